package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
}
