package io.gpusockets.transport.ring;

import static io.gpusockets.transport.ring.RingDescriptor.META_BYTES;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Record layout and wrap logic of one ring, producer and consumer as two views of the same memory. */
class ByteRingTest {
    private static final int CAPACITY = 4096;

    private final Arena arena = Arena.ofConfined();
    private final MemorySegment mapping = arena.allocate(META_BYTES + CAPACITY, 4096);
    private final MemorySegment data = mapping.asSlice(META_BYTES, CAPACITY);
    /** Records as large as the ring, so each test controls where records end. */
    private final ByteRing producer = new ByteRing(mapping, 0, data, CAPACITY);
    private final ByteRing consumer = new ByteRing(mapping, 0, data, CAPACITY);

    @AfterEach
    void free() {
        arena.close();
    }

    @Test
    void exactFitFillsTheWholeRingAndTheNextRecordStartsAtZero() {
        byte[] full = bytes(CAPACITY - RingDescriptor.HEADER_LENGTH, 1);
        assertEquals(full.length, producer.write(buffers(full)));
        assertEquals(0, producer.write(buffers(bytes(1, 2))), "a full ring takes nothing");
        assertArrayEquals(full, read(full.length));
        byte[] next = bytes(100, 3);
        assertEquals(100, producer.write(buffers(next)));
        assertEquals(100, data.get(JAVA_INT, RingDescriptor.LENGTH_OFFSET), "second record at index 0");
        assertArrayEquals(next, read(100));
    }

    @Test
    void headerOnlyRoomAtTheEndBecomesAPaddingRecord() {
        byte[] first = bytes(CAPACITY - 2 * RingDescriptor.HEADER_LENGTH, 4); // ends 8 bytes before the end
        producer.write(buffers(first));
        assertArrayEquals(first, read(first.length));
        byte[] second = bytes(100, 5);
        assertEquals(100, producer.write(buffers(second)));
        long pad = CAPACITY - RingDescriptor.HEADER_LENGTH;
        assertEquals(RingDescriptor.TYPE_PADDING, data.get(JAVA_INT, pad + RingDescriptor.TYPE_OFFSET));
        assertEquals(0, data.get(JAVA_INT, pad + RingDescriptor.LENGTH_OFFSET));
        assertEquals(RingDescriptor.TYPE_DATA, data.get(JAVA_INT, RingDescriptor.TYPE_OFFSET));
        assertArrayEquals(second, read(100), "the reader skips the padding");
    }

    @Test
    void aPieceThatDoesNotFitBeforeTheEndIsCutThereAndContinuesAtZero() {
        byte[] first = bytes(3000, 6); // record of 3008 bytes
        producer.write(buffers(first));
        assertArrayEquals(first, read(first.length));
        byte[] second = bytes(2000, 7);
        assertEquals(2000, producer.write(buffers(second)));
        assertEquals(CAPACITY - 3008 - RingDescriptor.HEADER_LENGTH, data.get(JAVA_INT, 3008 + RingDescriptor.LENGTH_OFFSET));
        assertArrayEquals(second, read(2000));
    }

    @Test
    void fullRingTakesWhatFitsAndTheRestAfterTheConsumerFreesRoom() {
        byte[] big = bytes(3 * CAPACITY, 8);
        ByteBuffer src = ByteBuffer.wrap(big);
        long first = producer.write(new ByteBuffer[] {src});
        assertTrue(first > 0 && first < CAPACITY, "took " + first);
        assertEquals(0, producer.write(new ByteBuffer[] {src}));
        ByteBuffer out = ByteBuffer.allocate(big.length);
        while (out.hasRemaining()) {
            consumer.read(out);
            producer.write(new ByteBuffer[] {src});
        }
        assertArrayEquals(big, out.array());
    }

