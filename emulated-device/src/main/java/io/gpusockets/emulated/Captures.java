package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_STATE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Stream capture (cuStreamBeginCapture ... cuStreamEndCapture) on the emulated device. A capturing
 * stream records the work queued on it as nodes of a graph instead of running it: each stream in the
 * sequence has a dependency set (the nodes the next captured node depends on), an event recorded in
 * a capturing stream keeps the recording stream's set, and a stream that waits for such an event
 * joins the sequence with that set (fork and join, as CUDA does it). Ends with a graph, or with the
 * error that invalidated the sequence.
 *
 * <p>Capture modes (CUstreamCaptureMode) and each thread's own mode (cuThreadExchangeStreamCaptureMode)
 * decide which "potentially unsafe" calls (synchronous copies and sets, allocation, context
 * synchronization) a thread may make while sequences are active, as the driver documents: the
 * prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the sequences that
 * prohibited it. Work on the legacy stream that would wait for a capturing blocking stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates that capture.
 *
 * <p>Work that touches host memory (copies to or from host memory, host functions and callbacks) is
 * refused in a capture with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: behind the backend the host memory is
 * the guest's, which a graph launched later cannot reach; the device behaves the same used directly.
 */
final class Captures {
    static final int MODE_GLOBAL = 0;
    static final int MODE_THREAD_LOCAL = 1;
    static final int MODE_RELAXED = 2;
    static final int STATUS_NONE = 0;
    static final int STATUS_ACTIVE = 1;
    static final int STATUS_INVALIDATED = 2;
    /** CUstreamUpdateCaptureDependencies_flags. */
    static final int ADD_DEPENDENCIES = 0;
    static final int SET_DEPENDENCIES = 1;

    /** One capture sequence. Guarded by the registry's lock. */
    static final class Sequence {
        final long id;
        final int mode;
        final Thread thread;
        final EmulatedStream origin;
        final EmulatedGraph graph;
        /** Every stream of the sequence, with the nodes its next captured node depends on. */
        final Map<EmulatedStream, Set<EmulatedGraph.Node>> streams = new LinkedHashMap<>();
        int invalidated;          // the error that invalidated it, or 0
        String why;

        Sequence(long id, int mode, Thread thread, EmulatedStream origin, EmulatedGraph graph) {
            this.id = id;
            this.mode = mode;
            this.thread = thread;
            this.origin = origin;
            this.graph = graph;
        }
    }

    /** What an event recorded in a capturing stream holds: the sequence and the recording stream's set then. */
    record CapturedRecord(Sequence sequence, Set<EmulatedGraph.Node> nodes) {
    }

    private final Object lock = new Object();
    private final Set<Sequence> active = new LinkedHashSet<>();    // guarded by lock
    /** active.size(), readable without the lock: queuing and unsafe-call checks cost nothing while no capture runs. */
    private volatile int activeCount;
    private final AtomicLong ids = new AtomicLong();
    private final ThreadLocal<int[]> threadMode = ThreadLocal.withInitial(() -> new int[] {MODE_GLOBAL});

