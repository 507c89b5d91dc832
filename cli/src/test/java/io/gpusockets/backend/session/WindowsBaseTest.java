package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Properties;
import org.junit.jupiter.api.Test;

/**
 * Where the address-stable windows lie (issue H30): not in the top TiB of the address space, where Linux's top-down
 * mmap puts the process's own memory (the JVM's heap, libraries, the driver's mappings) at a random place per process,
 * but from {@link StableWindows#base()} ({@code 0x6000_0000_0000} by default). The process maps a large range where a
 * session's window would lie with the old base ({@code 0x7f00_0000_0000}), as a 32 GiB JVM heap on a 128 GiB host does:
 * the window at the base is reserved as asked, one at the old base is not. The emulated device grants a reservation at a
 * requested address only where the process maps nothing, as the driver does. Straight on the emulated device, in the
 * backend's package.
 */
class WindowsBaseTest {
    private static final long OLD_BASE = 0x7f00_0000_0000L;
    private static final int PROT_NONE = 0, MAP_PRIVATE = 0x02, MAP_ANONYMOUS = 0x20, MAP_NORESERVE = 0x4000;
    private static final int MAP_FIXED_NOREPLACE = 0x100000;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle MMAP = LINKER.downcallHandle(LINKER.defaultLookup().find("mmap").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG));
    private static final MethodHandle MUNMAP = LINKER.downcallHandle(LINKER.defaultLookup().find("munmap").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG));

    private static void ok(int r) {
        assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(r));
    }

    /** Maps {@code size} bytes of nothing (no access, no memory committed) at {@code at}; false where that is taken. */
    private static boolean mapNothing(long at, long size) throws Throwable {
        long got = ((MemorySegment) MMAP.invokeExact(MemorySegment.ofAddress(at), size, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0L)).address();
        if (got == -1L) {
            return false;
        }
        if (got != at) { // a kernel before 4.17 takes the flag as a hint
            unmap(got, size);
            return false;
        }
        return true;
    }

    private static void unmap(long at, long size) throws Throwable {
        assertEquals(0, (int) MUNMAP.invokeExact(MemorySegment.ofAddress(at), size));
    }

    @Test
    void aWindowAtTheBaseIsReservedWhileTheProcessMapsWhereTheOldBaseWas() throws Throwable {
        String had = System.getProperty(StableWindows.PROPERTY), hadWait = System.getProperty(StableAddresses.WAIT_PROPERTY);
        System.clearProperty(StableWindows.PROPERTY);
        System.setProperty(StableAddresses.WAIT_PROPERTY, "0");
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            ok(device.cuInit(0));
            ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long ctx = out.get(JAVA_LONG, 0);
            ok(device.cuDeviceTotalMem(out, 0));
            long size = Long.highestOneBit(out.get(JAVA_LONG, 0) - 1) << 1; // as StableAddresses sizes a window
            ok(device.cuDeviceGetCount(out));
            long slot = StableAddresses.windowSlot(1, 0, out.get(JAVA_INT, 0), StableWindows.SPAN / size);
            long oldWindow = OLD_BASE + slot * size, window = StableWindows.DEFAULT_BASE + slot * size;

            // the process's own memory where session 1's window lay with the old base (ours where that was free)
            boolean ours = mapNothing(oldWindow, size);
            assertFalse(ProcessMappings.within(oldWindow, size).isEmpty(), "the process maps the old window");
            try {
                StableAddresses session = new StableAddresses(device, 1);
                ok(session.cuMemAlloc(out, 4096));
                assertEquals(window, session.windowBase(0), "the window at the base, where the process maps nothing");
                long p = out.get(JAVA_LONG, 0);
                assertTrue(p >= window && p < window + size, Long.toHexString(p));
                session.close();

                System.setProperty(StableWindows.PROPERTY, "0x7f00_0000_0000");
                StableAddresses atOld = new StableAddresses(device, 1);
                ok(atOld.cuMemAlloc(out, 4096));
                assertNotEquals(oldWindow, atOld.windowBase(0), "with the old base the window is taken: put elsewhere");
                atOld.close();
                System.clearProperty(StableWindows.PROPERTY);

                // a restore of an image written with the old base asks for the image's window, not the base's
                StableAddresses restored = new StableAddresses(device, 1);
                restored.windowAt(0, oldWindow);
                assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(restored.cuMemAlloc(out, 4096)));
                assertTrue(restored.windowTakenInProcess(), restored.placeFailure());
                assertTrue(restored.placeFailure().startsWith(String.format("the address window of device 0 is taken"
                        + " at 0x%x (the driver offered 0x", oldWindow)), restored.placeFailure());
                assertTrue(restored.placeFailure().contains("; this process maps"), restored.placeFailure());
                restored.close();
            } finally {
                if (ours) {
                    unmap(oldWindow, size);
                }
            }
            if (ours) { // free again: an old image's window is granted where the image says, whatever the base
                StableAddresses restored = new StableAddresses(device, 1);
                restored.windowAt(0, oldWindow);
                restored.placeNext(oldWindow);
                ok(restored.cuMemAlloc(out, 4096));
                assertEquals(oldWindow, restored.windowBase(0));
                assertEquals(oldWindow, out.get(JAVA_LONG, 0));
                restored.close();
            }
            ok(device.cuCtxDestroy(ctx));
        } finally {
            restore(StableWindows.PROPERTY, had);
            restore(StableAddresses.WAIT_PROPERTY, hadWait);
        }
    }

    @Test
    void theBaseIsASettingThatIsChecked() {
        assertEquals(StableWindows.DEFAULT_BASE, StableWindows.base(null));
        assertEquals(0x5000_0000_0000L, StableWindows.base("0x5000_0000_0000"));
        assertEquals(1L << 30, StableWindows.base("1073741824"));
        assertEquals(0x7f00_0000_0000L, StableWindows.base(" 0x7F0000000000 "), "the old base");
        for (String bad : new String[] {"0", "-1073741824", "0x6000_0000_1000", "0x7f00_4000_1000", "0x7f01_0000_0000",
                "0x8000_0000_0000", "0xffff_ffff_ffff_ffff", "base", "0x"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StableWindows.base(bad), bad);
            assertTrue(e.getMessage().startsWith(StableWindows.PROPERTY + "=" + bad + ": "), e.getMessage());
        }
        Properties p = new Properties();
        p.setProperty(StableWindows.PROPERTY, "0x7fff_0000_0000");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BackendSettings.fromProperties(p, 4));
        assertTrue(e.getMessage().contains("past the 47-bit user address space"), e.getMessage());
        p.setProperty(StableWindows.PROPERTY, "0x4000_0000_0000");
        BackendSettings.fromProperties(p, 4); // a good one starts
    }

    private static void restore(String property, String value) {
        if (value == null) {
            System.clearProperty(property);
        } else {
            System.setProperty(property, value);
        }
    }
}
