package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class WindowSlotsTest {

    @Test
    void slotsFitTheirHalfOfTheWindowBesideTheControlPage() {
        long mib = 1 << 20;
        assertEquals(4, WindowSlots.inputSlots(16 * mib, mib));
        assertEquals(4, WindowSlots.outputSlots(16 * mib, mib));
        assertEquals(3, WindowSlots.inputSlots(8 * mib, mib), "the control page takes the room of a fourth");
        assertEquals(4, WindowSlots.outputSlots(8 * mib, mib));
        assertEquals(0, WindowSlots.inputSlots(64 << 10, mib));
        assertEquals(0, WindowSlots.outputSlots(64 << 10, mib));
        assertEquals(4, WindowSlots.inputSlots(1L << 30, mib), "never more than MAX_SLOTS");
        for (long size : new long[] {8 * mib, 16 * mib, 1L << 30}) {
            int in = WindowSlots.inputSlots(size, mib);
            int out = WindowSlots.outputSlots(size, mib);
            long lastIn = WindowSlots.inputSlotOffset(in - 1, mib) + mib;
            assertTrue(WindowSlots.inputSlotOffset(0, mib) >= WindowSlots.CONTROL_BYTES);
            assertTrue(lastIn <= WindowSlots.outputSlotOffset(size, 0, mib), "input slots end before output slots, size " + size);
            assertTrue(WindowSlots.outputSlotOffset(size, out - 1, mib) + mib <= size, "output slots end inside, size " + size);
        }
    }

    @Test
    void countersArePublishedAndReadAtTheirOffsets() {
        MemorySegment w = Arena.ofAuto().allocate(8192, 4096);
        WindowSlots.publish(w, WindowSlots.IN_RELEASED_OFFSET, 7);
        WindowSlots.publish(w, WindowSlots.OUT_TAKEN_OFFSET, 9);
        assertEquals(7, WindowSlots.read(w, WindowSlots.IN_RELEASED_OFFSET));
        assertEquals(9, WindowSlots.read(w, WindowSlots.OUT_TAKEN_OFFSET));
    }

    @Test
    void referencesResolveOnlyPastTheControlPageAndInsideTheWindow() throws Exception {
        MemorySegment w = Arena.ofAuto().allocate(64 << 10, 4096);
        MemorySegment bytes = WindowSlots.resolve(w, WindowSlots.ref(4096, 100));
        assertEquals(w.address() + 4096, bytes.address());
        assertEquals(100, bytes.byteSize());
        assertEquals((64 << 10) - 4096, WindowSlots.resolve(w, WindowSlots.ref(4096, (64 << 10) - 4096)).byteSize());
        long[][] bad = {{0, 16}, {4095, 16}, {4096, 0}, {4096, -1}, {-1, 16}, {60 << 10, 8 << 10},
                {(64 << 10) + 1, 1}, {4096, Long.MAX_VALUE}, {Long.MAX_VALUE, 1}};
        for (long[] r : bad) {
            assertThrows(ProtocolException.class, () -> WindowSlots.resolve(w, WindowSlots.ref(r[0], r[1])),
                    "offset " + r[0] + " length " + r[1]);
        }
    }

    @Test
    void awaitReturnsOnceTheCounterIsThereOrWhenToldToStop() throws Exception {
        MemorySegment w = Arena.ofShared().allocate(8192, 4096);
        assertTrue(WindowSlots.await(w, WindowSlots.IN_RELEASED_OFFSET, 0, () -> true), "already there");
        assertFalse(WindowSlots.await(w, WindowSlots.IN_RELEASED_OFFSET, 1, () -> true), "told to stop");
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
            WindowSlots.publish(w, WindowSlots.IN_RELEASED_OFFSET, 3);
        });
        assertTrue(WindowSlots.await(w, WindowSlots.IN_RELEASED_OFFSET, 3, () -> false));
        t.join();
    }
}
