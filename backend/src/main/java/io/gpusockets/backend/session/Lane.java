package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * One client thread's calls, run in order on one backend thread.
 *
 * <p>A lane is a platform thread, not a virtual one: CUDA keeps the current context per OS thread,
 * and a virtual thread blocked inside a driver call (cuStreamSynchronize, a large copy) pins its
 * carrier, so lanes on virtual threads could stall each other once the carriers are used up.
 * Platform threads keep each lane's blocking calls to itself.
 */
final class Lane implements Runnable {
    static final int SCRATCH_BYTES = 64 << 10;

    final int id;
    private final Session session;
    private final BlockingQueue<Inbound> queue = new LinkedBlockingQueue<>();
    private final Thread thread;
    /** The first error of an asynchronous call not yet reported; returned by the next synchronizing call. */
    int latchedError;
    /** Lane-thread-only memory for outputs and small inputs of one call at a time. */
    MemorySegment scratch;
    /** Lane-thread-only staging buffer for device-to-host chunks. */
    MemorySegment staging;
    private volatile boolean ended;

    Lane(Session session, int id) {
        this.session = session;
        this.id = id;
        this.thread = Thread.ofPlatform().daemon().name("gpusockets-s" + session.id() + "-lane" + id).unstarted(this);
    }

    void start() {
        thread.start();
    }

    void enqueue(Inbound in) {
        queue.add(in);
    }

    /** Asks the lane to finish what is queued and stop. */
    void end() {
        ended = true;
        queue.add(new Inbound(new FrameHeader(0, Opcodes.LANE_END, 0, id, 0), null, 0));
    }

    void interrupt() {
        thread.interrupt();
    }

    boolean join(long millis) throws InterruptedException {
        thread.join(millis);
        return !thread.isAlive();
    }

    @Override
    public void run() {
        try (Arena arena = Arena.ofConfined()) {
            scratch = arena.allocate(SCRATCH_BYTES, 16);
            staging = arena.allocate(session.chunkBytes(), 4096);
            while (true) {
                Inbound in = queue.take();
                if (in.header().opcode() == Opcodes.LANE_END) {
                    return;
                }
                try {
                    session.dispatcher().execute(this, in);
                } finally {
                    session.release(in);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ProtocolException e) {
            session.fail("lane " + id + ": " + e.getMessage());
        } catch (java.io.IOException e) {
            session.fail("lane " + id + ": connection lost: " + e.getMessage());
        } finally {
            // Whatever is still queued will never run: give its budget back.
            for (Inbound left; (left = queue.poll()) != null; ) {
                session.release(left);
            }
        }
    }

    /**
     * The next DATA frame of request {@code requestId}, taken from this lane's queue by the call that
     * consumes it. Any other frame here means the peer broke the protocol.
     */
    Inbound nextData(long requestId) throws ProtocolException, InterruptedException {
        Inbound in = queue.take();
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
