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

static const char *const absent_names[] = {
    "cuArrayCreate",
    "cuArrayGetDescriptor",
    "cuCtxCreate_v3",
    "cuDeviceTotalMem",
    "cuEGLApiInit",
    "cuEGLStreamConsumerAcquireFrame",
    "cuEGLStreamConsumerConnect",
    "cuEGLStreamConsumerConnectWithFlags",
    "cuEGLStreamConsumerDisconnect",
    "cuEGLStreamConsumerReleaseFrame",
    "cuEGLStreamProducerConnect",
    "cuEGLStreamProducerDisconnect",
    "cuEGLStreamProducerPresentFrame",
    "cuEGLStreamProducerReturnFrame",
    "cuGLCtxCreate",
    "cuGLCtxCreate_v2",
    "cuGLGetDevices",
    "cuGLGetDevices_v2",
    "cuGLInit",
    "cuGLMapBufferObject",
    "cuGLMapBufferObjectAsync",
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
    "cuMemGetAttribute",
    "cuMemGetAttribute_v2",
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
    "cuVDPAUCtxCreate",
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
ABSENT(cuEGLApiInit, 4)
ABSENT(cuEGLStreamConsumerAcquireFrame, 5)
ABSENT(cuEGLStreamConsumerConnect, 6)
ABSENT(cuEGLStreamConsumerConnectWithFlags, 7)
ABSENT(cuEGLStreamConsumerDisconnect, 8)
ABSENT(cuEGLStreamConsumerReleaseFrame, 9)
ABSENT(cuEGLStreamProducerConnect, 10)
ABSENT(cuEGLStreamProducerDisconnect, 11)
ABSENT(cuEGLStreamProducerPresentFrame, 12)
ABSENT(cuEGLStreamProducerReturnFrame, 13)
ABSENT(cuGLCtxCreate, 14)
ABSENT(cuGLCtxCreate_v2, 15)
ABSENT(cuGLGetDevices, 16)
ABSENT(cuGLGetDevices_v2, 17)
ABSENT(cuGLInit, 18)
ABSENT(cuGLMapBufferObject, 19)
ABSENT(cuGLMapBufferObjectAsync, 20)
ABSENT(cuGLMapBufferObjectAsync_v2, 21)
ABSENT(cuGLMapBufferObjectAsync_v2_ptsz, 22)
ABSENT(cuGLMapBufferObject_v2, 23)
ABSENT(cuGLMapBufferObject_v2_ptds, 24)
ABSENT(cuGLRegisterBufferObject, 25)
ABSENT(cuGLSetBufferObjectMapFlags, 26)
ABSENT(cuGLUnmapBufferObject, 27)
ABSENT(cuGLUnmapBufferObjectAsync, 28)
ABSENT(cuGLUnregisterBufferObject, 29)
ABSENT(cuGraphAddKernelNode, 30)
ABSENT(cuGraphExecKernelNodeSetParams, 31)
ABSENT(cuGraphExecUpdate, 32)
ABSENT(cuGraphInstantiate, 33)
ABSENT(cuGraphInstantiateWithParams_ptsz, 34)
ABSENT(cuGraphInstantiate_v2, 35)
ABSENT(cuGraphKernelNodeGetParams, 36)
ABSENT(cuGraphKernelNodeSetParams, 37)
ABSENT(cuGraphicsEGLRegisterImage, 38)
ABSENT(cuGraphicsGLRegisterBuffer, 39)
ABSENT(cuGraphicsGLRegisterImage, 40)
ABSENT(cuGraphicsMapResources_ptsz, 41)
ABSENT(cuGraphicsResourceGetMappedEglFrame, 42)
ABSENT(cuGraphicsUnmapResources_ptsz, 43)
ABSENT(cuGraphicsVDPAURegisterOutputSurface, 44)
ABSENT(cuGraphicsVDPAURegisterVideoSurface, 45)
ABSENT(cuMemAlloc, 46)
ABSENT(cuMemAllocHost, 47)
ABSENT(cuMemAllocPitch, 48)
ABSENT(cuMemBatchDecompressAsync_ptsz, 49)
ABSENT(cuMemDiscardAndPrefetchBatchAsync_ptsz, 50)
ABSENT(cuMemDiscardBatchAsync_ptsz, 51)
ABSENT(cuMemFree, 52)
ABSENT(cuMemGetAddressRange, 53)
ABSENT(cuMemGetAttribute, 54)
ABSENT(cuMemGetAttribute_v2, 55)
ABSENT(cuMemGetInfo, 56)
ABSENT(cuMemHostGetDevicePointer, 57)
ABSENT(cuMemHostRegister, 58)
ABSENT(cuMemMapArrayAsync_ptsz, 59)
ABSENT(cuMemPrefetchBatchAsync_ptsz, 60)
ABSENT(cuMemcpy2D, 61)
ABSENT(cuMemcpy2DAsync, 62)
ABSENT(cuMemcpy2DUnaligned_v2_ptds, 63)
ABSENT(cuMemcpy3D, 64)
ABSENT(cuMemcpy3DAsync, 65)
ABSENT(cuMemcpy3DBatchAsync_ptsz, 66)
ABSENT(cuMemcpy3DBatchAsync_v2_ptsz, 67)
ABSENT(cuMemcpy3DPeerAsync_ptsz, 68)
ABSENT(cuMemcpy3DPeer_ptds, 69)
ABSENT(cuMemcpyAtoA_v2_ptds, 70)
ABSENT(cuMemcpyAtoD_v2_ptds, 71)
ABSENT(cuMemcpyAtoHAsync_v2_ptsz, 72)
ABSENT(cuMemcpyAtoH_v2_ptds, 73)
ABSENT(cuMemcpyBatchAsync_ptsz, 74)
ABSENT(cuMemcpyBatchAsync_v2_ptsz, 75)
ABSENT(cuMemcpyDtoA_v2_ptds, 76)
ABSENT(cuMemcpyDtoD, 77)
ABSENT(cuMemcpyDtoDAsync, 78)
ABSENT(cuMemcpyDtoH, 79)
ABSENT(cuMemcpyDtoHAsync, 80)
ABSENT(cuMemcpyHtoAAsync_v2_ptsz, 81)
ABSENT(cuMemcpyHtoA_v2_ptds, 82)
ABSENT(cuMemcpyHtoD, 83)
ABSENT(cuMemcpyHtoDAsync, 84)
ABSENT(cuMemsetD16, 85)
ABSENT(cuMemsetD2D16, 86)
ABSENT(cuMemsetD2D32, 87)
ABSENT(cuMemsetD2D8, 88)
ABSENT(cuMemsetD32, 89)
ABSENT(cuMemsetD8, 90)
ABSENT(cuModuleGetGlobal, 91)
ABSENT(cuProfilerInitialize, 92)
ABSENT(cuProfilerStart, 93)
ABSENT(cuProfilerStop, 94)
ABSENT(cuSignalExternalSemaphoresAsync_ptsz, 95)
ABSENT(cuStreamAttachMemAsync_ptsz, 96)
ABSENT(cuStreamCopyAttributes_ptsz, 97)
ABSENT(cuStreamSetAttribute_ptsz, 98)
ABSENT(cuTexRefSetAddress2D_v2, 99)
ABSENT(cuVDPAUCtxCreate, 100)
ABSENT(cuVDPAUCtxCreate_v2, 101)
ABSENT(cuVDPAUGetDevice, 102)
ABSENT(cuWaitExternalSemaphoresAsync_ptsz, 103)
