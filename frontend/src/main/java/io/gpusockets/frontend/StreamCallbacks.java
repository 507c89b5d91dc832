package io.gpusockets.frontend;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.HostCallbackOps;
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
import java.util.function.BiFunction;

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

    /** Sends one request on the calling thread's lane and waits for its reply. */
    private final BiFunction<ApiFunction, ByteBuffer, CallChannel.Reply> exchange;
    /** By gate id; the worker may hear of a gate before its enqueuer has filed it, hence futures. */
    private final Map<Long, CompletableFuture<Pending>> pending = new ConcurrentHashMap<>();
    /** Gates enqueued and not yet reported reached: how many AWAITs the worker may send. */
    private final Semaphore outstanding = new Semaphore(0);
    private Thread worker;   // guarded by this, started once
    /** The worker while it is inside a program's callback. */
    private volatile Thread inCallback;
    private volatile boolean closed;

    StreamCallbacks(BiFunction<ApiFunction, ByteBuffer, CallChannel.Reply> exchange) {
        this.exchange = exchange;
    }

    /** Runs {@code callback} in this process, in stream order, on this driver's callback thread; the caller goes on at once. */
    @Override
    public int cuStreamAddCallback(long stream, MemorySegment callback, MemorySegment userData, int flags) {
        if (isNull(callback) || flags != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return enqueue(ADD_CALLBACK, stream, flags, new Pending(false, callback.address(), userData.address(), stream));
    }

    /** As {@link #cuStreamAddCallback}, without a status; skipped if the stream failed. */
    @Override
    public int cuLaunchHostFunc(long stream, MemorySegment fn, MemorySegment userData) {
        if (isNull(fn)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return enqueue(HOST_FUNC, stream, 0, new Pending(true, fn.address(), userData.address(), stream));
    }

    private int enqueue(ApiFunction f, long stream, int flags, Pending p) {
        ByteBuffer req = request();
        HostCallbackOps.putEnqueue(req, stream, flags);
        req.flip();
        CallChannel.Reply reply = exchange.apply(f, req);
        if (reply.result() != CuResult.CUDA_SUCCESS) {
            return reply.result();
        }
        long gate = HostCallbackOps.readEnqueueReply(reply.body());
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
                outstanding.acquire();
                if (closed) {
                    return;
                }
                CallChannel.Reply reached = exchange.apply(ADD_CALLBACK, awaitRequest());
                if (reached.result() != CuResult.CUDA_SUCCESS) {
                    failAll(reached.result());
                    return;
                }
                HostCallbackOps.Reached r = HostCallbackOps.readAwaitReply(reached.body());
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
                CallChannel.Reply opened = exchange.apply(ADD_CALLBACK, openRequest(gate));
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
