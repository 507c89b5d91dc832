package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class BodyBudgetTest {
    private static final int CHUNK = 4096;
    private static final int CALL = ApiTable.get().byName("cuCtxSynchronize").opcode();

    private final BodyBudget budget = new BodyBudget(8 * CHUNK, new DataBufferPool(CHUNK));

    private static FrameHeader data(int length) {
        return new FrameHeader(length, Opcodes.DATA, 0, 1, 7);
    }

    private static FrameHeader call(int length) {
        return new FrameHeader(length, CALL, 0, 1, 7);
    }

    /** Tiny DATA frames must not pin chunk-sized charges: each costs the buffer it really takes. */
    @Test
    void chargesSmallDataFramesTheBufferTheyTake() {
        assertEquals(DataBufferPool.MIN_BUFFER, budget.charge(data(0)));
        assertEquals(DataBufferPool.MIN_BUFFER, budget.charge(data(1)));
        assertEquals(DataBufferPool.MIN_BUFFER, budget.charge(data(DataBufferPool.MIN_BUFFER)));
        assertEquals(2 * DataBufferPool.MIN_BUFFER, budget.charge(data(DataBufferPool.MIN_BUFFER + 1)));
        assertEquals(CHUNK, budget.charge(data(CHUNK / 2 + 1)));
        assertEquals(CHUNK, budget.charge(data(CHUNK)));
    }

    @Test
    void aWaitForBudgetEndsWhenThePeerIsGone() throws Exception {
        java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean();
        BodyBudget b = new BodyBudget(8 * CHUNK, new DataBufferPool(CHUNK), gone::get);
        b.acquire(8 * CHUNK);
        java.util.concurrent.CompletableFuture<Throwable> waiter = new java.util.concurrent.CompletableFuture<>();
        Thread reader = Thread.ofPlatform().start(() -> {
            try {
                b.acquire(BodyBudget.MIN_CHARGE);
                waiter.complete(null);
            } catch (Throwable t) {
                waiter.complete(t);
            }
        });
        assertFalse(waiter.isDone());
        gone.set(true);
        Throwable t = waiter.get(10, TimeUnit.SECONDS);
        assertTrue(t instanceof java.io.IOException, "the wait did not end with the peer: " + t);
        reader.join(5000);
        assertEquals(0, b.available(), "a wait that gave up took budget");
    }

    @Test
    void chargesLargerDataFramesAndCallsTheirLength() {
        assertEquals(CHUNK + 1, budget.charge(data(CHUNK + 1)));
        assertEquals(1000, budget.charge(call(1000)));
    }

    @Test
    void chargesSmallCallsAtLeastTheMinimum() {
        assertEquals(BodyBudget.MIN_CHARGE, budget.charge(call(0)));
        assertEquals(BodyBudget.MIN_CHARGE, budget.charge(call(3)));
    }

    @Test
    void releaseGivesBackWhatAcquireTook() throws Exception {
        budget.acquire(CHUNK);
        budget.acquire(100);
        assertEquals(8 * CHUNK - CHUNK - 100, budget.available());
        budget.release(100);
        budget.release(CHUNK);
        budget.release(0);
        assertEquals(8 * CHUNK, budget.available());
    }

    @Test
    void blocksWhenExhaustedAndResumesOnRelease() throws Exception {
        budget.acquire(8 * CHUNK);
        CountDownLatch got = new CountDownLatch(1);
        Thread reader = Thread.ofPlatform().start(() -> {
            try {
                budget.acquire(BodyBudget.MIN_CHARGE);
                got.countDown();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        assertFalse(got.await(200, TimeUnit.MILLISECONDS), "acquire returned with the budget used up");
        budget.release(CHUNK);
        assertTrue(got.await(5, TimeUnit.SECONDS), "acquire still blocked after a release");
        reader.join(5000);
        assertEquals(CHUNK - BodyBudget.MIN_CHARGE, budget.available());
    }
}
