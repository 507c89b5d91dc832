/*
 * histogram: 256 bins of 1M bytes by the atomics kernel of histogram.cu (per-block counts with
 * shared-memory atomicAdd, then global atomicAdd into the bins), 64 blocks of 256 threads. The input
 * is skewed (each byte the smaller of two random ones) so the bins differ and threads of a warp
 * often collide on one bin. Integer counts: every bin must equal the CPU's.
 * usage: histogram HISTOGRAM.fatbin
 */
#include "../common.h"

int main(int argc, char **argv) {
    usage_if(argc != 2, "histogram HISTOGRAM.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));
    CUfunction f = get_function(mod, "histogram256");

    const unsigned int n = 1u << 20;
    unsigned char *in = xmalloc(n);
    uint64_t seed = 41;
    for (unsigned int i = 0; i < n; i++) {
        uint64_t v = next_u64(&seed);
        unsigned int x = v & 255, y = (v >> 8) & 255;
        in[i] = (unsigned char) (x < y ? x : y);
    }
    unsigned int want[256] = {0}, got[256];
    for (unsigned int i = 0; i < n; i++) {
        want[in[i]]++;
    }
    CUdeviceptr din, dbins;
    CHECK(cuMemAlloc(&din, n));
    CHECK(cuMemAlloc(&dbins, sizeof got));
    CHECK(cuMemcpyHtoD(din, in, n));
    CHECK(cuMemsetD32(dbins, 0, 256));
    unsigned int count = n;
    void *params[] = {&din, &count, &dbins};
    double t1 = now_ms();
    CHECK(cuLaunchKernel(f, 64, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "histogram256 kernel: %.1f ms\n", now_ms() - t1);
    CHECK(cuMemcpyDtoH(got, dbins, sizeof got));
    unsigned long long total = 0;
    unsigned int wrong = 0;
    for (int b = 0; b < 256; b++) {
        total += got[b];
        if (got[b] != want[b]) {
            fprintf(stderr, "bin %d: %u, expected %u\n", b, got[b], want[b]);
            wrong++;
        }
    }
    if (wrong != 0) {
        fail("histogram: %u of 256 bins wrong", wrong);
    }
    printf("histogram n=%u bins=256 total=%llu bin0=%u bin128=%u bin255=%u fnv %016llx ok\n", n, total, got[0], got[128],
           got[255], (unsigned long long) fnv1a(FNV_INIT, got, sizeof got));
    CHECK(cuMemFree(din));
    CHECK(cuMemFree(dbins));
    CHECK(cuModuleUnload(mod));
    free(in);
    release_primary_context(dev);
    fprintf(stderr, "histogram: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
