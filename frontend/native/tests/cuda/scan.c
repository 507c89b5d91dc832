/*
 * scan: an inclusive prefix sum of 1M unsigned ints by the kernels of scan.cu: scan_blocks scans
 * each 1024-element block in shared memory and writes the block totals, scan_blocks again scans
 * those 1024 totals in one block (the second pass), add_offsets adds them to the blocks after the
 * first. Integer sums: every element must equal the CPU's. Also n = 1000003 (the last block partial).
 * usage: scan SCAN.fatbin
 */
#include "../common.h"

#define BLOCK 1024

int main(int argc, char **argv) {
    usage_if(argc != 2, "scan SCAN.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction scan_blocks = get_function(mod, "scan_blocks");
    CUfunction add_offsets = get_function(mod, "add_offsets");

    const unsigned int max_n = 1u << 20;
    size_t bytes = sizeof(unsigned int) * max_n;
    unsigned int *in = xmalloc(bytes), *out = xmalloc(bytes), *want = xmalloc(bytes);
    uint64_t seed = 53;
    for (unsigned int i = 0; i < max_n; i++) {
        in[i] = (unsigned int) (next_u64(&seed) % 10);
    }
    CUdeviceptr din, dout, dsums, dscanned;
    CHECK(cuMemAlloc(&din, bytes));
    CHECK(cuMemAlloc(&dout, bytes));
    CHECK(cuMemAlloc(&dsums, sizeof(unsigned int) * BLOCK));
    CHECK(cuMemAlloc(&dscanned, sizeof(unsigned int) * BLOCK));
    CHECK(cuMemcpyHtoD(din, in, bytes));
    const unsigned int sizes[] = {max_n, 1000003};
    for (int s = 0; s < 2; s++) {
        unsigned int n = sizes[s];
        unsigned int blocks = (n + BLOCK - 1) / BLOCK;
        unsigned int acc = 0;
        for (unsigned int i = 0; i < n; i++) {
            acc += in[i];
            want[i] = acc;
        }
        CHECK(cuMemsetD32(dout, 0, max_n));
        CUdeviceptr none = 0;
        double t1 = now_ms();
        void *p1[] = {&din, &dout, &dsums, &n};
        CHECK(cuLaunchKernel(scan_blocks, blocks, 1, 1, BLOCK, 1, 1, 2 * BLOCK * sizeof(unsigned int), NULL, p1, NULL));
        void *p2[] = {&dsums, &dscanned, &none, &blocks};
        CHECK(cuLaunchKernel(scan_blocks, 1, 1, 1, BLOCK, 1, 1, 2 * BLOCK * sizeof(unsigned int), NULL, p2, NULL));
        void *p3[] = {&dout, &dscanned, &n};
        CHECK(cuLaunchKernel(add_offsets, blocks, 1, 1, BLOCK, 1, 1, 0, NULL, p3, NULL));
        CHECK(cuCtxSynchronize());
        fprintf(stderr, "scan of %u: %.1f ms\n", n, now_ms() - t1);
        CHECK(cuMemcpyDtoH(out, dout, bytes));
        for (unsigned int i = 0; i < n; i++) {
            if (out[i] != want[i]) {
                fail("scan n=%u: out[%u] = %u, expected %u", n, i, out[i], want[i]);
            }
        }
        for (unsigned int i = n; i < max_n; i++) {
            if (out[i] != 0) {
                fail("scan n=%u: out[%u] = %u written past n", n, i, out[i]);
            }
        }
        printf("scan n=%u blocks=%u last=%u fnv %016llx ok\n", n, blocks, out[n - 1],
               (unsigned long long) fnv1a(FNV_INIT, out, sizeof(unsigned int) * n));
    }
    CHECK(cuMemFree(din));
    CHECK(cuMemFree(dout));
    CHECK(cuMemFree(dsums));
    CHECK(cuMemFree(dscanned));
    CHECK(cuModuleUnload(mod));
    free(in);
    free(out);
    free(want);
    release_primary_context(dev);
    fprintf(stderr, "scan: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
