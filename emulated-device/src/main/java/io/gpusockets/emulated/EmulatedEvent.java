package io.gpusockets.emulated;

import java.util.concurrent.CompletableFuture;

/** An event: each cuEventRecord replaces the recording that later waits and queries refer to. */
final class EmulatedEvent {
    static final int DISABLE_TIMING = 0x2;
    static final int INTERPROCESS = 0x4;
    static final int VALID_FLAGS = 0x1 | DISABLE_TIMING | INTERPROCESS;

    /** One cuEventRecord: reached when the stream gets there, stamped with the host clock at that moment. */
    static final class Recording {
        volatile long nanos;
        volatile CompletableFuture<Void> reached;
    }

    final long handle;
    final EmulatedContext context;
    final int flags;
    private volatile Recording recording;   // null until first recorded
    /** Set when last recorded in a capturing stream: what a wait on it joins. */
    volatile Captures.CapturedRecord captured;

    EmulatedEvent(long handle, EmulatedContext context, int flags) {
        this.handle = handle;
        this.context = context;
        this.flags = flags;
    }

    boolean timing() {
        return (flags & DISABLE_TIMING) == 0;
    }

    Recording recording() {
        return recording;
    }

    void recording(Recording r) {
        recording = r;
    }
}
