/*
 * context_v4: a driver-API program as CUDA 13 writes one. Its context comes from
 * cuCtxCreate(&ctx, &params, flags, dev) with a zeroed CUctxCreateParams (cuda.h 13 maps cuCtxCreate to
 * cuCtxCreate_v4), once with flags 0 and once with CU_CTX_SCHED_BLOCKING_SYNC (read back with
 * cuCtxGetFlags); the profiler calls of cudaProfiler.h go around the work (a vector add from the
 * shipped PTX, checked element by element): cuProfilerStart/Stop succeed with a context current and
 * answer CUDA_ERROR_INVALID_CONTEXT without one; the deprecated cuProfilerInitialize answers
 * CUDA_ERROR_NOT_SUPPORTED, as cudaProfiler.h says it does since CUDA 12.0. Then cuCtxSetFlags (read back),
 * peer access to another context of the same device (CUDA_ERROR_INVALID_DEVICE; disabling it:
 * CUDA_ERROR_PEER_ACCESS_NOT_ENABLED), cuPointerSetAttribute(SYNC_MEMOPS) read back through
 * cuPointerGetAttribute, and cuFlushGPUDirectRDMAWrites with both scopes.
 * With --refusals (the harness only: a GPU may offer them) core-dump flags (cuCtxSetFlags and
 * cuDevicePrimaryCtxSetFlags), setting another pointer
 * attribute or one past an allocation, and parameters that ask for execution affinity or CIG are
 * refused (NOT_SUPPORTED, INVALID_VALUE), and an affinity count without its array is INVALID_VALUE.
 * usage: context_v4 KERNELS.ptx [--refusals]
 */
#include "common.h"

#include <cudaProfiler.h>

static void vector_add(const char *ptx, unsigned int n) {
    CUmodule mod = load_ptx_module(ptx);
    CUfunction f = get_function(mod, "gpus_vector_add");
    float *a = xmalloc(n * sizeof(float)), *b = xmalloc(n * sizeof(float)), *c = xmalloc(n * sizeof(float));
    uint64_t seed = 13;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = next_unit_float(&seed);
        b[i] = next_unit_float(&seed);
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, n * sizeof(float)));
    CHECK(cuMemAlloc(&db, n * sizeof(float)));
    CHECK(cuMemAlloc(&dc, n * sizeof(float)));
    CHECK(cuMemcpyHtoD(da, a, n * sizeof(float)));
    CHECK(cuMemcpyHtoD(db, b, n * sizeof(float)));
    void *params[] = {&da, &db, &dc, &n};
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CHECK(cuMemcpyDtoH(c, dc, n * sizeof(float)));
    for (unsigned int i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&c[i], &want, 4) != 0) {
            fail("c[%u] = %.9g, expected %.9g", i, c[i], want);
        }
    }
    printf("gpus_vector_add of %u floats: ok, fnv %016llx\n", n, (unsigned long long) fnv1a(FNV_INIT, c, n * sizeof(float)));
    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));
    free(a);
    free(b);
    free(c);
}

