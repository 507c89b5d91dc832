package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The guest's managed range (issue 25, item 1; {@code ManagedRange}, GPUSOCKETS_MANAGED_RANGE) against backend
 * processes on the emulated device: reserved in this process (the guest) before the connection, announced in the HELLO,
 * and the managed allocations and mapped host memory of the session placed inside it, in isolation mode context and
 * process (where the range reaches the worker with the session's ticket); the reservation gone with the session; a range
 * the backend process already maps something in refused at the allocation, with the backend's log and the program's
 * stderr line naming it; {@code off} keeping the driver's addresses; a bad value failing the connection by name.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ManagedRangeTest extends EmulatedBackendTest {
    private static final String PROP = "gpusockets.managed.range";
    private static final long GIB = 1L << 30;
    private static final int DEVICEMAP = 2;

    @AfterEach
    void clearSetting() {
        System.clearProperty(PROP);
    }

    private static boolean inside(long[] range, long p, long n) {
        return p >= range[0] && p + n <= range[0] + range[1];
    }

    /** The line of this process's maps that starts at {@code address}, or null. */
    private static String mapping(long address) throws IOException {
        String start = Long.toHexString(address) + "-";
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            if (line.startsWith(start)) {
                return line;
            }
        }
        return null;
    }

    /** Managed memory and mapped host memory of a session on {@code uri} lie in its range; the range goes with it. */
    private static void allocationsLieInTheRange(String uri) throws Exception {
        long[] range;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            range = d.managedRange();
            assertNotNull(range, "the backend accepted the managed range");
            assertEquals(256 * GIB, range[1], "GPUSOCKETS_MANAGED_RANGE's default");
            assertEquals(0, range[0] % GIB, "1 GiB-aligned");
            String reserved = mapping(range[0]);
            assertNotNull(reserved, "the guest reserved the range");
            assertTrue(reserved.split("\\s+")[1].equals("---p"), "no access, no memory: " + reserved);
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemAllocManaged(c, 100_000, 1), "cuMemAllocManaged");
            long managed = c.get(JAVA_LONG, 0);
            assertTrue(inside(range, managed, 100_000), String.format("managed 0x%x in 0x%x+0x%x", managed, range[0], range[1]));
            assertTrue(ManagedMemoryTest.mappedHere(managed), "mapped over the reservation");
            Cuda.ok(d.cuMemHostAlloc(c, 8192, DEVICEMAP), "cuMemHostAlloc DEVICEMAP");
            long host = c.get(JAVA_LONG, 0);
            assertTrue(inside(range, host, 8192), String.format("mapped host 0x%x in 0x%x+0x%x", host, range[0], range[1]));
            long plain = cu.alloc(4096);
            assertFalse(inside(range, plain, 4096), "ordinary device memory keeps the driver's addresses");
            // the CPU's bytes reach a device copy through the one pointer
            d.prepareManagedAccess(managed, 4, true);
            MemorySegment.ofAddress(managed).reinterpret(4).set(java.lang.foreign.ValueLayout.JAVA_INT, 0, 0x5eed);
            MemorySegment back = cu.cell();
            Cuda.ok(d.cuMemcpyDtoH(back, managed, 4), "cuMemcpyDtoH");
            assertEquals(0x5eed, back.get(java.lang.foreign.ValueLayout.JAVA_INT, 0));
            Cuda.ok(d.cuMemFreeHost(MemorySegment.ofAddress(host)), "cuMemFreeHost");
            Cuda.ok(d.cuMemFree(managed), "cuMemFree");
            String again = mapping(managed & -4096L);
            assertTrue(again == null || again.split("\\s+")[1].equals("---p"), "a freed allocation's pages are reserved again");
        }
        assertNull(mapping(range[0]), "the range goes with the session");
    }

    @Test
    void managedAndMappedHostMemoryLieInTheRangeInIsolationModeContext() throws Exception {
        allocationsLieInTheRange(backend.address("unix"));
    }

    @Test
    void managedAndMappedHostMemoryLieInTheRangeInIsolationModeProcess() throws Exception {
        try (BackendProcess b = BackendProcess.start(List.of("-D" + io.gpusockets.emulated.FaultScope.PROP_NAME + "=context"),
                "--isolation", "process", "--idle-workers", "1")) {
            allocationsLieInTheRange(b.address("unix"));
        }
    }

    @Test
    void offKeepsTheDriversAddresses() throws Exception {
        System.setProperty(PROP, "off");
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.address("unix"))) {
            assertNull(d.managedRange(), "no range");
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemAllocManaged(c, 65536, 1), "cuMemAllocManaged");
            long p = c.get(JAVA_LONG, 0);
            assertTrue(ManagedMemoryTest.mappedHere(p), "mapped at the driver's address");
            assertTrue(p >= 0x7e00_0000_0000L, String.format("the emulated device's own address: 0x%x", p));
            Cuda.ok(d.cuMemFree(p), "cuMemFree");
        }
    }

    @Test
    void aBadValueFailsTheConnectionByName() {
        for (String bad : new String[] {"lots", "12Q", "-1G", "1G@0x1234", "1G@nowhere", "100T"}) {
            System.setProperty(PROP, bad);
            IOException e = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(backend.address("unix")).close(), bad);
            assertTrue(e.getMessage().contains("GPUSOCKETS_MANAGED_RANGE=" + bad), e.getMessage());
        }
    }

    /** A HELLO whose range is none the guest could have reserved is refused, naming it; the backend serves on. */
    @Test
    void aHelloWithABadRangeIsRefusedByName() throws Exception {
        long[][] bad = {{0x2000_0000_0000L + 4096, GIB}, {0x2000_0000_0000L, GIB + 1}, {0, GIB}, {GIB << 10, 0},
                {StableWindows.USER_LIMIT - GIB, 2 * GIB}};
        for (long[] r : bad) {
            try (RawClient c = new RawClient(backend.address("unix"))) {
                c.channel.send(io.gpusockets.protocol.wire.Opcodes.HELLO, 0, 0, 0, new io.gpusockets.protocol.wire.Handshake.Hello(
                        io.gpusockets.protocol.wire.Handshake.PROTOCOL_VERSION,
                        io.gpusockets.protocol.wire.Handshake.FEATURE_MANAGED_RANGE, "raw test client", new byte[0],
                        new byte[0], r[0], r[1]).encode());
                var h = c.channel.readHeader();
                assertEquals(io.gpusockets.protocol.wire.Opcodes.REFUSE, h.opcode(), String.format("0x%x+0x%x", r[0], r[1]));
                String why = io.gpusockets.protocol.wire.Handshake.readString(c.channel.readBody(h.length())
                        .order(java.nio.ByteOrder.LITTLE_ENDIAN));
                assertTrue(why.contains(String.format("managed range 0x%x+0x%x", r[0], r[1])), why);
            }
        }
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.address("unix"))) {
            assertNotNull(d.managedRange(), "a good range is still granted");
        }
    }

    @Test
    void anAddressGivenIsTheRange() throws Exception {
        long base = 0x3000_0000_0000L + 7 * GIB;
        System.setProperty(PROP, "2G@0x" + Long.toHexString(base));
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.address("unix"))) {
            assertEquals(base, d.managedRange()[0]);
            assertEquals(2 * GIB, d.managedRange()[1]);
            // a second session of this process cannot have the same place
            IOException e = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(backend.address("unix")).close());
            assertTrue(e.getMessage().contains("already in use"), e.getMessage());
        }
    }

    /**
     * A range where the backend process already maps something: the session opens (the guest's side is free), and the
     * first managed allocation is refused with CUDA_ERROR_OUT_OF_MEMORY, the backend logging the range and what it maps
     * there, the program getting one stderr line naming the range; nothing is charged.
     */
    @Test
    void aRangeTheBackendProcessUsesIsRefusedByName() throws Exception {
        long window;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.address("unix"))) {
            Cuda cu = new Cuda(d);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuDeviceTotalMem(c, 0), "cuDeviceTotalMem");
            long total = c.get(JAVA_LONG, 0);
            window = Math.max(GIB, Long.highestOneBit(total - 1) << 1); // as StableAddresses sizes a window
        }
        long size = (window + GIB - 1) & -GIB;
        int tried = 0;
        for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(backend.pid()), "maps"))) {
            long start = Long.parseUnsignedLong(line.substring(0, line.indexOf('-')), 16);
            long base = start & -GIB;
            if (base < 4 * GIB || Long.compareUnsigned(base + size, StableWindows.USER_LIMIT) > 0) {
                continue;
            }
            System.setProperty(PROP, size + "@0x" + Long.toHexString(base));
            RemoteCudaDriver d;
            try {
                d = RemoteCudaDriver.connect(backend.address("unix"));
            } catch (IOException e) {
                assertTrue(e.getMessage().contains("already in use"), e.getMessage());
                continue; // this process maps something there too: another of the backend's mappings
            }
            tried++;
            PrintStream err = System.err;
            ByteArrayOutputStream said = new ByteArrayOutputStream();
            try (d) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                MemorySegment free = cu.cell(), total = cu.cell();
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                long before = free.get(JAVA_LONG, 0);
                System.setErr(new PrintStream(said, true, StandardCharsets.UTF_8));
                int r;
                try {
                    r = d.cuMemAllocManaged(cu.cell(), 65536, 1);
                } finally {
                    System.setErr(err);
                }
                assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, r, "a range the backend process maps something in");
                String named = String.format("0x%x+0x%x", base, size);
                String logged = backend.awaitLog("managed range " + named + " is taken in the backend process", 10_000);
                assertTrue(logged.contains("session "), logged);
                String stderr = said.toString(StandardCharsets.UTF_8);
                assertTrue(stderr.contains("managed range " + named) && stderr.contains("GPUSOCKETS_MANAGED_RANGE"), stderr);
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                assertEquals(before, free.get(JAVA_LONG, 0), "nothing charged for the refused allocation");
                long plain = cu.alloc(4096); // the session goes on
                Cuda.ok(d.cuMemFree(plain), "cuMemFree");
            }
            return;
        }
        throw new AssertionError("no mapping of the backend process was free in this one to try (" + tried + " tried)");
    }
}
