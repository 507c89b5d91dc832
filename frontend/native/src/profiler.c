/*
 * The profiler control calls of cudaProfiler.h (not cuda.h, so not in the API table): answered here,
 * in the guest, never forwarded. cuProfilerStart/Stop switch collection on and off for the profiling
 * tool attached to the calling process (Nsight Systems, Nsight Compute through CUPTI). A guest
 * program's tool, if any, runs in the guest and sees our library, not the GPU host's driver; forwarded,
 * the calls would start and stop whatever profiler runs on the backend's host, over every session of
 * that backend, which one tenant must not control. So, as the driver does when no tool is attached,
 * they change nothing and answer as it answers: CUDA_SUCCESS with a current context, and the error of
 * cuCtxGetCurrent's view otherwise (CUDA_ERROR_INVALID_CONTEXT without one; cudaProfiler.h lists it,
 * and CUDA_ERROR_NOT_INITIALIZED before cuInit). cuProfilerInitialize is deprecated and, as cudaProfiler.h
 * says, returns CUDA_ERROR_NOT_SUPPORTED since CUDA 12.0 on the driver too.
 *
 * cudart 13 asks cuGetProcAddress for all three at version 4000 (procaddress/cudart13-requests.txt);
 * procaddress.c answers them from profiler_symbols below.
 */
#include "gpusockets.h"

#define CUDA_ERROR_INVALID_CONTEXT 201

typedef void *CUcontext;

CUresult cuCtxGetCurrent(CUcontext *pctx);

/* The version cudaProfilerTypedefs.h lists them from (PFN_cuProfilerStart_v4000). */
#define GPUS_PROFILER_SINCE 4000

static CUresult current_context_state(const char *name) {
    CUcontext ctx = NULL;
    CUresult r = cuCtxGetCurrent(&ctx);
    if (r == CUDA_SUCCESS && ctx == NULL) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    }
    if (gpus_tracing()) {
        gpus_trace("%s -> %d (answered in the guest)", name, r);
    }
    return r;
}

GPUS_EXPORT CUresult CUDAAPI cuProfilerStart(void) {
    return current_context_state("cuProfilerStart");
}

GPUS_EXPORT CUresult CUDAAPI cuProfilerStop(void) {
    return current_context_state("cuProfilerStop");
}

GPUS_EXPORT CUresult CUDAAPI cuProfilerInitialize(const char *configFile, const char *outputFile, int outputMode) {
    if (gpus_tracing()) {
        gpus_trace("cuProfilerInitialize -> %d (deprecated: not supported since CUDA 12.0)", CUDA_ERROR_NOT_SUPPORTED);
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

const struct gpus_symbol gpus_profiler_symbols[] = {
    {"cuProfilerInitialize", "cuProfilerInitialize", GPUS_PROFILER_SINCE, 0, (void *) cuProfilerInitialize},
    {"cuProfilerStart", "cuProfilerStart", GPUS_PROFILER_SINCE, 0, (void *) cuProfilerStart},
    {"cuProfilerStop", "cuProfilerStop", GPUS_PROFILER_SINCE, 0, (void *) cuProfilerStop},
    {NULL, NULL, 0, 0, NULL},
};
