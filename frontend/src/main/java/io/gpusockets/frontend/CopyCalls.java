package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.DecompressParams;
import io.gpusockets.protocol.structs.Memcpy3D;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code copies}: unified-addressing copies (cuMemcpy, cuMemcpyAsync, and the batches of
 * cuMemcpyBatchAsync). Each pointer is classified by the device ranges the frontend has seen
 * ({@link DeviceRanges}): device to device goes to the backend as the entry itself, one host side
 * becomes cuMemcpyHtoD or cuMemcpyDtoH, and host to host never leaves the guest.
 *
 * <p>Captured host copies (issue 21): an async copy with a host side (cuMemcpyHtoDAsync,
 * cuMemcpyDtoHAsync, or cuMemcpyAsync/cuMemcpyBatchAsync with one host side) on a stream that is
 * capturing must not carry its data now: the driver records it as a memcpy node whose host memory is
 * read or written each time the graph runs. While a capture is active on the connection
 * ({@link RemoteCudaDriver#captureActive}; otherwise no stream can capture, so no query is made) such
 * a copy asks the stream's capture status first and, capturing, becomes a memcpy node of the
 * capture's graph ({@link CapturedCopies}; the 2D/3D and array forms likewise, {@link PitchedCalls}).
 *
 * <p>Hardware decompression batches (cuMemBatchDecompressAsync) are device to device: checked here for
 * their shape and errorIndex, then sent as they are.
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

    /** CUmemcpyAttributes (24 bytes): srcAccessOrder u32, srcLocHint and dstLocHint (CUmemLocation), flags u32. */
    static final int MEMCPY_ATTRIBUTES_BYTES = 24;
    /** CU_MEMCPY_SRC_ACCESS_ORDER_STREAM .. _ANY, and CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE. */
    static final int ACCESS_ORDER_FIRST = 1, ACCESS_ORDER_LAST = 3, FLAG_PREFER_OVERLAP = 1;
    /** CU_STREAM_LEGACY: a batch may not go to the legacy stream, under either of its names. */
    private static final long STREAM_LEGACY = 1;

    /**
     * The batch is checked as the driver checks it (a stream other than the legacy one; every copy
     * covered by attributes that start at copy 0 and rise, each with a known source access order and
     * flags), then each copy goes in order as {@link #cuMemcpyAsync} sends it. The data of a host source
     * is captured when its copy is sent, before this returns, which every access order allows.
     */
    @Override
    public int cuMemcpyBatchAsync(MemorySegment dsts, MemorySegment srcs, MemorySegment sizes, long count,
                                  MemorySegment attrs, MemorySegment attrsIdxs, long numAttrs, long hStream) {
        return batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, null);
    }

    /** The CUDA 12.8 form: as {@link #cuMemcpyBatchAsync}, and failIdx names the copy that failed (SIZE_MAX: none in particular). */
    @Override
    public int cuMemcpyBatchAsync_v1(MemorySegment dsts, MemorySegment srcs, MemorySegment sizes, long count,
                                     MemorySegment attrs, MemorySegment attrsIdxs, long numAttrs, MemorySegment failIdx,
                                     long hStream) {
        long[] failed = {-1};
        int r = batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream, failed);
        if (r != CuResult.CUDA_SUCCESS && !isNull(failIdx)) {
            failIdx.reinterpret(8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, failed[0]);
        }
        return r;
    }

    /** {@code failed[0]}, if given, becomes the index of the copy that failed. */
    private int batch(MemorySegment dsts, MemorySegment srcs, MemorySegment sizes, long count, MemorySegment attrs,
                      MemorySegment attrsIdxs, long numAttrs, long hStream, long[] failed) {
        if (hStream == 0 || hStream == STREAM_LEGACY || count <= 0 || numAttrs <= 0 || numAttrs > count
                || count > Integer.MAX_VALUE / 8 || isNull(dsts) || isNull(srcs) || isNull(sizes) || isNull(attrs)
                || isNull(attrsIdxs)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment d = dsts.reinterpret(8 * count), s = srcs.reinterpret(8 * count), n = sizes.reinterpret(8 * count);
        MemorySegment a = attrs.reinterpret(MEMCPY_ATTRIBUTES_BYTES * numAttrs), idx = attrsIdxs.reinterpret(8 * numAttrs);
        for (long k = 0; k < numAttrs; k++) {
            long first = idx.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, k);
            long previous = k == 0 ? -1 : idx.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, k - 1);
            int order = a.get(ValueLayout.JAVA_INT_UNALIGNED, k * MEMCPY_ATTRIBUTES_BYTES);
            int flags = a.get(ValueLayout.JAVA_INT_UNALIGNED, k * MEMCPY_ATTRIBUTES_BYTES + 20);
            if ((k == 0 ? first != 0 : first <= previous) || first >= count
                    || order < ACCESS_ORDER_FIRST || order > ACCESS_ORDER_LAST || (flags & ~FLAG_PREFER_OVERLAP) != 0) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        for (long i = 0; i < count; i++) {
            int r = copy(d.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i), s.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i),
                    n.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i), hStream, true);
            if (r != CuResult.CUDA_SUCCESS) {
                if (failed != null) {
                    failed[0] = i;
                }
                return r;
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Hardware decompression (cuMemBatchDecompressAsync): each operation's shape is checked here as the backend
     * checks it ({@link DecompressParams#shapeRefusal}) and its src, dst and dstActBytes must be device memory
     * this frontend knows; the first operation refused is errorIndex. The backend then checks every range
     * against the session's memory; an error of the backend or the driver has errorIndex SIZE_MAX (the driver's
     * own index does not travel back).
     */
    @Override
    public int cuMemBatchDecompressAsync(MemorySegment paramsArray, long count, int flags, MemorySegment errorIndex,
                                         long stream) {
        long[] failed = {DecompressParams.NO_INDEX};
        int r = decompress(paramsArray, count, flags, stream, failed);
        if (r != CuResult.CUDA_SUCCESS && !isNull(errorIndex)) {
            errorIndex.reinterpret(8).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, failed[0]);
        }
        return r;
    }

    private int decompress(MemorySegment paramsArray, long count, int flags, long stream, long[] failed) {
        if (count <= 0 || count > DecompressParams.MAX_COUNT || flags != 0 || isNull(paramsArray)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment params = paramsArray.reinterpret(count * DecompressParams.SIZE);
        for (long i = 0; i < count; i++) {
            if (DecompressParams.shapeRefusal(params, i) != null
                    || ranges.classify(DecompressParams.at(params, i, DecompressParams.SRC)) != DeviceRanges.Kind.DEVICE
                    || ranges.classify(DecompressParams.at(params, i, DecompressParams.DST)) != DeviceRanges.Kind.DEVICE
                    || ranges.classify(DecompressParams.at(params, i, DecompressParams.DST_ACT_BYTES)) != DeviceRanges.Kind.DEVICE) {
                failed[0] = i;
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        return driver.call(ApiEntries.cuMemBatchDecompressAsync, params, count, flags, MemorySegment.NULL, stream);
    }

    private static boolean isNull(MemorySegment p) {
        return p.isNative() && p.address() == 0;
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
            return async ? cuMemcpyHtoDAsync(dst, host, byteCount, stream) : driver.cuMemcpyHtoD(dst, host, byteCount);
        }
        if (srcDevice) {
            MemorySegment host = host(dst, byteCount);
            return async ? cuMemcpyDtoHAsync(host, src, byteCount, stream) : driver.cuMemcpyDtoH(host, src, byteCount);
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

    @Override
    public int cuMemcpyHtoDAsync(long dstDevice, MemorySegment srcHost, long byteCount, long hStream) {
        int r = captured(dstDevice, true, srcHost, byteCount, hStream);
        return r != CapturedCopies.NOT_CAPTURING ? r : driver.call(ApiEntries.cuMemcpyHtoDAsync, dstDevice, srcHost, byteCount, hStream);
    }

    @Override
    public int cuMemcpyDtoHAsync(MemorySegment dstHost, long srcDevice, long byteCount, long hStream) {
        int r = captured(srcDevice, false, dstHost, byteCount, hStream);
        return r != CapturedCopies.NOT_CAPTURING ? r : driver.call(ApiEntries.cuMemcpyDtoHAsync, dstHost, srcDevice, byteCount, hStream);
    }

    /**
     * When {@code stream} is capturing, records the copy between {@code device} and the program's
     * {@code host} memory (one row) as a memcpy node of the capture ({@link CapturedCopies}) and
     * answers its result; {@link CapturedCopies#NOT_CAPTURING} otherwise.
     */
    private int captured(long device, boolean toDevice, MemorySegment host, long byteCount, long stream) {
        if (!driver.captureActive() || byteCount <= 0 || isNull(host)) {
            return CapturedCopies.NOT_CAPTURING;   // invalid arguments are the backend's to answer, as before
        }
        try (Arena arena = Arena.ofConfined()) {
            // one row of byteCount bytes, each side's pitch byteCount
            Memcpy3D.Side h = new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, host.address(), 0, 0, byteCount, 0, 0);
            Memcpy3D.Side d = new Memcpy3D.Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, device, 0, byteCount, 0, 0);
            MemorySegment p = arena.allocate(Memcpy3D.SIZE_3D, 8);
            new Memcpy3D(toDevice ? h : d, toDevice ? d : h, byteCount, 1, 1).write3D(p);
            return CapturedCopies.record(driver, stream, p);
        }
    }
}
