/*
 * module_cubin (GPU only: the emulated device runs PTX alone): a cubin read into memory and loaded
 * with cuModuleLoadData, a fatbin loaded with cuModuleLoadFatBinary and with cuModuleLoadData; from
 * each, gpus_vector_add of 65537 floats checked against the CPU.
 * usage: module_cubin KERNELS.cubin KERNELS.fatbin
 */
#include "../common.h"

static void vector_add(CUmodule mod, const char *what) {
    const unsigned int n = 65537;
    size_t bytes = 4 * (size_t) n;
    CUfunction f = get_function(mod, "gpus_vector_add");
    float *a = xmalloc(bytes), *b = xmalloc(bytes), *c = xmalloc(bytes);
    uint64_t seed = 99;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = next_unit_float(&seed) * 3.0f;
        b[i] = next_unit_float(&seed);
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));
    void *params[] = {&da, &db, &dc, (void *) &n};
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(c, dc, bytes));
    for (unsigned int i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&c[i], &want, 4) != 0) {
            fail("%s: c[%u] = %.9g, expected %.9g", what, i, c[i], want);
        }
    }
    printf("%s: gpus_vector_add of %u floats ok, fnv %016llx\n", what, n, (unsigned long long) fnv1a(FNV_INIT, c, bytes));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    usage_if(argc != 3, "module_cubin KERNELS.cubin KERNELS.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    size_t size;
    CUmodule mod;

    unsigned char *cubin = read_file(argv[1], &size, 0);
    CHECK(cuModuleLoadData(&mod, cubin));
    free(cubin);
    vector_add(mod, "cubin by cuModuleLoadData");
    CHECK(cuModuleUnload(mod));

    unsigned char *fatbin = read_file(argv[2], &size, 0);
    CHECK(cuModuleLoadFatBinary(&mod, fatbin));
    vector_add(mod, "fatbin by cuModuleLoadFatBinary");
    CHECK(cuModuleUnload(mod));
    CHECK(cuModuleLoadData(&mod, fatbin));
    vector_add(mod, "fatbin by cuModuleLoadData");
    CHECK(cuModuleUnload(mod));
    free(fatbin);

    release_primary_context(dev);
    fprintf(stderr, "module_cubin: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
