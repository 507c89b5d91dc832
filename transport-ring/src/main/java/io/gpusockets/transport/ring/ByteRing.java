package io.gpusockets.transport.ring;

import static io.gpusockets.transport.ring.RingDescriptor.CONSUMER_WAITING_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.HEADER_LENGTH;
import static io.gpusockets.transport.ring.RingDescriptor.HEAD_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.LENGTH_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.LOW_WORD;
import static io.gpusockets.transport.ring.RingDescriptor.PRODUCER_WAITING_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.TAIL_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.TYPE_DATA;
import static io.gpusockets.transport.ring.RingDescriptor.TYPE_OFFSET;
import static io.gpusockets.transport.ring.RingDescriptor.TYPE_PADDING;
import static io.gpusockets.transport.ring.RingDescriptor.recordLength;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;

/**
 * One direction of a connection: a single-producer/single-consumer byte ring laid out as
 * {@link RingDescriptor} describes. Non-blocking: {@link #write} and {@link #read} move what they can and
 * return the byte count (0 = nothing possible now), leaving waiting to the caller's {@link IdleStrategy}
 * and the two {@link Doorbell}s. A process uses one instance as producer or as consumer, never both,
 * and calls each role from one thread at a time.
 */
final class ByteRing {
    /** {@link #read} result for a record header that cannot be valid: the peer is broken or hostile. */
    static final int CORRUPT = -1;

    private static final VarHandle LONG = JAVA_LONG.varHandle();

    private final MemorySegment meta;
    private final MemorySegment data;
    private final long tailOffset;
    private final long headOffset;
    private final long capacity;
    private final long mask;
    private final long maxPiece;
    private final Doorbell dataBell;
    private final Doorbell spaceBell;

    // producer-local
    private long tail;
    private long headSeen;
    // consumer-local
    private long head;
    private long tailSeen;
    private long recordIndex;
    private long recordRemaining;
    private long recordEnd;

    /** {@code meta} is the metadata page, {@code ring} the ring's index in it, {@code data} its data area. */
    ByteRing(MemorySegment meta, int ring, MemorySegment data) {
        // pieces well below the capacity let the consumer copy one while the producer fills the next
        this(meta, ring, data, Math.min(data.byteSize() / 4, 256 << 10));
    }

    /** {@code maxPiece}: the most payload bytes in one record. */
    ByteRing(MemorySegment meta, int ring, MemorySegment data, long maxPiece) {
        this.capacity = data.byteSize();
        RingDescriptor.checkCapacity(capacity);
        this.meta = meta;
        this.data = data;
        long base = RingDescriptor.ringMetaOffset(ring);
        this.tailOffset = base + TAIL_OFFSET;
        this.headOffset = base + HEAD_OFFSET;
        this.mask = capacity - 1;
        this.maxPiece = maxPiece;
        long flags = RingDescriptor.waitingFlagsOffset(ring);
        this.dataBell = new Doorbell(meta, tailOffset + LOW_WORD, flags + CONSUMER_WAITING_OFFSET);
        this.spaceBell = new Doorbell(meta, headOffset + LOW_WORD, flags + PRODUCER_WAITING_OFFSET);
        this.tail = (long) LONG.getAcquire(meta, tailOffset);
        this.headSeen = (long) LONG.getAcquire(meta, headOffset);
        this.head = headSeen;
        this.tailSeen = tail;
    }

    long capacity() {
        return capacity;
    }

    /** Where the consumer sleeps while the ring is empty. */
    Doorbell dataBell() {
        return dataBell;
    }

    /** Where the producer sleeps while the ring is full. */
    Doorbell spaceBell() {
        return spaceBell;
    }

    /** The futex value of HEAD as the producer last saw it. */
    int headWordSeen() {
        return (int) headSeen;
    }

    /** The futex value of TAIL as the consumer last saw it. */
    int tailWordSeen() {
        return (int) tailSeen;
    }

    // ---- producer ----

