package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.AbstractList;
import java.util.List;

/**
 * The hand-written copies of the table's memory section: unified cuMemcpy(Async), and pitched
 * cuMemcpy2D/3D(Async). Pointers are classified with {@link DeviceRanges}; a host side is gathered
 * from (or scattered into) the program's pitched memory row by row, so that only the bytes the copy
 * moves travel, packed, and no guest address is sent.
 */
final class RemoteMemory {
    private static final ApiFunction MEMCPY = ApiTable.get().byName("cuMemcpy");
    private static final ApiFunction MEMCPY_ASYNC = ApiTable.get().byName("cuMemcpyAsync");
    private static final ApiFunction MEMCPY_2D = ApiTable.get().byName("cuMemcpy2D");
    private static final ApiFunction MEMCPY_2D_ASYNC = ApiTable.get().byName("cuMemcpy2DAsync");
    private static final ApiFunction MEMCPY_3D = ApiTable.get().byName("cuMemcpy3D");
    private static final ApiFunction MEMCPY_3D_ASYNC = ApiTable.get().byName("cuMemcpy3DAsync");
    private static final int POINTER_ATTRIBUTE_RANGE_START = 11;
    private static final int POINTER_ATTRIBUTE_RANGE_SIZE = 12;

    private final RemoteCudaDriver driver;
    private final DeviceRanges ranges;

    RemoteMemory(RemoteCudaDriver driver) {
        this.driver = driver;
        this.ranges = new DeviceRanges(this::rangeOf);
    }

    DeviceRanges ranges() {
        return ranges;
    }

