package io.gpusockets.transport.ring;

import java.nio.ByteOrder;

/**
 * Layout of the shared mapping behind one {@code ring://} connection: a metadata page followed by two
 * single-producer/single-consumer byte rings, client-to-server first. All offsets are in bytes from
 * the start of the mapping; every field is native-endian.
 *
 * <pre>
 * Metadata page (4096 bytes):
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                    MAGIC "GPURING1" (64)                      |   0
 *  +---------------------------------------------------------------+
 *  |                       VERSION (32)                            |   8
 *  +---------------------------------------------------------------+
 *  |                 CAPACITY of each ring (64)                    |  16
 *  +---------------------------------------------------------------+
 *  |                 WINDOW bytes (64), 0 for none                 |  24
 *  +---------------------------------------------------------------+
 *  |          SERVER_CLOSED (32)  |  ...  CLIENT_CLOSED (32)       | 128 / 132 (written once each)
 *  +---------------------------------------------------------------+
 *  | ring r (r = 0 client-to-server, r = 1 server-to-client), base = 256 + 256 * r:
 *  |   base +   0  TAIL (64), producer's cache lines: only the producer writes here
 *  |   base + 128  HEAD (64), consumer's cache lines: only the consumer writes here
 *  +---------------------------------------------------------------+
 *  | ring r's waiter flags, flags = 768 + 256 * r, each on cache lines of its own:
 *  |   flags +   0  PRODUCER_WAITING (32): 1 while the producer sleeps on HEAD (ring full)
 *  |   flags + 128  CONSUMER_WAITING (32): 1 while the consumer sleeps on TAIL (ring empty)
 *  +---------------------------------------------------------------+
 * Data of ring r: 4096 + r * CAPACITY .. 4096 + (r + 1) * CAPACITY, page aligned.
 * Shared window: 4096 + 2 * CAPACITY .. + WINDOW, page aligned: bulk data that frames refer to by
 * offset (see io.gpusockets.protocol.transport.SharedWindow); the rings never touch it.
 * </pre>
 *
 * HEAD and TAIL count bytes since the start and never wrap; a position's index in the data area is
 * {@code position & (CAPACITY - 1)}. Each counter and each flag has 128 bytes to itself (two cache lines,
 * against the adjacent-line prefetcher). The futex words are the low 32 bits of TAIL and HEAD. A side
 * reads the other's waiter flag after every publish ({@link Doorbell}); the flags live apart from the
 * counters so that this read hits its own cache while nobody sleeps, instead of pulling the line the
 * other side writes on every record.
 *
 * <p>A record, 8-byte aligned, never straddling the end of the data area:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                        LENGTH (32)                            |  payload bytes
 *  +---------------------------------------------------------------+
 *  |                         TYPE (32)                             |  DATA or PADDING
 *  +---------------------------------------------------------------+
 *  |                  payload ... padded to 8 bytes               ...
 *  +---------------------------------------------------------------+
 * </pre>
 * The ring carries a byte stream, so record boundaries mean nothing to the reader: a piece that does not
 * fit before the end of the data area is cut to end exactly there; only when the end leaves room for a
 * header alone (8 bytes) does the producer write a PADDING record there and wrap to index 0.
 *
 * <p>Write order: the producer copies the payload, writes the record header with plain stores, then
 * publishes with a release store of TAIL; the consumer reads TAIL with acquire before it reads the
 * record. The consumer frees a record by a release store of HEAD after copying the payload out.
 */
public final class RingDescriptor {
    public static final long MAGIC = 0x3147_4E49_5255_5047L; // "GPURING1" in little-endian bytes
    public static final int VERSION = 3;

    public static final long MAGIC_OFFSET = 0;
    public static final long VERSION_OFFSET = 8;
    public static final long CAPACITY_OFFSET = 16;
    public static final long WINDOW_OFFSET = 24;
    public static final long SERVER_CLOSED_OFFSET = 128;
    public static final long CLIENT_CLOSED_OFFSET = 132;

    public static final int CACHE_LINE_PAIR = 128;
    public static final long RINGS_OFFSET = 256;
    public static final long RING_META_BYTES = 2 * CACHE_LINE_PAIR;
    public static final long TAIL_OFFSET = 0;
    public static final long HEAD_OFFSET = CACHE_LINE_PAIR;
    /** Where the rings' waiter flags start; each ring's take {@link #RING_META_BYTES}. */
    public static final long WAITING_FLAGS_OFFSET = RINGS_OFFSET + 2 * RING_META_BYTES;
    /** Offsets from a ring's {@link #waitingFlagsOffset}. */
    public static final long PRODUCER_WAITING_OFFSET = 0;
    public static final long CONSUMER_WAITING_OFFSET = CACHE_LINE_PAIR;
    /** Where the low 32 bits of a 64-bit counter sit, the futex word. */
    public static final long LOW_WORD = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? 0 : 4;

    public static final long META_BYTES = 4096;

    public static final int HEADER_LENGTH = 8;
    public static final int LENGTH_OFFSET = 0;
    public static final int TYPE_OFFSET = 4;
    public static final int ALIGNMENT = 8;
    public static final int TYPE_DATA = 1;
    public static final int TYPE_PADDING = 2;

    public static final int MIN_CAPACITY = 4096;
    public static final long MAX_CAPACITY = 1L << 30;
    public static final int DEFAULT_CAPACITY = 4 << 20;
    /** Shared window bytes unless configured: four 1 MiB slots each way and their control page. */
    public static final int DEFAULT_WINDOW = 16 << 20;

    /** Ring index of the client-to-server direction; the other is server-to-client. */
    public static final int CLIENT_TO_SERVER = 0;
    public static final int SERVER_TO_CLIENT = 1;

    private RingDescriptor() {
    }

    /** Bytes of the whole mapping for rings of {@code capacity} each and a shared window of {@code window}. */
    public static long mappingBytes(long capacity, long window) {
        checkCapacity(capacity);
        checkWindow(window);
        return META_BYTES + 2 * capacity + window;
    }

    /** Where the shared window starts in the mapping. */
    public static long windowOffset(long capacity) {
        return META_BYTES + 2 * capacity;
    }

    /** A window is 0 (none) or a power of two from 4 KiB to 1 GiB. */
    public static void checkWindow(long window) {
        if (window != 0) {
            try {
                checkCapacity(window);
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("shared window must be 0 or a power of two in [" + MIN_CAPACITY + ", "
                        + MAX_CAPACITY + "]: window=" + window);
            }
        }
    }

    public static long ringMetaOffset(int ring) {
        return RINGS_OFFSET + ring * RING_META_BYTES;
    }

    public static long waitingFlagsOffset(int ring) {
        return WAITING_FLAGS_OFFSET + ring * RING_META_BYTES;
    }

    public static long ringDataOffset(int ring, long capacity) {
        return META_BYTES + ring * capacity;
    }

    /** Record length for a payload: header plus payload, rounded up to the alignment. */
    public static long recordLength(long payload) {
        return align(HEADER_LENGTH + payload);
    }

    public static long align(long bytes) {
        return (bytes + ALIGNMENT - 1) & -ALIGNMENT;
    }

    public static void checkCapacity(long capacity) {
        if (capacity < MIN_CAPACITY || capacity > MAX_CAPACITY || Long.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("ring capacity must be a power of two in [" + MIN_CAPACITY + ", "
                    + MAX_CAPACITY + "]: capacity=" + capacity);
        }
    }
}
