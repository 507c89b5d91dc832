/*
 * cuGetProcAddress answers by name, requested CUDA version and flags as the real driver does:
 * the newest ABI variant the requested version knows, the per-thread-default-stream variant when
 * asked for, "version not sufficient" for versions older than any variant we export, and "not
 * found" for names that do not exist. The pointers it returns work.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { const char *n_ = NULL; \
    cuGetErrorName(r_, &n_); fprintf(stderr, "%s failed: %d %s\n", #call, r_, n_ ? n_ : "?"); exit(1); } } while (0)

static const char *which(void *fn) {
    Dl_info info;
    return fn != NULL && dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "(none)";
}

static void ask(const char *name, int version, cuuint64_t flags) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult r = cuGetProcAddress(name, &fn, version, flags, &status);
    printf("%s v%d flags %llu: result %d status %d -> %s\n", name, version, (unsigned long long) flags, r,
           (int) status, which(fn));
}

int main(void) {
    ask("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuMemAlloc", 3000, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuEventElapsedTime", 12080, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    ask("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    ask("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    ask("cuInit", 2000, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuNoSuchFunction", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    ask("cuGetProcAddress", 13000, CU_GET_PROC_ADDRESS_DEFAULT);

    /* a returned pointer is a working entry point */
    CUresult (*init)(unsigned int) = NULL;
    CUresult (*count)(int *) = NULL;
    CHECK(cuGetProcAddress("cuInit", (void **) &init, 13000, 0, NULL));
    CHECK(cuGetProcAddress("cuDeviceGetCount", (void **) &count, 13000, 0, NULL));
    CHECK(init(0));
    int n = 0;
    CHECK(count(&n));
    printf("devices through cuGetProcAddress: %d\n", n > 0);
    const void *table = (const void *) 1;
    printf("cuGetExportTable: %s\n", cuGetExportTable(&table, NULL) != CUDA_SUCCESS && table == NULL ? "error" : "?");
    printf("PASS\n");
    return 0;
}
