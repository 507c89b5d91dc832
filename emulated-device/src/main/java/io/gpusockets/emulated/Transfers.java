package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * Copies and sets, synchronous and on streams. Device ranges are resolved when the work runs (not
 * only when it is queued), so memory freed in between is found missing instead of being touched;
 * a synchronous call reports that as CUDA_ERROR_INVALID_VALUE, queued work as a sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS. Synchronous calls run on the caller's thread, ordered on the legacy
 * default stream, as cuMemcpy* and cuMemset* are.
 */
final class Transfers {
    /** A thread that is not the caller: a host segment it can access is safe to touch from a stream thread. */
    private static final Thread OTHER_THREAD = Thread.ofVirtual().unstarted(() -> { });

    private final EmulatedMemory memory;

    Transfers(EmulatedMemory memory) {
        this.memory = memory;
    }

    /** Device range resolved for an API call: CUDA_ERROR_INVALID_VALUE when it is not one allocation of {@code c}. */
    MemorySegment device(EmulatedContext c, long address, long bytes, String what) {
        MemorySegment m = memory.resolve(c, address, bytes);
        if (m == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "=0x" + Long.toHexString(address) + " bytes=" + bytes
                    + " is not inside one allocation of the current context");
        }
        return m;
    }

    /** size_t counts arrive as longs: above Long.MAX_VALUE they are negative here. */
    private static void checkCount(long bytes) {
        if (bytes < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "ByteCount=" + Long.toUnsignedString(bytes) + " is out of range");
        }
    }

    /** Device range resolved inside queued work: a fault becomes the context's sticky error. */
    private MemorySegment deviceInWork(EmulatedContext c, long address, long bytes) {
        MemorySegment m = memory.resolve(c, address, bytes);
        if (m == null) {
            throw KernelFault.illegalAddress(address, bytes);
        }
        return m;
    }

    void htod(EmulatedContext c, long dst, MemorySegment src, long bytes) {
        MemorySegment host = HostSegments.sized(src, bytes, "srcHost");
        c.runInline(c.legacyStream(), () -> MemorySegment.copy(host, 0, device(c, dst, bytes, "dstDevice"), 0, bytes));
    }

    void dtoh(EmulatedContext c, MemorySegment dst, long src, long bytes) {
        MemorySegment host = HostSegments.sized(dst, bytes, "dstHost");
        c.runInline(c.legacyStream(), () -> MemorySegment.copy(device(c, src, bytes, "srcDevice"), 0, host, 0, bytes));
    }

    void dtod(EmulatedContext c, long dst, long src, long bytes) {
        checkCount(bytes);
        c.runInline(c.legacyStream(),
                () -> MemorySegment.copy(device(c, src, bytes, "srcDevice"), 0, device(c, dst, bytes, "dstDevice"), 0, bytes));
    }

    /** The source is copied now: the caller may reuse its buffer as soon as the call returns. */
    void htodAsync(EmulatedContext c, EmulatedStream s, long dst, MemorySegment src, long bytes) {
        c.refuseInCapture(s, "cuMemcpyHtoDAsync");
        device(c, dst, bytes, "dstDevice");
        MemorySegment host = HostSegments.sized(src, bytes, "srcHost");
        Arena arena = Arena.ofShared();
        try {
            MemorySegment snapshot = arena.allocate(bytes, 16).copyFrom(host);
            c.enqueue(s, null, () -> MemorySegment.copy(snapshot, 0, deviceInWork(c, dst, bytes), 0, bytes), "cuMemcpyHtoDAsync")
                    .whenComplete((v, t) -> arena.close());
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    /**
     * Written when the stream gets there, into the caller's memory. Host memory confined to the calling
     * thread cannot be written from a stream thread: then the copy is done now, still in stream order.
     */
    void dtohAsync(EmulatedContext c, EmulatedStream s, MemorySegment dst, long src, long bytes) {
        c.refuseInCapture(s, "cuMemcpyDtoHAsync");
        device(c, src, bytes, "srcDevice");
        MemorySegment host = HostSegments.sized(dst, bytes, "dstHost");
        if (host.isAccessibleBy(OTHER_THREAD)) {
            c.enqueue(s, null, () -> MemorySegment.copy(deviceInWork(c, src, bytes), 0, host, 0, bytes), "cuMemcpyDtoHAsync");
        } else {
            c.runInline(s, () -> MemorySegment.copy(device(c, src, bytes, "srcDevice"), 0, host, 0, bytes));
        }
    }

    void dtodAsync(EmulatedContext c, EmulatedStream s, long dst, long src, long bytes) {
        checkCount(bytes);
        device(c, src, bytes, "srcDevice");
        device(c, dst, bytes, "dstDevice");
        c.enqueue(s, null, () -> MemorySegment.copy(deviceInWork(c, src, bytes), 0, deviceInWork(c, dst, bytes), 0, bytes),
                "cuMemcpyDtoDAsync");
    }

    /** cuMemsetD8/16/32: {@code count} elements of {@code width} bytes; the destination must be aligned to the width. */
    void set(EmulatedContext c, EmulatedStream s, boolean async, long dst, long value, int width, long count) {
        if (dst % width != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dstDevice=0x" + Long.toHexString(dst) + " is not aligned to " + width);
        }
        if (count < 0 || count > Long.MAX_VALUE / width) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "N=" + count + " is out of range");
        }
        long bytes = count * width;
        device(c, dst, bytes, "dstDevice");
        if (async) {
            c.enqueue(s, null, () -> fill(deviceInWork(c, dst, bytes), value, width), "cuMemsetD" + 8 * width + "Async");
        } else {
            c.runInline(s, () -> fill(device(c, dst, bytes, "dstDevice"), value, width));
        }
    }

    /** Writes one element, then doubles the filled prefix with bulk copies. */
    static void fill(MemorySegment d, long value, int width) {
        if (width == 1) {
            d.fill((byte) value);
            return;
        }
        long size = d.byteSize();
        if (size == 0) {
            return;
        }
        if (width == 2) {
            d.set(ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0, (short) value);
        } else {
            d.set(HostSegments.INT, 0, (int) value);
        }
        for (long filled = width; filled < size; ) {
            long n = Math.min(filled, size - filled);
            MemorySegment.copy(d, 0, d, filled, n);
            filled += n;
        }
    }
}
