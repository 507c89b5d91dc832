package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.MigrationLanding;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The migration target's landing (issue 23 item 1, {@link MigrationLanding}): the session's window memory is written
 * into device memory on the target as it arrives, and the restore at COMMIT takes it over, so the image the target
 * restores carries only the memory outside the windows ({@link Migration.Result#imageMemoryBytes}: here the program's
 * own VMM allocation, restored from the image beside the landed memory) and the data is intact; a layout
 * that changes between rounds (an allocation freed, a smaller one made at its address with the same first bytes, whose
 * chunks the source must send again since the target's memory under them is new) lands right; a bad layout is refused
 * naming what is wrong, before anything is made, and a closed landing leaves no device memory behind.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MigrationLandingTest extends CheckpointTestSupport {
    private static final long MIB = 1 << 20;

    private static BackendServer server(EmulatedDevice device) {
        BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties());
        server.resumeGrace(Duration.ofSeconds(60));
        return server;
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void theTargetRestoresFromTheLandingWithNoMemoryInItsImageAndALayoutChangeBetweenRoundsLands() throws Exception {
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String unixA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            serverB.acceptMigrations(true);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(unixA)) {
                MigrationTest.Program p = new MigrationTest.Program(d);
                // X: the last allocation, in granules of its own at the top of what the window used
                byte[] xData = random((int) (4 * MIB), 1);
                long x = p.cu.alloc(xData.length);
                p.cu.put(x, xData);
                // the program's own VMM memory: not in the windows, so not landed: it goes through the image
                MemorySegment c = p.cu.cell();
                MemorySegment prop = p.cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
                prop.set(ValueLayout.JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
                prop.set(ValueLayout.JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
                MemorySegment rw = p.cu.cell(MemoryProps.ACCESS_DESC_SIZE).fill((byte) 0);
                rw.set(ValueLayout.JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
                rw.set(ValueLayout.JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
                Cuda.ok(d.cuMemCreate(c, 2 * MIB, prop, 0), "cuMemCreate");
                long vmmHandle = c.get(JAVA_LONG, 0);
                Cuda.ok(d.cuMemAddressReserve(c, 2 * MIB, 0, 0, 0), "cuMemAddressReserve");
                long vmm = c.get(JAVA_LONG, 0);
                Cuda.ok(d.cuMemMap(vmm, 2 * MIB, 0, vmmHandle, 0), "cuMemMap");
                Cuda.ok(d.cuMemSetAccess(vmm, 2 * MIB, rw, 1), "cuMemSetAccess");
                byte[] vmmData = random((int) (2 * MIB), 4);
                p.cu.put(vmm, vmmData);
                long id = serverA.sessions().get(0).id();
                p.start();
                p.runs(1);
                // after the first round: X freed, Y (2 MiB, X's first 2 MiB) made at X's place (the lowest free one)
                AtomicBoolean changed = new AtomicBoolean();
                AtomicReference<Throwable> failed = new AtomicReference<>();
                long[] y = new long[1];
                byte[] yData = java.util.Arrays.copyOf(xData, (int) (2 * MIB));
                Migration.Result r = serverA.migrate(id, unixB, null, (stage, done, total) -> {
                    if (stage.equals("pre-copy") && done == 1 && changed.compareAndSet(false, true)) {
                        try {
                            Cuda cu = new Cuda(d);
                            cu.primaryContext();
                            Cuda.ok(d.cuMemFree(x), "cuMemFree");
                            y[0] = cu.alloc(yData.length);
                            cu.put(y[0], yData);
                        } catch (Throwable t) {
                            failed.set(t);
                        }
                    }
                });
                assertTrue(changed.get(), "the program changed its memory between two rounds");
                if (failed.get() != null) {
                    throw new AssertionError("the change failed", failed.get());
                }
                // the case this test is for: the same address, another physical allocation under it, the same bytes
                assertEquals(x, y[0], "Y took X's place");
                assertTrue(r.rounds().size() >= 3, "two pre-copy rounds at least, and the final: " + r);
                assertEquals(2 * MIB, r.imageMemoryBytes(), "all window memory landed: the image carried only the"
                        + " program's VMM memory: " + r);
                p.runs(2);
                assertEquals(unixB, d.backendUri());
                assertEquals(1, serverB.resumesAccepted());
                p.finish(); // the program's allocations, dirtied throughout, equal its model
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                assertArrayEquals(yData, cu.get(y[0], yData.length), "Y, made between two rounds, at 0x"
                        + Long.toHexString(y[0]) + " (X was at 0x" + Long.toHexString(x) + ")");
                assertArrayEquals(vmmData, cu.get(vmm, vmmData.length), "the program's VMM memory, through the image");
            }
        } finally {
            a.close();
            b.close();
        }
    }

    private static long freeMemory(EmulatedDevice device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment free = arena.allocate(8), total = arena.allocate(8);
            assertEquals(CuResult.CUDA_SUCCESS, device.cuMemGetInfo(free, total));
            return free.get(JAVA_LONG, 0);
        }
    }

    @Test
    void aBadLayoutIsRefusedBeforeAnythingIsMadeAndAClosedLandingLeavesNothing() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment c = arena.allocate(8);
            assertEquals(CuResult.CUDA_SUCCESS, device.cuInit(0));
            assertEquals(CuResult.CUDA_SUCCESS, device.cuCtxCreate(c, MemorySegment.NULL, 0, 0));
            long mine = c.get(JAVA_LONG, 0); // current: cuMemGetInfo needs one
            long before = freeMemory(device);
            long base = StableWindows.base() + 0x10_0000_0000L, g = 2 * MIB; // where windows lie: free in this process
            MigrationLanding landing = new MigrationLanding(device, 1, (int) MIB);
            try {
                List<MigrationLanding.Entry> good = List.of(new MigrationLanding.Entry(0, base, g),
                        new MigrationLanding.Entry(0, base + 4 * g, 2 * g));
                assertEquals(List.of(base, base + 4 * g), landing.apply(good));
                long made = before - freeMemory(device); // the layout's memory, and the landing's context
                assertTrue(made >= 3 * g && made < 3 * g + MIB, "the layout's memory was made: " + made);
                byte[] chunk = random((int) MIB, 3);
                assertTrue(landing.write(base + 5 * g + MIB, MemorySegment.ofArray(chunk)));
                assertFalse(landing.write(base + g, MemorySegment.ofArray(chunk)), "not landed: the caller keeps it");
                assertFalse(landing.write(base + g - MIB / 2, MemorySegment.ofArray(chunk)), "across an entry's end");
                MemorySegment back = arena.allocate(MIB);
                landing.read(base + 5 * g + MIB, back, MIB);
                assertArrayEquals(chunk, back.toArray(JAVA_BYTE));

                String[][] bad = {
                        {"overlaps", "0:" + base + ":" + 2 * g, "0:" + (base + g) + ":" + g},
                        {"device 3", "3:" + base + ":" + g},
                        {"whole granules", "0:" + base + ":" + (g + 4096)},
                        {"whole granules", "0:" + (base + 4096) + ":" + g},
                        {"whole granules", "0:" + base + ":0"},
                        {"which has", "0:" + base + ":" + (1L << 40)},
                };
                for (String[] t : bad) {
                    List<MigrationLanding.Entry> layout = new java.util.ArrayList<>();
                    for (int i = 1; i < t.length; i++) {
                        String[] f = t[i].split(":");
                        layout.add(new MigrationLanding.Entry(Integer.parseInt(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2])));
                    }
                    ProtocolException e = assertThrows(ProtocolException.class, () -> landing.apply(layout), t[0]);
                    assertTrue(e.getMessage().contains(t[0]), e.getMessage());
                    assertEquals(made, before - freeMemory(device), "a refused layout changes nothing: " + t[0]);
                }
                java.nio.ByteBuffer wire = java.nio.ByteBuffer.allocate(8).putInt(5).putInt(0).flip();
                assertThrows(ProtocolException.class, () -> MigrationLanding.decode(wire), "a count its body does not hold");
                java.nio.ByteBuffer encoded = MigrationLanding.encode(List.of(
                        new io.gpusockets.backend.session.PhysicalMemory(base, g, 0, 0)));
                assertEquals(List.of(new MigrationLanding.Entry(0, base, g)), MigrationLanding.decode(encoded));

                // a change: the first entry gone, the second kept (its contents too), a new one made
                List<MigrationLanding.Entry> next = List.of(new MigrationLanding.Entry(0, base + 4 * g, 2 * g),
                        new MigrationLanding.Entry(0, base + 8 * g, g));
                assertEquals(List.of(base + 8 * g), landing.apply(next));
                assertEquals(made, before - freeMemory(device), "2 MiB released, 2 MiB made");
                landing.read(base + 5 * g + MIB, back, MIB);
                assertArrayEquals(chunk, back.toArray(JAVA_BYTE), "a kept entry keeps its contents");
                assertFalse(landing.holds(base, MIB), "the entry gone is no longer landed");
            } finally {
                landing.close();
            }
            assertEquals(before, freeMemory(device), "a closed landing leaves no device memory");
            assertEquals(CuResult.CUDA_SUCCESS, device.cuCtxGetCurrent(c));
            assertEquals(mine, c.get(JAVA_LONG, 0), "the landing left this thread's context current");
        } finally {
            device.close();
        }
    }
}
