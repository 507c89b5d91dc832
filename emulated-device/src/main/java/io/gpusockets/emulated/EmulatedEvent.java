package io.gpusockets.emulated;

import java.util.concurrent.CompletableFuture;

/**
 * An event: each cuEventRecord replaces the recording that later waits and queries refer to. An IPC event (exported
 * with cuIpcGetEventHandle, or opened with cuIpcOpenEventHandle) has a {@link IpcEvents.Cell} shared with the other
 * processes, which its records, queries and waits outside stream capture go through instead.
 */
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
    /** The shared state of an IPC event, else null; set once. */
    volatile IpcEvents.Cell cell;

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

    /** The event's handle is gone (cuEventDestroy, its context destroyed): an IPC cell is let go. */
    void released() {
        IpcEvents.Cell c = cell;
        if (c != null) {
            c.release();
        }
    }
}
