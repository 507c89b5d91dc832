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
 * Area {@code pitched}: cuMemcpy2D/3D (and Async), cuMemcpy2DUnaligned, cuMemcpy3DPeer (and Async), cuMemcpy3DBatchAsync (each
 * operation sent as the cuMemcpy3DAsync it describes), and the array copies with a host side
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
        return copy(entry(is3D, async), pCopy, stream, is3D, async);
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

    // ---- 3D batch copies (CUDA 12.8-13.0): the 3D async copies their operations describe -------------

    /** CUDA_MEMCPY3D_BATCH_OP: src and dst CUmemcpy3DOperand (40 bytes each), extent (3 x size_t), srcAccessOrder, flags. */
    static final long BATCH_OP_BYTES = 112, OPERAND_DST = 40, OP_EXTENT = 80, OP_ORDER = 104, OP_FLAGS = 108;
    /** CU_MEMCPY_OPERAND_TYPE_POINTER and _ARRAY. */
    static final int OPERAND_POINTER = 1, OPERAND_ARRAY = 2;

    /**
     * cuMemcpy3DBatchAsync: the batch is checked as the driver checks it (a stream other than NULL and
     * the legacy one, flags 0, each operation with a known source access order, known copy flags, known
     * operand types, a non-zero extent, row lengths and layer heights 0 or at least the extent), then
     * each operation goes in order as the cuMemcpy3DAsync it describes: a pointer operand is a UNIFIED
     * side (resolved as cuMemcpy3DAsync resolves it) with pitch rowLength x element size and height
     * layerHeight, an array operand an ARRAY side at its offset in elements. The element size is 1
     * between pointers, else the array's (asked of the backend with cuArray3DGetDescriptor); two arrays
     * must have the same. A host source's data is captured when its copy is sent, which every access
     * order allows.
     */
    @Override
    public int cuMemcpy3DBatchAsync(long numOps, MemorySegment opList, long flags, long hStream) {
        return batch3D(numOps, opList, flags, hStream, null);
    }

    /** The CUDA 12.8 form: as {@link #cuMemcpy3DBatchAsync}, and failIdx names the operation that failed (SIZE_MAX: none in particular). */
    @Override
    public int cuMemcpy3DBatchAsync_v1(long numOps, MemorySegment opList, MemorySegment failIdx, long flags, long hStream) {
        long[] failed = {-1};
        int r = batch3D(numOps, opList, flags, hStream, failed);
        if (r != CuResult.CUDA_SUCCESS && !(failIdx.isNative() && failIdx.address() == 0)) {
            failIdx.reinterpret(8).set(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0, failed[0]);
        }
        return r;
    }

    private int batch3D(long numOps, MemorySegment opList, long flags, long hStream, long[] failed) {
        if (hStream == 0 || hStream == 1 || numOps <= 0 || numOps > Integer.MAX_VALUE / BATCH_OP_BYTES || flags != 0
                || (opList.isNative() && opList.address() == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment ops = opList.reinterpret(BATCH_OP_BYTES * numOps);
        Memcpy3D[] copies = new Memcpy3D[(int) numOps];
        for (int i = 0; i < numOps; i++) {
            copies[i] = batchOp(ops.asSlice(i * BATCH_OP_BYTES, BATCH_OP_BYTES));
            if (copies[i] == null) {
                if (failed != null) {
                    failed[0] = i;
                }
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        for (int i = 0; i < numOps; i++) {
            int r = send(copies[i], hStream, true, true);
            if (r != CuResult.CUDA_SUCCESS) {
                if (failed != null) {
                    failed[0] = i;
                }
                return r;
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** One operation as the 3D copy it describes; null when the driver would refuse it (CUDA_ERROR_INVALID_VALUE). */
    private Memcpy3D batchOp(MemorySegment op) {
        var L = java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
        var I = java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
        long w = op.get(L, OP_EXTENT), h = op.get(L, OP_EXTENT + 8), dd = op.get(L, OP_EXTENT + 16);
        int order = op.get(I, OP_ORDER), opFlags = op.get(I, OP_FLAGS);
        if (w <= 0 || h <= 0 || dd <= 0 || order < CopyCalls.ACCESS_ORDER_FIRST || order > CopyCalls.ACCESS_ORDER_LAST
                || (opFlags & ~CopyCalls.FLAG_PREFER_OVERLAP) != 0) {
            return null;
        }
        int srcType = op.get(I, 0), dstType = op.get(I, OPERAND_DST);
        if ((srcType != OPERAND_POINTER && srcType != OPERAND_ARRAY) || (dstType != OPERAND_POINTER && dstType != OPERAND_ARRAY)) {
            return null;
        }
        long elem = 1;
        long srcElem = srcType == OPERAND_ARRAY ? arrayElementBytes(op.get(L, 8)) : 0;
        long dstElem = dstType == OPERAND_ARRAY ? arrayElementBytes(op.get(L, OPERAND_DST + 8)) : 0;
        if (srcElem < 0 || dstElem < 0 || (srcElem > 0 && dstElem > 0 && srcElem != dstElem)) {
            return null;
        }
        elem = Math.max(1, Math.max(srcElem, dstElem));
        Side src = operand(op, 0, w, h, elem), dst = operand(op, OPERAND_DST, w, h, elem);
        if (src == null || dst == null) {
            return null;
        }
        try {
            return new Memcpy3D(src, dst, Math.multiplyExact(w, elem), h, dd);
        } catch (ArithmeticException e) {
            return null;
        }
    }

    /** A CUmemcpy3DOperand at {@code base} of the operation as a side of a 3D copy in bytes; null when invalid. */
    private static Side operand(MemorySegment op, long base, long w, long h, long elem) {
        var L = java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
        long a = op.get(L, base + 8), b = op.get(L, base + 16), c = op.get(L, base + 24), e = op.get(L, base + 32);
        try {
            if (op.get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, base) == OPERAND_POINTER) {
                long rowLength = b == 0 ? w : b, layerHeight = c == 0 ? h : c;
                if (rowLength < w || layerHeight < h || rowLength < 0 || layerHeight < 0) {
                    return null;
                }
                return new Side(Memcpy3D.UNIFIED, 0, 0, 0, 0, 0, a, 0, Math.multiplyExact(rowLength, elem), layerHeight, 0);
            }
            if (b < 0 || c < 0 || e < 0) {
                return null;
            }
            return new Side(Memcpy3D.ARRAY, Math.multiplyExact(b, elem), c, e, 0, 0, 0, a, 0, 0, 0);
        } catch (ArithmeticException ex) {
            return null;
        }
    }

    /** The element size of {@code array} (format x channels), asked of the backend; -1 when it is not an array of the session. */
    private long arrayElementBytes(long array) {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment desc = arena.allocate(40);
            if (array == 0 || driver.cuArray3DGetDescriptor(desc, array) != CuResult.CUDA_SUCCESS) {
                return -1;
            }
            int bytes = io.gpusockets.protocol.structs.ArrayDescriptor.elementBytes(
                    desc.get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 24),
                    desc.get(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 28));
            return bytes > 0 ? bytes : -1;
        }
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
        return send(m, stream, is3D, async, entry(is3D, async));
    }

    /** The table entry a pitched copy of that shape and mode travels as. */
    private static ApiFunction entry(boolean is3D, boolean async) {
        return is3D ? (async ? ApiEntries.cuMemcpy3DAsync : ApiEntries.cuMemcpy3D)
                : (async ? ApiEntries.cuMemcpy2DAsync : ApiEntries.cuMemcpy2D);
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
