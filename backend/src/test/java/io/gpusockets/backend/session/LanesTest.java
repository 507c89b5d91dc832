package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.ProtocolException;
import java.nio.ByteBuffer;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class LanesTest {

    /** cuCtxSynchronize waits until released or interrupted (or, when {@code deaf}, only until released). */
    static class BlockingSync extends UnsupportedCudaDriver {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        volatile boolean interrupted;
        volatile boolean deaf;

        @Override
        public int cuCtxSetCurrent(long ctx) {
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxSynchronize() {
            entered.countDown();
            while (true) {
                try {
                    release.await();
                    return CuResult.CUDA_SUCCESS;
                } catch (InterruptedException e) {
                    interrupted = true;
                    if (!deaf) {
                        return CuResult.CUDA_ERROR_UNKNOWN;
                    }
                }
            }
        }
    }

    private static Inbound sync(int lane) {
        int op = ApiTable.get().byName("cuCtxSynchronize").opcode();
        return new Inbound(new FrameHeader(0, op, 0, lane, 1), ByteBuffer.allocate(0), 0);
    }

    @Test
    void refusesALaneBeyondTheLimitWithTheLimitInTheMessage() throws Exception {
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits two = new SessionLimits(2, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(), d.maxBulkBytes(),
                d.maxOutBytes(), true);
        Session s = SessionTestKit.session(new BlockingSync(), SessionTestKit.settings().withLimits(two), null,
                new SessionTestKit.QuietConnection());
        Lanes lanes = s.lanes();
        Lane first = lanes.lane(1);
        lanes.lane(2);
        assertSame(first, lanes.lane(1), "a known lane is not made again");
        ProtocolException e = assertThrows(ProtocolException.class, () -> lanes.lane(3));
        assertEquals("too many lanes: max=2", e.getMessage());
        assertEquals(2, lanes.size());
    }

    @Test
    void laneEndRemovesTheLaneAndIgnoresUnknownIds() throws Exception {
        Lanes lanes = SessionTestKit.session(new BlockingSync()).lanes();
        Lane first = lanes.lane(5);
        lanes.end(5);
        lanes.end(99);
        assertEquals(0, lanes.size());
        assertNotSame(first, lanes.lane(5), "an ended lane's id starts a new lane");
    }

    @Test
    void endAllInterruptsALaneStuckInACallAndWaitsForIt() throws Exception {
        BlockingSync driver = new BlockingSync();
        Lanes lanes = SessionTestKit.session(driver).lanes();
        Lane lane = lanes.lane(1);
        lane.enqueue(sync(1));
        assertTrue(driver.entered.await(5, TimeUnit.SECONDS));
        long start = System.nanoTime();
        boolean stuck = lanes.endAll(100, 5000);
        assertTrue(System.nanoTime() - start >= 100_000_000L, "the lane was not given its time to finish");
        assertFalse(stuck, "an interrupted lane that stopped counts as stuck");
        assertTrue(driver.interrupted, "the lane was not interrupted");
        assertTrue(lane.join(0), "endAll returned before the lane's thread ended");
        assertEquals(0, lanes.size());
    }

    @Test
    void endAllReportsALaneThatDoesNotStop() throws Exception {
        BlockingSync driver = new BlockingSync();
        driver.deaf = true;
        Lanes lanes = SessionTestKit.session(driver).lanes();
        Lane lane = lanes.lane(1);
        lane.enqueue(sync(1));
        assertTrue(driver.entered.await(5, TimeUnit.SECONDS));
        try {
            assertTrue(lanes.endAll(50, 100), "a lane still in the driver was not reported");
            assertTrue(driver.interrupted);
        } finally {
            driver.release.countDown();
        }
        assertTrue(lane.join(5000));
    }

    @Test
    void endAllWithIdleLanesDoesNotWait() throws Exception {
        Lanes lanes = SessionTestKit.session(new BlockingSync()).lanes();
        lanes.lane(1);
        lanes.lane(2).enqueue(new Inbound(new FrameHeader(0, io.gpusockets.protocol.wire.Opcodes.DATA, 0, 2, 1), null, 0));
        long start = System.nanoTime();
        assertFalse(lanes.endAll());
        assertTrue(System.nanoTime() - start < 1_000_000_000L, "idle lanes took the stuck-lane wait");
    }
}
