/*
 * module_file: cuModuleLoad from a .ptx path (the driver, or the library, reads the file), then
 * gpus_vector_add of 4099 floats checked; cuModuleLoad of a missing file fails with
 * CUDA_ERROR_FILE_NOT_FOUND.
 * usage: module_file KERNELS.ptx
 */
#include "common.h"

int main(int argc, char **argv) {
    usage_if(argc != 2, "module_file KERNELS.ptx");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));
    fprintf(stderr, "cuModuleLoad: %.1f ms\n", now_ms() - t0);
    printf("cuModuleLoad of the PTX file: ok\n");

    const unsigned int n = 4099;
    CUfunction f = get_function(mod, "gpus_vector_add");
    float a[4099], b[4099], c[4099];
    uint64_t seed = 7;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = next_unit_float(&seed);
        b[i] = -next_unit_float(&seed);
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, sizeof a));
    CHECK(cuMemAlloc(&db, sizeof b));
    CHECK(cuMemAlloc(&dc, sizeof c));
    CHECK(cuMemcpyHtoD(da, a, sizeof a));
    CHECK(cuMemcpyHtoD(db, b, sizeof b));
    void *params[] = {&da, &db, &dc, (void *) &n};
    CHECK(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(c, dc, sizeof c));
    for (unsigned int i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&c[i], &want, 4) != 0) {
            fail("c[%u] = %.9g, expected %.9g", i, c[i], want);
        }
    }
    printf("gpus_vector_add of %u floats: ok, fnv %016llx\n", n, (unsigned long long) fnv1a(FNV_INIT, c, sizeof c));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));

    CUmodule missing;
    EXPECT("cuModuleLoad of a missing file", cuModuleLoad(&missing, "/nonexistent/gpusockets/no_such_module.ptx"),
           CUDA_ERROR_FILE_NOT_FOUND);
    release_primary_context(dev);
    fprintf(stderr, "module_file: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
