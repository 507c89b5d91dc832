package io.gpusockets.frontend;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Sends frames, batching small pipelined ones: a frame sent without waiting for a reply (an async
 * launch, an event record) waits here for at most {@link #DELAY_NANOS} and leaves together with the
 * others in one write, instead of a system call each. Any other frame first sends what is waiting,
 * so each lane's frames stay in order and a synchronising call always follows the work before it.
 * System property {@code gpusockets.batch.micros}: the delay (default 20; 0 turns batching off).
 */
final class FrameBatcher implements AutoCloseable {
    static final long DELAY_NANOS = Long.getLong("gpusockets.batch.micros", 20) * 1000;
    /** Frames larger than this are sent at once. */
    static final int MAX_BATCHED_FRAME = 4096;
    static final int CAPACITY = 64 << 10;

    private final FrameChannel channel;
    private final long delayNanos;
    private final ReentrantLock lock = new ReentrantLock();
    private final ByteBuffer batch = ByteBuffer.allocateDirect(CAPACITY).order(ByteOrder.LITTLE_ENDIAN);
    private final Thread flusher;
    private volatile boolean closed;
    /** A write failure seen by the flusher, reported to the next sender. */
    private IOException failure;

    FrameBatcher(FrameChannel channel) {
        this(channel, DELAY_NANOS);
    }

    /** {@code delayNanos} 0: no batching. */
    FrameBatcher(FrameChannel channel, long delayNanos) {
        this.channel = channel;
        this.delayNanos = delayNanos;
        this.flusher = delayNanos > 0
                ? Thread.ofPlatform().daemon().name("gpusockets-batch-flusher").start(this::flushLoop)
                : null;
    }

    void send(int opcode, int flags, int lane, long requestId, ByteBuffer... body) throws IOException {
        long length = 0;
        for (ByteBuffer b : body) {
            length += b.remaining();
        }
        lock.lock();
        try {
            if (failure != null) {
                throw failure;
            }
            if (flusher != null && (flags & FrameHeader.FLAG_NO_REPLY) != 0
                    && length + FrameHeader.BYTES <= MAX_BATCHED_FRAME) {
                if (batch.remaining() < length + FrameHeader.BYTES) {
                    flushLocked();
                }
                boolean wasEmpty = batch.position() == 0;
                FrameChannel.putHeader(batch, (int) length, opcode, flags, lane, requestId);
                for (ByteBuffer b : body) {
                    batch.put(b.duplicate());
                }
                if (wasEmpty) {
                    LockSupport.unpark(flusher);
                }
                return;
            }
            flushLocked();
            channel.send(opcode, flags, lane, requestId, body);
        } finally {
            lock.unlock();
        }
    }

    /** Sends what is waiting now. */
    void flush() throws IOException {
        lock.lock();
        try {
            flushLocked();
        } finally {
            lock.unlock();
        }
    }

    private void flushLocked() throws IOException {
        if (batch.position() == 0) {
            return;
        }
        batch.flip();
        try {
            channel.connection().write(batch);
        } finally {
            batch.clear();
        }
    }

    private void flushLoop() {
        while (!closed) {
            LockSupport.park(this);
            if (closed) {
                return;
            }
            LockSupport.parkNanos(this, delayNanos);
            lock.lock();
            try {
                flushLocked();
            } catch (IOException e) {
                failure = e;
            } finally {
                lock.unlock();
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        if (flusher != null) {
            LockSupport.unpark(flusher);
        }
    }
}