    /**
     * Copies as many remaining bytes of {@code srcs} as fit, in order, advancing their positions, and
     * publishes each record as it is written. Returns the bytes taken, 0 when the ring is full.
     */
    long write(ByteBuffer[] srcs) {
        long taken = 0;
        int first = 0;
        while (true) {
            while (first < srcs.length && !srcs[first].hasRemaining()) {
                first++;
            }
            if (first == srcs.length) {
                return taken;
            }
            long free = capacity - (tail - headSeen);
            if (free < HEADER_LENGTH + RingDescriptor.ALIGNMENT) {
                headSeen = (long) LONG.getAcquire(meta, headOffset);
                free = capacity - (tail - headSeen);
                if (free < HEADER_LENGTH + RingDescriptor.ALIGNMENT) {
                    return taken;
                }
            }
            long index = tail & mask;
            long toEnd = capacity - index;
            if (toEnd < HEADER_LENGTH + RingDescriptor.ALIGNMENT) {
                if (free < toEnd + HEADER_LENGTH + RingDescriptor.ALIGNMENT) {
                    headSeen = (long) LONG.getAcquire(meta, headOffset);
                    if (capacity - (tail - headSeen) < toEnd + HEADER_LENGTH + RingDescriptor.ALIGNMENT) {
                        return taken;
                    }
                }
                data.set(JAVA_INT, index + LENGTH_OFFSET, (int) (toEnd - HEADER_LENGTH));
                data.set(JAVA_INT, index + TYPE_OFFSET, TYPE_PADDING);
                tail += toEnd;
                continue;
            }
            long room = Math.min(free, toEnd) - HEADER_LENGTH;
            long payload = Math.min(room, Math.min(maxPiece, remaining(srcs, first, room)));
            long at = index + HEADER_LENGTH;
            for (long left = payload; left > 0; ) {
                ByteBuffer src = srcs[first];
                int n = (int) Math.min(left, src.remaining());
                MemorySegment.copy(MemorySegment.ofBuffer(src), 0, data, at, n);
                src.position(src.position() + n);
                at += n;
                left -= n;
                if (!src.hasRemaining()) {
                    first++;
                }
            }
            data.set(JAVA_INT, index + LENGTH_OFFSET, (int) payload);
            data.set(JAVA_INT, index + TYPE_OFFSET, TYPE_DATA);
            tail += recordLength(payload);
            LONG.setRelease(meta, tailOffset, tail);
            dataBell.ring();
            taken += payload;
        }
    }

    /** Remaining bytes from {@code srcs[first]} on, counting no further than {@code cap}. */
    private static long remaining(ByteBuffer[] srcs, int first, long cap) {
        long sum = 0;
        for (int i = first; i < srcs.length && sum < cap; i++) {
            sum += srcs[i].remaining();
        }
        return sum;
    }

    // ---- consumer ----

    /**
     * Copies available bytes into {@code dst}, up to its limit. Returns the bytes copied, 0 when the ring
     * is empty, or {@link #CORRUPT}.
     */
    int read(ByteBuffer dst) {
        int copied = 0;
        while (dst.hasRemaining()) {
            if (recordRemaining == 0) {
                if (head == tailSeen) {
                    tailSeen = (long) LONG.getAcquire(meta, tailOffset);
                    if (head == tailSeen) {
                        return copied;
                    }
                }
                long index = head & mask;
                int length = data.get(JAVA_INT, index + LENGTH_OFFSET);
                int type = data.get(JAVA_INT, index + TYPE_OFFSET);
                long record = recordLength(length);
                if (length < 0 || (type != TYPE_DATA && type != TYPE_PADDING) || index + record > capacity
                        || head + record > tailSeen) {
                    return CORRUPT;
                }
                if (type == TYPE_PADDING || length == 0) {
                    release(head + record);
                    continue;
                }
                recordIndex = index + HEADER_LENGTH;
                recordRemaining = length;
                recordEnd = head + record;
            }
            int n = (int) Math.min(recordRemaining, dst.remaining());
            MemorySegment.copy(data, recordIndex, MemorySegment.ofBuffer(dst), 0, n);
            dst.position(dst.position() + n);
            recordIndex += n;
            recordRemaining -= n;
            copied += n;
            if (recordRemaining == 0) {
                release(recordEnd);
            }
        }
        return copied;
    }

    /** Whether the consumer has bytes it has not read, as far as it last looked. */
    boolean hasUnread() {
        return recordRemaining > 0 || head != (long) LONG.getAcquire(meta, tailOffset);
    }

    private void release(long newHead) {
        head = newHead;
        LONG.setRelease(meta, headOffset, newHead);
        spaceBell.ring();
    }
}
