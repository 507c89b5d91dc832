package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.wire.FrameHeader;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;

/** What a session holds in host buffers while it is idle: a few KiB, whatever it did before. */
class IdleSessionTest {
    private static final long DEVICE = 0x7000_0000L;
    private static final int CHUNK = 64 << 10;

    /** Device-to-host copies that succeed (the bytes are whatever the staging buffer held). */
    static final class CopyingDriver extends UnsupportedCudaDriver {
        @Override
        public int cuCtxSetCurrent(long ctx) {
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuMemcpyDtoH(MemorySegment dst, long src, long n) {
            return CuResult.CUDA_SUCCESS;
        }
    }

    private static void await(String what, LongSupplier value, long atMost) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (value.getAsLong() > atMost) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting until " + what + ": " + value.getAsLong());
            Thread.sleep(10);
        }
    }

    @Test
    void anIdleSessionHoldsAFewKiBAfterCopiesAndData() throws Exception {
        try (SessionTestKit.Served s = new SessionTestKit.Served(new CopyingDriver(),
                SessionTestKit.limits(8, 8 << 20, CHUNK, 1 << 20))) {
            assertTrue(s.session.hostBufferBytes() <= 4096, "a new session holds " + s.session.hostBufferBytes());
            s.session.memory().add(new SessionMemory.Range(DEVICE, 8 << 20, 0, true));
            Semaphore replies = new Semaphore(0);
            Thread drain = Thread.ofPlatform().daemon().start(() -> {
                try {
                    while (true) {
                        FrameHeader h = s.peer.readHeader();
                        s.peer.skipBody(h.length());
                        if (h.isReply()) {
                            replies.release();
                        }
                    }
                } catch (java.io.IOException closed) {
                    // the test is over
                }
            });
            s.call("cuMemcpyDtoH", 1, 1, DEVICE, 10 << 10);      // small: through the lane thread's staging
            s.call("cuMemcpyDtoH", 1, 2, DEVICE, 3 << 20);       // large: through the session's staging pool
            for (int i = 0; i < 16; i++) {
                s.data(2, 9, i % 2 == 0 ? CHUNK : 100);          // DATA of no call: pooled buffers, then dropped
            }
            assertTrue(replies.tryAcquire(2, 15, TimeUnit.SECONDS), "the copies were not answered");
            assertTrue(s.session.hostBufferBytes() > CHUNK, "the copies and data took no buffers: the test proves nothing");
            await("the idle session dropped its buffers", s.session::hostBufferBytes, 4096);
            drain.interrupt();
        }
    }

    @Test
    void anEndedSessionHoldsNoBuffers() throws Exception {
        SessionTestKit.Served s = new SessionTestKit.Served(new CopyingDriver(), SessionTestKit.limits(8, 8 << 20, CHUNK, 1 << 20));
        for (int i = 0; i < 8; i++) {
            s.data(1, 9, CHUNK);
        }
        s.session.staging().release(s.session.staging().acquire(0));
        s.close();
        assertTrue(s.ended(0));
        assertEquals(0, s.session.hostBufferBytes());
    }
}
