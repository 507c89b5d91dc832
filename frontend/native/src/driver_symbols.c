/*
 * Symbols the real libcuda.so.1 exports that no table entry serves: the pre-_v2 ABIs cuda.h no
 * longer maps to (cuMemAlloc with 32-bit sizes, ...), per-thread-stream variants of functions that
 * are not forwarded, and the graphics-interop entry points. Libraries that carry their own driver
 * loader (cuBLAS, cuFFT) look such names up with dlsym when they start and give up with an
 * internal error when one is missing, even if they never call it (seen on the H200: both ran to
 * completion remotely under calltrace, whose libcuda.so.1 exports every name the driver does, and
 * failed at cublasCreate / cufftPlan1d under ours). So every symbol the real driver 580 answered a
 * cuGetProcAddress with (procaddress/driver580-*-answers.txt) is exported here:
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

static const char *const absent_names[] = {
    "cuArrayCreate",
    "cuArrayGetDescriptor",
    "cuCtxCreate_v3",
    "cuDeviceTotalMem",
    "cuEGLStreamConsumerAcquireFrame",
    "cuEGLStreamConsumerConnect",
    "cuEGLStreamConsumerConnectWithFlags",
    "cuEGLStreamConsumerDisconnect",
    "cuEGLStreamConsumerReleaseFrame",
    "cuEGLStreamProducerConnect",
    "cuEGLStreamProducerDisconnect",
    "cuEGLStreamProducerPresentFrame",
    "cuEGLStreamProducerReturnFrame",
    "cuGLCtxCreate_v2",
    "cuGLGetDevices",
    "cuGLInit",
    "cuGLMapBufferObjectAsync_v2",
    "cuGLMapBufferObjectAsync_v2_ptsz",
    "cuGLMapBufferObject_v2",
    "cuGLMapBufferObject_v2_ptds",
    "cuGLRegisterBufferObject",
    "cuGLSetBufferObjectMapFlags",
    "cuGLUnmapBufferObject",
    "cuGLUnmapBufferObjectAsync",
    "cuGLUnregisterBufferObject",
    "cuGraphAddKernelNode",
    "cuGraphExecKernelNodeSetParams",
    "cuGraphExecUpdate",
    "cuGraphInstantiate",
    "cuGraphInstantiateWithParams_ptsz",
    "cuGraphInstantiate_v2",
    "cuGraphKernelNodeGetParams",
    "cuGraphKernelNodeSetParams",
    "cuGraphicsEGLRegisterImage",
    "cuGraphicsGLRegisterBuffer",
    "cuGraphicsGLRegisterImage",
    "cuGraphicsMapResources_ptsz",
    "cuGraphicsResourceGetMappedEglFrame",
    "cuGraphicsUnmapResources_ptsz",
    "cuGraphicsVDPAURegisterOutputSurface",
    "cuGraphicsVDPAURegisterVideoSurface",
    "cuMemAlloc",
    "cuMemAllocHost",
    "cuMemAllocPitch",
    "cuMemBatchDecompressAsync_ptsz",
    "cuMemDiscardAndPrefetchBatchAsync_ptsz",
    "cuMemDiscardBatchAsync_ptsz",
    "cuMemFree",
    "cuMemGetAddressRange",
    "cuMemGetInfo",
    "cuMemHostGetDevicePointer",
    "cuMemHostRegister",
    "cuMemMapArrayAsync_ptsz",
    "cuMemPrefetchBatchAsync_ptsz",
    "cuMemcpy2D",
    "cuMemcpy2DAsync",
    "cuMemcpy2DUnaligned_v2_ptds",
    "cuMemcpy3D",
    "cuMemcpy3DAsync",
    "cuMemcpy3DBatchAsync_ptsz",
    "cuMemcpy3DBatchAsync_v2_ptsz",
    "cuMemcpy3DPeerAsync_ptsz",
    "cuMemcpy3DPeer_ptds",
    "cuMemcpyAtoA_v2_ptds",
    "cuMemcpyAtoD_v2_ptds",
    "cuMemcpyAtoHAsync_v2_ptsz",
    "cuMemcpyAtoH_v2_ptds",
    "cuMemcpyBatchAsync_ptsz",
    "cuMemcpyBatchAsync_v2_ptsz",
    "cuMemcpyDtoA_v2_ptds",
    "cuMemcpyDtoD",
    "cuMemcpyDtoDAsync",
    "cuMemcpyDtoH",
    "cuMemcpyDtoHAsync",
    "cuMemcpyHtoAAsync_v2_ptsz",
    "cuMemcpyHtoA_v2_ptds",
    "cuMemcpyHtoD",
    "cuMemcpyHtoDAsync",
    "cuMemsetD16",
    "cuMemsetD2D16",
    "cuMemsetD2D32",
    "cuMemsetD2D8",
    "cuMemsetD32",
    "cuMemsetD8",
    "cuModuleGetGlobal",
    "cuProfilerInitialize",
    "cuProfilerStart",
    "cuProfilerStop",
    "cuSignalExternalSemaphoresAsync_ptsz",
    "cuStreamAttachMemAsync_ptsz",
    "cuStreamCopyAttributes_ptsz",
    "cuStreamSetAttribute_ptsz",
    "cuTexRefSetAddress2D_v2",
    "cuVDPAUCtxCreate_v2",
    "cuVDPAUGetDevice",
    "cuWaitExternalSemaphoresAsync_ptsz",
};

static CUresult absent(int index) {
    static unsigned char said[sizeof absent_names / sizeof absent_names[0]];
    if (!__atomic_exchange_n(&said[index], 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets: %s (an ABI or API GPUsockets does not provide) was called; it returns "
                        "CUDA_ERROR_NOT_SUPPORTED\n", absent_names[index]);
    }
    gpus_trace("%s -> %d (not provided)", absent_names[index], CUDA_ERROR_NOT_SUPPORTED);
    return CUDA_ERROR_NOT_SUPPORTED;
}

#define ABSENT(name, index)                          \
    GPUS_EXPORT CUresult CUDAAPI name(void) {        \
        return absent(index);                        \
    }

ABSENT(cuArrayCreate, 0)
ABSENT(cuArrayGetDescriptor, 1)
ABSENT(cuCtxCreate_v3, 2)
ABSENT(cuDeviceTotalMem, 3)
ABSENT(cuEGLStreamConsumerAcquireFrame, 4)
ABSENT(cuEGLStreamConsumerConnect, 5)
ABSENT(cuEGLStreamConsumerConnectWithFlags, 6)
ABSENT(cuEGLStreamConsumerDisconnect, 7)
ABSENT(cuEGLStreamConsumerReleaseFrame, 8)
ABSENT(cuEGLStreamProducerConnect, 9)
ABSENT(cuEGLStreamProducerDisconnect, 10)
ABSENT(cuEGLStreamProducerPresentFrame, 11)
ABSENT(cuEGLStreamProducerReturnFrame, 12)
ABSENT(cuGLCtxCreate_v2, 13)
ABSENT(cuGLGetDevices, 14)
ABSENT(cuGLInit, 15)
ABSENT(cuGLMapBufferObjectAsync_v2, 16)
ABSENT(cuGLMapBufferObjectAsync_v2_ptsz, 17)
ABSENT(cuGLMapBufferObject_v2, 18)
ABSENT(cuGLMapBufferObject_v2_ptds, 19)
ABSENT(cuGLRegisterBufferObject, 20)
ABSENT(cuGLSetBufferObjectMapFlags, 21)
ABSENT(cuGLUnmapBufferObject, 22)
ABSENT(cuGLUnmapBufferObjectAsync, 23)
ABSENT(cuGLUnregisterBufferObject, 24)
ABSENT(cuGraphAddKernelNode, 25)
ABSENT(cuGraphExecKernelNodeSetParams, 26)
ABSENT(cuGraphExecUpdate, 27)
ABSENT(cuGraphInstantiate, 28)
ABSENT(cuGraphInstantiateWithParams_ptsz, 29)
ABSENT(cuGraphInstantiate_v2, 30)
ABSENT(cuGraphKernelNodeGetParams, 31)
ABSENT(cuGraphKernelNodeSetParams, 32)
ABSENT(cuGraphicsEGLRegisterImage, 33)
ABSENT(cuGraphicsGLRegisterBuffer, 34)
ABSENT(cuGraphicsGLRegisterImage, 35)
ABSENT(cuGraphicsMapResources_ptsz, 36)
ABSENT(cuGraphicsResourceGetMappedEglFrame, 37)
ABSENT(cuGraphicsUnmapResources_ptsz, 38)
ABSENT(cuGraphicsVDPAURegisterOutputSurface, 39)
ABSENT(cuGraphicsVDPAURegisterVideoSurface, 40)
ABSENT(cuMemAlloc, 41)
ABSENT(cuMemAllocHost, 42)
ABSENT(cuMemAllocPitch, 43)
ABSENT(cuMemBatchDecompressAsync_ptsz, 44)
ABSENT(cuMemDiscardAndPrefetchBatchAsync_ptsz, 45)
ABSENT(cuMemDiscardBatchAsync_ptsz, 46)
ABSENT(cuMemFree, 47)
ABSENT(cuMemGetAddressRange, 48)
ABSENT(cuMemGetInfo, 49)
ABSENT(cuMemHostGetDevicePointer, 50)
ABSENT(cuMemHostRegister, 51)
ABSENT(cuMemMapArrayAsync_ptsz, 52)
ABSENT(cuMemPrefetchBatchAsync_ptsz, 53)
ABSENT(cuMemcpy2D, 54)
ABSENT(cuMemcpy2DAsync, 55)
ABSENT(cuMemcpy2DUnaligned_v2_ptds, 56)
ABSENT(cuMemcpy3D, 57)
ABSENT(cuMemcpy3DAsync, 58)
ABSENT(cuMemcpy3DBatchAsync_ptsz, 59)
ABSENT(cuMemcpy3DBatchAsync_v2_ptsz, 60)
ABSENT(cuMemcpy3DPeerAsync_ptsz, 61)
ABSENT(cuMemcpy3DPeer_ptds, 62)
ABSENT(cuMemcpyAtoA_v2_ptds, 63)
ABSENT(cuMemcpyAtoD_v2_ptds, 64)
ABSENT(cuMemcpyAtoHAsync_v2_ptsz, 65)
ABSENT(cuMemcpyAtoH_v2_ptds, 66)
ABSENT(cuMemcpyBatchAsync_ptsz, 67)
ABSENT(cuMemcpyBatchAsync_v2_ptsz, 68)
ABSENT(cuMemcpyDtoA_v2_ptds, 69)
ABSENT(cuMemcpyDtoD, 70)
ABSENT(cuMemcpyDtoDAsync, 71)
ABSENT(cuMemcpyDtoH, 72)
ABSENT(cuMemcpyDtoHAsync, 73)
ABSENT(cuMemcpyHtoAAsync_v2_ptsz, 74)
ABSENT(cuMemcpyHtoA_v2_ptds, 75)
ABSENT(cuMemcpyHtoD, 76)
ABSENT(cuMemcpyHtoDAsync, 77)
ABSENT(cuMemsetD16, 78)
ABSENT(cuMemsetD2D16, 79)
ABSENT(cuMemsetD2D32, 80)
ABSENT(cuMemsetD2D8, 81)
ABSENT(cuMemsetD32, 82)
ABSENT(cuMemsetD8, 83)
ABSENT(cuModuleGetGlobal, 84)
ABSENT(cuProfilerInitialize, 85)
ABSENT(cuProfilerStart, 86)
ABSENT(cuProfilerStop, 87)
ABSENT(cuSignalExternalSemaphoresAsync_ptsz, 88)
ABSENT(cuStreamAttachMemAsync_ptsz, 89)
ABSENT(cuStreamCopyAttributes_ptsz, 90)
ABSENT(cuStreamSetAttribute_ptsz, 91)
ABSENT(cuTexRefSetAddress2D_v2, 92)
ABSENT(cuVDPAUCtxCreate_v2, 93)
ABSENT(cuVDPAUGetDevice, 94)
ABSENT(cuWaitExternalSemaphoresAsync_ptsz, 95)