    static void checkMode(int mode) {
        if (mode < MODE_GLOBAL || mode > MODE_RELAXED) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "mode=" + mode + " is no CUstreamCaptureMode");
        }
    }

    /** cuThreadExchangeStreamCaptureMode: sets the calling thread's mode, returns the previous one. */
    int exchangeMode(int mode) {
        checkMode(mode);
        int[] m = threadMode.get();
        int old = m[0];
        m[0] = mode;
        return old;
    }

    void begin(EmulatedStream s, int mode, EmulatedGraph graph) {
        begin(s, mode, graph, List.of());
    }

    /** cuStreamBeginCaptureToGraph: into an existing graph, the first node depending on {@code dependencies}. */
    void begin(EmulatedStream s, int mode, EmulatedGraph graph, List<EmulatedGraph.Node> dependencies) {
        checkMode(mode);
        if (s.kind == EmulatedStream.Kind.LEGACY) {
            throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy default stream cannot be captured");
        }
        synchronized (lock) {
            if (s.capture != null) {
                throw new CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is already capturing");
            }
            Sequence q = new Sequence(ids.incrementAndGet(), mode, Thread.currentThread(), s, graph);
            for (Sequence other : active) {
                if (other.graph == graph) {
                    throw new CudaError(CUDA_ERROR_ILLEGAL_STATE, "the graph is already being captured into");
                }
            }
            for (EmulatedGraph.Node n : dependencies) {
                if (n.graph != graph) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "a dependency is not a node of hGraph");
                }
            }
            q.streams.put(s, new LinkedHashSet<>(dependencies));
            active.add(q);
            activeCount = active.size();
            s.capture = q;
        }
    }

    /** Status, id of a stream's sequence (id 0 when none). */
    long[] info(EmulatedStream s) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (q == null) {
                return new long[] {STATUS_NONE, 0};
            }
            return new long[] {q.invalidated != 0 ? STATUS_INVALIDATED : STATUS_ACTIVE, q.id};
        }
    }

    /** The stream's current dependency set, in insertion order (empty when not capturing). */
    List<EmulatedGraph.Node> dependencies(EmulatedStream s) {
        synchronized (lock) {
            Sequence q = s.capture;
            return q == null ? List.of() : new ArrayList<>(q.streams.get(s));
        }
    }

    EmulatedGraph graphOf(EmulatedStream s) {
        synchronized (lock) {
            return s.capture == null ? null : s.capture.graph;
        }
    }

    /** cuStreamEndCapture: the graph, or the error that invalidated the sequence (the stream leaves it either way). */
    EmulatedGraph end(EmulatedStream s) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (q == null) {
                throw new CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing");
            }
            if (q.origin != s) {
                invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "cuStreamEndCapture on a stream that did not begin it");
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "the capture was not begun in this stream");
            }
            if (q.mode != MODE_RELAXED && q.thread != Thread.currentThread()) {
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                        "a capture not begun in relaxed mode must end in the thread that began it");
            }
            finishLocked(q);
            if (q.invalidated != 0) {
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the capture was invalidated: " + q.why);
            }
            // Every other stream's last work must be joined into the origin stream.
            Set<EmulatedGraph.Node> joined = EmulatedGraph.ancestors(q.streams.get(s));
            for (Map.Entry<EmulatedStream, Set<EmulatedGraph.Node>> e : q.streams.entrySet()) {
                if (e.getKey() != s && !joined.containsAll(e.getValue())) {
                    throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                            "a stream forked into the capture was not joined back into the origin stream");
                }
            }
            return q.graph;
        }
    }

    private void finishLocked(Sequence q) {
        active.remove(q);
        activeCount = active.size();
        for (EmulatedStream t : q.streams.keySet()) {
            t.capture = null;
        }
    }

    /**
     * Records {@code op}, queued on capturing {@code s}, as a node depending on the stream's set, which
     * then holds only the new node. Refused once the sequence is invalidated.
     */
    EmulatedGraph.Node record(EmulatedStream s, int type, EmulatedContext c, Runnable op, String what) {
        synchronized (lock) {
            Sequence q = liveLocked(s, what);
            EmulatedGraph.Node n = q.graph.addCaptured(type, c, op, what, q.streams.get(s));
            Set<EmulatedGraph.Node> set = q.streams.get(s);
            set.clear();
            set.add(n);
            return n;
        }
    }

    /** An event record or wait node (CU_EVENT_RECORD_EXTERNAL, CU_EVENT_WAIT_EXTERNAL in a capture). */
    void recordEventNode(EmulatedStream s, int type, EmulatedEvent e) {
        synchronized (lock) {
            Sequence q = liveLocked(s, type == EmulatedGraph.EVENT_RECORD ? "cuEventRecordWithFlags" : "cuStreamWaitEvent");
            Set<EmulatedGraph.Node> set = q.streams.get(s);
            EmulatedGraph.Node n = q.graph.addCaptured(type, e.context, null, "event node", set);
            n.event = e;
            set.clear();
            set.add(n);
        }
    }

    private Sequence liveLocked(EmulatedStream s, String what) {
        Sequence q = s.capture;
        if (q == null) {
            throw new IllegalStateException("not capturing");
        }
        if (q.invalidated != 0) {
            throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, what + ": the capture was invalidated: " + q.why);
        }
        return q;
    }

    /** Work that cannot be captured: refused, and the sequence invalidated, as the driver does for unsupported work. */
    void refuse(EmulatedStream s, String what, String reason) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (q == null) {
                return;
            }
            liveLocked(s, what);
            invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what + ": " + reason);
            throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what + " is not permitted in stream capture: " + reason);
        }
    }

    /** cuEventRecord on a capturing stream: the event now stands for the stream's current set. */
    CapturedRecord recordEvent(EmulatedStream s) {
        synchronized (lock) {
            Sequence q = liveLocked(s, "cuEventRecord");
            return new CapturedRecord(q, new LinkedHashSet<>(q.streams.get(s)));
        }
    }

    /**
     * cuStreamWaitEvent with an event recorded in a capture: {@code s} joins the sequence (or, already
     * in it, adds the event's nodes to its set). Returns false when nothing was captured here (the
     * caller then waits as usual).
     */
    boolean waitEvent(EmulatedStream s, CapturedRecord r) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (r == null || !active.contains(r.sequence())) {
                if (q == null) {
                    return false;
                }
                // An event recorded outside this capture (or in one that ended): a dependency across its boundary.
                liveLocked(s, "cuStreamWaitEvent");
                invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "cuStreamWaitEvent on an event recorded outside the capture");
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
                        "cuStreamWaitEvent in a capture on an event recorded outside it");
            }
            Sequence from = r.sequence();
            if (q != null && q != from) {
                throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_MERGE,
                        "the stream belongs to another capture sequence");
            }
            if (from.invalidated != 0) {
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "cuStreamWaitEvent: the capture was invalidated: " + from.why);
            }
            if (s.kind == EmulatedStream.Kind.LEGACY) {
                invalidateLocked(from, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "the legacy stream waited for a captured event");
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy default stream cannot join a capture");
            }
            if (q == null) {
                from.streams.put(s, new LinkedHashSet<>(r.nodes()));
                s.capture = from;
            } else {
                from.streams.get(s).addAll(r.nodes());
            }
            return true;
        }
    }

    /** cuStreamUpdateCaptureDependencies: adds {@code nodes} to the set or replaces it. */
    void updateDependencies(EmulatedStream s, List<EmulatedGraph.Node> nodes, int flags) {
        if (flags != ADD_DEPENDENCIES && flags != SET_DEPENDENCIES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        synchronized (lock) {
            Sequence q = s.capture;
            if (q == null) {
                throw new CudaError(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing");
            }
            liveLocked(s, "cuStreamUpdateCaptureDependencies");
            for (EmulatedGraph.Node n : nodes) {
                if (n.graph != q.graph) {
                    throw new CudaError(CUDA_ERROR_INVALID_VALUE, "a node is not of the capture's graph");
                }
            }
            Set<EmulatedGraph.Node> set = q.streams.get(s);
            if (flags == SET_DEPENDENCIES) {
                set.clear();
            }
            set.addAll(nodes);
        }
    }

    /**
     * Queuing on the legacy stream would wait for every blocking stream of {@code c}: one that is
     * capturing makes that an implicit dependency on the capture, which is refused.
     */
    void checkLegacy(EmulatedContext c, Iterable<EmulatedStream> blockingStreams) {
        if (activeCount == 0) {
            return;
        }
        synchronized (lock) {
            if (active.isEmpty()) {
                return;
            }
            Sequence hit = null;
            for (EmulatedStream t : blockingStreams) {
                if (t.capture != null && t.blocking()) {
                    hit = t.capture;
                    invalidateLocked(hit, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "work on the legacy stream of " + c.name);
                }
            }
            if (hit != null) {
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                        "work on the legacy default stream would depend on a capturing stream");
            }
        }
    }

    /**
     * A potentially unsafe call (synchronous copy or set, allocation, synchronization): refused while a
     * sequence prohibits it for the calling thread, by the thread's capture mode.
     */
    void checkUnsafe(String what) {
        if (activeCount == 0) {
            return;
        }
        int mode = threadMode.get()[0];
        if (mode == MODE_RELAXED) {
            return;
        }
        synchronized (lock) {
            if (active.isEmpty()) {
                return;
            }
            Thread me = Thread.currentThread();
            List<Sequence> prohibiting = new ArrayList<>();
            for (Sequence q : active) {
                boolean mine = q.thread == me && q.mode != MODE_RELAXED;
                boolean othersGlobal = mode == MODE_GLOBAL && q.thread != me && q.mode == MODE_GLOBAL;
                if (mine || othersGlobal) {
                    prohibiting.add(q);
                }
            }
            if (prohibiting.isEmpty()) {
                return;
            }
            for (Sequence q : prohibiting) {
                invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what + " during the capture");
            }
            throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                    what + " is not permitted while a stream capture is active (capture mode)");
        }
    }

    /** Synchronizing or querying a capturing stream is refused and invalidates its capture. */
    void checkNotCapturing(EmulatedStream s, String what) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (q != null) {
                invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what + " on a capturing stream");
                throw new CudaError(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, what + " is not permitted on a capturing stream");
            }
        }
    }

    /** Whether any sequence uses a node of {@code g} (a graph being captured into cannot be used). */
    boolean capturingInto(EmulatedGraph g) {
        synchronized (lock) {
            for (Sequence q : active) {
                if (q.graph == g) {
                    return true;
                }
            }
            return false;
        }
    }

    private static void invalidateLocked(Sequence q, int code, String why) {
        if (q.invalidated == 0) {
            q.invalidated = code;
            q.why = why;
        }
    }

    /** Sequences of destroyed streams end (their graph is dropped). */
    void forget(EmulatedStream s) {
        synchronized (lock) {
            Sequence q = s.capture;
            if (q != null) {
                invalidateLocked(q, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "a stream of the capture was destroyed");
                if (q.origin == s) {
                    finishLocked(q);
                } else {
                    q.streams.remove(s);
                    s.capture = null;
                }
            }
        }
    }
}
