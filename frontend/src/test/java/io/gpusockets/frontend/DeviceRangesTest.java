package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.api.ApiTable;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DeviceRangesTest {
    private static final ApiTable T = ApiTable.get();
    private static final MemorySegment OUT = MemorySegment.NULL;

    private final List<Long> asked = new ArrayList<>();
    /** What the backend would answer: its live ranges by base. */
    private final Map<Long, Long> backend = new java.util.HashMap<>();
    private final DeviceRanges ranges = new DeviceRanges(p -> {
        asked.add(p);
        for (var e : backend.entrySet()) {
            if (p >= e.getKey() && p < e.getKey() + e.getValue()) {
                return new long[] {e.getKey(), e.getValue()};
            }
        }
        return null;
    });

    private void alloc(long base, long size) {
        ranges.afterCall(T.byName("cuMemAlloc"), new Object[] {OUT, size}, new long[] {base, 0});
        backend.put(base, size);
    }

    @Test
    void learnsAllocationsAndFreesFromTheTable() {
        alloc(0x1000, 256);
        assertTrue(ranges.isDevice(0x1000));
        assertTrue(ranges.isDevice(0x10ff));
        assertFalse(ranges.isDevice(0x1100));
        assertFalse(ranges.isDevice(0xfff));
        // cuMemAllocPitch: alloc=pPitch*Height, the pitch an output
        ranges.afterCall(T.byName("cuMemAllocPitch"), new Object[] {OUT, OUT, 100L, 4L, 4}, new long[] {0x8000, 512, 0, 0, 0});
        assertTrue(ranges.isDevice(0x8000 + 4 * 512 - 1));
        assertFalse(ranges.isDevice(0x8000 + 4 * 512));
        // cuModuleGetGlobal: global=bytes, the size an output
        ranges.afterCall(T.byName("cuModuleGetGlobal"), new Object[] {OUT, OUT, 7L, OUT}, new long[] {0x20000, 64, 0, 0});
        assertTrue(ranges.isDevice(0x20000 + 63));
        ranges.afterCall(T.byName("cuMemFree"), new Object[] {0x1000L}, new long[1]);
        assertFalse(ranges.isDevice(0x1000));
        assertEquals(DeviceRanges.Kind.FREED, ranges.classify(0x1080), "a stale pointer is not taken for guest memory");
        assertEquals(DeviceRanges.Kind.HOST, ranges.classify(0x1100));
        alloc(0x1000, 64);
        assertEquals(DeviceRanges.Kind.DEVICE, ranges.classify(0x1010));
        assertEquals(DeviceRanges.Kind.HOST, ranges.classify(0x1080), "the address was handed out again");
        ranges.afterCall(T.byName("cuMemFree"), new Object[] {0x1000L}, new long[1]);
        // a pipelined call without outputs adds nothing
        ranges.afterCall(T.byName("cuMemAlloc"), new Object[] {OUT, 64L}, null);
        assertEquals(2, ranges.size());
        assertTrue(asked.isEmpty(), "nothing was suspect, so the backend was never asked");
    }

    @Test
    void aDestroyedContextMakesRangesSuspectUntilTheBackendConfirms() {
        alloc(0x1000, 256);
        alloc(0x2000, 256);
        ranges.afterCall(T.byName("cuCtxDestroy"), new Object[] {5L}, new long[1]);
        backend.remove(0x2000L);   // went with the context
        assertTrue(ranges.isDevice(0x1010));
        assertFalse(ranges.isDevice(0x2010));
        assertEquals(List.of(0x1010L, 0x2010L), asked);
        assertTrue(ranges.isDevice(0x1020));
        assertEquals(DeviceRanges.Kind.FREED, ranges.classify(0x2020));
        assertEquals(2, asked.size(), "each range is checked once");
        assertEquals(1, ranges.size());
    }
}
