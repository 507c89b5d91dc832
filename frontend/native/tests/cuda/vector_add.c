/*
 * vector_add: c = a + b over 1M floats by the kernel of vector_add.cu (nvcc -fatbin, PTX inside),
 * the fatbin loaded with cuModuleLoad of its path. The inputs are integer-valued floats, so the
 * sums are exact and must equal the CPU's bit for bit.
 * usage: vector_add VECTOR_ADD.fatbin
 */
#include "../common.h"

int main(int argc, char **argv) {
    usage_if(argc != 2, "vector_add VECTOR_ADD.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));
    CUfunction f = get_function(mod, "vector_add");

    const unsigned int n = 1u << 20;
    size_t bytes = sizeof(float) * n;
    float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
    uint64_t seed = 11;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = (float) (next_u64(&seed) % 2001) - 1000.0f;
        b[i] = (float) (next_u64(&seed) % 4096);
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));
    void *params[] = {&da, &db, &dc, (void *) &n};
    double t1 = now_ms();
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "vector_add kernel: %.1f ms\n", now_ms() - t1);
    CHECK(cuMemcpyDtoH(c, dc, bytes));

    double max_err = 0;
    for (unsigned int i = 0; i < n; i++) {
        double err = c[i] - (a[i] + b[i]);
        if (err < 0) {
            err = -err;
        }
        if (err > max_err) {
            max_err = err;
        }
    }
    if (max_err != 0) {
        fail("vector_add: max_abs_err=%g, expected 0", max_err);
    }
    printf("vector_add n=%u max_abs_err=%g fnv %016llx ok\n", n, max_err,
           (unsigned long long) fnv1a(FNV_INIT, c, bytes));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));
    free(a);
    free(b);
    free(c);
    release_primary_context(dev);
    fprintf(stderr, "vector_add: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
