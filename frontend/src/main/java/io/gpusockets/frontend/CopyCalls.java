package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;

/**
 * Area {@code copies}: unified-addressing copies (cuMemcpy, cuMemcpyAsync). Each pointer is
 * classified by the device ranges the frontend has seen ({@link DeviceRanges}): device to device
 * goes to the backend as the entry itself, one host side becomes cuMemcpyHtoD or cuMemcpyDtoH, and
 * host to host never leaves the guest.
 */
final class CopyCalls implements FrontendHandlers.Copies {
    private final RemoteCudaDriver driver;
    private final DeviceRanges ranges;

    CopyCalls(RemoteCudaDriver driver, DeviceRanges ranges) {
        this.driver = driver;
        this.ranges = ranges;
    }

    @Override
    public int cuMemcpy(long dst, long src, long byteCount) {
        return copy(dst, src, byteCount, 0, false);
    }

    @Override
    public int cuMemcpyAsync(long dst, long src, long byteCount, long hStream) {
        return copy(dst, src, byteCount, hStream, true);
    }

    /**
     * Device to device goes to the backend as this entry; one device side becomes cuMemcpyHtoD or
     * cuMemcpyDtoH (Async with the stream); host to host is copied here (after the stream's work, for
     * the async form).
     */
    private int copy(long dst, long src, long byteCount, long stream, boolean async) {
        if (byteCount < 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        DeviceRanges.Kind dstKind = ranges.classify(dst), srcKind = ranges.classify(src);
        if (dstKind == DeviceRanges.Kind.FREED || srcKind == DeviceRanges.Kind.FREED) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        boolean dstDevice = dstKind == DeviceRanges.Kind.DEVICE;
        boolean srcDevice = srcKind == DeviceRanges.Kind.DEVICE;
        if (dstDevice && srcDevice) {
            return async ? driver.call(ApiEntries.cuMemcpyAsync, dst, src, byteCount, stream)
                    : driver.call(ApiEntries.cuMemcpy, dst, src, byteCount);
        }
        if (byteCount == 0) {
            return CuResult.CUDA_SUCCESS;
        }
        if ((!dstDevice && dst == 0) || (!srcDevice && src == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (dstDevice) {
            MemorySegment host = host(src, byteCount);
            return async ? driver.cuMemcpyHtoDAsync(dst, host, byteCount, stream) : driver.cuMemcpyHtoD(dst, host, byteCount);
        }
        if (srcDevice) {
            MemorySegment host = host(dst, byteCount);
            return async ? driver.cuMemcpyDtoHAsync(host, src, byteCount, stream) : driver.cuMemcpyDtoH(host, src, byteCount);
        }
        if (async) {
            int r = driver.cuStreamSynchronize(stream);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        }
        MemorySegment.copy(host(src, byteCount), 0, host(dst, byteCount), 0, byteCount);
        return CuResult.CUDA_SUCCESS;
    }

    static MemorySegment host(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }
}
