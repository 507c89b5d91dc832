package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The copies and sets of unified addressing and of pitched memory: cuMemcpy(Async) with pointers of
 * either kind, cuMemcpy2D/3D(Async) between host, device and array sides (a 3D copy reaches the layers
 * and cubemap faces of an array as its slices, by z), the array copies cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA
 * (and Async) as one-row 2D copies, cuMemsetD2D*(Async).
 *
 * <p>An address inside a live allocation (of any context) is device memory, any other is host memory
 * of this process, as under CUDA's unified addressing; so UNIFIED sides and cuMemcpy resolve by
 * address. (The emulated address range cannot decide it: in-process, host mappings can lie inside
 * it.) Host memory named in a struct or by cuMemcpy is used as the caller's C contract promises: the
 * emulated device cannot check it, so in-process a freed device pointer passed to cuMemcpy is read
 * as host memory. Behind the backend it only ever sees pointers the backend checked against the
 * session's allocations, and host sides that are the backend's own staging buffers.
 *
 * <p>Timing follows {@link Transfers}: synchronous calls run on the caller's thread ordered on the
 * legacy stream; async ones capture a host source at the call and resolve device memory when the
 * stream reaches them, so memory freed meanwhile becomes a sticky CUDA_ERROR_ILLEGAL_ADDRESS.
 */
final class PitchedTransfers {
    /** Stands for "no stream": the synchronous form of a call. */
    static final long SYNCHRONOUS = -1;

    private final Contexts contexts;
    private final EmulatedMemory memory;
    private final CudaArrays arrays;
    private final Streams streams;
    private final Transfers transfers;

    PitchedTransfers(Contexts contexts, EmulatedMemory memory, CudaArrays arrays, Streams streams, Transfers transfers) {
        this.contexts = contexts;
        this.memory = memory;
        this.arrays = arrays;
        this.streams = streams;
        this.transfers = transfers;
    }

    private boolean isDeviceAddress(long address) {
        return memory.find(address) != null;
    }

    private static MemorySegment host(long address, long bytes, String what) {
        if (address == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + " is NULL");
        }
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    // ---- cuMemcpy, cuMemcpyAsync -----------------------------------------------------------------

