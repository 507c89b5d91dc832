/*
 * How far device memory moves with each call that can make the driver allocate (scripts/gpu-pass-quota):
 * for each step, free memory (cuMemGetInfo) before, after the call (and after a launch where the driver
 * may reserve lazily), and after what it made is released. Run natively it measures the driver; run
 * through gpusockets as a tenant with a memory limit below the device's free memory, cuMemGetInfo is the
 * tenant's view (free = limit - charged), so the same numbers are what the tenant was charged; as a
 * tenant without a limit, they are the device's again, seen through the backend.
 *
 * One line per step on stdout:
 *   step NAME take BYTES [launch BYTES] back BYTES     taken by the call, by a launch after it, left after the release
 *   step NAME refused CUDA_ERROR_...                   the call failed (past a quota, or refused by gpusockets)
 * then "PASS". Steps: a second context; each memory-reserving limit at several values; modules and a
 * library declaring large globals; an array; 100 streams, 100 events, an exec graph of 100 kernel nodes
 * (charged nothing: to see whether the driver takes memory for them); a pool told to keep freed memory; a
 * graph memory node (cuMemAllocAsync captured: gpusockets charges it when captured, for the session's life).
 *
 *   footprint [SCALE]   SCALE divides the large sizes (default 1; e.g. 8 for a device of 8 GiB)
 */
#include "../common.h"

#define MIB ((size_t) 1 << 20)

static CUdevice dev;
static CUcontext ctx;
static CUmodule kernels;
static CUfunction deep;
static CUdeviceptr out;

static const char *KERNELS =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry deep(.param .u64 out, .param .u32 i)\n"
    "{\n"
    "    .local .align 4 .b8 buf[16384];\n"
    "    .reg .u64 %rd<4>;\n    .reg .u32 %r<3>;\n"
    "    ld.param.u64 %rd1, [out];\n    ld.param.u32 %r1, [i];\n"
    "    mov.u64 %rd2, buf;\n    cvt.u64.u32 %rd3, %r1;\n    add.u64 %rd2, %rd2, %rd3;\n"
    "    st.local.u32 [%rd2], %r1;\n    ld.local.u32 %r2, [%rd2];\n"
    "    cvta.to.global.u64 %rd1, %rd1;\n    st.global.u32 [%rd1], %r2;\n    ret;\n"
    "}\n";

static size_t free_now(void) {
    size_t free = 0, total = 0;
    CHECK(cuCtxSynchronize());
    CHECK(cuMemGetInfo(&free, &total));
    return free;
}

static long long taken(size_t before, size_t after) {
    return (long long) before - (long long) after;
}

/* A launch that needs 16 KiB of local memory per thread, then a sync. */
static void launch(void) {
    unsigned i = 4096;
    void *args[] = {&out, &i};
    CHECK(cuLaunchKernel(deep, 132, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
}

static int refused(const char *name, CUresult r) {
    if (r == CUDA_SUCCESS) {
        return 0;
    }
    printf("step %s refused %s\n", name, err_name(r));
    return 1;
}

static void limit_step(const char *label, CUlimit limit, size_t value) {
    char name[96];
    snprintf(name, sizeof name, "%s=%zu", label, value);
    size_t old = 0;
    CHECK(cuCtxGetLimit(&old, limit));
    size_t f0 = free_now();
    if (refused(name, cuCtxSetLimit(limit, value))) {
        return;
    }
    size_t f1 = free_now();
    launch();
    size_t f2 = free_now();
    CHECK(cuCtxSetLimit(limit, old));
    size_t f3 = free_now();
    printf("step %s take %lld launch %lld back %lld\n", name, taken(f0, f1), taken(f1, f2), taken(f0, f3));
}

static char *globals_ptx(size_t bytes) {
    static char text[512];
    snprintf(text, sizeof text, ".version 8.0\n.target sm_90\n.address_size 64\n"
             ".visible .global .align 8 .b8 big[%zu];\n.visible .entry k() { ret; }\n", bytes);
    return text;
}

static void module_step(size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "module-global-%zuMiB", bytes / MIB);
    size_t f0 = free_now();
    CUmodule m;
    if (refused(name, cuModuleLoadData(&m, globals_ptx(bytes)))) {
        return;
    }
    size_t f1 = free_now();
    CUdeviceptr g;
    size_t size;
    CHECK(cuModuleGetGlobal(&g, &size, m, "big"));   /* what cudart does for every variable as it loads a module */
    size_t f2 = free_now();
    CHECK(cuModuleUnload(m));
    size_t f3 = free_now();
    printf("step %s take %lld global %lld back %lld\n", name, taken(f0, f1), taken(f1, f2), taken(f0, f3));
}

static void library_step(size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "library-global-%zuMiB", bytes / MIB);
    size_t f0 = free_now();
    CUlibrary lib;
    if (refused(name, cuLibraryLoadData(&lib, globals_ptx(bytes), NULL, NULL, 0, NULL, NULL, 0))) {
        return;
    }
    size_t f1 = free_now();
    CUmodule m;
    CHECK(cuLibraryGetModule(&m, lib));   /* loaded into this context */
    size_t f2 = free_now();
    CHECK(cuLibraryUnload(lib));
    size_t f3 = free_now();
    printf("step %s take %lld in-context %lld back %lld\n", name, taken(f0, f1), taken(f1, f2), taken(f0, f3));
}

