/*
 * Symbols the real libcuda.so.1 exports that no table entry serves: the pre-_v2 ABIs cuda.h no
 * longer maps to (cuMemAlloc with 32-bit sizes, ...), per-thread-stream variants of functions that
 * are not forwarded, and the graphics-interop entry points. Libraries that carry their own driver
 * loader (cuBLAS, cuFFT) look such names up with dlsym when they start and give up with an
 * internal error when one is missing, even if they never call it (seen on the H200: both ran to
 * completion remotely under calltrace, whose libcuda.so.1 exports every name the driver does, and
 * failed at cublasCreate / cufftPlan1d under ours; with these exports they pass there). So every
 * cu* function the real driver 580 exports (procaddress/driver580-exports.txt) is exported:
 *
 *  - where the old ABI is the current one under another name, it calls the current one;
 *  - otherwise it answers CUDA_ERROR_NOT_SUPPORTED and says once on stderr which symbol was called.
 *
 * NativeExportsTest keeps this list complete against those answers. Written by hand from that
 * list: cuGetProcAddress never hands these out (it answers from the API table), so they are only
 * reached by name.
 */
#include "gpusockets.h"

#include <stdio.h>

typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;

CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
CUresult cuCtxPushCurrent_v2(CUcontext ctx);
CUresult cuEventDestroy_v2(CUevent event);
CUresult cuStreamDestroy_v2(CUstream stream);
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

/* ---- old names of the current ABI ---------------------------------------------------------------- */

GPUS_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
    return cuCtxDestroy_v2(ctx);
}

GPUS_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) {
    return cuCtxPopCurrent_v2(pctx);
}

GPUS_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
    return cuCtxPushCurrent_v2(ctx);
}

GPUS_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent event) {
    return cuEventDestroy_v2(event);
}

GPUS_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream stream) {
    return cuStreamDestroy_v2(stream);
}

GPUS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

GPUS_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    return cuCtxCreate_v2(pctx, flags, dev);
}

/* ---- the rest: not supported, one notice each ------------------------------------------------- */

/* The list, once: an index per name (enum), its text and its exported function come from it. */
#define ABSENT_SYMBOLS(X) \
    X(cuArray3DCreate) \
    X(cuArray3DGetDescriptor) \
    X(cuArrayCreate) \
    X(cuArrayGetDescriptor) \
    X(cuCtxCreate_v3) \
    X(cuDeviceTotalMem) \
    X(cuEGLApiInit) \
    X(cuEGLStreamConsumerAcquireFrame) \
    X(cuEGLStreamConsumerConnect) \
    X(cuEGLStreamConsumerConnectWithFlags) \
    X(cuEGLStreamConsumerDisconnect) \
    X(cuEGLStreamConsumerReleaseFrame) \
    X(cuEGLStreamProducerConnect) \
    X(cuEGLStreamProducerDisconnect) \
    X(cuEGLStreamProducerPresentFrame) \
    X(cuEGLStreamProducerReturnFrame) \
    X(cuGLCtxCreate) \
    X(cuGLCtxCreate_v2) \
    X(cuGLGetDevices) \
    X(cuGLGetDevices_v2) \
    X(cuGLInit) \
    X(cuGLMapBufferObject) \
    X(cuGLMapBufferObjectAsync) \
    X(cuGLMapBufferObjectAsync_v2) \
    X(cuGLMapBufferObjectAsync_v2_ptsz) \
    X(cuGLMapBufferObject_v2) \
    X(cuGLMapBufferObject_v2_ptds) \
    X(cuGLRegisterBufferObject) \
    X(cuGLSetBufferObjectMapFlags) \
    X(cuGLUnmapBufferObject) \
    X(cuGLUnmapBufferObjectAsync) \
    X(cuGLUnregisterBufferObject) \
    X(cuGraphAddKernelNode) \
    X(cuGraphExecKernelNodeSetParams) \
    X(cuGraphExecUpdate) \
    X(cuGraphInstantiate) \
    X(cuGraphInstantiate_v2) \
    X(cuGraphKernelNodeGetParams) \
    X(cuGraphKernelNodeSetParams) \
    X(cuGraphicsEGLRegisterImage) \
    X(cuGraphicsGLRegisterBuffer) \
    X(cuGraphicsGLRegisterImage) \
    X(cuGraphicsMapResources_ptsz) \
    X(cuGraphicsResourceGetMappedEglFrame) \
    X(cuGraphicsUnmapResources_ptsz) \
    X(cuGraphicsVDPAURegisterOutputSurface) \
    X(cuGraphicsVDPAURegisterVideoSurface) \
    X(cuMemAlloc) \
    X(cuMemAllocHost) \
    X(cuMemAllocPitch) \
    X(cuMemFree) \
    X(cuMemGetAddressRange) \
    X(cuMemGetAttribute) \
    X(cuMemGetAttribute_v2) \
    X(cuMemGetInfo) \
    X(cuMemHostGetDevicePointer) \
    X(cuMemHostRegister) \
    X(cuMemcpy2D) \
    X(cuMemcpy2DAsync) \
    X(cuMemcpy2DUnaligned) \
    X(cuMemcpy3D) \
    X(cuMemcpy3DAsync) \
    X(cuMemcpyAtoA) \
    X(cuMemcpyAtoD) \
    X(cuMemcpyAtoH) \
    X(cuMemcpyAtoHAsync) \
    X(cuMemcpyDtoA) \
    X(cuMemcpyDtoD) \
    X(cuMemcpyDtoDAsync) \
    X(cuMemcpyDtoH) \
    X(cuMemcpyDtoHAsync) \
    X(cuMemcpyHtoA) \
    X(cuMemcpyHtoAAsync) \
    X(cuMemcpyHtoD) \
    X(cuMemcpyHtoDAsync) \
    X(cuMemsetD16) \
    X(cuMemsetD2D16) \
    X(cuMemsetD2D32) \
    X(cuMemsetD2D8) \
    X(cuMemsetD32) \
    X(cuMemsetD8) \
    X(cuModuleGetGlobal) \
    X(cuSignalExternalSemaphoresAsync_ptsz) \
    X(cuTexRefSetAddress2D_v2) \
    X(cuVDPAUCtxCreate) \
    X(cuVDPAUCtxCreate_v2) \
    X(cuVDPAUGetDevice) \
    X(cuWaitExternalSemaphoresAsync_ptsz)

#define ABSENT_INDEX(name) absent_##name,
enum { ABSENT_SYMBOLS(ABSENT_INDEX) ABSENT_COUNT };

#define ABSENT_NAME(name) #name,
static const char *const absent_names[ABSENT_COUNT] = {ABSENT_SYMBOLS(ABSENT_NAME)};

static CUresult absent(int index) {
    static unsigned char said[ABSENT_COUNT];
    if (!__atomic_exchange_n(&said[index], 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets: %s (an ABI or API GPUsockets does not provide) was called; it returns "
                        "CUDA_ERROR_NOT_SUPPORTED\n", absent_names[index]);
    }
    gpus_trace("%s -> %d (not provided)", absent_names[index], CUDA_ERROR_NOT_SUPPORTED);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define ABSENT_FUNCTION(name)                  \
    GPUS_EXPORT CUresult CUDAAPI name(void) {  \
        return absent(absent_##name);          \
    }
ABSENT_SYMBOLS(ABSENT_FUNCTION)
