package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.transport.HeapWindow;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class SessionWindowTest {
    private static final long SIZE = 1 << 20;
    private static final long SLOT = 64 << 10;
    private static final int SLOTS = 2;

    /** Page-locking answered with {@code register}; counts the calls. */
    static final class PinDriver extends UnsupportedCudaDriver {
        volatile int register = CuResult.CUDA_SUCCESS;
        int registers;
        int unregisters;

        @Override
        public synchronized int cuMemHostRegister(MemorySegment p, long bytesize, int flags) {
            registers++;
            return flags == SessionWindow.MEMHOSTREGISTER_PORTABLE ? register : CuResult.CUDA_ERROR_INVALID_VALUE;
        }

        @Override
        public synchronized int cuMemHostUnregister(MemorySegment p) {
            unregisters++;
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxPushCurrent(long ctx) {
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuCtxPopCurrent(MemorySegment pctx) {
            return CuResult.CUDA_SUCCESS;
        }
    }

    private final HeapWindow shared = new HeapWindow(SIZE);
    private final AtomicBoolean gone = new AtomicBoolean();
    private final PinDriver driver = new PinDriver();
    private final SessionWindow window = new SessionWindow(1, shared, driver, gone::get);

    /** Fills every output slot, so that the next one waits for the frontend. */
    private void fillOutputSlots() throws Exception {
        for (int i = 0; i < SLOTS; i++) {
            assertEquals(WindowSlots.outputSlotOffset(SIZE, i, SLOT), window.nextOutputSlot(SLOTS, SLOT));
            window.outputSent(SLOT);
        }
    }

    private CompletableFuture<Long> nextSlotElsewhere(SessionWindow w) {
        CompletableFuture<Long> f = new CompletableFuture<>();
        Thread.ofPlatform().daemon().start(() -> {
            try {
                f.complete(w.nextOutputSlot(SLOTS, SLOT));
            } catch (Exception e) {
                f.completeExceptionally(e);
            }
        });
        return f;
    }

    @Test
    void outputSlotsAreReusedOnceTheFrontendTookThem() throws Exception {
        fillOutputSlots();
        CompletableFuture<Long> next = nextSlotElsewhere(window);
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS), "a slot still in use was handed out");
        WindowSlots.publish(shared.segment(), WindowSlots.OUT_TAKEN_OFFSET, 1);
        assertEquals(WindowSlots.outputSlotOffset(SIZE, 0, SLOT), next.get(5, TimeUnit.SECONDS));
        assertEquals(SLOTS * SLOT, window.bytes());
    }

    @Test
    void slotWaitEndsWhenTheSessionIsGone() throws Exception {
        fillOutputSlots();
        CompletableFuture<Long> next = nextSlotElsewhere(window);
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS));
        gone.set(true);
        ExecutionException e = assertThrows(ExecutionException.class, () -> next.get(5, TimeUnit.SECONDS));
        assertInstanceOf(java.io.IOException.class, e.getCause());
    }

    @Test
    void slotWaitEndsWhenTheSessionEnds() throws Exception {
        SessionTestKit.QuietConnection c = new SessionTestKit.QuietConnection();
        Session s = SessionTestKit.session(driver, SessionTestKit.settings(), shared, c);
        SessionWindow w = s.window();
        for (int i = 0; i < SLOTS; i++) {
            w.nextOutputSlot(SLOTS, SLOT);
            w.outputSent(1);
        }
        CompletableFuture<Long> next = nextSlotElsewhere(w);
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS));
        s.end("test");
        ExecutionException e = assertThrows(ExecutionException.class, () -> next.get(5, TimeUnit.SECONDS));
        assertInstanceOf(java.io.IOException.class, e.getCause());
        assertTrue(shared.released(), "the window was not unmapped at the session's end");
    }

    @Test
    void slotWaitEndsWhenThePeerCloses() throws Exception {
        SessionTestKit.QuietConnection c = new SessionTestKit.QuietConnection();
        SessionWindow w = SessionTestKit.session(driver, SessionTestKit.settings(), shared, c).window();
        for (int i = 0; i < SLOTS; i++) {
            w.nextOutputSlot(SLOTS, SLOT);
            w.outputSent(1);
        }
        CompletableFuture<Long> next = nextSlotElsewhere(w);
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS));
        c.peerClosed = true;
        ExecutionException e = assertThrows(ExecutionException.class, () -> next.get(5, TimeUnit.SECONDS));
        assertInstanceOf(java.io.IOException.class, e.getCause());
    }

    @Test
    void interruptedSlotWaitThrowsInterruptedException() throws Exception {
        fillOutputSlots();
        CompletableFuture<Throwable> failure = new CompletableFuture<>();
        Thread t = Thread.ofPlatform().daemon().start(() -> {
            try {
                window.nextOutputSlot(SLOTS, SLOT);
                failure.complete(null);
            } catch (Exception e) {
                failure.complete(e);
            }
        });
        Thread.sleep(100);
        t.interrupt();
        assertInstanceOf(InterruptedException.class, failure.get(5, TimeUnit.SECONDS));
    }

    @Test
    void dataResolvesAReferenceInsideTheWindowAndChargesTheMinimum() throws Exception {
        BodyBudget budget = new BodyBudget(1 << 20, new DataBufferPool(4096));
        FrameHeader h = new FrameHeader(16, Opcodes.DATA, FrameHeader.FLAG_WINDOW, 1, 9);
        shared.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, WindowSlots.CONTROL_BYTES, (byte) 42);
        Inbound in = window.data(h, WindowSlots.ref(WindowSlots.CONTROL_BYTES, 1000), budget);
        assertEquals(1000, in.body().remaining());
        assertEquals(42, in.body().get(0));
        assertEquals(BodyBudget.MIN_CHARGE, in.charge());
        assertEquals((1 << 20) - BodyBudget.MIN_CHARGE, budget.available());
        assertEquals(1000, window.bytes());
    }

    @Test
    void dataRejectsReferencesOutsideTheWindow() {
        BodyBudget budget = new BodyBudget(1 << 20, new DataBufferPool(4096));
        FrameHeader h = new FrameHeader(16, Opcodes.DATA, FrameHeader.FLAG_WINDOW, 1, 9);
        assertThrows(ProtocolException.class, () -> window.data(h, WindowSlots.ref(0, 16), budget), "control page");
        assertThrows(ProtocolException.class, () -> window.data(h, WindowSlots.ref(SIZE - 10, 100), budget), "past the end");
        assertThrows(ProtocolException.class, () -> window.data(h, WindowSlots.ref(SIZE + 4096, 1), budget), "beyond");
        assertThrows(ProtocolException.class, () -> window.data(h, WindowSlots.ref(8192, 0), budget), "empty");
        assertEquals(1 << 20, budget.available(), "a rejected reference was charged");
        assertEquals(0, window.bytes());
    }

    @Test
    void inputDonePublishesTheCountForTheFrontend() {
        window.inputDone();
        window.inputDone();
        assertEquals(2, WindowSlots.read(shared.segment(), WindowSlots.IN_RELEASED_OFFSET));
        assertEquals(0, WindowSlots.read(shared.segment(), WindowSlots.OUT_TAKEN_OFFSET));
    }

    @Test
    void pinRefusedOnceIsNotTriedAgain() {
        driver.register = CuResult.CUDA_ERROR_NOT_SUPPORTED;
        assertFalse(window.pin(0xC0));
        assertFalse(window.pin(0xC0));
        assertEquals(1, driver.registers);
        assertEquals(0, window.pinnedIn());
        window.unpin(0);
        assertEquals(0, driver.unregisters);
    }

    @Test
    void pinsOncePortablyAndUnpinsOnlyForItsContext() {
        assertFalse(window.pin(0), "pinned with no current context");
        assertEquals(0, driver.registers);
        assertTrue(window.pin(0xC0));
        assertTrue(window.pin(0xC1), "a pinned window is pinned for every context");
        assertEquals(1, driver.registers);
        window.unpin(0xC1);
        assertEquals(0, driver.unregisters, "unpinned for a context it was not pinned in");
        window.unpin(0xC0);
        assertEquals(1, driver.unregisters);
        assertEquals(0, window.pinnedIn());
    }

    @Test
    void pinningIsChargedToTheTenantsPinnedLimitAndPastItTheWindowStaysUnpinned() {
        io.gpusockets.backend.tenant.Tenant t = new io.gpusockets.backend.tenant.Tenant("t",
                new io.gpusockets.backend.tenant.TenantLimits(Long.MAX_VALUE, 9, 9, 9, 9, SIZE, 0));
        window.pinQuota(new SessionQuota(1, t));
        assertTrue(window.pin(0xC0));
        assertEquals(SIZE, t.pinnedUsed());
        window.unpin(0xC0);
        assertEquals(0, t.pinnedUsed());

        assertTrue(t.reservePinned(1)); // another session of the tenant holds a byte: no room for the window
        SessionWindow other = new SessionWindow(2, new HeapWindow(SIZE), driver, gone::get);
        other.pinQuota(new SessionQuota(2, t));
        assertFalse(other.pin(0xC0));
        assertEquals(1, driver.registers, "the driver was not asked");
        assertEquals(1, t.pinnedUsed());
        assertEquals(1, t.rejections().get("pinned"));
    }

    @Test
    void sessionWithoutWindowHasNone() {
        assertNull(SessionTestKit.session(driver).window());
        assertEquals(0, SessionTestKit.session(driver).windowBytes());
    }
}
