package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import org.junit.jupiter.api.Test;

/**
 * Windows confined to the guest's managed range ({@link StableAddresses#confine}; issue 25, item 1): device d's window
 * at d window sizes into the range. With address-stable memory ({@code onlyInRange} false) a place there that another
 * session of the process holds, or the process itself maps, sends the window to its slot as without a range; for
 * managed memory alone ({@code onlyInRange} true) it is refused, the failure naming the range and the holder, without
 * waiting. Straight on the emulated device, in the backend's package.
 */
class ConfinedWindowsTest {
    private static final long RANGE = 0x2a00_0000_0000L, RANGE_SIZE = 256L << 30;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle MMAP = LINKER.downcallHandle(LINKER.defaultLookup().find("mmap").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = LINKER.downcallHandle(LINKER.defaultLookup().find("munmap").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));

    private static void ok(int r) {
        assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(r));
    }

    private static long windowSize(EmulatedDevice device, MemorySegment out) {
        ok(device.cuDeviceTotalMem(out, 0));
        return Long.highestOneBit(out.get(JAVA_LONG, 0) - 1) << 1; // as StableAddresses sizes a window
    }

    @Test
    void windowsLieInTheRangeAndATakenPlaceGoesToTheSlotOrIsRefused() throws Throwable {
        String hadWait = System.getProperty(StableAddresses.WAIT_PROPERTY);
        System.setProperty(StableAddresses.WAIT_PROPERTY, "1"); // a restore's wait; a new session's place has none
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            ok(device.cuInit(0));
            ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long ctx = out.get(JAVA_LONG, 0);
            long size = windowSize(device, out);
            ok(device.cuDeviceGetCount(out));
            int devices = out.get(JAVA_INT, 0);

            StableAddresses first = new StableAddresses(device, 1);
            first.confine(RANGE, RANGE_SIZE, false);
            ok(first.cuMemAlloc(out, 4096));
            assertEquals(RANGE, first.windowBase(0), "device 0's window at the range's base");
            long p = out.get(JAVA_LONG, 0);
            assertTrue(p >= RANGE && p < RANGE + size, Long.toHexString(p));

            // another session whose guest range overlaps (another guest process): its window goes to its slot
            StableAddresses second = new StableAddresses(device, 2);
            second.confine(RANGE, RANGE_SIZE, false);
            ok(second.cuMemAlloc(out, 4096));
            long slot = StableWindows.base() + StableAddresses.windowSlot(2, 0, devices, StableWindows.SPAN / size) * size;
            assertEquals(slot, second.windowBase(0), "taken in the range: the window at its slot");
            assertNull(second.placeFailure(), "a window at its slot is no failure");
            second.close();

            // managed memory alone (no address-stable memory): refused, naming the range and the holder
            StableAddresses managed = new StableAddresses(device, 3);
            managed.confine(RANGE, RANGE_SIZE, true);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(managed.cuMemAlloc(out, 4096)));
            String why = managed.placeFailure();
            assertTrue(why.startsWith(String.format("the guest's managed range 0x%x+0x%x is taken in the backend process",
                    RANGE, RANGE_SIZE)) && why.contains("of session 1"), why);
            managed.close();
            first.close();

            // the process itself maps where the window would lie: slot (address-stable) or refusal naming what it maps
            MemorySegment mine = (MemorySegment) MMAP.invokeExact(MemorySegment.ofAddress(RANGE), 1L << 20, 0,
                    0x02 | 0x20 | 0x4000 | 0x100000, -1, 0L);
            assertEquals(RANGE, mine.address(), "the test's own mapping at the range's base");
            try {
                StableAddresses stable = new StableAddresses(device, 4);
                stable.confine(RANGE, RANGE_SIZE, false);
                ok(stable.cuMemAlloc(out, 4096));
                assertEquals(StableWindows.base() + StableAddresses.windowSlot(4, 0, devices, StableWindows.SPAN / size) * size,
                        stable.windowBase(0));
                stable.close();
                StableAddresses only = new StableAddresses(device, 5);
                only.confine(RANGE, RANGE_SIZE, true);
                assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(only.cuMemAlloc(out, 4096)));
                assertTrue(only.placeFailure().contains("; this process maps"), only.placeFailure());
                only.close();
            } finally {
                int ignored = (int) MUNMAP.invokeExact(mine, 1L << 20);
            }
            ok(device.cuCtxDestroy(ctx));
        } finally {
            if (hadWait == null) {
                System.clearProperty(StableAddresses.WAIT_PROPERTY);
            } else {
                System.setProperty(StableAddresses.WAIT_PROPERTY, hadWait);
            }
        }
    }
}
