package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;

import java.util.concurrent.CompletableFuture;

/**
 * The stream and event calls. Stream handles 0 and 1 name the current context's legacy default
 * stream and 2 the calling thread's per-thread stream; created streams and events are handles of
 * the context that was current when they were made. Work may only be queued on a stream of the
 * current context.
 */
final class Streams {
    static final long LEGACY = 1;
    static final long PER_THREAD = 2;

    private final Handles handles;
    private final Contexts contexts;

    Streams(Handles handles, Contexts contexts) {
        this.handles = handles;
        this.contexts = contexts;
    }

    /** A stream of {@code c} to queue work on. */
    EmulatedStream resolve(long handle, EmulatedContext c) {
        if (handle == 0 || handle == LEGACY) {
            return c.legacyStream();
        }
        if (handle == PER_THREAD) {
            return c.perThreadStream();
        }
        EmulatedStream s = contexts.lookup(handle, EmulatedStream.class, "hStream");
        if (s.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "hStream belongs to another context than the current one");
        }
        return s;
    }

    /** A created stream can be waited for without its context being current; the special ones need one. */
    private EmulatedStream toWaitFor(long handle) {
        return handle >= 0 && handle <= PER_THREAD ? resolve(handle, contexts.current()) : contexts.lookup(handle, EmulatedStream.class, "hStream");
    }

    /** Completion of what synchronizing {@code s} waits for: the legacy stream also waits for blocking streams' earlier work. */
    private static CompletableFuture<Void> completion(EmulatedStream s) {
        return s.kind == EmulatedStream.Kind.LEGACY ? s.context.barrier(s) : s.tail();
    }

    /** Priorities are kept but change no scheduling: each stream has its own thread anyway. */
    long create(int flags, int priority) {
        EmulatedContext c = contexts.current();
        if ((flags & ~EmulatedStream.NON_BLOCKING) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=0x" + Integer.toHexString(flags));
        }
        long h = handles.issue();
        EmulatedStream s = c.createStream(h, flags, Math.clamp(priority, -5, 0));
        try {
            handles.own(c, h, s);
        } catch (CudaError e) {
            c.destroyStream(s);
            throw e;
        }
        return h;
    }

    void destroy(long handle) {
        EmulatedStream s = contexts.lookup(handle, EmulatedStream.class, "hStream");
        if (handles.remove(handle, s)) {
            contexts.captures.forget(s);
            s.context.owned.remove(handle);
            s.context.destroyStream(s);
        }
    }

    int synchronize(long handle) {
        EmulatedStream s = toWaitFor(handle);
        contexts.captures.checkNotCapturing(s, "cuStreamSynchronize");
        completion(s).join();
        s.context.throwIfFaulted();
        return CUDA_SUCCESS;
    }

    int query(long handle) {
        EmulatedStream s = toWaitFor(handle);
        contexts.captures.checkNotCapturing(s, "cuStreamQuery");
        s.context.throwIfFaulted();
        return completion(s).isDone() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    }

    void waitEvent(long hStream, long hEvent, int flags) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = resolve(hStream, c);
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
        if ((flags & ~1) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=0x" + Integer.toHexString(flags));
        }
        if ((flags & 1) != 0 && s.capture != null) {   // CU_EVENT_WAIT_EXTERNAL in a capture: an event wait node
            contexts.captures.recordEventNode(s, EmulatedGraph.WAIT_EVENT, e);
            return;
        }
        IpcEvents.Cell cell = e.cell;
        if (cell != null && s.capture == null) {   // recorded here or in another process: the shared counters say
            IpcEvents.waitEvent(c, s, cell);
            return;
        }
        if (e.captured == null && e.recording() == null) {
            return;   // never recorded: nothing to wait for, in a capture or not
        }
        if (contexts.captures.waitEvent(s, e.captured)) {
            return;   // the stream joined the capture the event was recorded in, or took its nodes
        }
        EmulatedEvent.Recording r = e.recording();
        if (r != null) {   // an event never recorded is complete: nothing to wait for
            c.enqueue(s, r.reached, () -> { }, "cuStreamWaitEvent");
        }
    }

    long createEvent(int flags) {
        EmulatedContext c = contexts.current();
        if ((flags & ~EmulatedEvent.VALID_FLAGS) != 0
                || ((flags & EmulatedEvent.INTERPROCESS) != 0 && (flags & EmulatedEvent.DISABLE_TIMING) == 0)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "Flags=0x" + Integer.toHexString(flags));
        }
        long h = handles.issue();
        handles.own(c, h, new EmulatedEvent(h, c, flags));
        return h;
    }

    void record(long hEvent, long hStream) {
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
        EmulatedContext c = contexts.active();
        if (e.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "hEvent belongs to another context than the current one");
        }
        EmulatedStream s = resolve(hStream, c);
        if (s.capture != null) {
            e.captured = contexts.captures.recordEvent(s);
            return;
        }
        e.captured = null;
        IpcEvents.Cell cell = e.cell;
        if (cell != null) {
            IpcEvents.record(c, s, e, cell);
            return;
        }
        EmulatedEvent.Recording r = new EmulatedEvent.Recording();
        r.reached = c.enqueue(s, null, () -> r.nanos = System.nanoTime(), "cuEventRecord");
        e.recording(r);
    }

    int synchronizeEvent(long hEvent) {
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
        checkNotCaptured(e);
        IpcEvents.Cell cell = e.cell;
        if (cell != null) {
            use(cell);
            try {
                cell.await(cell.recorded(), () -> false);
            } finally {
                cell.release();
            }
            e.context.throwIfFaulted();
            return CUDA_SUCCESS;
        }
        EmulatedEvent.Recording r = e.recording();
        if (r != null) {
            r.reached.join();
        }
        e.context.throwIfFaulted();
        return CUDA_SUCCESS;
    }

    int queryEvent(long hEvent) {
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
        checkNotCaptured(e);
        e.context.throwIfFaulted();
        IpcEvents.Cell cell = e.cell;
        if (cell != null) {
            use(cell);
            try {
                return cell.completed() >= cell.recorded() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
            } finally {
                cell.release();
            }
        }
        EmulatedEvent.Recording r = e.recording();
        return r == null || r.reached.isDone() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    }

    /** Milliseconds between two completed recordings, or null while either is still pending. */
    Float elapsed(long hStart, long hEnd) {
        EmulatedEvent start = contexts.lookup(hStart, EmulatedEvent.class, "hStart");
        EmulatedEvent end = contexts.lookup(hEnd, EmulatedEvent.class, "hEnd");
        if (!start.timing() || !end.timing()) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "an event was created with CU_EVENT_DISABLE_TIMING");
        }
        EmulatedEvent.Recording a = start.recording();
        EmulatedEvent.Recording b = end.recording();
        if (a == null || b == null) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "an event has not been recorded");
        }
        if (!a.reached.isDone() || !b.reached.isDone()) {
            return null;
        }
        start.context.throwIfFaulted();
        end.context.throwIfFaulted();
        return (b.nanos - a.nanos) / 1_000_000f;
    }

    /** Holds an IPC event's cell for a call (released by the caller); a cell whose event was destroyed meanwhile is refused. */
    private static void use(IpcEvents.Cell cell) {
        if (!cell.acquire()) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "the event was destroyed");
        }
    }

        /** An event last recorded in a capture that is still going stands for no work that runs. */
    private static void checkNotCaptured(EmulatedEvent e) {
        Captures.CapturedRecord r = e.captured;
        if (r != null && r.sequence().graph != null && r.sequence().origin.capture == r.sequence()) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_CAPTURED_EVENT,
                    "the event was last recorded in a capturing stream");
        }
    }

    void destroyEvent(long hEvent) {
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "hEvent");
        if (handles.remove(hEvent, e)) {
            e.context.owned.remove(hEvent);
            e.released();
        }
    }
}
