package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.HeapWindow;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WindowSlots;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class FrontendWindowTest {
    private static final long SIZE = 1 << 20;
    private static final long SLOT = 64 << 10;

    private final HeapWindow shared = new HeapWindow(SIZE);
    private final FrontendWindow window = new FrontendWindow(shared, SLOT);
    private final int slots = WindowSlots.inputSlots(SIZE, SLOT);

    @Test
    void oneCallHoldsItAtATime() throws Exception {
        assertTrue(window.tryHold(true));
        CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(() -> window.tryHold(false));
        assertFalse(other.get(5, TimeUnit.SECONDS), "a second call got the window while the first held it");
        window.letGo();
        assertTrue(CompletableFuture.supplyAsync(() -> {
            boolean got = window.tryHold(false);
            window.letGo();
            return got;
        }).get(5, TimeUnit.SECONDS));
    }

    @Test
    void inputIsRefusedWhereTheWindowHasNoInputSlots() {
        FrontendWindow tiny = new FrontendWindow(new HeapWindow(4 * WindowSlots.CONTROL_BYTES), SLOT);
        assertFalse(tiny.tryHold(true));
        assertTrue(tiny.tryHold(false), "output only needs no input slot");
    }

    @Test
    void inputSlotsAreTakenInTurnAndReusedOnceTheBackendIsDone() throws Exception {
        assertEquals(WindowSlots.MAX_SLOTS, slots);
        for (int i = 0; i < slots; i++) {
            assertEquals(WindowSlots.inputSlotOffset(i, SLOT), window.nextInputSlot(() -> false));
            window.inputSent();
        }
        CompletableFuture<Long> next = CompletableFuture.supplyAsync(() -> window.nextInputSlot(() -> false));
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS), "a slot still in use was handed out");
        WindowSlots.publish(shared.segment(), WindowSlots.IN_RELEASED_OFFSET, 1);
        assertEquals(WindowSlots.inputSlotOffset(0, SLOT), next.get(5, TimeUnit.SECONDS));
    }

    @Test
    void slotWaitEndsWhenTheBackendIsGone() throws Exception {
        for (int i = 0; i < slots; i++) {
            window.nextInputSlot(() -> false);
            window.inputSent();
        }
        AtomicBoolean gone = new AtomicBoolean();
        CompletableFuture<Long> next = CompletableFuture.supplyAsync(() -> window.nextInputSlot(gone::get));
        assertThrows(TimeoutException.class, () -> next.get(200, TimeUnit.MILLISECONDS));
        gone.set(true);
        assertEquals(-1, next.get(5, TimeUnit.SECONDS));
    }

    @Test
    void outputTakenIsPublishedForTheBackend() {
        window.outputTaken();
        window.outputTaken();
        assertEquals(2, WindowSlots.read(shared.segment(), WindowSlots.OUT_TAKEN_OFFSET));
        assertEquals(0, WindowSlots.read(shared.segment(), WindowSlots.IN_RELEASED_OFFSET));
    }

    @Test
    void referencesOutsideTheWindowAreRejected() throws Exception {
        assertEquals(100, window.resolve(WindowSlots.ref(SIZE / 2, 100)).byteSize());
        assertThrows(ProtocolException.class, () -> window.resolve(WindowSlots.ref(0, 8)));
        assertThrows(ProtocolException.class, () -> window.resolve(WindowSlots.ref(SIZE - 8, 16)));
    }

    @Test
    void closeUnmapsTheWindowWhenNoCallHoldsIt() {
        window.close();
        assertTrue(shared.released());
    }
}
