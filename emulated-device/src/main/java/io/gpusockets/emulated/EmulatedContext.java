package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_FAILED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A context: its streams and the ordering rules between them, its sticky error, and the handles of
 * what was created in it (so that destroying it frees everything).
 *
 * <p>Ordering, as CUDA's legacy default stream defines it: work on the legacy stream (handles 0 and 1)
 * first waits for all work already submitted to every blocking stream of the context, and work on a
 * blocking stream first waits for all work already submitted to the legacy stream. NON_BLOCKING
 * streams wait for neither. Dependencies are captured under {@link #lock} at submission, so they only
 * ever point at earlier work and cannot form a cycle.
 */
final class EmulatedContext {
    private static final System.Logger LOG = System.getLogger(EmulatedContext.class.getName());

    final long handle;
    final int device;
    /** CU_CTX_* flags: from cuCtxCreate, replaced by cuCtxSetFlags ({@link ContextControls}). */
    volatile int flags;
    final String name;
    /** Handles of the streams, events, modules and functions created in this context. */
    final Map<Long, Object> owned = new ConcurrentHashMap<>();
    /** The conditional handles made for graphs in this context, by handle: the value cudaGraphSetConditional sets. */
    final Map<Long, Graphs.Conditional> conditionals = new ConcurrentHashMap<>();
    /** Limits and cache preference (cuCtxGetLimit, cuCtxSetCacheConfig, ...). */
    final ContextSettings settings = new ContextSettings();

    private final Object lock = new Object();
    private final EmulatedStream legacy;
    private final Set<EmulatedStream> streams = new LinkedHashSet<>();         // guarded by lock
    private final Map<Thread, EmulatedStream> perThread = new HashMap<>();     // guarded by lock
    private int streamSerial;                                                  // guarded by lock
    private volatile boolean destroyed;
    private volatile int stickyError = CUDA_SUCCESS;
    private volatile String stickyDetail;

    private final Captures captures;
    /** Told once, when this context first faults (the device may poison the other contexts: {@link FaultScope}). */
    private final FaultListener onFault;

    /** Who hears of a context's first fault. */
    interface FaultListener {
        void faulted(EmulatedContext c, int code, String detail);
    }

    EmulatedContext(long handle, int device, int flags, int serial, Captures captures, FaultListener onFault) {
        this.captures = captures;
        this.onFault = onFault;
        this.handle = handle;
        this.device = device;
        this.flags = flags;
        this.name = "gpusockets-emulated-ctx" + serial;
        this.legacy = new EmulatedStream(0, this, EmulatedStream.Kind.LEGACY, 0, 0, name + "-legacy");
    }

    boolean destroyed() {
        return destroyed;
    }

    private DeviceHeap heap;   // guarded by lock; made at a kernel's first malloc

    /** The device heap for kernels' malloc/free, allocated in this context's memory at first use. */
    DeviceHeap heap(EmulatedMemory memory) {
        synchronized (lock) {
            if (heap == null) {
                heap = new DeviceHeap(memory.allocate(this, settings.limit(ContextSettings.MALLOC_HEAP_SIZE), Allocation.Kind.HEAP));
            }
            return heap;
        }
    }

    EmulatedStream legacyStream() {
        return legacy;
    }

    EmulatedStream createStream(long handle, int flags, int priority) {
        synchronized (lock) {
            checkAlive();
            EmulatedStream s = new EmulatedStream(handle, this, EmulatedStream.Kind.CREATED, flags, priority,
                    name + "-stream" + (++streamSerial));
            streams.add(s);
            return s;
        }
    }

    /** CU_STREAM_PER_THREAD for the calling thread: a blocking stream of its own, made on first use. */
    EmulatedStream perThreadStream() {
        Thread me = Thread.currentThread();
        synchronized (lock) {
            checkAlive();
            EmulatedStream s = perThread.get(me);
            if (s == null) {
                // Threads come and go (lanes): retire the streams of those that ended.
                perThread.entrySet().removeIf(e -> {
                    boolean dead = !e.getKey().isAlive();
                    if (dead) {
                        retireLocked(e.getValue());
                    }
                    return dead;
                });
                s = new EmulatedStream(0, this, EmulatedStream.Kind.PER_THREAD, 0, 0, name + "-ptds" + (++streamSerial));
                streams.add(s);
                perThread.put(me, s);
            }
            return s;
        }
    }

    /** cuStreamDestroy: returns at once; queued work still completes and still orders the legacy stream. */
    void destroyStream(EmulatedStream s) {
        synchronized (lock) {
            retireLocked(s);
        }
    }

    private void retireLocked(EmulatedStream s) {
        s.destroy();
        s.tail().whenComplete((v, t) -> {
            synchronized (lock) {
                streams.remove(s);
            }
        });
    }

    /** Queues {@code op} on {@code stream} after {@code after} (may be null) and the implicit dependencies. */
    CompletableFuture<Void> enqueue(EmulatedStream stream, CompletableFuture<?> after, Runnable op, String what) {
        return enqueue(stream, after, op, what, false);
    }

    /**
     * As {@link #enqueue(EmulatedStream, CompletableFuture, Runnable, String)}; with {@code always},
     * {@code op} runs even once the context has faulted or is being destroyed (stream callbacks, which
     * CUDA calls exactly once, passing the error), and must not throw.
     */
    CompletableFuture<Void> enqueue(EmulatedStream stream, CompletableFuture<?> after, Runnable op, String what,
                                    boolean always) {
        if (stream.capture != null) {
            captures.record(stream, nodeType(what), this, () -> runGuarded(op, what), what);
            return CAPTURED;
        }
        synchronized (lock) {
            checkAlive();
            checkStream(stream);
            if (stream.kind == EmulatedStream.Kind.LEGACY) {
                captures.checkLegacy(this, streams);
            }
            List<CompletableFuture<?>> deps = dependenciesLocked(stream);
            if (after != null && !after.isDone()) {
                deps.add(after);
            }
            CompletableFuture<Void> f = stream.submit(() -> {
                joinAll(deps);
                if (always) {
                    op.run();
                } else {
                    runGuarded(op, what);
                }
            });
            stream.tail(f);
            return f;
        }
    }

    /**
     * Runs {@code op} on the calling thread as if it were queued on {@code stream}: synchronous copies
     * and sets go through here, so the caller's host memory (maybe confined to its thread) is touched
     * only by the caller. A placeholder takes the stream's tail so later work still orders after it.
     */
    void runInline(EmulatedStream stream, Runnable op) {
        if (stream.kind == EmulatedStream.Kind.LEGACY) {
            captures.checkUnsafe("a synchronous copy or set");
        }
        refuseInCapture(stream, "work on host memory");
        CompletableFuture<Void> placeholder = new CompletableFuture<>();
        List<CompletableFuture<?>> deps;
        synchronized (lock) {
            checkAlive();
            checkStream(stream);
            if (stream.kind == EmulatedStream.Kind.LEGACY) {
                captures.checkLegacy(this, streams);
            }
            deps = dependenciesLocked(stream);
            stream.tail(placeholder);
        }
        try {
            joinAll(deps);
            op.run();
        } finally {
            placeholder.complete(null);
        }
    }

    /** Records {@code op} in {@code stream}'s capture (the stream is capturing) and returns its node. */
    EmulatedGraph.Node capture(EmulatedStream stream, Runnable op, String what) {
        return captures.record(stream, nodeType(what), this, () -> runGuarded(op, what), what);
    }

    /** What a capturing stream's queue call returns: the work is recorded, not queued. */
    private static final CompletableFuture<Void> CAPTURED = CompletableFuture.completedFuture(null);

    /** The CUgraphNodeType a captured call becomes, by what it is (the names its queuing passes). */
    private static int nodeType(String what) {
        if (what.startsWith("kernel ")) {
            return EmulatedGraph.KERNEL;
        } else if (what.startsWith("cuMemset")) {
            return EmulatedGraph.MEMSET;
        } else if (what.startsWith("cuMemcpy")) {
            return EmulatedGraph.MEMCPY;
        } else if (what.equals("cuGraphLaunch")) {
            return EmulatedGraph.GRAPH;
        } else if (what.equals("cuLaunchHostFunc")) {
            return EmulatedGraph.HOST;
        } else if (what.startsWith("cuStreamBatchMemOp") || what.startsWith("cuStreamWriteValue")
                || what.startsWith("cuStreamWaitValue")) {
            return EmulatedGraph.BATCH_MEM_OP;
        }
        return EmulatedGraph.EMPTY;
    }

    /**
     * Work that touches host memory cannot be captured (a graph launched later could not reach the
     * guest's memory behind the backend): refused in a capturing stream, which invalidates the capture.
     */
    void refuseInCapture(EmulatedStream stream, String what) {
        if (stream.capture != null) {
            captures.refuse(stream, what, "host memory or host code cannot be part of a graph here");
        }
    }

    /** Completion of everything {@code stream} would wait for if work were submitted to it now. */
    CompletableFuture<Void> barrier(EmulatedStream stream) {
        synchronized (lock) {
            checkAlive();
            return CompletableFuture.allOf(dependenciesLocked(stream).toArray(CompletableFuture[]::new));
        }
    }

    /** Completion of all work submitted to any stream of the context so far. */
    CompletableFuture<Void> allWork() {
        synchronized (lock) {
            List<CompletableFuture<?>> all = new ArrayList<>();
            addPending(all, legacy.tail());
            for (EmulatedStream s : streams) {
                addPending(all, s.tail());
            }
            return CompletableFuture.allOf(all.toArray(CompletableFuture[]::new));
        }
    }

    private List<CompletableFuture<?>> dependenciesLocked(EmulatedStream stream) {
        List<CompletableFuture<?>> deps = new ArrayList<>();
        addPending(deps, stream.tail());
        if (stream.kind == EmulatedStream.Kind.LEGACY) {
            for (EmulatedStream s : streams) {
                if (s.blocking()) {
                    addPending(deps, s.tail());
                }
            }
        } else if (stream.blocking()) {
            addPending(deps, legacy.tail());
        }
        return deps;
    }

    private static void addPending(List<CompletableFuture<?>> deps, CompletableFuture<?> f) {
        if (!f.isDone()) {
            deps.add(f);
        }
    }

    private static void joinAll(List<CompletableFuture<?>> deps) {
        for (CompletableFuture<?> d : deps) {
            d.join();
        }
    }

    private void checkAlive() {
        if (destroyed) {
            throw new CudaError(CUDA_ERROR_INVALID_CONTEXT, "context " + name + " was destroyed");
        }
    }

    private static void checkStream(EmulatedStream stream) {
        if (stream.destroyed()) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "stream was destroyed");
        }
    }

    /** Queued work never throws: what goes wrong becomes the sticky error, as on a GPU. */
    private void runGuarded(Runnable op, String what) {
        if (stickyError != CUDA_SUCCESS || destroyed) {
            return;   // a faulted (or dying) context executes nothing more
        }
        try {
            op.run();
        } catch (KernelFault f) {
            fault(f.code, what + ": " + f.getMessage());
        } catch (IllegalStateException | IndexOutOfBoundsException e) {
            // host memory of an async copy went away (closed arena) or was too short
            fault(CUDA_ERROR_ILLEGAL_ADDRESS, what + ": " + e);
        } catch (Throwable t) {
            fault(CUDA_ERROR_LAUNCH_FAILED, what + ": " + t);
        }
    }

    /** The first error wins and stays: a context that faulted is unusable, as on the GPU. */
    void fault(int code, String detail) {
        if (stick(code, detail)) {
            onFault.faulted(this, code, detail);
        }
    }

    /** The device is poisoned by another context's fault: this one takes the error too (its listener is not told). */
    void poison(int code, String detail) {
        stick(code, detail);
    }

    /** Sets the sticky error unless one is set; whether it was set now. */
    private boolean stick(int code, String detail) {
        synchronized (lock) {
            if (stickyError != CUDA_SUCCESS) {
                return false;
            }
            stickyDetail = detail;
            stickyError = code;
        }
        LOG.log(Level.WARNING, "{0}: sticky error {1}: {2}", name, code, detail);
        return true;
    }

    /** A faulted context accepts no more work: its sticky error is the answer. */
    void throwIfFaulted() {
        int code = stickyError;
        if (code != CUDA_SUCCESS) {
            throw new CudaError(code, "context " + name + " faulted earlier: " + stickyDetail);
        }
    }

    int stickyError() {
        return stickyError;
    }

    String stickyDetail() {
        return stickyDetail;
    }

    /** Marks the context dead (no new work) and returns every stream so the caller can drain them. */
    List<EmulatedStream> markDestroyed() {
        synchronized (lock) {
            destroyed = true;
            List<EmulatedStream> all = new ArrayList<>(streams);
            all.add(legacy);
            streams.clear();
            perThread.clear();
            return all;
        }
    }
}
