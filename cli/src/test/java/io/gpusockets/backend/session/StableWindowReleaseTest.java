package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A restore's address window held by a session of the same process (issue H25: sessions migrated into one backend one
 * after another keep their ids, so the next one needs the window the previous one, still ending, holds): the restore
 * waits for that session's release ({@link StableAddresses#close}) instead of being refused, up to
 * {@value StableAddresses#WAIT_PROPERTY}; one still held after the wait is refused naming the session. Straight on the
 * emulated device, in the backend's package.
 */
class StableWindowReleaseTest {
    private static void ok(int r) {
        assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(r));
    }

    /** The emulated device with a context current on this thread; its handle in {@code ctx[0]}. */
    private static void context(EmulatedDevice device, MemorySegment out) {
        ok(device.cuInit(0));
        ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
    }

    @Test
    void aRestoreWaitsForTheEndingSessionThatHoldsItsWindow() throws Exception {
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofShared()) {
            MemorySegment out = arena.allocate(8);
            context(device, out);
            long ctx = out.get(JAVA_LONG, 0);
            StableAddresses first = new StableAddresses(device, 1);
            ok(first.cuMemAlloc(out, 1 << 20));
            long address = out.get(JAVA_LONG, 0);
            long base = first.windowBase(0);
            assertNotEquals(0, base);
            first.ending(); // the session ends: its lanes are leaving the driver, its release comes next

            StableAddresses restored = new StableAddresses(device, 1); // the same session id, moved in again
            restored.windowAt(0, base);
            CompletableFuture<Integer> alloc = CompletableFuture.supplyAsync(() -> {
                ok(device.cuCtxSetCurrent(ctx));
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment o = a.allocate(8);
                    restored.placeNext(address);
                    int r = restored.cuMemAlloc(o, 1 << 20);
                    return r == CuResult.CUDA_SUCCESS && o.get(JAVA_LONG, 0) != address ? -1 : r;
                }
            });
            while (!alloc.isDone() && StableAddresses.waitingForWindows() == 0) {
                Thread.sleep(10);
            }
            assertTrue(!alloc.isDone(), () -> "the restore did not wait for the ending session: "
                    + CuResult.name(alloc.join()) + ", " + restored.placeFailure());
            first.close(); // the ending session's release: its window goes
            assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(alloc.get()), () -> restored.placeFailure());
            assertEquals(base, restored.windowBase(0));
            restored.close();
            ok(device.cuCtxDestroy(ctx));
        }
    }

    @Test
    void aWindowStillHeldAfterTheWaitIsRefusedNamingItsSession() {
        String had = System.getProperty(StableAddresses.WAIT_PROPERTY);
        System.setProperty(StableAddresses.WAIT_PROPERTY, "0");
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            context(device, out);
            long ctx = out.get(JAVA_LONG, 0);
            StableAddresses running = new StableAddresses(device, 1);
            ok(running.cuMemAlloc(out, 4096));
            long base = running.windowBase(0);
            StableAddresses restored = new StableAddresses(device, 1);
            restored.windowAt(0, base);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(restored.cuMemAlloc(out, 4096)));
            String why = restored.placeFailure();
            assertTrue(why.contains(String.format("is taken at 0x%x by session 1 of this backend, still running", base)), why);
            running.close();
            ok(restored.cuMemAlloc(out, 4096)); // released: the window is there at once
            assertEquals(base, restored.windowBase(0));
            restored.close();
            ok(device.cuCtxDestroy(ctx));
        } finally {
            if (had == null) {
                System.clearProperty(StableAddresses.WAIT_PROPERTY);
            } else {
                System.setProperty(StableAddresses.WAIT_PROPERTY, had);
            }
        }
    }

    @Test
    void aWindowTakenByWhatIsNoSessionIsSaidToBeThisProcesssOwn() {
        String had = System.getProperty(StableAddresses.WAIT_PROPERTY);
        System.setProperty(StableAddresses.WAIT_PROPERTY, "0");
        try (EmulatedDevice device = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            context(device, out);
            long ctx = out.get(JAVA_LONG, 0);
            StableAddresses running = new StableAddresses(device, 1);
            ok(running.cuMemAlloc(out, 4096));
            long base = running.windowBase(0);
            StableAddresses bySession = new StableAddresses(device, 1);
            bySession.windowAt(0, base);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(bySession.cuMemAlloc(out, 4096)));
            assertTrue(!bySession.windowTakenInProcess(), "held by a session: another process would not help");
            running.close();
            ok(device.cuMemAddressReserve(out, 1 << 21, 0, base, 0)); // the driver's own, say: no session's
            long own = out.get(JAVA_LONG, 0);
            assertEquals(base, own);
            StableAddresses restored = new StableAddresses(device, 1);
            restored.windowAt(0, base);
            assertEquals(CuResult.name(CuResult.CUDA_ERROR_OUT_OF_MEMORY), CuResult.name(restored.cuMemAlloc(out, 4096)));
            assertTrue(restored.windowTakenInProcess(), restored.placeFailure());
            assertTrue(restored.placeFailure().startsWith(String.format("the address window of device 0 is taken at 0x%x"
                    + " (the driver offered 0x", base)), restored.placeFailure());
            ok(device.cuMemAddressFree(own, 1 << 21));
            ok(device.cuCtxDestroy(ctx));
        } finally {
            if (had == null) {
                System.clearProperty(StableAddresses.WAIT_PROPERTY);
            } else {
                System.setProperty(StableAddresses.WAIT_PROPERTY, had);
            }
        }
    }

    @Test
    void windowsOfAnotherDriverAreNotWaitedFor() {
        try (EmulatedDevice a = new EmulatedDevice(); EmulatedDevice b = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            context(a, out);
            long ctxA = out.get(JAVA_LONG, 0);
            StableAddresses onA = new StableAddresses(a, 1);
            ok(onA.cuMemAlloc(out, 4096));
            long base = onA.windowBase(0);
            context(b, out);
            long ctxB = out.get(JAVA_LONG, 0);
            StableAddresses onB = new StableAddresses(b, 1); // another address space: nothing to wait for
            onB.windowAt(0, base);
            ok(onB.cuMemAlloc(out, 4096));
            assertEquals(base, onB.windowBase(0));
            onB.close();
            ok(b.cuCtxDestroy(ctxB));
            ok(a.cuCtxSetCurrent(ctxA));
            onA.close();
            ok(a.cuCtxDestroy(ctxA));
        }
    }

    @Test
    void theProcessOwnMappingsInAWindowAreNamed() {
        List<String> maps = List.of(
                "55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/java",
                "7f3f00000000-7f4100000000 rw-p 00000000 00:00 0 ",
                "7f4800000000-7f48a4000000 r-xp 00000000 08:01 77 /usr/lib/libcuda.so.1",
                "7fff00000000-7fff00021000 rw-p 00000000 00:00 0 [stack]");
        String s = ProcessMappings.within(maps, 0x7f40_0000_0000L, 0x20_0000_0000L);
        assertEquals("; this process maps 2 range(s) there, 0x7f3f00000000-0x7f48a4000000 in all (0x7f3f00000000-0x7f4100000000"
                + " anonymous, 0x7f4800000000-0x7f48a4000000 /usr/lib/libcuda.so.1): its own memory (the JVM's heap, libraries,"
                + " the driver's mappings; placed at random per process) lies in the window", s);
        assertEquals("", ProcessMappings.within(maps, 0x6000_0000_0000L, 0x20_0000_0000L));
    }
}