    void unified(long dst, long src, long bytes, long hStream) {
        EmulatedContext c = contexts.active();
        boolean async = hStream != SYNCHRONOUS;
        EmulatedStream s = async ? streams.resolve(hStream, c) : c.legacyStream();
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ByteCount=" + Long.toUnsignedString(bytes) + " is out of range");
        }
        if (bytes == 0) {
            return;
        }
        boolean dstDevice = isDeviceAddress(dst), srcDevice = isDeviceAddress(src);
        if (dstDevice && srcDevice) {
            if (async) {
                transfers.dtodAsync(c, s, dst, src, bytes);
            } else {
                transfers.dtod(c, dst, src, bytes);
            }
        } else if (dstDevice) {
            MemorySegment from = host(src, bytes, "src");
            if (async) {
                transfers.htodAsync(c, s, dst, from, bytes);
            } else {
                transfers.htod(c, dst, from, bytes);
            }
        } else if (srcDevice) {
            MemorySegment to = host(dst, bytes, "dst");
            if (async) {
                transfers.dtohAsync(c, s, to, src, bytes);
            } else {
                transfers.dtoh(c, to, src, bytes);
            }
        } else {
            MemorySegment from = host(src, bytes, "src"), to = host(dst, bytes, "dst");
            c.runInline(s, () -> MemorySegment.copy(from, 0, to, 0, bytes));
        }
        if (!async) {
            c.throwIfFaulted();
        }
    }

    // ---- cuMemcpy2D, cuMemcpy3D ------------------------------------------------------------------

    /**
     * One side of a copy, checked: {@code view} describes its layout (an array's rows as pitch and
     * slice height), {@code start} and {@code extent} the touched bytes from its base.
     */
    private record Surface(int type, Side view, long base, long start, long extent, EmulatedArray array) {
    }

    void copy(MemorySegment pCopy, boolean is3D, long hStream) {
        Memcpy3D m = is3D ? Memcpy3D.read3D(HostSegments.sized(pCopy, Memcpy3D.SIZE_3D, "pCopy"))
                : Memcpy3D.read2D(HostSegments.sized(pCopy, Memcpy3D.SIZE_2D, "pCopy"));
        copy(m, is3D, hStream);
    }

    /**
     * cuMemcpy3DPeer(Async): both contexts must be live; the copy is then the CUDA_MEMCPY3D it describes, run in
     * the current context (device memory of any context is reachable by its unified address; array sides must
     * be the current context's, as for cuMemcpy3D).
     */
    void peer(MemorySegment pCopy, long hStream) {
        Memcpy3D m = Memcpy3D.read3D(HostSegments.sized(pCopy, Memcpy3D.SIZE_3D, "pCopy"));
        contexts.find(m.src().reserved());
        contexts.find(m.dst().reserved());
        copy(m.withoutPeerContexts(), true, hStream);
    }

    // ---- cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA (and Async): byte offsets into a 1D array ---------------

    /**
     * An array copy as the one-row 2D copy it is for a 1D array: {@code bytes} at byte {@code x} of row 0 of
     * each array side ({@link Memcpy3D#arrayRow}); the frontend sends those with a host side in this form.
     */
    void arrayRow(Side src, Side dst, long bytes, long hStream) {
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ByteCount=" + Long.toUnsignedString(bytes) + " is out of range");
        }
        copy(Memcpy3D.arrayRow(src, dst, bytes), false, hStream);
    }

    private void copy(Memcpy3D m, boolean is3D, long hStream) {
        EmulatedContext c = contexts.active();
        boolean async = hStream != SYNCHRONOUS;
        EmulatedStream s = async ? streams.resolve(hStream, c) : c.legacyStream();
        long total = m.totalBytes();
        if (total < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "WidthInBytes=" + m.width() + " Height=" + m.height()
                    + " Depth=" + m.depth() + " is out of range");
        }
        Surface src = surface(c, m, m.src(), "src");
        Surface dst = surface(c, m, m.dst(), "dst");
        if (total == 0) {
            return;
        }
        String name = (is3D ? "cuMemcpy3D" : "cuMemcpy2D") + (async ? "Async" : "");
        if (!async) {
            c.runInline(s, () -> move(m, src.view(), resolve(c, src, false), dst.view(), resolve(c, dst, false)));
            c.throwIfFaulted();
            return;
        }
        resolve(c, src, false);   // refused now if the memory is not there now
        resolve(c, dst, false);
        if (src.type() == Memcpy3D.HOST || dst.type() == Memcpy3D.HOST) {
            c.refuseInCapture(s, name);
        }
        if (src.type() != Memcpy3D.HOST) {
            c.enqueue(s, null, () -> move(m, src.view(), resolve(c, src, true), dst.view(), resolve(c, dst, true)), name);
            return;
        }
        // The caller may reuse its buffer once the call returns: capture the rows now, packed.
        Arena arena = Arena.ofShared();
        try {
            MemorySegment snapshot = arena.allocate(total, 16);
            Side packed = new Side(Memcpy3D.HOST, 0, 0, 0, 0, snapshot.address(), 0, 0, m.width(), m.height(), 0);
            move(m, src.view(), resolve(c, src, false), packed, snapshot);
            c.enqueue(s, null, () -> move(m, packed, snapshot, dst.view(), resolve(c, dst, true)), name)
                    .whenComplete((v, t) -> arena.close());
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    private Surface surface(EmulatedContext c, Memcpy3D m, Side side, String what) {
        if (side.lod() != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "LOD=" + side.lod() + ": levels of a mipmapped array are copied"
                    + " through the array cuMipmappedArrayGetLevel gives");
        }
        if (side.reserved() != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "reserved pointer of " + what + " must be NULL");
        }
        int type = side.memoryType();
        long address = type == Memcpy3D.HOST ? side.host() : side.device();
        if (type == Memcpy3D.UNIFIED) {
            type = isDeviceAddress(address) ? Memcpy3D.DEVICE : Memcpy3D.HOST;
        }
        Side view;
        EmulatedArray array = null;
        switch (type) {
            case Memcpy3D.HOST, Memcpy3D.DEVICE -> {
                boolean manyRows = m.height() > 1 || m.depth() > 1;
                if (manyRows && side.pitch() < m.width()) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "Pitch=" + side.pitch() + " is below WidthInBytes=" + m.width());
                }
                if (m.depth() > 1 && side.height() < m.height()) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "Height=" + side.height() + " is below Height=" + m.height());
                }
                view = side;
            }
            case Memcpy3D.ARRAY -> {
                array = arrays.of(c, side.array(), what + "Array");
                long e = array.elementBytes;
                if (side.x() % e != 0 || m.width() % e != 0 || side.x() < 0 || side.y() < 0 || side.z() < 0
                        || side.x() > array.rowBytes() - m.width() || side.y() > array.rows() - m.height()
                        || side.z() > array.slices() - m.depth()) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": the block at x=" + side.x() + " y=" + side.y()
                            + " z=" + side.z() + " of " + m.width() + "x" + m.height() + "x" + m.depth()
                            + " does not fit the array of " + array.rowBytes() + " bytes by " + array.rows() + " rows by "
                            + array.slices() + " slices");
                }
                // layers and cubemap faces are slices: a 3D copy reaches them by z
                view = new Side(Memcpy3D.ARRAY, side.x(), side.y(), side.z(), 0, 0, 0, side.array(), array.rowBytes(), array.rows(), 0);
            }
            default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "MemoryType=" + side.memoryType());
        }
        long start = Memcpy3D.startOffset(view);
        long extent = m.extent(view);
        if (start < 0 || extent < 0 || address + start < address) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": position or pitch out of range");
        }
        return new Surface(type, view, address, start, extent, array);
    }

    /** The bytes from the first to the last one a side touches; device memory is looked up now. */
    private MemorySegment resolve(EmulatedContext c, Surface s, boolean inWork) {
        return switch (s.type()) {
            case Memcpy3D.HOST -> host(s.base() + s.start(), s.extent(), "host pointer");
            case Memcpy3D.ARRAY -> s.array().memory.asSlice(s.start(), s.extent());
            default -> {
                long first = s.base() + s.start();
                MemorySegment m = memory.resolve(c, first, s.extent());
                if (m == null) {
                    if (inWork) {
                        throw KernelFault.illegalAddress(first, s.extent());
                    }
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "device range 0x" + Long.toHexString(first) + "+" + s.extent()
                            + " is not inside one allocation of the current context");
                }
                yield m;
            }
        };
    }

    /** Copies the rows of {@code m} between two resolved sides (segments start at the first touched byte). */
    private static void move(Memcpy3D m, Side fromView, MemorySegment from, Side toView, MemorySegment to) {
        if (m.contiguous(fromView) && m.contiguous(toView)) {
            MemorySegment.copy(from, 0, to, 0, m.totalBytes());
            return;
        }
        long rows = m.rows();
        for (long r = 0; r < rows; r++) {
            MemorySegment.copy(from, m.rowOffset(fromView, r), to, m.rowOffset(toView, r), m.width());
        }
    }

    // ---- cuMemsetD2D8/16/32 ----------------------------------------------------------------------

    /** {@code height} rows of {@code width} elements of {@code elementBytes}, {@code pitch} bytes apart. */
    void set2D(long dst, long pitch, long value, int elementBytes, long width, long height, long hStream) {
        EmulatedContext c = contexts.active();
        boolean async = hStream != SYNCHRONOUS;
        EmulatedStream s = async ? streams.resolve(hStream, c) : c.legacyStream();
        if (dst % elementBytes != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dstDevice=0x" + Long.toHexString(dst) + " is not aligned to " + elementBytes);
        }
        if (width < 0 || width > Long.MAX_VALUE / elementBytes) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Width=" + Long.toUnsignedString(width) + " is out of range");
        }
        long rowBytes = width * elementBytes;
        if (height > 1 && pitch < rowBytes) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dstPitch=" + pitch + " is below the row of " + rowBytes + " bytes");
        }
        long span = ApiParam.pitchedSpan(rowBytes, height, pitch);
        if (span < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dstPitch=" + pitch + " Height=" + height + " is out of range");
        }
        if (span == 0) {
            return;
        }
        transfers.device(c, dst, span, "dstDevice");
        Runnable fill = () -> {
            MemorySegment block = memory.resolve(c, dst, span);
            if (block == null) {
                throw async ? KernelFault.illegalAddress(dst, span) : new CudaError(CUDA_ERROR_INVALID_VALUE, "dstDevice was freed");
            }
            for (long r = 0; r < height; r++) {
                Transfers.fill(block.asSlice(r * pitch, rowBytes), value, elementBytes);
            }
        };
        if (async) {
            c.enqueue(s, null, fill, "cuMemsetD2D" + 8 * elementBytes + "Async");
        } else {
            c.runInline(s, fill);
            c.throwIfFaulted();
        }
    }
}
