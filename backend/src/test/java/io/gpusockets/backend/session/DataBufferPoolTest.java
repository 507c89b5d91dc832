package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

class DataBufferPoolTest {
    private static final int CHUNK = 4096;
    private final DataBufferPool pool = new DataBufferPool(CHUNK);

    @Test
    void dataBodiesReuseDirectBuffersOfTheirSizeClass() {
        ByteBuffer b = pool.bodyFor(new FrameHeader(CHUNK / 2 + 1, Opcodes.DATA, 0, 1, 1));
        assertTrue(b.isDirect());
        assertEquals(CHUNK, b.capacity());
        assertEquals(CHUNK / 2 + 1, b.limit());
        pool.offer(b);
        assertSame(b, pool.bodyFor(new FrameHeader(CHUNK, Opcodes.DATA, 0, 1, 2)));
        assertEquals(0, pool.freeCount());
    }

    @Test
    void tinyDataBodiesTakeTheSmallestBufferNotAChunk() {
        ByteBuffer b = pool.bodyFor(new FrameHeader(10, Opcodes.DATA, 0, 1, 1));
        assertTrue(b.isDirect());
        assertEquals(DataBufferPool.MIN_BUFFER, b.capacity());
        assertEquals(10, b.limit());
        pool.offer(b);
        assertSame(b, pool.bodyFor(new FrameHeader(DataBufferPool.MIN_BUFFER, Opcodes.DATA, 0, 1, 2)));
    }

    @Test
    void otherBodiesAreNotPooled() {
        ByteBuffer big = pool.bodyFor(new FrameHeader(CHUNK + 1, Opcodes.DATA, 0, 1, 1));
        assertTrue(big.isDirect());
        assertEquals(CHUNK + 1, big.capacity());
        assertEquals(CHUNK + 1, big.limit());
        ByteBuffer call = pool.bodyFor(new FrameHeader(10, ApiTable.get().byName("cuInit").opcode(), 0, 1, 1));
        assertFalse(call.isDirect());
        pool.offer(big);
        pool.offer(call);
        pool.offer(ByteBuffer.allocate(CHUNK));
        pool.offer(null);
        assertEquals(0, pool.freeCount());
    }

    /** A DATA body beyond the chunk is freed as soon as its frame is done with, not when the GC gets to it. */
    @Test
    void aBodyBeyondTheChunkIsFreedWhenGivenBack() {
        java.util.concurrent.atomic.AtomicLong held = new java.util.concurrent.atomic.AtomicLong();
        DataBufferPool counted = new DataBufferPool(CHUNK, held);
        ByteBuffer big = counted.bodyFor(new FrameHeader(3 * CHUNK, Opcodes.DATA, 0, 1, 1));
        assertEquals(3 * CHUNK, held.get());
        counted.offer(big);
        assertEquals(0, held.get());
        assertEquals(0, counted.freeCount());
        org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> big.get(0),
                "the memory of a body given back is still reachable");
    }

    @Test
    void trimFreesTheBuffersWaitingForReuse() {
        java.util.concurrent.atomic.AtomicLong held = new java.util.concurrent.atomic.AtomicLong();
        DataBufferPool counted = new DataBufferPool(CHUNK, held);
        ByteBuffer a = counted.bodyFor(new FrameHeader(CHUNK, Opcodes.DATA, 0, 1, 1));
        ByteBuffer b = counted.bodyFor(new FrameHeader(10, Opcodes.DATA, 0, 1, 2));
        assertEquals(CHUNK + DataBufferPool.MIN_BUFFER, held.get());
        counted.offer(a);
        counted.trim();
        assertEquals(DataBufferPool.MIN_BUFFER, held.get(), "a lent buffer was freed, or a free one kept");
        counted.close();
        counted.offer(b);
        assertEquals(0, held.get(), "a buffer given back after the pool closed was kept");
    }
}
