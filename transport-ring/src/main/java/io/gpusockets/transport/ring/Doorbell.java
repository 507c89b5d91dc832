package io.gpusockets.transport.ring;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;

/**
 * One place a side of a ring sleeps: a 32-bit futex word (the low half of the counter the other side
 * advances) and a waiter flag, both in the shared metadata. The sleeper raises its flag before it
 * re-reads the word and sleeps; the other side publishes its counter, then reads the flag and issues
 * FUTEX_WAKE only when it is raised. Both sides put a full fence between their store and their load
 * (Dekker), so at least one of them sees the other's store: no wake is lost, and a publisher with no
 * sleeper makes no system call.
 */
public final class Doorbell {
    private static final VarHandle INT = JAVA_INT.varHandle();

    private final MemorySegment meta;
    private final long wordOffset;
    private final long flagOffset;

    Doorbell(MemorySegment meta, long wordOffset, long flagOffset) {
        this.meta = meta;
        this.wordOffset = wordOffset;
        this.flagOffset = flagOffset;
    }

    /** Whether {@link #await} sleeps in the kernel; false where futex is missing. */
    public boolean canSleep() {
        return Futex.available();
    }

    /** The word's current value, what a sleeper passes as {@code expected}. */
    public int word() {
        return (int) INT.getVolatile(meta, wordOffset);
    }

    /**
     * Sleeps until the word no longer reads {@code expected}, a {@link #ring}, or {@code timeoutNanos}.
     * Blocks the carrier of a virtual thread, so idle strategies call it from platform threads only.
     */
    public void await(int expected, long timeoutNanos) {
        INT.setVolatile(meta, flagOffset, 1);
        try {
            VarHandle.fullFence();
            if (word() == expected) {
                Futex.await(meta.address() + wordOffset, expected, timeoutNanos);
            }
        } finally {
            INT.setRelease(meta, flagOffset, 0);
        }
    }

    /** After publishing: wakes the other side if it sleeps here. */
    void ring() {
        VarHandle.fullFence();
        if ((int) INT.getVolatile(meta, flagOffset) != 0) {
            Futex.wakeAll(meta.address() + wordOffset);
        }
    }

    /** Wakes any sleeper, flag or not (close). */
    void wakeAll() {
        if (Futex.available()) {
            Futex.wakeAll(meta.address() + wordOffset);
        }
    }
}
