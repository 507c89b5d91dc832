package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The program's own VMM calls with address-stable memory (issue 22, item 2): its reservations lie in the session's
 * address window, and a checkpoint with stop in backend A (emulated device) restored in backend B (a new emulated
 * device) brings back every reservation, allocation handle, mapping (one allocation mapped twice, one the program
 * released but still maps), access setting and reference at the same addresses and ids, with the mapped contents
 * byte for byte and the pointers stored in them still walkable by a kernel; the tenant's memory charge is the same.
 * Memory an unmap made unreachable while its allocation lived on is refused by name.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CheckpointVmmTest extends CheckpointTestSupport {
    private static final long MIB2 = 2L << 20;

    private static long out(int r, MemorySegment cell, String what) {
        Cuda.ok(r, what);
        return cell.get(JAVA_LONG, 0);
    }

    private static MemorySegment prop(Cuda cu) {
        MemorySegment p = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
        p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        return p;
    }

    private static MemorySegment readWrite(Cuda cu) {
        MemorySegment d = cu.cell(MemoryProps.ACCESS_DESC_SIZE).fill((byte) 0);
        d.set(JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
        d.set(JAVA_INT, 8, MemoryProps.ACCESS_READWRITE);
        return d;
    }

    private static boolean inWindows(long p) {
        return io.gpusockets.protocol.api.ManagedRange.inGuest(p); // the windows lie in the guest's managed range
    }

    private static long freeBytes(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        return free.get(JAVA_LONG, 0);
    }

    private static byte[] node(long next, int value) {
        return ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(next).putInt(value).putInt(0).array();
    }

    /** The program: its VMM objects, a list over them, and the kernel that walks it. */
    private static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        long module, fn, stream, headAddr;
        long r1, r2, h1, h3, retained;
        /** r1 holds h1 twice ([0, 4 MiB) and again at +4 MiB); r2 holds h2, which the program released. */
        long[] nodes;
        byte[] pattern = new byte[(int) MIB2];
        int walks;

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
        }

        void build() {
            cu.primaryContext();
            byte[] ptx = (CheckpointRestoreTest.PTX + "\0").getBytes(StandardCharsets.US_ASCII);
            MemorySegment image = cu.cell(ptx.length);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            MemorySegment c = cu.cell(), size = cu.cell();
            module = out(d.cuModuleLoadData(c, image), c, "cuModuleLoadData");
            fn = cu.function(module, "walk_bump");
            stream = cu.stream();
            h1 = out(d.cuMemCreate(c, 2 * MIB2, prop(cu), 0), c, "cuMemCreate h1");
            long h2 = out(d.cuMemCreate(c, MIB2, prop(cu), 0), c, "cuMemCreate h2");
            h3 = out(d.cuMemCreate(c, MIB2, prop(cu), 0), c, "cuMemCreate h3 (never mapped)");
            r1 = out(d.cuMemAddressReserve(c, 4 * MIB2, 4 * MIB2, 0, 0), c, "cuMemAddressReserve r1");
            r2 = out(d.cuMemAddressReserve(c, MIB2, 0, 0x1000_0000L, 0), c, "cuMemAddressReserve r2 (a hint outside)");
            Cuda.ok(d.cuMemMap(r1, 2 * MIB2, 0, h1, 0), "map h1");
            Cuda.ok(d.cuMemMap(r1 + 2 * MIB2, 2 * MIB2, 0, h1, 0), "map h1 again");
            Cuda.ok(d.cuMemMap(r2, MIB2, 0, h2, 0), "map h2");
            Cuda.ok(d.cuMemSetAccess(r1, 4 * MIB2, readWrite(cu), 1), "access r1");
            Cuda.ok(d.cuMemSetAccess(r2, MIB2, readWrite(cu), 1), "access r2");
            Cuda.ok(d.cuMemSetAccess(r2, MIB2, readWrite(cu), 1), "access r2 again");
            Cuda.ok(d.cuMemRelease(h2), "release h2: its mapping keeps it");
            retained = out(d.cuMemRetainAllocationHandle(c, r1 + 100), c, "cuMemRetainAllocationHandle");
            assertEquals(h1, retained);
            new Random(7).nextBytes(pattern);
            cu.put(r1 + MIB2, pattern); // the second half of h1: seen at r1 + MIB2 and at r1 + 3 MIB2
            nodes = new long[] {r1 + 0x100, r2 + 0x40, r1 + 2 * MIB2 + 0x2000};
            for (int i = 0; i < nodes.length; i++) {
                cu.put(nodes[i], node(i + 1 < nodes.length ? nodes[i + 1] : 0, 10 * i));
            }
            headAddr = out(d.cuModuleGetGlobal(c, size, module, cu.arena.allocateFrom("head")), c, "cuModuleGetGlobal");
            cu.put(headAddr, CheckpointRestoreTest.le(nodes[0]));
        }

        void walk() {
            Cuda.ok(d.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, cu.params(), MemorySegment.NULL), "launch");
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            walks++;
        }

        void check() {
            for (int i = 0; i < nodes.length; i++) {
                ByteBuffer b = ByteBuffer.wrap(cu.get(nodes[i], 16)).order(ByteOrder.LITTLE_ENDIAN);
                assertEquals(i + 1 < nodes.length ? nodes[i + 1] : 0L, b.getLong(), "node " + i + " next");
                assertEquals(10 * i + walks, b.getInt(), "node " + i + " after " + walks + " walks");
            }
            ByteBuffer alias = ByteBuffer.wrap(cu.get(r1 + 0x2000, 16)).order(ByteOrder.LITTLE_ENDIAN);
            assertEquals(0L, alias.getLong(), "node 2 through h1's first mapping");
            assertEquals(20 + walks, alias.getInt());
            assertArrayEquals(pattern, cu.get(r1 + MIB2, (int) MIB2), "h1's second half, first mapping");
            assertArrayEquals(pattern, cu.get(r1 + 3 * MIB2, (int) MIB2), "h1's second half, second mapping");
            MemorySegment c = cu.cell(), location = cu.cell(8).fill((byte) 0);
            location.set(JAVA_INT, 0, MemoryProps.LOCATION_TYPE_DEVICE);
            assertEquals(MemoryProps.ACCESS_READWRITE, out(d.cuMemGetAccess(c, location, r2), c, "cuMemGetAccess"), "r2's access");
        }
    }

    @Test
    void theProgramsVmmObjectsComeBackAtTheirAddressesWithTheirContents() throws Exception {
        Path sock = dir.resolve("v.sock");
        Path image = dir.resolve("vmm.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            assertTrue(inWindows(p.r1) && inWindows(p.r2), String.format("0x%x 0x%x", p.r1, p.r2));
            assertEquals(0, p.r1 % (4 * MIB2), "r1's alignment");
            assertNotEquals(0x1000_0000L, p.r2, "a hint outside the window gives a window address");
            p.walk();
            p.walk();
            p.check();
            long charged = freeBytes(p.cu);
            long id = serverA.sessions().get(0).id();
            serverA.checkpoint(id, image, true, null);
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // resumes on B: same addresses, same bytes
                assertEquals(charged, freeBytes(p.cu), "the tenant's charge is the same");
                p.walk();
                p.check();
                MemorySegment c = p.cu.cell();
                assertEquals(p.h1, out(d.cuMemRetainAllocationHandle(c, p.r1 + 3 * MIB2), c, "retain"), "h1's id");
                Cuda.ok(d.cuMemRelease(p.h1), "the new reference");
                Cuda.ok(d.cuMemRelease(p.retained), "the restored retained reference");
                Cuda.ok(d.cuMemRelease(p.h3), "h3, never mapped, came back");
                Cuda.ok(d.cuMemUnmap(p.r1, 4 * MIB2), "unmap r1's two mappings");
                Cuda.ok(d.cuMemRelease(p.h1), "h1's last reference");
                assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuMemRelease(p.h1), "h1 is gone");
                Cuda.ok(d.cuMemAddressFree(p.r1, 4 * MIB2), "free r1");
                long again = out(d.cuMemAddressReserve(c, 4 * MIB2, 0, p.r1, 0), c, "reserve r1's range again");
                assertEquals(p.r1, again, "a free range of the window is given where asked");
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    @Test
    void memoryAnUnmapMadeUnreachableIsRefusedByName() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("r.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                MemorySegment c = cu.cell();
                long h = out(d.cuMemCreate(c, 2 * MIB2, prop(cu), 0), c, "cuMemCreate");
                long r = out(d.cuMemAddressReserve(c, 2 * MIB2, 0, 0, 0), c, "cuMemAddressReserve");
                Cuda.ok(d.cuMemMap(r, MIB2, 0, h, 0), "map the first half");
                Cuda.ok(d.cuMemMap(r + MIB2, MIB2, MIB2, h, 0), "map the second half");
                Cuda.ok(d.cuMemSetAccess(r, 2 * MIB2, readWrite(cu), 1), "access");
                cu.put(r + MIB2, new byte[] {1, 2, 3});
                Cuda.ok(d.cuMemUnmap(r + MIB2, MIB2), "unmap the second half: its bytes live on in h");
                long id = server.sessions().get(0).id();
                CheckpointRefused e = assertThrows(CheckpointRefused.class,
                        () -> server.checkpoint(id, dir.resolve("no.ckpt"), false, null));
                assertTrue(e.getMessage().contains("VMM allocation(s) whose memory an unmap made unreachable"), e.getMessage());
                Cuda.ok(d.cuMemMap(r + MIB2, MIB2, MIB2, h, 0), "map it again");
                Cuda.ok(d.cuMemSetAccess(r + MIB2, MIB2, readWrite(cu), 1), "access again");
                assertArrayEquals(new byte[] {1, 2, 3}, cu.get(r + MIB2, 3), "the session kept running");
                server.checkpoint(id, dir.resolve("yes.ckpt"), false, null); // all of it mapped again: captured
            }
        } finally {
            a.close();
        }
    }
}
