/*
 * printf: device printf from one warp (print_lanes of printf.cu, one block of 32 threads): lane 0
 * prints a line without arguments, then lanes 1, 5, ..., 29 one line each with %d %u %f %e %s %x
 * %lld %c and %5.2f. The program checks what every lane's printf returned (the number of arguments
 * it consumed: 0 for lane 0's line, 10 for the others; -1 stored by lanes that did not print).
 *
 * Where the text goes: on a GPU the driver writes the device's printf buffer to the process's stdout
 * at the next synchronizing call. Through GPUsockets the kernel runs in the backend, and the emulated
 * device prints the text on the backend's stdout at the printf call; nothing brings it back to the
 * program (the remoting has no channel for it). So that this program's stdout is the same natively
 * and remotely, it points its stdout (fd 1) at its stderr from before the launch until after the
 * cuCtxSynchronize that flushes the buffer: natively the device text lands on stderr, remotely it is
 * in the backend's output, where CudaProgramsTest checks it line for line (DEVICE_OUTPUT there).
 * usage: printf PRINTF.fatbin
 */
#include "../common.h"

#include <unistd.h>

int main(int argc, char **argv) {
    usage_if(argc != 2, "printf PRINTF.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction f = get_function(mod, "print_lanes");

    CUdeviceptr drets;
    int rets[33];
    CHECK(cuMemAlloc(&drets, sizeof rets));
    CHECK(cuMemsetD32(drets, 0x7f7f7f7f, 33));
    void *params[] = {&drets};

    fflush(stdout);
    int saved = dup(1);
    if (saved < 0 || dup2(2, 1) < 0) {
        fail("cannot point stdout at stderr for the device printf");
    }
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fflush(stdout);
    if (dup2(saved, 1) < 0) {
        fail("cannot restore stdout");
    }
    close(saved);

    CHECK(cuMemcpyDtoH(rets, drets, sizeof rets));
    int printed = 0;
    for (int lane = 0; lane < 32; lane++) {
        int want = lane % 4 == 1 ? 10 : -1;
        if (rets[lane] != want) {
            fail("print_lanes: lane %d: printf returned %d, expected %d", lane, rets[lane], want);
        }
        printed += lane % 4 == 1;
    }
    if (rets[32] != 0) {
        fail("print_lanes: lane 0's printf without arguments returned %d, expected 0", rets[32]);
    }
    printf("printf one warp: lane 0 returned %d (no arguments), %d lanes returned %d (arguments), the rest did not print ok\n",
           rets[32], printed, rets[1]);
    CHECK(cuMemFree(drets));
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "printf: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