    @Test
    void gatheringWritesAndSmallReadsKeepEveryByteInOrderOverManyWraps() {
        Random random = new Random(7);
        ByteBuffer expected = ByteBuffer.allocate(1 << 20);
        ByteBuffer actual = ByteBuffer.allocate(1 << 20);
        while (expected.hasRemaining()) {
            int parts = 1 + random.nextInt(3);
            ByteBuffer[] srcs = new ByteBuffer[parts];
            for (int i = 0; i < parts; i++) {
                byte[] b = bytes(Math.min(random.nextInt(300), expected.remaining()), random.nextInt());
                expected.put(b);
                srcs[i] = random.nextBoolean() ? ByteBuffer.wrap(b) : ByteBuffer.allocateDirect(b.length).put(b).flip();
            }
            while (java.util.Arrays.stream(srcs).anyMatch(ByteBuffer::hasRemaining)) {
                producer.write(srcs);
                ByteBuffer slice = actual.slice(actual.position(), Math.min(actual.remaining(), 1 + random.nextInt(500)));
                int n = consumer.read(slice);
                assertTrue(n >= 0, "corrupt");
                actual.position(actual.position() + n);
            }
        }
        while (actual.hasRemaining()) {
            assertTrue(consumer.read(actual) > 0, "bytes missing");
        }
        assertArrayEquals(expected.array(), actual.array());
        assertFalse(consumer.hasUnread());
    }

    @Test
    void emptyRingReadsNothing() {
        assertEquals(0, consumer.read(ByteBuffer.allocate(10)));
        assertEquals(0, producer.write(new ByteBuffer[] {ByteBuffer.allocate(0)}));
        assertFalse(consumer.hasUnread());
    }

    @Test
    void corruptHeaderIsReportedNotFollowed() {
        producer.write(buffers(bytes(16, 9)));
        data.set(JAVA_INT, RingDescriptor.TYPE_OFFSET, 77);
        assertEquals(ByteRing.CORRUPT, consumer.read(ByteBuffer.allocate(16)));
        data.set(JAVA_INT, RingDescriptor.TYPE_OFFSET, RingDescriptor.TYPE_DATA);
        data.set(JAVA_INT, RingDescriptor.LENGTH_OFFSET, CAPACITY);
        assertEquals(ByteRing.CORRUPT, consumer.read(ByteBuffer.allocate(16)), "length past the published tail");
    }

    @Test
    void capacityMustBeAPowerOfTwoInRange() {
        assertThrows(IllegalArgumentException.class, () -> RingDescriptor.checkCapacity(3 * 4096));
        assertThrows(IllegalArgumentException.class, () -> RingDescriptor.checkCapacity(2048));
        assertThrows(IllegalArgumentException.class, () -> RingDescriptor.checkCapacity(1L << 31));
        assertEquals(4096 + 2 * 65536, RingDescriptor.mappingBytes(65536, 0));
        assertEquals(4096 + 2 * 65536 + (1 << 20), RingDescriptor.mappingBytes(65536, 1 << 20));
        assertEquals(0, RingDescriptor.windowOffset(65536) % 4096, "the window is page aligned");
        assertThrows(IllegalArgumentException.class, () -> RingDescriptor.checkWindow(5000));
        assertThrows(IllegalArgumentException.class, () -> RingDescriptor.checkWindow(-4096));
        assertEquals(0, RingDescriptor.ringDataOffset(0, 65536) % 4096, "data areas are page aligned");
        assertEquals(0, RingDescriptor.ringMetaOffset(1) % RingDescriptor.CACHE_LINE_PAIR);
    }

    @Test
    void waiterFlagsSitOnCacheLinesOfTheirOwnInsideTheMetadataPage() {
        java.util.List<Long> fields = new java.util.ArrayList<>();
        for (int ring = 0; ring < 2; ring++) {
            fields.add(RingDescriptor.ringMetaOffset(ring) + RingDescriptor.TAIL_OFFSET);
            fields.add(RingDescriptor.ringMetaOffset(ring) + RingDescriptor.HEAD_OFFSET);
            fields.add(RingDescriptor.waitingFlagsOffset(ring) + RingDescriptor.PRODUCER_WAITING_OFFSET);
            fields.add(RingDescriptor.waitingFlagsOffset(ring) + RingDescriptor.CONSUMER_WAITING_OFFSET);
        }
        java.util.Set<Long> pairs = new java.util.HashSet<>();
        for (long f : fields) {
            assertTrue(f >= RingDescriptor.RINGS_OFFSET && f + 8 <= META_BYTES, "offset=" + f);
            assertTrue(pairs.add(f / RingDescriptor.CACHE_LINE_PAIR), "shares a cache line pair: offset=" + f);
        }
    }

    private byte[] read(int n) {
        ByteBuffer out = ByteBuffer.allocate(n);
        assertEquals(n, consumer.read(out));
        return out.array();
    }

    private static ByteBuffer[] buffers(byte[] b) {
        return new ByteBuffer[] {ByteBuffer.wrap(b)};
    }

    private static byte[] bytes(int n, int seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }
}
