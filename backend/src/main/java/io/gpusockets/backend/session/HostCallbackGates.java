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
 * frontend, as cuLaunchHostFunc specifies. (cuLaunchHostFunc is legal during stream capture, but a gate in a
 * graph would wait for a guest callback no one asks for: CaptureGuard refuses it on a capturing stream.) On a real GPU the driver runs callbacks on its own thread, so while
 * one gate waits for the guest, later callbacks of the context wait too; CUDA allows this ("may be
 * serialized"). When the session ends every gate opens, so no stream stays blocked.
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

    static {
        try {
            var target = MethodHandles.lookup().findStatic(HostCallbackGates.class, "reached",
                    MethodType.methodType(void.class, MemorySegment.class, int.class, MemorySegment.class));
            REACHED = Linker.nativeLinker().upcallStub(target, FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS),
                    Arena.global());
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** One enqueued callback. */
    private static final class Gate {
        final long id;
        final HostCallbackGates owner;
        final CountDownLatch opened = new CountDownLatch(1);
        volatile int status;

        Gate(long id, HostCallbackGates owner) {
            this.id = id;
            this.owner = owner;
        }
    }

    /** Stands for "the session ended" in the reached queue. */
    private final Gate ended = new Gate(0, this);
    private final Map<Long, Gate> open = new ConcurrentHashMap<>();
    private final BlockingQueue<Gate> reached = new LinkedBlockingQueue<>();
    private volatile boolean closed;

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
        Gate g = new Gate(IDS.getAndIncrement(), this);
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
        return CuResult.CUDA_SUCCESS;
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
