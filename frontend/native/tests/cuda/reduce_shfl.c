/*
 * reduce_shfl: the sum of 1M floats by the warp-shuffle kernels of reduce_shfl.cu
 * (__shfl_down_sync within warps, shared memory across warps): 120 blocks of 256 threads write
 * partial sums, one block of 128 adds those. The inputs are integers 0..15, so every partial sum is
 * an integer below 2^24 and exact in any order: the total must equal the CPU's. Also a sum of 1000
 * elements (not a multiple of a warp or of the grid).
 * usage: reduce_shfl REDUCE_SHFL.fatbin
 */
#include "../common.h"

static float device_sum(CUfunction partial, CUfunction final, CUdeviceptr din, unsigned int n) {
    const unsigned int blocks = 120;
    CUdeviceptr dpartial, dout;
    CHECK(cuMemAlloc(&dpartial, sizeof(float) * blocks));
    CHECK(cuMemAlloc(&dout, sizeof(float)));
    void *p1[] = {&din, &dpartial, &n};
    CHECK(cuLaunchKernel(partial, blocks, 1, 1, 256, 1, 1, 0, NULL, p1, NULL));
    unsigned int nb = blocks;
    void *p2[] = {&dpartial, &dout, &nb};
    CHECK(cuLaunchKernel(final, 1, 1, 1, 128, 1, 1, 0, NULL, p2, NULL));
    float sum;
    CHECK(cuMemcpyDtoH(&sum, dout, sizeof sum));
    CHECK(cuMemFree(dpartial));
    CHECK(cuMemFree(dout));
    return sum;
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "reduce_shfl REDUCE_SHFL.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction partial = get_function(mod, "reduce_partial");
    CUfunction final = get_function(mod, "reduce_final");

    const unsigned int n = 1u << 20;
    size_t bytes = sizeof(float) * n;
    float *in = xmalloc(bytes);
    uint64_t seed = 31;
    for (unsigned int i = 0; i < n; i++) {
        in[i] = (float) (next_u64(&seed) & 15);
    }
    CUdeviceptr din;
    CHECK(cuMemAlloc(&din, bytes));
    CHECK(cuMemcpyHtoD(din, in, bytes));
    const unsigned int sizes[] = {n, 1000};
    for (int s = 0; s < 2; s++) {
        unsigned long long want = 0;
        for (unsigned int i = 0; i < sizes[s]; i++) {
            want += (unsigned long long) in[i];
        }
        double t1 = now_ms();
        float got = device_sum(partial, final, din, sizes[s]);
        fprintf(stderr, "reduce of %u: %.1f ms\n", sizes[s], now_ms() - t1);
        if ((double) got != (double) want) {
            fail("reduce_shfl n=%u: sum %.1f, expected %llu", sizes[s], got, want);
        }
        printf("reduce_shfl n=%u sum=%.0f expected=%llu ok\n", sizes[s], got, want);
    }
    CHECK(cuMemFree(din));
    CHECK(cuModuleUnload(mod));
    free(in);
    release_primary_context(dev);
    fprintf(stderr, "reduce_shfl: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
