/*
 * probe: what the real driver's cuGetProcAddress_v2 answers, for a GPU machine. Reads lines
 * "NAME VERSION FLAGS" on stdin (blank names and '#' lines skipped) and prints for each
 * "NAME VERSION FLAGS RESULT STATUS SYMBOL": the CUresult, the CUdriverProcAddressQueryResult and the
 * libcuda symbol the returned pointer is (dladdr; "-" when not found, "?+OFFSET" when the pointer
 * is inside a symbol but not at its start). Those symbols name the ABI variant each request gets
 * (cuMemAlloc_v2, cuCtxCreate_v4, cuMemcpyAsync_ptsz...), which our own table must answer alike.
 *   gcc -O1 -I/usr/local/cuda/include probe.c -o probe -ldl -L/usr/local/nvidia/lib64 -lcuda
 *   ./probe < requests.txt > answers.txt
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    CUresult init = cuInit(0);
    if (init != CUDA_SUCCESS) {
        fprintf(stderr, "probe: cuInit: %d\n", (int) init);
        return 1;
    }
    char line[512];
    while (fgets(line, sizeof line, stdin)) {
        char name[256] = "";
        int version = 0;
        unsigned long long flags = 0;
        if (line[0] == '#' || sscanf(line, "%255s %d %llu", name, &version, &flags) != 3) {
            continue;
        }
        void *pfn = NULL;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = cuGetProcAddress(name, &pfn, version, flags, &status);
        char symbol[300] = "-";
        Dl_info info;
        if (r == CUDA_SUCCESS && pfn != NULL && dladdr(pfn, &info) && info.dli_sname != NULL) {
            if (info.dli_saddr == pfn) {
                snprintf(symbol, sizeof symbol, "%s", info.dli_sname);
            } else {
                snprintf(symbol, sizeof symbol, "%s+%ld", info.dli_sname, (long) ((char *) pfn - (char *) info.dli_saddr));
            }
        } else if (r == CUDA_SUCCESS && pfn != NULL) {
            snprintf(symbol, sizeof symbol, "?");
        }
        printf("%s %d %llu %d %d %s\n", name, version, flags, (int) r, (int) status, symbol);
    }
    return 0;
}
