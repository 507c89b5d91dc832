package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class SessionMemoryTest {
    @Test
    void aSpanMayCrossAdjacentVmmMappingsButNoOtherRanges() {
        SessionMemory m = new SessionMemory();
        m.add(new SessionMemory.Range(0x1000, 0x1000, SessionMemory.MAPPING, false));
        m.add(new SessionMemory.Range(0x2000, 0x1000, SessionMemory.MAPPING, false));
        m.add(new SessionMemory.Range(0x4000, 0x1000, SessionMemory.MAPPING, false));   // a gap before it
        m.add(new SessionMemory.Range(0x10000, 0x100, 7, true));
        m.add(new SessionMemory.Range(0x10100, 0x100, 7, true));                        // adjacent allocations
        assertTrue(m.contains(0x1f00, 0x200), "across two adjacent mappings");
        assertTrue(m.contains(0x1000, 0x2000), "both whole");
        assertFalse(m.contains(0x1f00, 0x1200), "into the gap");
        assertFalse(m.contains(0x2f00, 0x1200), "over the gap");
        assertFalse(m.contains(0x100f0, 0x20), "allocations are separate even when adjacent");
        assertFalse(m.contains(0x1f00, Long.MAX_VALUE), "an overflowing span");
        m.remove(0x2000);
        assertFalse(m.contains(0x1f00, 0x200), "an unmapped neighbour");
    }
}
