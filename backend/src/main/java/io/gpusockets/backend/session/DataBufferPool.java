package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The session's direct buffers for DATA bodies of up to one chunk, reused across frames: bulk data
 * moves from the transport into native memory the driver copies from, with no allocation (and no
 * GC-freed direct memory) per chunk. Owns the rule of which bodies use them and the buffers given
 * back. Buffers come in power-of-two sizes from {@link #MIN_BUFFER} up to the chunk (the chunk itself
 * at the top), so a frame takes a buffer at most twice its length (or {@link #MIN_BUFFER}) and the
 * {@link BodyBudget} charges that capacity: what the budget bounds is the memory really held. Each
 * buffer is native memory of an arena of its own, freed when {@link #trim} drops it (the session went
 * idle, or ended), not when the GC gets round to it.
 */
final class DataBufferPool {
    /** The smallest pooled buffer: what a tiny DATA frame costs. */
    static final int MIN_BUFFER = 1024;

    private final int bufferBytes;
    /** Free buffers by size class: class i holds buffers of {@link #capacity(int)} bytes. */
    private final Queue<ByteBuffer>[] free;
    /** Every buffer of this pool, free or lent, and the arena that frees it. */
    private final Map<ByteBuffer, Arena> owned = Collections.synchronizedMap(new IdentityHashMap<>());
    /** The session's count of host buffer bytes, which these buffers are part of. */
    private final AtomicLong held;
    private volatile boolean closed;

    DataBufferPool(int bufferBytes) {
        this(bufferBytes, new AtomicLong());
    }

    /** {@code held}: where the bytes of the buffers in existence are counted. */
    @SuppressWarnings("unchecked")
    DataBufferPool(int bufferBytes, AtomicLong held) {
        this.bufferBytes = bufferBytes;
        this.held = held;
        this.free = new Queue[classOf(bufferBytes) + 1];
        for (int i = 0; i < free.length; i++) {
            free[i] = new ConcurrentLinkedQueue<>();
        }
    }

    /** Capacity of the largest pooled buffer: the session's chunk size. */
    int bufferBytes() {
        return bufferBytes;
    }

    /** Whether the body of {@code h} is read into a pooled buffer. */
    boolean pools(FrameHeader h) {
        return h.opcode() == Opcodes.DATA && h.length() <= bufferBytes;
    }

    /** The capacity of the pooled buffer a body of {@code length} bytes (at most the chunk) takes. */
    int capacityFor(int length) {
        return capacity(classOf(Math.max(length, 1)));
    }

    /**
     * A buffer for the body of {@code h}: pooled where {@link #pools} says so, else native memory of its
     * own for DATA (freed by {@link #offer}), heap for calls.
     */
    ByteBuffer bodyFor(FrameHeader h) {
        if (pools(h)) {
            int c = classOf(Math.max(h.length(), 1));
            ByteBuffer b = free[c].poll();
            if (b == null) {
                Arena a = Arena.ofShared();
                b = a.allocate(capacity(c), 64).asByteBuffer();
                owned.put(b, a);
                held.addAndGet(capacity(c));
            }
            return b.clear().limit(h.length());
        }
        if (h.opcode() != Opcodes.DATA) {
            return ByteBuffer.allocate(h.length());
        }
        // A DATA body beyond the chunk: native memory of its own, freed as soon as the frame is done with.
        Arena a = Arena.ofShared();
        ByteBuffer b = a.allocate(Math.max(h.length(), 1), 64).asByteBuffer().limit(h.length());
        owned.put(b, a);
        held.addAndGet(b.capacity());
        return b;
    }

    /** Takes back a body whose frame is done with, if it is one of ours (null and other buffers are ignored). */
    void offer(ByteBuffer body) {
        if (body == null || !owned.containsKey(body)) {
            return;
        }
        if (body.capacity() > bufferBytes) {
            Arena a = owned.remove(body);
            if (a != null) {
                a.close();
                held.addAndGet(-body.capacity());
            }
            return;
        }
        free[classOf(body.capacity())].offer(body);
        if (closed) {
            trim();
        }
    }

    /** The session is over: frees the buffers waiting for reuse now, and each one lent out when it comes back. */
    void close() {
        closed = true;
        trim();
    }

    /** Frees every buffer waiting for reuse (those lent to frames stay until given back). */
    void trim() {
        for (Queue<ByteBuffer> q : free) {
            for (ByteBuffer b; (b = q.poll()) != null; ) {
                Arena a = owned.remove(b);
                if (a != null) {
                    a.close();
                    held.addAndGet(-b.capacity());
                }
            }
        }
    }

    /** Buffers waiting for reuse. */
    int freeCount() {
        int n = 0;
        for (Queue<ByteBuffer> q : free) {
            n += q.size();
        }
        return n;
    }

    /** The size class of a body of {@code length} (1..chunk) bytes. */
    private int classOf(int length) {
        if (length <= MIN_BUFFER) {
            return 0;
        }
        int c = 32 - Integer.numberOfLeadingZeros(length - 1) - Integer.numberOfTrailingZeros(MIN_BUFFER);
        int top = 32 - Integer.numberOfLeadingZeros(bufferBytes - 1) - Integer.numberOfTrailingZeros(MIN_BUFFER);
        return Math.min(c, top);
    }

    /** The capacity of class {@code c}: MIN_BUFFER doubled c times, the chunk at most. */
    private int capacity(int c) {
        return (int) Math.min((long) MIN_BUFFER << c, bufferBytes);
    }
}
