/*
 * no_backend: calls cuInit(0) alone and prints "cuInit: NAME" (the CUresult's name, or its number
 * when cuGetErrorName does not know it). Its exit status is the CUresult (255 for larger codes), so
 * 0 means cuInit succeeded and 100 is CUDA_ERROR_NO_DEVICE. Nothing goes to stderr from the program
 * itself: the test harness runs it against a closed port and expects exactly one line there, the
 * library's own, naming the server address.
 * usage: no_backend
 */
#include "common.h"

int main(int argc, char **argv) {
    (void) argv;
    usage_if(argc != 1, "no_backend");
    CUresult r = cuInit(0);
    const char *name = NULL;
    if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name != NULL) {
        printf("cuInit: %s\n", name);
    } else {
        printf("cuInit: %d\n", (int) r);
    }
    return r > 255 ? 255 : (int) r;
}