static void context_step(void) {
    size_t f0 = free_now();
    CUcontext second;
    if (refused("context", cuCtxCreate(&second, NULL, 0, dev))) {
        return;
    }
    size_t f1 = free_now();
    CHECK(cuCtxDestroy(second));
    CHECK(cuCtxSetCurrent(ctx));
    size_t f2 = free_now();
    printf("step context take %lld back %lld\n", taken(f0, f1), taken(f0, f2));
}

static void array_step(size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "array-%zuMiB", bytes / MIB);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 4096, .Height = bytes / (4096 * 16), .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    size_t f0 = free_now();
    CUarray a;
    if (refused(name, cuArrayCreate(&a, &d))) {
        return;
    }
    size_t f1 = free_now();
    CHECK(cuArrayDestroy(a));
    size_t f2 = free_now();
    printf("step %s take %lld back %lld\n", name, taken(f0, f1), taken(f0, f2));
}

static void objects_step(void) {
    enum { N = 100 };
    CUstream s[N];
    CUevent e[N];
    size_t f0 = free_now();
    for (int i = 0; i < N; i++) {
        CHECK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    }
    size_t f1 = free_now();
    for (int i = 0; i < N; i++) {
        CHECK(cuEventCreate(&e[i], CU_EVENT_DISABLE_TIMING));
    }
    size_t f2 = free_now();
    for (int i = 0; i < N; i++) {
        CHECK(cuEventDestroy(e[i]));
        CHECK(cuStreamDestroy(s[i]));
    }
    size_t f3 = free_now();
    printf("step streams-%d take %lld back %lld\n", N, taken(f0, f1), taken(f0, f3));
    printf("step events-%d take %lld back %lld\n", N, taken(f1, f2), taken(f0, f3));
}

static void graph_exec_step(void) {
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    unsigned i = 8;
    void *args[] = {&out, &i};
    for (int k = 0; k < 100; k++) {
        CHECK(cuLaunchKernel(deep, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    }
    CUgraph g;
    CHECK(cuStreamEndCapture(s, &g));
    size_t f0 = free_now();
    CUgraphExec x;
    if (!refused("graph-exec-100-kernels", cuGraphInstantiateWithFlags(&x, g, 0))) {
        size_t f1 = free_now();
        CHECK(cuGraphLaunch(x, s));
        CHECK(cuStreamSynchronize(s));
        size_t f2 = free_now();
        CHECK(cuGraphExecDestroy(x));
        size_t f3 = free_now();
        printf("step graph-exec-100-kernels take %lld launch %lld back %lld\n", taken(f0, f1), taken(f1, f2), taken(f0, f3));
    }
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy(s));
}

/*
 * A pool told to keep freed memory (release threshold UINT64_MAX): natively 'back' shows what it keeps past
 * the synchronization; gpusockets keeps a limited tenant's pool threshold at 0 (PoolCalls).
 */
static void pool_threshold_step(size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "pool-kept-%zuMiB", bytes / MIB);
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
    cuuint64_t keep = UINT64_MAX, none = 0;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    size_t f0 = free_now();
    CUdeviceptr p;
    if (!refused(name, cuMemAllocAsync(&p, bytes, NULL))) {
        size_t f1 = free_now();
        CHECK(cuMemFreeAsync(p, NULL));
        size_t f2 = free_now();
        printf("step %s take %lld back %lld\n", name, taken(f0, f1), taken(f0, f2));
    }
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none));
    CHECK(cuMemPoolTrimTo(pool, 0));
}

