package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.FrameHeader;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How a session ends when its lanes are blocked: at once for its peer, and never destroying a context a thread is inside. */
class SessionEndTest {
    private static final long CTX = 0xA000;

    /** A cuCtxSynchronize deaf to interrupts, and a record of contexts destroyed. */
    static final class StuckSync extends LanesTest.BlockingSync {
        final List<String> destroyed = new CopyOnWriteArrayList<>();

        StuckSync() {
            deaf = true;
        }

        @Override
        public int cuCtxDestroy(long ctx) {
            destroyed.add(Long.toHexString(ctx) + (entered.getCount() == 0 && release.getCount() != 0 ? " while a lane is inside" : ""));
            return CuResult.CUDA_SUCCESS;
        }
    }

    private static Inbound sync(int lane) {
        int op = ApiTable.get().byName("cuCtxSynchronize").opcode();
        return new Inbound(new FrameHeader(0, op, 0, lane, 1), ByteBuffer.allocate(0), 0);
    }

    private static void await(String what, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting until " + what);
            Thread.sleep(5);
        }
    }

    @Test
    void aContextIsDestroyedOnlyAfterTheLaneInsideTheDriverReturns() throws Exception {
        StuckSync driver = new StuckSync();
        Session s = SessionTestKit.session(driver);
        s.handles().intern(ParamType.CTX, CTX, 0, 0);
        s.lanes().stopWaits(50, 100);
        s.lanes().lane(1).enqueue(sync(1));
        assertTrue(driver.entered.await(10, TimeUnit.SECONDS));
        int before = Session.releasesPending();
        try {
            s.end("test");
            assertEquals(List.of(), driver.destroyed, "the context was destroyed while a lane was inside the driver on it");
            assertTrue(s.releasePending(), "the deferred release is not reported");
            assertEquals(before + 1, Session.releasesPending());
        } finally {
            driver.release.countDown();
        }
        await("the release ran after the lane returned", () -> !s.releasePending());
        assertEquals(List.of("a000"), driver.destroyed);
        assertEquals(0, s.handles().count(ParamType.CTX));
        await("the pending count went down", () -> Session.releasesPending() == before);
    }

    /**
     * A LANE_END takes a lane out of the session's table while its thread still runs what was queued: the
     * session's end must wait for that thread too, else the context it is inside is destroyed under it (or
     * what it makes afterwards outlives the release). Seen as a context left behind by the dispatcher fuzzer.
     */
    @Test
    void aLaneEndedByItsPeerIsWaitedForAtTheSessionsEnd() throws Exception {
        StuckSync driver = new StuckSync();
        Session s = SessionTestKit.session(driver);
        s.handles().intern(ParamType.CTX, CTX, 0, 0);
        s.lanes().stopWaits(50, 100);
        s.lanes().lane(1).enqueue(sync(1));
        assertTrue(driver.entered.await(10, TimeUnit.SECONDS));
        s.lanes().end(1);   // LANE_END behind the call inside the driver
        try {
            s.end("test");
            assertEquals(List.of(), driver.destroyed, "the context was destroyed while an ended lane was inside the driver on it");
            assertTrue(s.releasePending(), "the release waits for the ended lane");
        } finally {
            driver.release.countDown();
        }
        await("the release ran after the ended lane returned", () -> !s.releasePending());
        assertEquals(List.of("a000"), driver.destroyed);
    }

    /** Ended lanes whose threads still run count against the lane limit: a peer cannot pile threads up past it. */
    @Test
    void lanesEndedWhileBusyCountAgainstTheLimitUntilTheirThreadsEnd() throws Exception {
        LanesTest.BlockingSync driver = new LanesTest.BlockingSync();
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits two = new SessionLimits(2, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(), d.maxBulkBytes(),
                d.maxOutBytes(), true);
        Session s = SessionTestKit.session(driver, SessionTestKit.settings().withLimits(two), null,
                new SessionTestKit.QuietConnection());
        try {
            s.lanes().lane(1).enqueue(sync(1));
            assertTrue(driver.entered.await(10, TimeUnit.SECONDS));
            s.lanes().end(1);
            s.lanes().lane(2);
            assertThrows(io.gpusockets.protocol.wire.ProtocolException.class, () -> s.lanes().lane(3),
                    "a third lane while an ended one still runs");
        } finally {
            driver.release.countDown();
        }
        await("the ended lane's thread is gone, and its room with it", () -> {
            try {
                s.lanes().lane(3);
                return true;
            } catch (io.gpusockets.protocol.wire.ProtocolException stillFull) {
                return false;
            }
        });
        s.end("test");
    }

    @Test
    void aSessionWithoutStuckLanesReleasesAtOnce() throws Exception {
        StuckSync driver = new StuckSync();
        Session s = SessionTestKit.session(driver);
        s.handles().intern(ParamType.CTX, CTX, 0, 0);
        s.lanes().lane(1);
        s.end("test");
        assertFalse(s.releasePending());
        assertEquals(List.of("a000"), driver.destroyed);
    }

    /**
     * A lane blocked in a synchronize, and a peer that then sends small DATA frames for it until the
     * body budget is used up and the reader stops reading, then goes: the session must still end.
     */
    @Test
    void aReaderStoppedByAFullBudgetEndsTheSessionWhenThePeerGoes() throws Exception {
        LanesTest.BlockingSync driver = new LanesTest.BlockingSync();
        int budget = 8 << 20;
        try (SessionTestKit.Served s = new SessionTestKit.Served(driver, SessionTestKit.limits(4, budget, 64 << 10, 1 << 20))) {
            s.call("cuCtxSynchronize", 1, 1);
            assertTrue(driver.entered.await(10, TimeUnit.SECONDS));
            Thread writer = Thread.ofPlatform().daemon().start(() -> {
                try {
                    for (int i = 0; i < 2 * budget / 16; i++) {
                        s.data(1, 99, 16);   // 16 bytes each, more of them than the budget could hold at 16 bytes
                    }
                } catch (java.io.IOException gone) {
                    // the test closed the pipe
                }
            });
            await("the budget is used up and the reader waits for it", () -> s.session.bodyBudget().available() < 64 << 10
                    && (s.reader.getState() == Thread.State.WAITING || s.reader.getState() == Thread.State.TIMED_WAITING));
            s.backendEnd.peerClosed = true;   // the frontend vanishes; a transport that can tell says so
            s.peer.close();
            try {
                assertTrue(s.ended(20_000), "the session's reader is still blocked after its peer went");
            } finally {
                driver.release.countDown();
            }
            writer.join(10_000);
        }
    }

    /**
     * A lane thread hit by an Error (OutOfMemoryError making its buffers or inside a call) ends its session, so
     * the frontend sees the connection close: before, the thread died and the session stayed, its frontend
     * waiting for ever for the reply.
     */
    @Test
    void aLaneThreadThatFailsEndsItsSession() throws Exception {
        CudaDriver driver = new io.gpusockets.protocol.api.UnsupportedCudaDriver() {
            @Override
            public int cuCtxSetCurrent(long ctx) {
                return io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
            }

            @Override
            public int cuCtxSynchronize() {
                throw new OutOfMemoryError("test: no memory for this call");
            }
        };
        try (SessionTestKit.Served s = new SessionTestKit.Served(driver, SessionLimits.DEFAULT)) {
            s.call("cuCtxSynchronize", 1, 1);
            assertTrue(s.ended(20_000), "the session stayed after its lane thread failed");
        }
    }
}
