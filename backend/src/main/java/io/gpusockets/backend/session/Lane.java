package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * One client thread's calls, run in order: quick calls (the table's {@code quick}) on the session's
 * reader thread when the lane is idle, everything else on the lane's own thread, started on first use.
 * The lane's context stack lives here, not in a thread, so either thread can run its calls.
 *
 * <p>The lane's thread is a platform thread, not a virtual one: CUDA keeps the current context per OS thread,
 * and a virtual thread blocked inside a driver call (cuStreamSynchronize, a large copy) pins its
 * carrier, so lanes on virtual threads could stall each other once the carriers are used up.
 * Platform threads keep each lane's blocking calls to itself.
 */
final class Lane implements Runnable {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** Scratch memory per thread that runs calls; a call that needs more takes an arena of its own. */
    static final int SCRATCH_BYTES = 16 << 10;
    /** How long a lane's thread waits idle between calls before it frees its buffers ({@link ExecutionThread#trim}). */
    static final long IDLE_TRIM_MILLIS = 1000;

    final int id;
    private final Session session;
    private final BlockingQueue<Inbound> queue = new LinkedBlockingQueue<>();
    private final Thread thread;
    /** The first error of an asynchronous call not yet reported; returned by the next synchronizing call. */
    int latchedError;
    private volatile boolean ended;
    /** Set by the lane's thread as it stops: frames queued after that are released at once. Guarded by this. */
    private boolean closed;
    private boolean started;
    /**
     * How long an idle lane thread polls its queue before it parks ({@link BackendSettings#laneSpinMicros}):
     * a parked thread takes tens of microseconds to wake on a virtual machine, which a client's next call
     * (the sync after a launch, the next chunk of a copy) usually arrives well within.
     */
    private final long spinNanos;
    /**
     * Calls queued for or running on this lane's thread. Only the session's reader adds to it, so when
     * the reader sees 0 the lane is idle and the reader may run a quick call itself, in order.
     */
    final java.util.concurrent.atomic.AtomicInteger pending = new java.util.concurrent.atomic.AtomicInteger();
    /**
     * The lane's context stack (real driver values, top last), kept here rather than in a thread's
     * driver state so that any thread can run the lane's calls: {@link ExecutionThread#apply} makes the
     * top current before each call. Guarded by this lane's monitor.
     */
    private final java.util.ArrayDeque<Long> contexts = new java.util.ArrayDeque<>();
    /** What the call this lane runs uses now, for the session's destroys to see ({@link SessionUses}). */
    final UseSlot uses = new UseSlot();
    /**
     * The handle entry of the context the lane's last call ran in ({@link Call#useContext}), so that the
     * next call in the same context needs no look-up in the session's handle tables; valid while no
     * context was destroyed since ({@link ExecutionThread#destroyedEpoch}: the driver may give a later
     * context the same value). Touched only by the thread running the lane's call, one at a time.
     */
    long usedContext;
    SessionHandles.Entry usedContextEntry;
    long usedContextEpoch = -1;

    /** A restore's internal lane ({@link SessionRestore}): its replies are discarded, its result kept here. */
    final boolean replay;
    /** The result of the last call a replay lane ran. */
    int replayResult;

    Lane(Session session, int id) {
        this(session, id, false);
    }

    Lane(Session session, int id, boolean replay) {
        this.replay = replay;
        this.session = session;
        this.id = id;
        this.spinNanos = session.settings().laneSpinNanos();
        this.thread = Thread.ofPlatform().daemon().name("gpusockets-s" + session.id() + "-lane" + id).unstarted(this);
        session.uses().register(uses);
    }

    /** Queues a frame for the lane's thread (started on first use); calls count as pending until they finish there. */
    synchronized void enqueue(Inbound in) {
        if (closed) {
            session.release(in); // the thread has stopped taking frames: this one would never be given back
            return;
        }
        if (in.header().opcode() != Opcodes.DATA) {
            pending.incrementAndGet();
        }
        if (!started) {
            started = true;
            thread.start();
        }
        queue.add(in);
    }

    /** A replay lane: a DATA frame for the call it runs next, queued without starting a thread. */
    void offerData(Inbound in) {
        queue.add(in);
    }

    /** The context stack, bottom first (real driver values). */
    synchronized long[] contextStack() {
        return contexts.stream().mapToLong(Long::longValue).toArray();
    }

    /** Replaces the context stack (a restore). */
    synchronized void contextStack(long[] reals) {
        contexts.clear();
        for (long c : reals) {
            contexts.addLast(c);
        }
    }

    synchronized long topContext() {
        Long top = contexts.peekLast();
        return top == null ? 0 : top;
    }

