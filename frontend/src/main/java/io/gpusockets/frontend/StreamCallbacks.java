package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.HostCallbackOps;
import io.gpusockets.protocol.structs.Memcpy3D;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * cuStreamAddCallback and cuLaunchHostFunc. The functions are C function pointers of the program, so
 * they run here, in the guest, called through FFM downcalls, and in stream order:
 *
 * <ul>
 *   <li>The calling thread only enqueues: the backend puts a gate into the stream (see the backend's
 *   HostCallbackGates) and answers with its id. The caller continues at once, as with a local GPU;
 *   work it queues on the stream afterwards waits behind the gate on the backend.</li>
 *   <li>A worker thread of this connection (its own lane, started on first use) asks the backend for
 *   the next gate the stream has reached, that is, once all work before the callback has completed;
 *   it calls the function (a stream callback receives the stream handle the program passed, the
 *   stream's status and userData) and then opens the gate, which lets later work on the stream run.</li>
 * </ul>
 *
 * Callbacks therefore run one at a time, on that worker thread, never on the thread that enqueued
 * them, as CUDA runs them on a driver thread; CUDA allows such serialization. A CUDA call made from
 * inside a callback is refused with CUDA_ERROR_NOT_PERMITTED (CUDA forbids them; one that waited for
 * the stream would wait for itself). As CUDA specifies, a stream callback runs exactly once and
 * receives an error status if the stream failed, while a host function is skipped after an error.
 * If the backend is lost, pending stream callbacks are called with
 * {@link RemoteCudaDriver#CONNECTION_LOST}, so a program waiting for them is not left hanging.
 *
 * <p>Cost: the enqueue is one round trip on the caller's lane; each callback two more on the
 * worker's. While a gate is outstanding the worker waits in a call, so it may be the thread that
 * reads replies for the others (the connection has no reader thread): a hand-off per reply then.
 *
 * <p>Graph work (issue 21) runs on the same worker: a host node's function, and the guest's side of
 * a memcpy node that touches host memory. The program's function, userData and host pointers stay
 * here, filed under a work token ({@link #file}); the backend's node is a gate that names the token
 * each time a graph launch reaches it (the backend's HostCallbackGates). The worker then calls the
 * function, or copies the program's host rows into the gate's staging buffer (PUT, host to device)
 * or out of it (GET, device to host), or between two host buffers, and opens the gate, so the graph's
 * later nodes see the host side done, in the graph's order, at each launch. Once the first graph work
 * is filed the worker always waits for a gate (a graph launch enqueues none here to count), so from
 * then on it may read replies for the other threads, as above. A host function enqueued on a
 * capturing stream becomes such graph work too: its token travels with the enqueue, and the backend
 * puts a graph gate into the capture. Tokens are kept for the connection's
 * life, as the backend keeps their gates (an exec graph outlives its graph).
 */
final class StreamCallbacks implements FrontendHandlers.Callbacks, AutoCloseable {
    private static final ApiFunction ADD_CALLBACK = ApiEntries.cuStreamAddCallback;
    private static final ApiFunction HOST_FUNC = ApiEntries.cuLaunchHostFunc;

    /**
     * The downcalls into the program's functions, made on the first callback: every connection has a
     * StreamCallbacks, and making a downcall handle costs milliseconds of a program's start.
     */
    private static final class Downcalls {
        /** void (*CUstreamCallback)(CUstream hStream, CUresult status, void *userData), target first. */
        static final MethodHandle STREAM_CALLBACK =
                Linker.nativeLinker().downcallHandle(FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS));
        /** void (*CUhostFn)(void *userData), target first. */
        static final MethodHandle HOST_FN = Linker.nativeLinker().downcallHandle(FunctionDescriptor.ofVoid(ADDRESS));
    }

    /** A callback the program enqueued, waiting for its gate. */
    private record Pending(boolean hostFunction, long fn, long userData, long stream) {
    }

    /** Graph work filed under a token: a host node's function, or the host side(s) of a memcpy node. */
    sealed interface GraphWork permits HostFunction, HostCopy {
    }

    /** A host node: {@code fn(userData)}, the program's. */
    record HostFunction(long fn, long userData) implements GraphWork {
    }

    /** A memcpy node with a host side: the program's CUDA_MEMCPY3D as it gave it (host sides with their addresses). */
    record HostCopy(Memcpy3D copy) implements GraphWork {
    }

    /** Sends one request (with bulk inputs and outputs) on the calling thread's lane and waits for its reply. */
    interface Exchange {
        CallChannel.Reply apply(ApiFunction f, ByteBuffer request, List<MemorySegment> bulk, List<MemorySegment> outBytes);
    }

    /** Graph work the backend may report reached, by token; kept for the connection's life. */
    private final Map<Long, GraphWork> graphWork = new ConcurrentHashMap<>();
    private final AtomicLong tokens = new AtomicLong(1);
    /** Set once graph work is filed: the worker then always waits for a gate. */
    private volatile boolean graphMode;

    private final Exchange exchange;
    /** By gate id; the worker may hear of a gate before its enqueuer has filed it, hence futures. */
    private final Map<Long, CompletableFuture<Pending>> pending = new ConcurrentHashMap<>();
    /** Gates enqueued and not yet reported reached: how many AWAITs the worker may send. */
    private final Semaphore outstanding = new Semaphore(0);
    private Thread worker;   // guarded by this, started once
    /** The worker while it is inside a program's callback. */
    private volatile Thread inCallback;
    private volatile boolean closed;

    StreamCallbacks(Exchange exchange) {
        this.exchange = exchange;
    }

    private CallChannel.Reply exchange(ApiFunction f, ByteBuffer request) {
        return exchange.apply(f, request, List.of(), List.of());
    }

    /**
     * Files graph work under a new token, which the caller sends in place of the program's pointers;
     * from now on the worker waits for gates.
     */
    long file(GraphWork work) {
        long token = tokens.getAndIncrement();
        graphWork.put(token, work);
        graphMode();
        return token;
    }

    /** From now on the worker always waits for a gate (graph launches enqueue none here to count). */
    private void graphMode() {
        if (!graphMode) {
            synchronized (this) {
                if (!graphMode) {
                    graphMode = true;
                    startWorker();
                    outstanding.release();   // a worker waiting for a permit goes on, and never waits for one again
                }
            }
        }
    }

    /** Forgets a token the backend refused (it made no node with it). */
    void unfile(long token) {
        graphWork.remove(token);
    }

    /** The work filed under {@code token}, or null. */
    GraphWork filed(long token) {
        return graphWork.get(token);
    }

    /** Runs {@code callback} in this process, in stream order, on this driver's callback thread; the caller goes on at once. */
    @Override
    public int cuStreamAddCallback(long stream, MemorySegment callback, MemorySegment userData, int flags) {
        if (isNull(callback) || flags != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return enqueue(ADD_CALLBACK, stream, flags, new Pending(false, callback.address(), userData.address(), stream), 0);
    }

    /** As {@link #cuStreamAddCallback}, without a status; skipped if the stream failed. */
    @Override
    public int cuLaunchHostFunc(long stream, MemorySegment fn, MemorySegment userData) {
        if (isNull(fn)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        // Filed (quietly) in case the stream captures: the backend then makes it a host node of the graph.
        long token = tokens.getAndIncrement();
        graphWork.put(token, new HostFunction(fn.address(), userData.address()));
        return enqueue(HOST_FUNC, stream, 0, new Pending(true, fn.address(), userData.address(), stream), token);
    }

    /** {@code work}: a host function's token (0: none); the backend answers gate 0 when it went into a capture. */
    private int enqueue(ApiFunction f, long stream, int flags, Pending p, long work) {
        ByteBuffer req = request();
        HostCallbackOps.putEnqueue(req, stream, flags, work);
        req.flip();
        CallChannel.Reply reply = exchange(f, req);
        if (reply.result() != CuResult.CUDA_SUCCESS) {
            graphWork.remove(work);
            return reply.result();
        }
        long gate = HostCallbackOps.readEnqueueReply(reply.body());
        if (gate == 0 && work != 0) {
            graphMode();   // captured: it runs at each launch of the graph, through the graph gates
            return CuResult.CUDA_SUCCESS;
        }
        graphWork.remove(work);
        slot(gate).complete(p);
        startWorker();
        outstanding.release();
        return CuResult.CUDA_SUCCESS;
    }

    private CompletableFuture<Pending> slot(long gate) {
        return pending.computeIfAbsent(gate, g -> new CompletableFuture<>());
    }

    private synchronized void startWorker() {
        if (worker == null) {
            worker = Thread.ofPlatform().daemon().name("gpusockets-stream-callbacks").start(this::serve);
        }
    }

    /** The worker: waits for reached gates, runs their callbacks, opens them. */
    private void serve() {
        try {
            while (!closed) {
                if (!graphMode) {
                    outstanding.acquire();
                }
                if (closed) {
                    return;
                }
                CallChannel.Reply reached = exchange(ADD_CALLBACK, awaitRequest());
                if (reached.result() != CuResult.CUDA_SUCCESS) {
                    failAll(reached.result());
                    return;
                }
                HostCallbackOps.Reached r = HostCallbackOps.readAwaitReply(reached.body());
                if (r.work() != 0) {
                    if (!runGraphWork(r)) {
                        failAll(RemoteCudaDriver.CONNECTION_LOST);
                        return;
                    }
                    continue;
                }
                long gate = r.gate();
                int status = r.status();
                Pending p = slot(gate).join();
                pending.remove(gate);
                inCallback = Thread.currentThread();
                try {
                    run(p, status);
                } finally {
                    inCallback = null;
                }
                CallChannel.Reply opened = exchange(ADD_CALLBACK, openRequest(gate));
                if (opened.result() == RemoteCudaDriver.CONNECTION_LOST) {
                    failAll(opened.result());
                    return;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Does the guest's side of a graph node the backend reports reached, then opens its gate. Returns
     * false when the backend is gone.
     */
    private boolean runGraphWork(HostCallbackOps.Reached r) {
        GraphWork w = graphWork.get(r.work());
        boolean lost = false;
        switch (w) {
            case HostFunction h -> {
                inCallback = Thread.currentThread();
                try {
                    Downcalls.HOST_FN.invokeExact(MemorySegment.ofAddress(h.fn()), MemorySegment.ofAddress(h.userData()));
                } catch (Throwable t) {
                    System.err.println("gpusockets: a graph host node's function failed: " + t);
                } finally {
                    inCallback = null;
                }
            }
            case HostCopy c -> {
                int result;
                try {
                    result = copy(c.copy(), r.gate(), r.bytes());
                } catch (RuntimeException e) {
                    result = CuResult.CUDA_ERROR_UNKNOWN;   // the gate opens all the same: the graph must not hang
                }
                lost = result == RemoteCudaDriver.CONNECTION_LOST;
                if (result != CuResult.CUDA_SUCCESS && !lost) {
                    System.err.println("gpusockets: the host side of a graph memcpy node failed: CUresult " + result);
                }
            }
            case null -> System.err.println("gpusockets: the backend reached graph work " + r.work() + " this process never filed");
        }
        if (lost) {
            return false;
        }
        return exchange(ADD_CALLBACK, openRequest(r.gate())).result() != RemoteCudaDriver.CONNECTION_LOST;
    }

    /**
     * The host side of a copy node at its gate: host rows into the staging buffer (PUT) when the source
     * is host memory, out of it (GET) when the destination is, or from host to host here alone.
     */
    private int copy(Memcpy3D m, long gate, long stagingBytes) {
        boolean srcHost = m.src().memoryType() == Memcpy3D.HOST, dstHost = m.dst().memoryType() == Memcpy3D.HOST;
        long total = m.totalBytes();
        if (srcHost && dstHost) {
            for (long row = 0; row < m.rows(); row++) {
                MemorySegment.copy(hostRow(m, m.src(), row), 0, hostRow(m, m.dst(), row), 0, m.width());
            }
            return CuResult.CUDA_SUCCESS;
        }
        if (stagingBytes != total) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D.Side host = srcHost ? m.src() : m.dst();
        boolean contiguous = m.contiguous(host);
        // Shared: the DATA of a GET may be read into it by whichever thread reads the connection's replies.
        try (Arena arena = Arena.ofShared()) {
            MemorySegment packed = contiguous
                    ? MemorySegment.ofAddress(host.host() + Memcpy3D.startOffset(host)).reinterpret(total)
                    : arena.allocate(total, 16);
            ByteBuffer req = request();
            if (srcHost) {
                if (!contiguous) {
                    for (long row = 0; row < m.rows(); row++) {
                        MemorySegment.copy(hostRow(m, host, row), 0, packed, row * m.width(), m.width());
                    }
                }
                HostCallbackOps.putPut(req, gate, total);
                return exchange.apply(ADD_CALLBACK, req.flip(), List.of(packed), List.of()).result();
            }
            HostCallbackOps.putGet(req, gate);
            int r = exchange.apply(ADD_CALLBACK, req.flip(), List.of(), List.of(packed)).result();
            if (r == CuResult.CUDA_SUCCESS && !contiguous) {
                for (long row = 0; row < m.rows(); row++) {
                    MemorySegment.copy(packed, row * m.width(), hostRow(m, host, row), 0, m.width());
                }
            }
            return r;
        }
    }

    /** Row {@code row} (through all slices) of a host side: the program's memory, {@code width} bytes. */
    private static MemorySegment hostRow(Memcpy3D m, Memcpy3D.Side s, long row) {
        return MemorySegment.ofAddress(s.host() + Memcpy3D.startOffset(s) + m.rowOffset(s, row)).reinterpret(m.width());
    }

    /**
     * Whether the calling thread is inside a program's callback. CUDA calls from there are refused with
     * CUDA_ERROR_NOT_PERMITTED, as CUDA specifies: one that waits for the stream would never return.
     */
    boolean runningHere() {
        return inCallback == Thread.currentThread();
    }

    private static void run(Pending p, int status) {
        try {
            if (!p.hostFunction()) {
                Downcalls.STREAM_CALLBACK.invokeExact(MemorySegment.ofAddress(p.fn()), MemorySegment.ofAddress(p.stream()), status,
                        MemorySegment.ofAddress(p.userData()));
            } else if (status == CuResult.CUDA_SUCCESS) {
                Downcalls.HOST_FN.invokeExact(MemorySegment.ofAddress(p.fn()), MemorySegment.ofAddress(p.userData()));
            }
        } catch (Throwable t) {
            System.err.println("gpusockets: a stream callback failed: " + t);
        }
    }

    /** The backend is gone: stream callbacks still run once, with the error; host functions do not. */
    private void failAll(int result) {
        if (closed) {
            return;
        }
        for (Long gate : pending.keySet()) {
            CompletableFuture<Pending> f = pending.remove(gate);
            if (f != null && f.isDone()) {
                run(f.join(), result);
            }
        }
    }

    private static ByteBuffer awaitRequest() {
        ByteBuffer b = request();
        HostCallbackOps.putAwait(b);
        return b.flip();
    }

    private static ByteBuffer openRequest(long gate) {
        ByteBuffer b = request();
        HostCallbackOps.putOpen(b, gate);
        return b.flip();
    }

    private static ByteBuffer request() {
        return ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static boolean isNull(MemorySegment fn) {
        return !fn.isNative() || fn.address() == 0;
    }

    /**
     * Stops the worker without calling anything more; call before closing the connection, which ends
     * a wait the worker may be in. (No interrupt: it might close the channel under a reader.)
     */
    @Override
    public void close() {
        closed = true;
        outstanding.release();
    }
}
