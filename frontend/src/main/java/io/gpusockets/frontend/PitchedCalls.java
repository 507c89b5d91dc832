package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.PitchedCopyRequest;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.AbstractList;
import java.util.List;

/**
 * Area {@code pitched}: cuMemcpy2D/3D (and Async), cuMemcpy2DUnaligned, cuMemcpy3DPeer (and Async), and the array copies with a host side
 * (cuMemcpyHtoA/AtoH and Async), sent as one-row 2D copies with an array side. An async one with a host side on a capturing stream
 * becomes a memcpy node of the capture instead ({@link CapturedCopies}). A host side is gathered from (or scattered into)
 * the program's pitched memory row by row, so that only the bytes the copy moves travel, packed, and
 * no guest address is sent; UNIFIED sides are resolved by the device ranges the frontend has seen.
 */
final class PitchedCalls implements FrontendHandlers.Pitched {
    private final CallChannel channel;
    /** For the host-to-host case's stream synchronisation, and captured copies. */
    private final RemoteCudaDriver driver;
    private final DeviceRanges ranges;

    PitchedCalls(CallChannel channel, RemoteCudaDriver driver, DeviceRanges ranges) {
        this.channel = channel;
        this.driver = driver;
        this.ranges = ranges;
    }

    @Override
    public int cuMemcpy2D(MemorySegment pCopy) {
        return copy(pCopy, 0, false, false);
    }

    @Override
    public int cuMemcpy2DUnaligned(MemorySegment pCopy) {
        return copy(ApiEntries.cuMemcpy2DUnaligned, pCopy, 0, false, false);
    }

    @Override
    public int cuMemcpy2DAsync(MemorySegment pCopy, long hStream) {
        return copy(pCopy, hStream, false, true);
    }

    @Override
    public int cuMemcpy3D(MemorySegment pCopy) {
        return copy(pCopy, 0, true, false);
    }

    @Override
    public int cuMemcpy3DAsync(MemorySegment pCopy, long hStream) {
        return copy(pCopy, hStream, true, true);
    }

    /**
     * Reads the program's CUDA_MEMCPY2D/3D, resolves UNIFIED sides, and sends the copy with a host
     * source's rows as DATA, or receives a host destination's rows into their places. A host-to-host
     * copy never leaves the guest.
     */
    private int copy(MemorySegment pCopy, long stream, boolean is3D, boolean async) {
        ApiFunction f = is3D ? (async ? ApiEntries.cuMemcpy3DAsync : ApiEntries.cuMemcpy3D)
                : (async ? ApiEntries.cuMemcpy2DAsync : ApiEntries.cuMemcpy2D);
        return copy(f, pCopy, stream, is3D, async);
    }

    /** The same for entry {@code f} (cuMemcpy2DUnaligned travels as itself, so the backend's driver applies its own rules). */
    private int copy(ApiFunction f, MemorySegment pCopy, long stream, boolean is3D, boolean async) {
        if (pCopy.isNative() && pCopy.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D m = is3D ? Memcpy3D.read3D(WireValues.sized(pCopy, Memcpy3D.SIZE_3D))
                : Memcpy3D.read2D(WireValues.sized(pCopy, Memcpy3D.SIZE_2D));
        if (m.src().reserved() != 0 || m.dst().reserved() != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return send(m, stream, is3D, async, f);
    }

    // ---- 3D peer copies: the contexts stay here ------------------------------------------------------

    /**
     * cuMemcpy3DPeer: within one backend every context's device memory has its unified address and the
     * backend checks each side against the session's memory and arrays, so the copy travels as the
     * cuMemcpy3D it describes. The contexts must be given (NULL: CUDA_ERROR_INVALID_CONTEXT, as the driver);
     * they do not travel.
     */
    @Override
    public int cuMemcpy3DPeer(MemorySegment pCopy) {
        return peer(pCopy, 0, false);
    }

    @Override
    public int cuMemcpy3DPeerAsync(MemorySegment pCopy, long hStream) {
        return peer(pCopy, hStream, true);
    }

    private int peer(MemorySegment pCopy, long stream, boolean async) {
        if (pCopy.isNative() && pCopy.address() == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D m = Memcpy3D.read3D(WireValues.sized(pCopy, Memcpy3D.SIZE_3D));
        if (m.src().reserved() == 0 || m.dst().reserved() == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        return send(m.withoutPeerContexts(), stream, true, async);
    }

    // ---- the array copies with a host side: one-row 2D copies ---------------------------------------

    @Override
    public int cuMemcpyHtoA(long dstArray, long dstOffset, MemorySegment srcHost, long byteCount) {
        return send(Memcpy3D.arrayRow(hostSide(srcHost), Memcpy3D.arraySide(dstArray, dstOffset), byteCount), 0, false, false);
    }

    @Override
    public int cuMemcpyAtoH(MemorySegment dstHost, long srcArray, long srcOffset, long byteCount) {
        return send(Memcpy3D.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset), hostSide(dstHost), byteCount), 0, false, false);
    }

    @Override
    public int cuMemcpyHtoAAsync(long dstArray, long dstOffset, MemorySegment srcHost, long byteCount, long hStream) {
        return send(Memcpy3D.arrayRow(hostSide(srcHost), Memcpy3D.arraySide(dstArray, dstOffset), byteCount), hStream, false, true);
    }

    @Override
    public int cuMemcpyAtoHAsync(MemorySegment dstHost, long srcArray, long srcOffset, long byteCount, long hStream) {
        return send(Memcpy3D.arrayRow(Memcpy3D.arraySide(srcArray, srcOffset), hostSide(dstHost), byteCount), hStream, false, true);
    }

    private static Side hostSide(MemorySegment host) {
        return Memcpy3D.hostSide(host == null ? 0 : host.address());
    }

    /** Sends a copy read from the program's struct (or built for an array copy): see {@link #copy}. */
    private int send(Memcpy3D m, long stream, boolean is3D, boolean async) {
        ApiFunction f = is3D ? (async ? ApiEntries.cuMemcpy3DAsync : ApiEntries.cuMemcpy3D)
                : (async ? ApiEntries.cuMemcpy2DAsync : ApiEntries.cuMemcpy2D);
        return send(m, stream, is3D, async, f);
    }

    private int send(Memcpy3D m, long stream, boolean is3D, boolean async, ApiFunction f) {
        if (m.totalBytes() < 0) {
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
        if (async && (hostIn || hostOut)) {   // on a capturing stream: a memcpy node of the capture (CapturedCopies)
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                MemorySegment copy3D = arena.allocate(Memcpy3D.SIZE_3D, 8);
                m.write3D(copy3D);
                int r = CapturedCopies.record(driver, stream, copy3D);
                if (r != CapturedCopies.NOT_CAPTURING) {
                    return r;
                }
            }
        }
        List<MemorySegment> in = hostIn ? hostBlocks(m, src) : List.of();
        List<MemorySegment> out = hostOut ? hostBlocks(m, dst) : List.of();
        if (in == null || out == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request();
        PitchedCopyRequest.put(req, m, async, stream, PitchedCopyRequest.bulkBytes(m));
        // Rows going to the device are captured once sent: that copy may be pipelined. Rows coming back are waited for.
        boolean noReply = async && channel.pipelining() && !hostOut;
        return channel.exchange(f, req.flip(), in, true, out, noReply).result();
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
        MemorySegment base = CopyCalls.host(s.host() + start, extent);
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
        MemorySegment base = CopyCalls.host(s.host() + start, extent);
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
