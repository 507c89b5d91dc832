/*
 * assert: check_below of assert.cu asserts v[i] < limit in every thread. A launch where all values
 * are below the limit is checked first; then one value (element 205: block 1, thread 77 of blocks
 * of 128) is over it, that thread's assert() fails, and as on a GPU the next synchronizing call
 * (the launch itself or the cuCtxSynchronize after it) returns CUDA_ERROR_ASSERT. The error is
 * sticky: the context is unusable, and a second cuCtxSynchronize, a cuMemcpyDtoH and another launch
 * return it again. The program prints what it got and exits 0.
 *
 * The device prints, at that synchronizing call, "assert.cu:12: void check_below(const unsigned
 * int *, unsigned int, unsigned int *, unsigned int): block: [1,0,0], thread: [77,0,0] Assertion
 * `v[i] < limit` failed.": a GPU's driver on the process's stderr (says the CUDA C++ Programming
 * Guide), the emulated device on the backend's stderr, where CudaProgramsTest checks it; nothing
 * brings it back to this program through GPUsockets. So that stdout is the same wherever the message
 * goes, stdout (fd 1) points at stderr from the failing launch until after that synchronizing call.
 * usage: assert ASSERT.fatbin
 */
#include "../common.h"

#include <unistd.h>

#define N 256
#define BLOCK 128

int main(int argc, char **argv) {
    usage_if(argc != 2, "assert ASSERT.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction f = get_function(mod, "check_below");

    unsigned int v[N], seen[N];
    uint64_t seed = 71;
    for (int i = 0; i < N; i++) {
        v[i] = (unsigned int) (next_u64(&seed) % 100);
    }
    CUdeviceptr dv, dseen;
    CHECK(cuMemAlloc(&dv, sizeof v));
    CHECK(cuMemAlloc(&dseen, sizeof seen));
    CHECK(cuMemcpyHtoD(dv, v, sizeof v));
    CHECK(cuMemsetD32(dseen, 0, N));
    unsigned int limit = 100, n = N;
    void *params[] = {&dv, &limit, &dseen, &n};
    CHECK(cuLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(seen, dseen, sizeof seen));
    if (memcmp(seen, v, sizeof v) != 0) {
        fail("check_below: seen differs from v although every assert held");
    }
    printf("check_below n=%d limit=%u every assert held, fnv %016llx ok\n", N, limit,
           (unsigned long long) fnv1a(FNV_INIT, seen, sizeof seen));

    const int bad = BLOCK + 77;
    v[bad] = 1000;
    CHECK(cuMemcpyHtoD(dv, v, sizeof v));
    fflush(stdout);
    int saved = dup(1);
    if (saved < 0 || dup2(2, 1) < 0) {
        fail("cannot point stdout at stderr for the device's assertion message");
    }
    CUresult launch = cuLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL);
    CUresult sync = launch == CUDA_SUCCESS ? cuCtxSynchronize() : launch;
    fflush(stdout);
    if (dup2(saved, 1) < 0) {
        fail("cannot restore stdout");
    }
    close(saved);
    fprintf(stderr, "check_below with v[%d]=%u: launch %s, then cuCtxSynchronize %s\n", bad, v[bad], err_name(launch),
            err_name(sync));
    expect_result(sync, CUDA_ERROR_ASSERT, "the failing assert (launch, then cuCtxSynchronize)", __FILE__, __LINE__);
    printf("assert failed in block %d thread %d, next synchronizing call: %s\n", bad / BLOCK, bad % BLOCK, err_name(sync));
    EXPECT("cuCtxSynchronize again (sticky)", cuCtxSynchronize(), CUDA_ERROR_ASSERT);
    EXPECT("cuMemcpyDtoH after the assert", cuMemcpyDtoH(seen, dseen, sizeof seen), CUDA_ERROR_ASSERT);
    limit = 2000;
    EXPECT("cuLaunchKernel after the assert (launch, then cuCtxSynchronize)",
           with_sync(cuLaunchKernel(f, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, NULL, params, NULL)), CUDA_ERROR_ASSERT);
    fprintf(stderr, "assert: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
