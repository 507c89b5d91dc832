package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteBuffer;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The session's direct buffers for DATA bodies of up to one chunk, reused across frames: bulk data
 * moves from the transport into native memory the driver copies from, with no allocation (and no
 * GC-freed direct memory) per chunk. Owns the rule of which bodies use them and the buffers given
 * back; at most {@code bodyBudget / chunkBytes} exist per session, since each costs its whole
 * capacity against the {@link BodyBudget}.
 */
final class DataBufferPool {
    private final Queue<ByteBuffer> free = new ConcurrentLinkedQueue<>();
    private final int bufferBytes;

    DataBufferPool(int bufferBytes) {
        this.bufferBytes = bufferBytes;
    }

    /** Capacity of each pooled buffer: the session's chunk size. */
    int bufferBytes() {
        return bufferBytes;
    }

    /** Whether the body of {@code h} is read into a pooled buffer. */
    boolean pools(FrameHeader h) {
        return h.opcode() == Opcodes.DATA && h.length() <= bufferBytes;
    }

    /** A buffer for the body of {@code h}: pooled where {@link #pools} says so, else direct for DATA, heap for calls. */
    ByteBuffer bodyFor(FrameHeader h) {
        if (pools(h)) {
            ByteBuffer b = free.poll();
            if (b == null) {
                b = ByteBuffer.allocateDirect(bufferBytes);
            }
            return b.clear().limit(h.length());
        }
        return h.opcode() == Opcodes.DATA ? ByteBuffer.allocateDirect(h.length()) : ByteBuffer.allocate(h.length());
    }

    /** Takes back a body whose frame is done with, if it is one of ours (null and other buffers are ignored). */
    void offer(ByteBuffer body) {
        if (body != null && body.isDirect() && body.capacity() == bufferBytes) {
            free.offer(body);
        }
    }

    /** Buffers waiting for reuse. */
    int freeCount() {
        return free.size();
    }
}
