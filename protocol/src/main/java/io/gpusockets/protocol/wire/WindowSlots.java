package io.gpusockets.protocol.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * How a session lays out its shared window ({@link io.gpusockets.protocol.transport.SharedWindow}):
 * <pre>
 *   0      IN_RELEASED  u64, written by the backend: window DATA frames from the frontend it is done with
 *   64     OUT_TAKEN    u64, written by the frontend: window DATA frames from the backend it has copied out
 *   4096   input slots: up to {@link #MAX_SLOTS} frames of the frontend's chunk size, reused in turn
 *   size/2 output slots: up to {@link #MAX_SLOTS} frames of the backend's chunk size, reused in turn
 * </pre>
 * Both counters count frames since the session began and only grow. A side writes frame n into slot
 * n mod slots only once the other side's counter says frame n - slots is done with: the bytes a frame
 * carries are written once by the CPU and read once by the device (or the other way round), while
 * the few slots stay in the processor's cache, as a driver's own staging buffer does.
 *
 * <p>Neither side trusts the other's counter beyond its own data: a wrong one can only make that
 * session's own copies wrong or make it wait, never reach outside the window.
 */
public final class WindowSlots {
    /** The control page: the two counters, each on its own cache line pair. */
    public static final long CONTROL_BYTES = 4096;
    public static final long IN_RELEASED_OFFSET = 0;
    public static final long OUT_TAKEN_OFFSET = 64;
    /** Slots per direction: few, so that they stay in the cache. */
    public static final int MAX_SLOTS = 4;

    private static final VarHandle LONG = ValueLayout.JAVA_LONG.varHandle();

    private WindowSlots() {
    }

    /** Input slots of {@code slotBytes} that fit a window of {@code size} bytes (0: none). */
    public static int inputSlots(long size, long slotBytes) {
        return (int) Math.min(MAX_SLOTS, Math.max(0, size / 2 - CONTROL_BYTES) / slotBytes);
    }

    /** Output slots of {@code slotBytes} that fit a window of {@code size} bytes (0: none). */
    public static int outputSlots(long size, long slotBytes) {
        return (int) Math.min(MAX_SLOTS, (size / 2) / slotBytes);
    }

    public static long inputSlotOffset(int slot, long slotBytes) {
        return CONTROL_BYTES + slot * slotBytes;
    }

    public static long outputSlotOffset(long size, int slot, long slotBytes) {
        return size / 2 + slot * slotBytes;
    }

    /** Reads a counter with acquire semantics (the bytes it vouches for are visible after it). */
    public static long read(MemorySegment window, long offset) {
        return (long) LONG.getAcquire(window, offset);
    }

    /** Publishes a counter with release semantics (after the bytes it vouches for). */
    public static void publish(MemorySegment window, long offset, long value) {
        LONG.setRelease(window, offset, value);
    }

    /**
     * Waits until the counter at {@code offset} reaches {@code value}: spinning briefly, then sleeping
     * 20 µs, then 1 ms between looks, for as long as the other side takes (a copy behind a long kernel
     * waits for the kernel). {@code stop}, asked between sleeps, ends the wait early. Returns true once
     * the counter is there, false when {@code stop} said to give up.
     */
    public static boolean await(MemorySegment window, long offset, long value, BooleanSupplier stop) {
        for (int spins = 0; read(window, offset) < value; spins++) {
            if (spins < 200) {
                Thread.onSpinWait();
                continue;
            }
            if (stop.getAsBoolean()) {
                return false;
            }
            LockSupport.parkNanos(spins < 10_000 ? 20_000 : 1_000_000);
        }
        return true;
    }

    /** The body of a window DATA frame: {@code length} bytes at {@code offset} ({@link Handshake#WINDOW_REF_BYTES}). */
    public static ByteBuffer ref(long offset, long length) {
        return ByteBuffer.allocate(Handshake.WINDOW_REF_BYTES).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(offset).putLong(length).flip();
    }

    /**
     * The bytes a window DATA frame's body names, checked to lie past the control page and inside the
     * window. The peer's numbers are not trusted: anything else is a protocol violation.
     */
    public static MemorySegment resolve(MemorySegment window, ByteBuffer ref) throws ProtocolException {
        ref = ref.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        long offset = ref.getLong();
        long length = ref.getLong();
        long size = window.byteSize();
        if (offset < CONTROL_BYTES || length <= 0 || offset > size || length > size - offset || length > Integer.MAX_VALUE) {
            throw new ProtocolException("window DATA frame outside the window of " + size + " bytes: offset=" + offset
                    + " length=" + length);
        }
        return window.asSlice(offset, length);
    }
}
