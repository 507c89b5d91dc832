/*
 * module_ptx: cuModuleLoadData from the PTX text read into memory (NUL-terminated); gpus_vector_add
 * of 1M floats checked element by element against the CPU; gpus_saxpy over a size that is no
 * multiple of the block; cuModuleGetFunction of a missing name; cuModuleLoadDataEx without options
 * and gpus_fill_u32 from that second module; cuModuleUnload.
 * usage: module_ptx KERNELS.ptx
 */
#include "common.h"

static void vector_add(CUmodule mod) {
    const unsigned int n = 1u << 20;
    CUfunction f = get_function(mod, "gpus_vector_add");
    float *a = xmalloc(4 * (size_t) n), *b = xmalloc(4 * (size_t) n), *c = xmalloc(4 * (size_t) n);
    uint64_t seed = 1;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = next_unit_float(&seed);
        b[i] = next_unit_float(&seed) * 1000.0f;
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, 4 * (size_t) n));
    CHECK(cuMemAlloc(&db, 4 * (size_t) n));
    CHECK(cuMemAlloc(&dc, 4 * (size_t) n));
    CHECK(cuMemcpyHtoD(da, a, 4 * (size_t) n));
    CHECK(cuMemcpyHtoD(db, b, 4 * (size_t) n));
    CHECK(cuMemsetD32(dc, 0xFFFFFFFFu, n));
    void *params[] = {&da, &db, &dc, (void *) &n};
    double t0 = now_ms();
    CHECK(cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "gpus_vector_add of %u floats: %.2f ms\n", n, now_ms() - t0);
    CHECK(cuMemcpyDtoH(c, dc, 4 * (size_t) n));
    for (unsigned int i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&c[i], &want, 4) != 0) {
            fail("gpus_vector_add: c[%u] = %.9g, expected %.9g", i, c[i], want);
        }
    }
    printf("gpus_vector_add of %u floats: ok, fnv %016llx\n", n, (unsigned long long) fnv1a(FNV_INIT, c, 4 * (size_t) n));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    free(a);
    free(b);
    free(c);
}

static void saxpy(CUmodule mod) {
    /* Values with few significant bits: alpha*x is exact, so fused and unfused multiply-add agree. */
    const unsigned int n = (1u << 20) + 3;
    const float alpha = 2.5f;
    CUfunction f = get_function(mod, "gpus_saxpy");
    float *x = xmalloc(4 * (size_t) (n + 1)), *y = xmalloc(4 * (size_t) (n + 1)), *out = xmalloc(4 * (size_t) (n + 1));
    for (unsigned int i = 0; i <= n; i++) {
        x[i] = (float) (i % 1000) * 0.25f;
        y[i] = (float) (i % 777) * 0.5f - 100.0f;
    }
    CUdeviceptr dx, dy;
    CHECK(cuMemAlloc(&dx, 4 * (size_t) (n + 1)));
    CHECK(cuMemAlloc(&dy, 4 * (size_t) (n + 1)));
    CHECK(cuMemcpyHtoD(dx, x, 4 * (size_t) (n + 1)));
    CHECK(cuMemcpyHtoD(dy, y, 4 * (size_t) (n + 1)));
    void *params[] = {(void *) &alpha, &dx, &dy, (void *) &n};
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(out, dy, 4 * (size_t) (n + 1)));
    for (unsigned int i = 0; i < n; i++) {
        float want = alpha * x[i] + y[i];
        if (memcmp(&out[i], &want, 4) != 0) {
            fail("gpus_saxpy: y[%u] = %.9g, expected %.9g", i, out[i], want);
        }
    }
    if (memcmp(&out[n], &y[n], 4) != 0) {
        fail("gpus_saxpy wrote past n");
    }
    printf("gpus_saxpy of %u floats: ok, fnv %016llx\n", n, (unsigned long long) fnv1a(FNV_INIT, out, 4 * (size_t) n));
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dy));
    free(x);
    free(y);
    free(out);
}

static void load_data_ex(const char *path) {
    size_t size;
    unsigned char *ptx = read_file(path, &size, 1);
    CUmodule mod;
    CHECK(cuModuleLoadDataEx(&mod, ptx, 0, NULL, NULL));
    free(ptx); /* the driver keeps no reference to the image */
    CUfunction f = get_function(mod, "gpus_fill_u32");
    const unsigned int n = 4097, value = 0x600DF00Du;
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 4 * (size_t) n));
    void *params[] = {&p, (void *) &value, (void *) &n};
    CHECK(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    uint32_t *back = xmalloc(4 * (size_t) n);
    CHECK(cuMemcpyDtoH(back, p, 4 * (size_t) n));
    for (unsigned int i = 0; i < n; i++) {
        if (back[i] != value) {
            fail("gpus_fill_u32 from cuModuleLoadDataEx: word %u is 0x%08x", i, back[i]);
        }
    }
    printf("cuModuleLoadDataEx without options, gpus_fill_u32 of %u words: ok\n", n);
    CHECK(cuMemFree(p));
    CHECK(cuModuleUnload(mod));
    free(back);
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "module_ptx KERNELS.ptx");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_ptx_module(argv[1]);
    const char *names[] = {"gpus_vector_add", "gpus_saxpy", "gpus_fill_u32", "gpus_empty", "gpus_sleep", "gpus_block_sum",
                           "gpus_mixed12"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        get_function(mod, names[i]);
    }
    printf("cuModuleGetFunction: all %zu kernels found\n", sizeof names / sizeof names[0]);
    CUfunction missing;
    EXPECT("cuModuleGetFunction of a missing name", cuModuleGetFunction(&missing, mod, "gpus_no_such_kernel"),
           CUDA_ERROR_NOT_FOUND);
    vector_add(mod);
    saxpy(mod);
    load_data_ex(argv[1]);
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "module_ptx: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
