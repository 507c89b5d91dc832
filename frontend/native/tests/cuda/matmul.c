/*
 * matmul: C = A * B for 256 x 256 floats by the tiled shared-memory kernel of matmul.cu (16 x 16
 * tiles), the fatbin read into memory and loaded with cuModuleLoadData. The entries are small
 * integers (-8..8), so every partial sum is an integer below 2^24: exact in any summation order,
 * and C must equal the CPU's product bit for bit.
 * usage: matmul MATMUL.fatbin
 */
#include "../common.h"

#define N 256
#define TILE 16

int main(int argc, char **argv) {
    usage_if(argc != 2, "matmul MATMUL.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction f = get_function(mod, "matmul_tiled");

    size_t bytes = sizeof(float) * N * N;
    float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes), *want = xmalloc(bytes);
    uint64_t seed = 23;
    for (int i = 0; i < N * N; i++) {
        a[i] = (float) (int) (next_u64(&seed) % 17) - 8.0f;
        b[i] = (float) (int) (next_u64(&seed) % 17) - 8.0f;
    }
    for (int r = 0; r < N; r++) {
        for (int col = 0; col < N; col++) {
            float s = 0;
            for (int k = 0; k < N; k++) {
                s += a[r * N + k] * b[k * N + col];
            }
            want[r * N + col] = s;
        }
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));
    int n = N;
    void *params[] = {&da, &db, &dc, &n};
    double t1 = now_ms();
    CHECK(cuLaunchKernel(f, N / TILE, N / TILE, 1, TILE, TILE, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "matmul_tiled kernel: %.1f ms\n", now_ms() - t1);
    CHECK(cuMemcpyDtoH(c, dc, bytes));

    double max_err = 0;
    for (int i = 0; i < N * N; i++) {
        double err = c[i] > want[i] ? c[i] - want[i] : want[i] - c[i];
        if (err > max_err) {
            max_err = err;
        }
    }
    if (max_err != 0) {
        fail("matmul: max_abs_err=%g, expected 0", max_err);
    }
    double trace = 0;
    for (int i = 0; i < N; i++) {
        trace += c[i * N + i];
    }
    printf("matmul %dx%d tile=%d max_abs_err=%g trace=%.0f fnv %016llx ok\n", N, N, TILE, max_err, trace,
           (unsigned long long) fnv1a(FNV_INIT, c, bytes));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));
    free(a);
    free(b);
    free(c);
    free(want);
    release_primary_context(dev);
    fprintf(stderr, "matmul: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
