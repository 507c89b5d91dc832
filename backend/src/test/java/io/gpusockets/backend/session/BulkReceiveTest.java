package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import org.junit.jupiter.api.Test;

/** A bulk input (a module image) takes native memory as its bytes arrive, not as its header announces them. */
class BulkReceiveTest {
    private static final int CHUNK = 64 << 10;
    private static final long MAX_BULK = 16 << 20;
    private static final int BUDGET = 8 << 20;

    /** Waits (bounded) until {@code budget} has {@code available} bytes left. */
    private static void awaitBudget(BodyBudget budget, long available) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (budget.available() != available) {
            assertTrue(System.nanoTime() < deadline, "budget never reached " + available + ": " + budget.available());
            Thread.sleep(5);
        }
    }

    @Test
    void announcedModuleImagesCommitOnlyWhatHasArrived() throws Exception {
        try (SessionTestKit.Served s = new SessionTestKit.Served(new UnsupportedCudaDriver() { },
                SessionTestKit.limits(8, BUDGET, CHUNK, MAX_BULK))) {
            int calls = 4;
            for (int lane = 1; lane <= calls; lane++) {
                s.call("cuModuleLoadData", lane, lane, MAX_BULK);  // a 16 MiB image announced ...
                s.data(lane, lane, 1024);                          // ... of which 1 KiB arrives
            }
            // Every DATA frame was taken by its call (its budget came back); the calls themselves still wait for the rest.
            awaitBudget(s.session.bodyBudget(), BUDGET - (long) calls * BodyBudget.MIN_CHARGE);
            long held = s.session.callNativeBytes();
            assertTrue(held <= (long) calls * CHUNK, calls + " announced images of " + MAX_BULK
                    + " bytes with 1 KiB each received hold " + held + " native bytes");
        }
    }

    @Test
    void bulkMemoryIsGivenBackWhenTheSessionEnds() throws Exception {
        SessionTestKit.Served s = new SessionTestKit.Served(new UnsupportedCudaDriver() { },
                SessionTestKit.limits(8, BUDGET, CHUNK, MAX_BULK));
        s.call("cuModuleLoadData", 1, 1, MAX_BULK);
        s.data(1, 1, CHUNK);
        s.data(1, 1, CHUNK);
        s.data(1, 1, 100);
        // The budget alone is no sign that the DATA frames were taken: it is also at this level before they
        // were read. Wait for the bytes to be counted (they are before each frame is given back).
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (s.session.callNativeBytes() < 2L * CHUNK + 100 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        awaitBudget(s.session.bodyBudget(), BUDGET - BodyBudget.MIN_CHARGE);
        assertTrue(s.session.callNativeBytes() >= 2L * CHUNK + 100, "received bytes are not counted");
        s.close();
        assertTrue(s.ended(0));
        assertEquals(0, s.session.callNativeBytes(), "a call abandoned at the session's end kept its bulk memory");
    }
}