    synchronized void pushContext(long ctx) {
        contexts.addLast(ctx);
    }

    /** Pops the top; 0 when the stack is empty. */
    synchronized long popContext() {
        Long top = contexts.pollLast();
        return top == null ? 0 : top;
    }

    /** cuCtxSetCurrent: replaces the top (pushes onto an empty stack); 0 pops the top. */
    synchronized void setContext(long ctx) {
        if (ctx == 0) {
            contexts.pollLast();
        } else {
            contexts.pollLast();
            contexts.addLast(ctx);
        }
    }

    /** Drops a destroyed context wherever it is on the stack. */
    synchronized void forgetContext(long ctx) {
        contexts.removeIf(c -> c == ctx);
    }

    /** Asks the lane to finish what is queued and stop. */
    synchronized void end() {
        if (!started) {
            session.uses().unregister(uses);   // no thread runs its calls: the reader ran its last one
        }
        ended = true;
        queue.add(new Inbound(new FrameHeader(0, Opcodes.LANE_END, 0, id, 0), null, 0));
    }

    void interrupt() {
        thread.interrupt();
    }

    /** Whether the lane's thread was started and has not ended. */
    boolean isAlive() {
        return thread.isAlive();
    }

    boolean join(long millis) throws InterruptedException {
        thread.join(millis);
        return !thread.isAlive();
    }

    /**
     * The next frame: polled for up to {@link #spinNanos}, then waited for. Between calls
     * ({@code exec} not null), a lane idle for {@link #IDLE_TRIM_MILLIS} first frees its thread's
     * buffers and lets the session drop its idle ones.
     */
    private Inbound next(ExecutionThread exec) throws InterruptedException {
        Inbound in = queue.poll();
        if (in != null) {
            return in;
        }
        if (spinNanos > 0) {
            long deadline = System.nanoTime() + spinNanos;
            do {
                Thread.onSpinWait();
                in = queue.poll();
                if (in != null) {
                    return in;
                }
            } while (System.nanoTime() < deadline);
        }
        if (exec != null) {
            in = queue.poll(IDLE_TRIM_MILLIS, java.util.concurrent.TimeUnit.MILLISECONDS);
            if (in != null) {
                return in;
            }
            exec.trim();
            session.trimIdle();
        }
        return queue.take();
    }

    @Override
    public void run() {
        try {
            ExecutionThread exec = ExecutionThread.current(session.chunkBytes(), session.hostBuffers());
            while (true) {
                Inbound in = next(exec);
                if (in.header().opcode() == Opcodes.LANE_END) {
                    return;
                }
                try {
                    session.dispatcher().execute(this, in, exec);
                } finally {
                    session.release(in);
                    if (in.header().opcode() != Opcodes.DATA) {
                        pending.decrementAndGet();
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ProtocolException e) {
            session.fail("lane " + id + ": " + e.getMessage());
        } catch (java.io.IOException e) {
            session.fail("lane " + id + ": connection lost: " + e.getMessage());
        } catch (RuntimeException | Error e) {
            // e.g. OutOfMemoryError making this thread's buffers: the session ends (its frontend sees the connection
            // close) rather than waiting for ever for a reply this thread will never send
            LOG.log(System.Logger.Level.ERROR, "session " + session.id() + ": lane " + id + " failed: " + e, e);
            session.fail("lane " + id + ": internal error: " + e);
        } finally {
            if (ended) {
                session.uses().unregister(uses);   // no call of this lane runs any more (else the reader may run its next)
            }
            // Whatever is still queued will never run: give its budget back.
            synchronized (this) {
                closed = true;
            }
            for (Inbound left; (left = queue.poll()) != null; ) {
                session.release(left);
            }
            ExecutionThread.end();
        }
    }

    /**
     * The next DATA frame of request {@code requestId}, taken from this lane's queue by the call that
     * consumes it. Any other frame here means the peer broke the protocol.
     */
    Inbound nextData(long requestId) throws ProtocolException, InterruptedException {
        Inbound in = replay ? queue.poll() : next(null);
        if (in == null) {
            // a replay lane holds all a record's DATA before its call runs: a call that wants more never gets it
            throw new ProtocolException("the record holds less DATA than its call reads");
        }
        FrameHeader h = in.header();
        if (h.opcode() != Opcodes.DATA || h.requestId() != requestId) {
            session.release(in);
            if (h.opcode() == Opcodes.LANE_END && ended) {
                throw new InterruptedException("lane ended while data was expected");
            }
            throw new ProtocolException("expected DATA for request " + requestId + ", got " + h);
        }
        return in;
    }

    void release(Inbound in) {
        session.release(in);
    }
}
