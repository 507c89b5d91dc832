package io.gpusockets.protocol.wire;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;

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
}