    /** The session's range containing {@code p}, from the backend, or null when it is no device memory of the session. */
    private long[] rangeOf(long p) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment start = a.allocate(8), size = a.allocate(8);
            if (driver.cuPointerGetAttribute(start, POINTER_ATTRIBUTE_RANGE_START, p) != CuResult.CUDA_SUCCESS
                    || driver.cuPointerGetAttribute(size, POINTER_ATTRIBUTE_RANGE_SIZE, p) != CuResult.CUDA_SUCCESS) {
                return null;
            }
            return new long[] {start.get(ValueLayout.JAVA_LONG, 0), size.get(ValueLayout.JAVA_LONG, 0)};
        }
    }

    // ---- cuMemcpy, cuMemcpyAsync ---------------------------------------------------------------

    /**
     * Device to device goes to the backend as this entry; one device side becomes cuMemcpyHtoD or
     * cuMemcpyDtoH (Async with the stream); host to host is copied here (after the stream's work, for
     * the async form).
     */
    int copy(long dst, long src, long byteCount, long stream, boolean async) {
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
            return async ? driver.call(MEMCPY_ASYNC, dst, src, byteCount, stream) : driver.call(MEMCPY, dst, src, byteCount);
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

    private static MemorySegment host(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    // ---- cuMemcpy2D, cuMemcpy3D (and Async) -----------------------------------------------------

    /**
     * Reads the program's CUDA_MEMCPY2D/3D, resolves UNIFIED sides, and sends the copy with a host
     * source's rows as DATA, or receives a host destination's rows into their places. A host-to-host
     * copy never leaves the guest.
     */
    int copyPitched(MemorySegment pCopy, long stream, boolean is3D, boolean async) {
        if (pCopy.isNative() && pCopy.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D m = is3D ? Memcpy3D.read3D(WireValues.sized(pCopy, Memcpy3D.SIZE_3D))
                : Memcpy3D.read2D(WireValues.sized(pCopy, Memcpy3D.SIZE_2D));
        if (m.src().reserved() != 0 || m.dst().reserved() != 0 || m.totalBytes() < 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Side src = resolve(m.src());
        Side dst = resolve(m.dst());
        if (src == null || dst == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        m = m.with(src, dst);
        boolean hostIn = src.memoryType() == Memcpy3D.HOST;
        boolean hostOut = dst.memoryType() == Memcpy3D.HOST;
        if (hostIn && hostOut) {
            return hostToHost(m, stream, async);
        }
        List<MemorySegment> in = hostIn ? hostBlocks(m, src) : List.of();
        List<MemorySegment> out = hostOut ? hostBlocks(m, dst) : List.of();
        if (in == null || out == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = RemoteCudaDriver.request();
        m.encode(req);
        if (async) {
            req.putLong(stream);
        }
        req.putLong(hostIn ? m.totalBytes() : 0);
        ApiFunction f = is3D ? (async ? MEMCPY_3D_ASYNC : MEMCPY_3D) : (async ? MEMCPY_2D_ASYNC : MEMCPY_2D);
        // Rows going to the device are captured once sent: that copy may be pipelined. Rows coming back are waited for.
        boolean noReply = async && driver.pipelining() && !hostOut;
        return driver.exchange(f, req.flip(), in, true, out, noReply).result();
    }

    /** A side with UNIFIED resolved to HOST or DEVICE by where its base pointer lies; null for an unknown type or freed memory. */
    private Side resolve(Side s) {
        return switch (s.memoryType()) {
            case Memcpy3D.HOST -> s.resolved(Memcpy3D.HOST);
            case Memcpy3D.DEVICE, Memcpy3D.ARRAY -> s;
            case Memcpy3D.UNIFIED -> switch (ranges.classify(s.device())) {
                case DEVICE -> s.resolved(Memcpy3D.DEVICE);
                case HOST -> s.resolved(Memcpy3D.HOST);
                case FREED -> null;
            };
            default -> null;
        };
    }

    /**
     * The program's memory a host side of {@code m} touches, as consecutive blocks in wire order:
     * one block when the rows lie back to back, one per slice when only the slices have gaps, else one
     * per row. Null when the side cannot be read (NULL, or an extent that overflows).
     */
    private static List<MemorySegment> hostBlocks(Memcpy3D m, Side s) {
        long start = Memcpy3D.startOffset(s);
        long extent = m.extent(s);
        if (start < 0 || extent < 0) {
            return null;
        }
        if (extent == 0) {
            return List.of();
        }
        if (s.host() == 0 || m.rows() > Integer.MAX_VALUE) {
            return null;
        }
        MemorySegment base = host(s.host() + start, extent);
        if (m.contiguous(s)) {
            return List.of(base.asSlice(0, m.totalBytes()));
        }
        boolean slicesOnly = m.height() <= 1 || s.pitch() == m.width();
        long sliceBytes = m.width() * m.height();
        long stride = Memcpy3D.sliceStride(s);
        int count = (int) (slicesOnly ? m.depth() : m.rows());
        return new AbstractList<>() {
            @Override
            public MemorySegment get(int i) {
                return slicesOnly ? base.asSlice(i * stride, sliceBytes) : base.asSlice(m.rowOffset(s, i), m.width());
            }

            @Override
            public int size() {
                return count;
            }
        };
    }

    private int hostToHost(Memcpy3D m, long stream, boolean async) {
        List<MemorySegment> from = hostRows(m, m.src());
        List<MemorySegment> to = hostRows(m, m.dst());
        if (from == null || to == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (async) {
            int r = driver.cuStreamSynchronize(stream);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
        }
        for (int i = 0; i < from.size(); i++) {
            MemorySegment.copy(from.get(i), 0, to.get(i), 0, m.width());
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** One segment per row (both sides of a host-to-host copy must agree row by row). */
    private static List<MemorySegment> hostRows(Memcpy3D m, Side s) {
        long start = Memcpy3D.startOffset(s);
        long extent = m.extent(s);
        if (start < 0 || extent < 0 || (extent > 0 && s.host() == 0) || m.rows() > Integer.MAX_VALUE) {
            return null;
        }
        if (extent == 0) {
            return List.of();
        }
        MemorySegment base = host(s.host() + start, extent);
        int count = (int) m.rows();
        return new AbstractList<>() {
            @Override
            public MemorySegment get(int i) {
                return base.asSlice(m.rowOffset(s, i), m.width());
            }

            @Override
            public int size() {
                return count;
            }
        };
    }
}