int main(int argc, char **argv) {
    usage_if(argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--refusals") != 0),
             "context_v4 KERNELS.ptx [--refusals]");
    int refusals = argc == 3;
    double t0 = now_ms();
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    EXPECT("cuProfilerStart without a context", cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);

    CUctxCreateParams params;
    memset(&params, 0, sizeof params);
    CUcontext ctx;
    CHECK(cuCtxCreate(&ctx, &params, 0, dev));
    printf("cuCtxCreate with zeroed CUctxCreateParams: ok\n");
    CUcontext current;
    CHECK(cuCtxGetCurrent(&current));
    printf("the new context is current: %d\n", current == ctx);

    CHECK(cuProfilerStart());
    printf("cuProfilerStart: ok\n");
    vector_add(argv[1], 100003);
    CHECK(cuCtxSynchronize());
    CHECK(cuProfilerStop());
    printf("cuProfilerStop: ok\n");
    CHECK(cuProfilerStop());
    printf("cuProfilerStop again: ok\n");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EXPECT("cuProfilerInitialize (deprecated)", cuProfilerInitialize(NULL, NULL, CU_OUT_CSV), CUDA_ERROR_NOT_SUPPORTED);
#pragma GCC diagnostic pop

    /* fields set one by one, padding left as it is: still no affinity and no CIG */
    CUctxCreateParams fields;
    memset(&fields, 0x5c, sizeof fields);
    fields.execAffinityParams = NULL;
    fields.numExecAffinityParams = 0;
    fields.cigParams = NULL;
    CUcontext blocking;
    CHECK(cuCtxCreate(&blocking, &fields, CU_CTX_SCHED_BLOCKING_SYNC, dev));
    unsigned int flags = 0;
    CHECK(cuCtxGetFlags(&flags));
    printf("cuCtxCreate with CU_CTX_SCHED_BLOCKING_SYNC: flags & SCHED_MASK = %u\n", flags & CU_CTX_SCHED_MASK);
    vector_add(argv[1], 4099);
    CHECK(cuCtxDestroy(blocking));

    /* context flags, peer access on one device, pointer SYNC_MEMOPS, an RDMA write flush */
    CHECK(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_SYNC_MEMOPS));
    CHECK(cuCtxGetFlags(&flags));
    printf("cuCtxSetFlags(BLOCKING_SYNC | SYNC_MEMOPS): flags & (SCHED_MASK | SYNC_MEMOPS) = 0x%x\n",
           flags & (CU_CTX_SCHED_MASK | CU_CTX_SYNC_MEMOPS));
    CHECK(cuCtxSetFlags(0));
    CHECK(cuCtxGetFlags(&flags));
    printf("cuCtxSetFlags(0): flags & (SCHED_MASK | SYNC_MEMOPS) = 0x%x\n", flags & (CU_CTX_SCHED_MASK | CU_CTX_SYNC_MEMOPS));
    CUcontext other;
    CHECK(cuCtxCreate(&other, &params, 0, dev));
    CUcontext popped;
    CHECK(cuCtxPopCurrent(&popped));
    EXPECT("cuCtxEnablePeerAccess to a context of the same device", cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    EXPECT("cuCtxDisablePeerAccess of a context never enabled", cuCtxDisablePeerAccess(other), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
    CHECK(cuCtxDestroy(other));
    CHECK(cuCtxGetCurrent(&current));
    printf("the first context is current again: %d\n", current == ctx && popped == other);
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 1 << 16));
    unsigned int one = 1, got = 0;
    CHECK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + 64));
    CHECK(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
    printf("cuPointerSetAttribute(SYNC_MEMOPS, 1) read back: %u\n", got);
    CHECK(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
    CHECK(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX, CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES));
    printf("cuFlushGPUDirectRDMAWrites to the owner and to all devices: ok\n");

    if (refusals) {
        EXPECT("cuCtxSetFlags with CU_CTX_COREDUMP_ENABLE", cuCtxSetFlags(CU_CTX_COREDUMP_ENABLE), CUDA_ERROR_NOT_SUPPORTED);
        EXPECT("cuDevicePrimaryCtxSetFlags with CU_CTX_USER_COREDUMP_ENABLE",
               cuDevicePrimaryCtxSetFlags(dev, CU_CTX_USER_COREDUMP_ENABLE), CUDA_ERROR_NOT_SUPPORTED);
        CUcontext attr = NULL;
        EXPECT("cuPointerSetAttribute of CU_POINTER_ATTRIBUTE_CONTEXT", cuPointerSetAttribute(&attr, CU_POINTER_ATTRIBUTE_CONTEXT, p),
               CUDA_ERROR_INVALID_VALUE);
        EXPECT("cuPointerSetAttribute past the allocation", cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p + (1 << 16)),
               CUDA_ERROR_INVALID_VALUE);
        CUexecAffinityParam affinity;
        memset(&affinity, 0, sizeof affinity);
        affinity.type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
        affinity.param.smCount.val = 4;
        CUctxCreateParams asks = {&affinity, 1, NULL};
        CUcontext refused = NULL;
        EXPECT("cuCtxCreate with execution affinity", cuCtxCreate(&refused, &asks, 0, dev), CUDA_ERROR_NOT_SUPPORTED);
        CUctxCigParam cig = {CIG_DATA_TYPE_D3D12_COMMAND_QUEUE, NULL};
        CUctxCreateParams graphics = {NULL, 0, &cig};
        EXPECT("cuCtxCreate with CIG parameters", cuCtxCreate(&refused, &graphics, 0, dev), CUDA_ERROR_NOT_SUPPORTED);
        CUctxCreateParams countOnly = {NULL, 1, NULL};
        EXPECT("cuCtxCreate with an affinity count and no array", cuCtxCreate(&refused, &countOnly, 0, dev),
               CUDA_ERROR_INVALID_VALUE);
        CHECK(cuCtxGetCurrent(&current));
        printf("the first context is still current: %d\n", current == ctx);
    }

    CHECK(cuMemFree(p));
    CHECK(cuCtxDestroy(ctx));
    CHECK(cuCtxGetCurrent(&current));
    printf("no context current after cuCtxDestroy: %d\n", current == NULL);
    EXPECT("cuProfilerStop without a context", cuProfilerStop(), CUDA_ERROR_INVALID_CONTEXT);
    fprintf(stderr, "context_v4: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
