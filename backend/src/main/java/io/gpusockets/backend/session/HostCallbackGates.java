package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The backend half of cuStreamAddCallback and cuLaunchHostFunc, whose functions live in the guest.
 *
 * <p>For each one the program enqueues, a gate goes into the stream: a driver stream callback
 * ({@link #reached}, an FFM upcall) that, once the work before it has completed, reports the gate
 * reached and blocks the stream until the frontend says its callback has run ({@link #open}). The
 * program's thread continues at once; work it queues on the stream later waits behind the gate, as
 * it waits behind a callback on a local GPU. The frontend learns of reached gates by asking on a lane
 * of its own ({@link #await}), so no frame ever travels unasked.
 *
 * <p>Both entries use the driver's cuStreamAddCallback, which runs exactly once per call and passes
 * the stream's status: a host function whose gate reports an error is then not called by the
 * frontend, as cuLaunchHostFunc specifies. (cuLaunchHostFunc is legal during stream capture, but a stream
 * gate captured into a graph would wait for a guest callback no one asks for: CaptureGuard refuses it on a
 * capturing stream; explicit graph host nodes use the graph gates below.) On a real GPU the driver runs callbacks on its own thread, so while
 * one gate waits for the guest, later callbacks of the context wait too; CUDA allows this ("may be
 * serialized"). When the session ends every gate opens, so no stream stays blocked.
 *
 * <p>Graph nodes whose work is the guest's travel the same way ({@link #graphWork}): a host node
 * (cuGraphAddHostNode) and the guest's side of a memcpy node that touches host memory are, in the
 * driver's graph, host nodes whose function is {@link #GRAPH_REACHED} and whose userData is a key of
 * this class. Each time a launch reaches one, a gate opens a reached record for the guest that names
 * the guest's own work token (the backend never learns the program's function or host pointer), and
 * the graph's node waits until the guest opens it. A copy node's gate has a staging buffer in the
 * backend's memory, between the guest's host buffer and the device: the guest fills it before opening
 * (PUT, host to device: the driver's memcpy node after the gate copies it to the device) or reads it
 * (GET, device to host: the memcpy node before the gate filled it). Staging buffers and keys live as
 * long as the session (an exec graph keeps its nodes after its graph is destroyed), bounded by
 * {@link #MAX_GRAPH_WORK} and {@link #MAX_STAGING_BYTES}, and are freed once its contexts are gone.
 */
final class HostCallbackGates {
    private static final System.Logger LOG = System.getLogger("gpusockets.callbacks");
    /** Driver callbacks of every session come through here: their failures are logged rate-limited. */
    private static final RateLimitedLog FAILURES = new RateLimitedLog(LOG, "stream callbacks", "gate failures");
    /** Gates enqueued but not yet opened, per session; a guest cannot make the backend keep more. */
    static final int MAX_OPEN_GATES = 1 << 16;

    /** Every open gate of every session, by the id the driver hands back to {@link #reached} as userData. */
    private static final Map<Long, Gate> LIVE = new ConcurrentHashMap<>();
    private static final AtomicLong IDS = new AtomicLong(1);
    private static final MemorySegment REACHED;
    /** The function of every graph host node the backend makes: void (*CUhostFn)(void *userData), userData a work key. */
    static final MemorySegment GRAPH_REACHED;
    /** Graph work (host nodes, copy staging) a session may hold: keys live as long as the session. */
    static final int MAX_GRAPH_WORK = 1 << 16;
    /** Staging bytes of host-memory copy nodes a session may hold, in the backend's memory. */
    static final long MAX_STAGING_BYTES = 1L << 30;
    /** Every session's graph work by key (the driver hands it to {@link #graphReached} as userData). */
    private static final Map<Long, GraphWork> WORK = new ConcurrentHashMap<>();

    static {
        try {
            var target = MethodHandles.lookup().findStatic(HostCallbackGates.class, "reached",
                    MethodType.methodType(void.class, MemorySegment.class, int.class, MemorySegment.class));
            REACHED = Linker.nativeLinker().upcallStub(target, FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS),
                    Arena.global());
            var graphTarget = MethodHandles.lookup().findStatic(HostCallbackGates.class, "graphReached",
                    MethodType.methodType(void.class, MemorySegment.class));
            GRAPH_REACHED = Linker.nativeLinker().upcallStub(graphTarget, FunctionDescriptor.ofVoid(ADDRESS), Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * A graph node whose work is the guest's: {@code token} is the guest's name for it, echoed in
     * each reached record; {@code staging} the copy's buffer (empty for a host function node).
     */
    record GraphWork(long key, HostCallbackGates owner, long token, MemorySegment staging) {
    }

    /** One enqueued callback, or one arrival at a graph node ({@code work} non-null). */
    private static final class Gate {
        final long id;
        final HostCallbackGates owner;
        final GraphWork work;
        final CountDownLatch opened = new CountDownLatch(1);
        volatile int status;

        Gate(long id, HostCallbackGates owner, GraphWork work) {
            this.id = id;
            this.owner = owner;
            this.work = work;
        }
    }

    /** Stands for "the session ended" in the reached queue. */
    private final Gate ended = new Gate(0, this, null);
    private final Map<Long, Gate> open = new ConcurrentHashMap<>();
    private final BlockingQueue<Gate> reached = new LinkedBlockingQueue<>();
    private volatile boolean closed;
    /** This session's graph work keys; guarded by this, as are the two below. */
    private final java.util.List<Long> workKeys = new java.util.ArrayList<>();
    private Arena staging;
    private long stagingBytes;
    /** Staging regions the driver page-locked, to unregister and give back to the tenant's pinned quota. */
    private final java.util.List<MemorySegment> pinned = new java.util.ArrayList<>();
    private CudaDriver pinDriver;
    private SessionQuota pinQuota;
    private long pinnedBytes;

    /** Callbacks enqueued and not yet opened by the guest (a checkpoint refuses while there are any). */
    int openGates() {
        return open.size();
    }

    /** Graph nodes of this session whose work is the guest's (a checkpoint does not capture them yet). */
    synchronized int graphWorkCount() {
        return workKeys.size();
    }

    /**
     * Puts a gate into {@code stream} (a real driver handle) on the calling lane's context.
     *
     * @param idOut receives the gate id on success
     */
    int enqueue(CudaDriver driver, long stream, int flags, long[] idOut) {
        if (closed) {
            return CuResult.CUDA_ERROR_DEINITIALIZED;
        }
        if (open.size() >= MAX_OPEN_GATES) {
            return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
        }
        Gate g = new Gate(IDS.getAndIncrement(), this, null);
        // Registered before the driver sees it: the callback may run before cuStreamAddCallback returns.
        open.put(g.id, g);
        LIVE.put(g.id, g);
        int r = driver.cuStreamAddCallback(stream, REACHED, MemorySegment.ofAddress(g.id), flags);
        if (r != CuResult.CUDA_SUCCESS) {
            forget(g);
            return r;
        }
        idOut[0] = g.id;
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Blocks until a gate of this session is reached; {@code out} receives its id and the stream's
     * status. Returns CUDA_ERROR_DEINITIALIZED once the session has ended.
     */
    int await(long[] out) throws InterruptedException {
        Gate g = reached.take();
        if (g == ended) {
            reached.add(ended);   // for any other waiter
            return CuResult.CUDA_ERROR_DEINITIALIZED;
        }
        out[0] = g.id;
        out[1] = g.status;
        out[2] = g.work == null ? 0 : g.work.token();
        out[3] = g.work == null ? 0 : g.work.staging().byteSize();
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Registers graph work of the guest named {@code token}, with a zeroed staging buffer of
     * {@code stagingBytes} (0 for a host function node). Returns null when the session's bounds would
     * be passed, the tenant's pinned quota is spent, the driver cannot page-lock the buffer, or the session
     * has ended; the caller answers CUDA_ERROR_OUT_OF_MEMORY.
     *
     * <p>A staging buffer is page-locked ({@code cuMemHostRegister}, portable) and charged to the tenant's pinned
     * memory: the real driver reads a pageable source of a graph's memcpy node when the graph is launched, not
     * when the node runs, so a pageable buffer would be copied before its gate filled it (seen on an H100, GPU
     * pass of 2026-12-05: host-memory copy nodes gave the data of the launch before). A driver that has no
     * page-locking (the emulated device: CUDA_ERROR_NOT_SUPPORTED) reads the buffer when the node runs and
     * gets it unpinned and uncharged.
     */
    synchronized GraphWork graphWork(long token, long stagingBytes, CudaDriver driver, SessionQuota quota) {
        if (closed || workKeys.size() >= MAX_GRAPH_WORK || stagingBytes < 0
                || stagingBytes > MAX_STAGING_BYTES - this.stagingBytes) {
            return null;
        }
        MemorySegment buffer = MemorySegment.NULL;
        if (stagingBytes > 0) {
            long pages = (stagingBytes + PAGE - 1) & -PAGE;
            if (!quota.reservePinned(pages)) {
                return null;
            }
            if (staging == null) {
                staging = Arena.ofShared();
            }
            MemorySegment region = staging.allocate(pages, PAGE);
            int r = registerRelaxed(driver, region, pages);
            if (r == CuResult.CUDA_SUCCESS) {
                pinned.add(region);
                pinDriver = driver;
                pinQuota = quota;
                pinnedBytes += pages;
            } else {
                quota.releasePinned(pages);
                if (r != CuResult.CUDA_ERROR_NOT_SUPPORTED) {
                    LOG.log(Level.WARNING, "graph copy staging of " + pages + " bytes not page-locked (" + CuResult.name(r)
                            + "): the node is refused");
                    return null;
                }
            }
            buffer = region.asSlice(0, stagingBytes);
            this.stagingBytes += stagingBytes;
        }
        GraphWork w = new GraphWork(IDS.getAndIncrement(), this, token, buffer);
        workKeys.add(w.key());
        WORK.put(w.key(), w);
        return w;
    }

    /**
     * cuMemHostRegister in capture mode relaxed for the calling thread: a copy node is often made while a stream
     * of the context captures (a captured host copy), and in the default mode (global) the driver refuses the
     * registration then (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, seen on an H100); the thread's mode is put back.
     */
    private static int registerRelaxed(CudaDriver driver, MemorySegment region, long pages) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment mode = a.allocate(JAVA_INT);
            mode.set(JAVA_INT, 0, CU_STREAM_CAPTURE_MODE_RELAXED);
            boolean exchanged = driver.cuThreadExchangeStreamCaptureMode(mode) == CuResult.CUDA_SUCCESS;
            try {
                return driver.cuMemHostRegister(region, pages, CU_MEMHOSTREGISTER_PORTABLE);
            } finally {
                if (exchanged) {
                    driver.cuThreadExchangeStreamCaptureMode(mode); // the mode it had
                }
            }
        }
    }

    /** cuda.h CU_STREAM_CAPTURE_MODE_RELAXED. */
    private static final int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
    private static final long PAGE = 4096;
    /** cuda.h CU_MEMHOSTREGISTER_PORTABLE: page-locked for every context. */
    private static final int CU_MEMHOSTREGISTER_PORTABLE = 1;

    /** The address of the staging buffer of graph work {@code key} of this session (0 when it has none). */
    long stagingAt(long key) {
        GraphWork w = WORK.get(key);
        return w == null || w.owner() != this ? 0 : w.staging().address();
    }

    /** The guest's token of graph work {@code key} of this session, or 0 when it is none of this session's. */
    long tokenOf(long key) {
        GraphWork w = WORK.get(key);
        return w == null || w.owner() != this ? 0 : w.token();
    }

    /**
     * The staging buffer behind reached graph gate {@code id}, if it is one of this session's with
     * exactly {@code bytes} bytes; else null (the caller refuses the request).
     */
    MemorySegment stagingOf(long id, long bytes) {
        Gate g = open.get(id);
        if (g == null || g.work == null || g.work.staging().byteSize() == 0 || g.work.staging().byteSize() != bytes) {
            return null;
        }
        return g.work.staging();
    }

    /** The staging size of reached graph gate {@code id}, or -1 when it is none of this session's with staging. */
    long stagingBytesOf(long id) {
        Gate g = open.get(id);
        return g == null || g.work == null || g.work.staging().byteSize() == 0 ? -1 : g.work.staging().byteSize();
    }

    /**
     * Frees the graph work once the session's contexts are gone (no graph can reach a gate any more);
     * called by the session's release, after {@link #close}.
     */
    synchronized void releaseGraphWork() {
        for (Long k : workKeys) {
            WORK.remove(k);
        }
        workKeys.clear();
        for (MemorySegment region : pinned) {
            int r = pinDriver.cuMemHostUnregister(region);
            // NOT_REGISTERED: the driver dropped it with the last context (seen on an H100): nothing left to undo
            if (r != CuResult.CUDA_SUCCESS && r != CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) {
                FAILURES.log(Level.WARNING, () -> "graph copy staging: cuMemHostUnregister: " + CuResult.name(r));
            }
        }
        pinned.clear();
        if (pinQuota != null) {
            pinQuota.releasePinned(pinnedBytes);
        }
        pinnedBytes = 0;
        if (staging != null) {
            staging.close();
            staging = null;
        }
        stagingBytes = 0;
    }

    /** Graph work of this session still held: keys and staging bytes (for tests and the end line). */
    synchronized long[] graphWorkHeld() {
        return new long[] {workKeys.size(), stagingBytes};
    }

    /** Lets the stream behind gate {@code id} go on: the guest's callback has run. */
    int open(long id) {
        Gate g = open.get(id);
        if (g == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        forget(g);
        g.opened.countDown();
        return CuResult.CUDA_SUCCESS;
    }

    /** The session ended: every gate opens, later ones pass at once, and waiters are told. */
    void close() {
        closed = true;
        for (Gate g : open.values()) {
            forget(g);
            g.opened.countDown();
        }
        reached.add(ended);
    }

    private void forget(Gate g) {
        open.remove(g.id);
        LIVE.remove(g.id);
    }

    private void arrive(Gate g, int status) throws InterruptedException {
        g.status = status;
        if (closed) {
            forget(g);
            return;
        }
        reached.add(g);
        g.opened.await();
    }

    private void arriveGraph(GraphWork w) throws InterruptedException {
        if (closed) {
            return;
        }
        Gate g = new Gate(IDS.getAndIncrement(), this, w);
        open.put(g.id, g);
        if (closed) {   // close() may have run between the check and the put: it opened what it saw
            forget(g);
            return;
        }
        reached.add(g);
        g.opened.await();
    }

    /** The function of graph host nodes the backend made: void (void *userData). Never throws into the driver. */
    private static void graphReached(MemorySegment userData) {
        try {
            GraphWork w = WORK.get(userData.address());
            if (w != null) {
                w.owner().arriveGraph(w);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Throwable t) {
            FAILURES.log(Level.ERROR, () -> "a graph gate failed", t);
        }
    }

    /** The driver's stream callback: void (CUstream, CUresult, void *userData). Never throws into the driver. */
    private static void reached(MemorySegment stream, int status, MemorySegment userData) {
        try {
            Gate g = LIVE.get(userData.address());
            if (g != null) {
                g.owner.arrive(g, status);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Throwable t) {
            FAILURES.log(Level.ERROR, () -> "a gate failed", t);
        }
    }
}