/*
 * cuMemAllocAsync captured: a graph memory node. Natively its memory is measured at the capture, the
 * instantiation and the launch, each figure the change since the one before (gpu-pass-quota sums them, as
 * it sums every step's figures but 'destroyed' and 'trimmed', which count from the start); gpusockets
 * charges it at the capture and keeps the charge for the session's life. cuDeviceGraphMemTrim is not forwarded (not-forwarded.api): then "trimmed -".
 */
static void graph_memory_step(size_t bytes) {
    char name[64];
    snprintf(name, sizeof name, "graph-mem-node-%zuMiB", bytes / MIB);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t f0 = free_now();
    CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUdeviceptr p;
    CUresult r = cuMemAllocAsync(&p, bytes, s);
    if (r == CUDA_SUCCESS) {
        r = cuMemFreeAsync(p, s);
    }
    CUgraph g = NULL;
    CUresult end = cuStreamEndCapture(s, &g);
    if (refused(name, r) || refused(name, end)) {
        if (g != NULL) {
            cuGraphDestroy(g);
        }
        CHECK(cuStreamDestroy(s));
        return;
    }
    size_t f1 = free_now();
    CUgraphExec x;
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    size_t f2 = free_now();
    CHECK(cuGraphLaunch(x, s));
    CHECK(cuStreamSynchronize(s));
    size_t f3 = free_now();
    CHECK(cuGraphExecDestroy(x));
    CHECK(cuGraphDestroy(g));
    size_t f4 = free_now();
    CUresult trim = cuDeviceGraphMemTrim(dev);
    if (trim != CUDA_SUCCESS && trim != CUDA_ERROR_NOT_SUPPORTED) {
        CHECK(trim);
    }
    size_t f5 = free_now();
    char trimmed[32] = "-";
    if (trim == CUDA_SUCCESS) {
        snprintf(trimmed, sizeof trimmed, "%lld", taken(f0, f5));
    }
    printf("step %s take %lld instantiate %lld launch %lld destroyed %lld trimmed %s\n", name, taken(f0, f1),
           taken(f1, f2), taken(f2, f3), taken(f0, f4), trimmed);
    CHECK(cuStreamDestroy(s));
}

int main(int argc, char **argv) {
    size_t scale = argc > 1 ? (size_t) atol(argv[1]) : 1;
    if (scale < 1 || scale > 1024) {
        fprintf(stderr, "usage: footprint [SCALE (1..1024)]\n");
        return 2;
    }
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&kernels, KERNELS));
    CHECK(cuModuleGetFunction(&deep, kernels, "deep"));
    CHECK(cuMemAlloc(&out, 4096));
    size_t free0, total0;
    CHECK(cuMemGetInfo(&free0, &total0));
    printf("footprint: free %zu MiB of %zu MiB, sizes divided by %zu\n", free0 / MIB, total0 / MIB, scale);
    fflush(stdout);

    context_step();
    size_t stacks[] = {2048, 4096, 16384, 65536};
    for (size_t i = 0; i < sizeof stacks / sizeof stacks[0]; i++) {
        limit_step("stack", CU_LIMIT_STACK_SIZE, stacks[i]);
    }
    size_t heaps[] = {64 * MIB, 1024 * MIB / scale};
    for (size_t i = 0; i < 2; i++) {
        limit_step("heap", CU_LIMIT_MALLOC_HEAP_SIZE, heaps[i]);
        limit_step("printf-fifo", CU_LIMIT_PRINTF_FIFO_SIZE, heaps[i]);
    }
    module_step(64 * MIB);
    module_step(1024 * MIB / scale);
    library_step(64 * MIB);
    array_step(64 * MIB);
    objects_step();
    graph_exec_step();
    pool_threshold_step(256 * MIB);
    graph_memory_step(256 * MIB);

    CHECK(cuMemFree(out));
    CHECK(cuModuleUnload(kernels));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("PASS\n");
    return 0;
}
