package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.StableWindows;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Address-stable memory (issue 22, item 2; {@code -Dgpusockets.backend.stableAddresses=true}), against an
 * in-process backend on the emulated device: a session's cuMemAlloc, pitched and stream-ordered allocations lie
 * in its own address window, inside the guest's managed range (issue 25; without one, from the windows' base at the
 * address its session id gives: {@link #withoutAManagedRangeTheWindowIsAtItsSlot}), small ones in shared
 * granules, large ones in granules of their own; what the program sees (data, kernels, 2D copies,
 * cuMemGetAddressRange, range attributes, pool attributes, cuMemGetInfo) is as without it, pools keep their
 * stream order, release threshold and trimming, and everything goes back when the session ends.
 * {@link StablePoolsAndVmmApiTest} and {@link StablePoolLocationsAndBatchesApiTest} run the pool suites with it on.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StableAddressesTest {
    private static final long WINDOWS_BASE = StableWindows.base();
    private static final long WINDOWS_END = StableWindows.end();

    private static String was;
    private static EmulatedDevice device;
    private static BackendServer server;
    private static Path dir;
    private static String uri;

    @BeforeAll
    static void start() throws Exception {
        was = System.setProperty("gpusockets.backend.stableAddresses", "true");
        device = new EmulatedDevice();
        dir = Files.createTempDirectory("gpusockets-stable");
        server = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties());
        uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
    }

    @AfterAll
    static void stop() throws Exception {
        try {
            server.close();
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.backend.stableAddresses");
            } else {
                System.setProperty("gpusockets.backend.stableAddresses", was);
            }
            device.close();
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
    }

    /** Each test's sessions have released everything before the next measures device memory. */
    @AfterEach
    void sessionsEnded() throws InterruptedException {
        CopyOutStagingTest.awaitNoSessions(server);
    }

    /** In the session's window, which lies in the guest's managed range (ManagedRange; this process hosts the guest). */
    private static void inWindow(long p) {
        assertTrue(io.gpusockets.protocol.api.ManagedRange.inGuest(p), "0x" + Long.toHexString(p)
                + " outside the guest's managed range");
    }

    /**
     * One mechanism (issue 25): with a managed range the session's window is device 0's place in it, at its base, and
     * managed memory lies there too; with GPUSOCKETS_MANAGED_RANGE=off the window is at its slot from the windows' base.
     */
    @Test
    void withoutAManagedRangeTheWindowIsAtItsSlot() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(100);
            long[] range = d.managedRange();
            assertTrue(p >= range[0] && p < range[0] + range[1], String.format("0x%x in 0x%x+0x%x", p, range[0], range[1]));
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemAllocManaged(c, 5000, 1), "cuMemAllocManaged");
            long m = c.get(JAVA_LONG, 0);
            assertTrue(m >= range[0] && m < range[0] + range[1], String.format("managed 0x%x in the range", m));
            Cuda.ok(d.cuMemFree(m), "cuMemFree");
            Cuda.ok(d.cuMemFree(p), "cuMemFree");
        }
        CopyOutStagingTest.awaitNoSessions(server);
        System.setProperty("gpusockets.managed.range", "off");
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            assertNull(d.managedRange());
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(100);
            assertTrue(p >= WINDOWS_BASE && p < WINDOWS_END, "0x" + Long.toHexString(p) + " outside the windows");
            Cuda.ok(d.cuMemFree(p), "cuMemFree");
        } finally {
            System.clearProperty("gpusockets.managed.range");
        }
    }

    @Test
    void allocationsLieInTheSessionsWindowAndBehaveAsTheDriversDo() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment free = arena.allocate(8), total = arena.allocate(8);
            long freeBefore;
            long firstSmall;
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                freeBefore = free.get(JAVA_LONG, 0);
                long small = cu.alloc(100), other = cu.alloc(3000), large = cu.alloc(5L << 20);
                for (long p : new long[] {small, other, large}) {
                    inWindow(p);
                }
                assertEquals(0, large % (2L << 20), "a large allocation starts a granule");
                firstSmall = small;

                MemorySegment base = arena.allocate(8), size = arena.allocate(8);
                Cuda.ok(d.cuMemGetAddressRange(base, size, small + 10), "cuMemGetAddressRange");
                assertEquals(small, base.get(JAVA_LONG, 0));
                assertEquals(100, size.get(JAVA_LONG, 0), "the allocation's size, not its block's or granule's");
                Cuda.ok(d.cuMemGetAddressRange(base, size, large + (3L << 20)), "cuMemGetAddressRange");
                assertEquals(large, base.get(JAVA_LONG, 0));
                assertEquals(5L << 20, size.get(JAVA_LONG, 0));
                Cuda.ok(d.cuPointerGetAttribute(base, 11, other + 5), "RANGE_START_ADDR");
                assertEquals(other, base.get(JAVA_LONG, 0));
                Cuda.ok(d.cuPointerGetAttribute(size, 12, other + 5), "RANGE_SIZE");
                assertEquals(3000, size.get(JAVA_LONG, 0));
                MemorySegment attrs = arena.allocate(JAVA_INT, 2);
                attrs.setAtIndex(JAVA_INT, 0, 11);
                attrs.setAtIndex(JAVA_INT, 1, 12);
                MemorySegment slots = arena.allocate(ADDRESS, 2);
                MemorySegment v0 = arena.allocate(8), v1 = arena.allocate(8);
                slots.setAtIndex(ADDRESS, 0, v0);
                slots.setAtIndex(ADDRESS, 1, v1);
                Cuda.ok(d.cuPointerGetAttributes(2, attrs, slots, large + 1), "cuPointerGetAttributes");
                assertEquals(large, v0.get(JAVA_LONG, 0));
                assertEquals(5L << 20, v1.get(JAVA_LONG, 0));

                byte[] data = new byte[3000];
                new Random(3).nextBytes(data);
                cu.put(other, data);
                assertArrayEquals(data, cu.get(other, data.length));
                long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
                int n = (5 << 20) / 4;
                Cuda.ok(d.cuLaunchKernel(fill, n / 256, 1, 1, 256, 1, 1, 0, 0,
                        cu.params(cu.u64(large), cu.u32(0xA11CE), cu.u32(n)), MemorySegment.NULL), "launch");
                Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                byte[] back = cu.get(large + (5L << 20) - 8, 8);
                assertEquals(0xA11CE, java.nio.ByteBuffer.wrap(back).order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt(4));

                Cuda.ok(d.cuMemFree(small), "cuMemFree");
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemFree(small), "freed twice");
                assertEquals(small, cu.alloc(90), "the block comes back to the same size class");
                Cuda.ok(d.cuMemFree(large), "cuMemFree");
                assertNotEquals(CuResult.CUDA_SUCCESS, d.cuMemsetD8(large, (byte) 1, 16), "unmapped once freed");
                assertEquals(large, cu.alloc(5L << 20), "the granules come back");
            }
            CopyOutStagingTest.awaitNoSessions(server);
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                Cuda.ok(d.cuMemGetInfo(free, total), "cuMemGetInfo");
                assertEquals(freeBefore, free.get(JAVA_LONG, 0), "the first session's memory all went back");
                long p = cu.alloc(100);
                inWindow(p);
                assertNotEquals(firstSmall, p, "another session, another window");
            }
            CopyOutStagingTest.awaitNoSessions(server);
        }
    }

    private static MemorySegment struct2D(Cuda cu, Side src, Side dst, long width, long height) {
        MemorySegment s = cu.arena.allocate(Memcpy3D.SIZE_2D, 8);
        new Memcpy3D(src, dst, width, height, 1).write2D(s);
        return s;
    }

    private static Side hostSide(MemorySegment s, long pitch) {
        return new Side(Memcpy3D.HOST, 0, 0, 0, 0, s.address(), 0, 0, pitch, 0, 0);
    }

    private static Side deviceSide(long p, long pitch) {
        return new Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, p, 0, pitch, 0, 0);
    }

    /**
     * cuMemAllocPitch in the window with the pitch the (emulated) driver chooses, rows rounded up to 512 bytes;
     * an image goes up with one host pitch, across to a second pitched allocation and back with another; the
     * driver's validation stays; cuMemFree frees it.
     */
    @Test
    void pitchedAllocationsLieInTheWindowWithTheDriversPitch() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment dptr = cu.cell(), pitchOut = cu.cell();
            Cuda.ok(d.cuMemAllocPitch(dptr, pitchOut, 100, 6, 4), "cuMemAllocPitch");
            long small = dptr.get(JAVA_LONG, 0);
            inWindow(small);
            assertEquals(512, pitchOut.get(JAVA_LONG, 0), "the driver's pitch for 100 bytes");
            MemorySegment base = cu.cell(), size = cu.cell();
            Cuda.ok(d.cuMemGetAddressRange(base, size, small + 700), "cuMemGetAddressRange");
            assertEquals(small, base.get(JAVA_LONG, 0));
            assertEquals(512 * 6, size.get(JAVA_LONG, 0), "pitch times height");

            int width = 3000, height = 700, hostPitch = 3011, backPitch = 3023;
            Cuda.ok(d.cuMemAllocPitch(dptr, pitchOut, width, height, 8), "cuMemAllocPitch");
            long a = dptr.get(JAVA_LONG, 0), pitchA = pitchOut.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocPitch(dptr, pitchOut, width, height, 16), "cuMemAllocPitch");
            long b = dptr.get(JAVA_LONG, 0), pitchB = pitchOut.get(JAVA_LONG, 0);
            inWindow(a);
            inWindow(b);
            assertEquals(3072, pitchA);
            assertEquals(3072, pitchB);
            assertEquals(0, a % (2L << 20), "over a quarter granule: granules of its own");
            MemorySegment src = cu.arena.allocate((long) hostPitch * height);
            byte[] bytes = new byte[hostPitch * height];
            new Random(11).nextBytes(bytes);
            MemorySegment.copy(bytes, 0, src, JAVA_BYTE, 0, bytes.length);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, hostSide(src, hostPitch), deviceSide(a, pitchA), width, height)), "HtoD");
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, deviceSide(a, pitchA), deviceSide(b, pitchB), width, height)), "DtoD");
            MemorySegment back = cu.arena.allocate((long) backPitch * height).fill((byte) 0);
            long stream = cu.stream();
            Cuda.ok(d.cuMemcpy2DAsync(struct2D(cu, deviceSide(b, pitchB), hostSide(back, backPitch), width, height), stream),
                    "DtoH");
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            for (int y = 0; y < height; y++) {
                assertArrayEquals(src.asSlice((long) y * hostPitch, width).toArray(JAVA_BYTE),
                        back.asSlice((long) y * backPitch, width).toArray(JAVA_BYTE), "row " + y);
            }
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemAllocPitch(dptr, pitchOut, 100, 6, 3), "element size 3");
            Cuda.ok(d.cuMemFree(small), "cuMemFree");
            Cuda.ok(d.cuMemFree(a), "cuMemFree");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemFree(a), "freed twice");
            assertNotEquals(CuResult.CUDA_SUCCESS, d.cuMemsetD8(a, (byte) 1, 16), "gone once freed");
            Cuda.ok(d.cuMemFree(b), "cuMemFree");
        }
    }

    private static long allocAsync(Cuda cu, long bytes, long stream) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuMemAllocAsync(c, bytes, stream), "cuMemAllocAsync");
        long p = c.get(JAVA_LONG, 0);
        inWindow(p);
        return p;
    }

    /**
     * cuMemAllocAsync (the session's default pool) in the window: data goes through in stream order; the same stream
     * takes back its own free at once; another stream gets the block only once the first stream passed the free
     * (held here behind a stream wait until a non-blocking stream releases it). Small (a size-class block) and large
     * (granules of its own) alike.
     */
    @Test
    void asyncAllocationsAreReusedOnlyOnceTheirStreamPassedTheFree() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long s1 = cu.stream(), s2 = cu.stream();
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuStreamCreate(c, 1), "a non-blocking stream");
            long releaser = c.get(JAVA_LONG, 0);
            long flag = cu.alloc(16);
            for (int bytes : new int[] {64 << 10, 3 << 20}) {
                long a = allocAsync(cu, bytes, s1);
                byte[] data = new byte[bytes];
                new Random(bytes).nextBytes(data);
                MemorySegment host = cu.arena.allocate(bytes), back = cu.arena.allocate(bytes);
                MemorySegment.copy(data, 0, host, JAVA_BYTE, 0, bytes);
                Cuda.ok(d.cuMemcpyAsync(a, host.address(), bytes, s1), "HtoD");
                Cuda.ok(d.cuMemcpyAsync(back.address(), a, bytes, s1), "DtoH");
                Cuda.ok(d.cuStreamSynchronize(s1), "cuStreamSynchronize");
                assertArrayEquals(data, back.toArray(JAVA_BYTE));

                Cuda.ok(d.cuMemFreeAsync(a, s1), "cuMemFreeAsync");
                assertEquals(a, allocAsync(cu, bytes, s1), "the same stream takes its free at once");

                Cuda.ok(d.cuMemsetD32(flag, 0, 4), "clear the flag");
                Cuda.ok(d.cuStreamWaitValue32(s1, flag, 1, 0), "s1 waits for the flag");
                Cuda.ok(d.cuMemFreeAsync(a, s1), "a free s1 has not reached");
                long b = allocAsync(cu, bytes, s2);
                assertNotEquals(a, b, "another stream does not get it before s1 reached the free");
                Cuda.ok(d.cuStreamWriteValue32(releaser, flag, 1, 0), "release s1");
                Cuda.ok(d.cuStreamSynchronize(s1), "s1 passes the free");
                assertEquals(a, allocAsync(cu, bytes, s2), "reused once s1 passed the free");
                Cuda.ok(d.cuMemFreeAsync(a, s2), "free");
                Cuda.ok(d.cuMemFreeAsync(b, s2), "free");
                Cuda.ok(d.cuStreamSynchronize(s2), "sync");
            }
        }
    }

    /**
     * cuMemFreeAsync of a cuMemAlloc allocation gives it back when its stream reaches the free; a captured
     * cuMemFreeAsync of window memory succeeds (no node for the driver, the memory kept until the session ends) and
     * the captured graph, with a copy captured before it, still runs.
     */
    @Test
    void streamOrderedFreesOfPlainAndCapturedWindowMemory() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long s = cu.stream();
            long plain = cu.alloc(3 << 20);
            inWindow(plain);
            Cuda.ok(d.cuMemFreeAsync(plain, s), "cuMemFreeAsync of a cuMemAlloc allocation");
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertNotEquals(CuResult.CUDA_SUCCESS, d.cuMemsetD8(plain, (byte) 1, 16), "gone once the stream reached it");
            assertEquals(plain, cu.alloc(3 << 20), "its granules came back to the window");

            long a = allocAsync(cu, 4096, s), b = allocAsync(cu, 4096, s);
            cu.put(a, new byte[] {5, 6, 7, 8});
            Cuda.ok(d.cuStreamBeginCapture(s, 2), "begin (relaxed)");
            Cuda.ok(d.cuMemcpyAsync(b, a, 4, s), "a captured copy");
            Cuda.ok(d.cuMemFreeAsync(a, s), "a captured free of window memory");
            MemorySegment g = cu.cell(), exec = cu.cell();
            Cuda.ok(d.cuStreamEndCapture(s, g), "cuStreamEndCapture");
            Cuda.ok(d.cuGraphInstantiateWithFlags(exec, g.get(JAVA_LONG, 0), 0), "cuGraphInstantiateWithFlags");
            Cuda.ok(d.cuGraphLaunch(exec.get(JAVA_LONG, 0), s), "cuGraphLaunch");
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertArrayEquals(new byte[] {5, 6, 7, 8}, cu.get(b, 4));
            assertNotEquals(a, allocAsync(cu, 4096, s), "memory a captured free names is not reused");
        }
        CopyOutStagingTest.awaitNoSessions(server);
    }

    private static long poolAttr(Cuda cu, long pool, int attr) {
        MemorySegment v = cu.cell().fill((byte) 0);
        Cuda.ok(cu.d.cuMemPoolGetAttribute(pool, attr, v), "cuMemPoolGetAttribute " + attr);
        return v.get(JAVA_LONG, 0);
    }

    private static long freeBytes(Cuda cu) {
        MemorySegment free = cu.cell(), total = cu.cell();
        Cuda.ok(cu.d.cuMemGetInfo(free, total), "cuMemGetInfo");
        return free.get(JAVA_LONG, 0);
    }

    /**
     * A pool the program made: its allocations in the window; freed memory stays held until a synchronisation,
     * which gives back all beyond the release threshold (0: everything; 64 MiB: it stays, and the next allocation
     * reuses it); cuMemPoolTrimTo gives back the rest, down to its argument; all of it seen in the pool's reserved
     * and used bytes and in cuMemGetInfo. A pool's maxSize caps what it holds.
     */
    @Test
    void programPoolsHonourReleaseThresholdAndTrimInTheWindow() throws Exception {
        long mib4 = 4L << 20;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment props = cu.cell(MemoryProps.POOL_PROPS_SIZE).fill((byte) 0);
            props.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
            props.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemPoolCreate(c, props), "cuMemPoolCreate");
            long pool = c.get(JAVA_LONG, 0);
            long s = cu.stream(), s2 = cu.stream();
            cu.alloc(256); // the window is open before the first figure
            long freeBefore = freeBytes(cu);
            for (long threshold : new long[] {0, 64L << 20}) {
                Cuda.ok(d.cuMemPoolSetAttribute(pool, PoolAttributeRequest.RELEASE_THRESHOLD, cu.u64(threshold)), "threshold");
                long[] p = new long[3];
                for (int i = 0; i < 3; i++) {
                    Cuda.ok(d.cuMemAllocFromPoolAsync(c, mib4, pool, s), "cuMemAllocFromPoolAsync");
                    p[i] = c.get(JAVA_LONG, 0);
                    inWindow(p[i]);
                }
                cu.put(p[2] + mib4 - 4, new byte[] {1, 2, 3, 4});
                assertArrayEquals(new byte[] {1, 2, 3, 4}, cu.get(p[2] + mib4 - 4, 4));
                assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT));
                assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.USED_MEM_CURRENT));
                assertEquals(freeBefore - 3 * mib4, freeBytes(cu), "cuMemGetInfo sees the pool's memory");
                for (long q : p) {
                    Cuda.ok(d.cuMemFreeAsync(q, s), "cuMemFreeAsync");
                }
                assertEquals(0, poolAttr(cu, pool, PoolAttributeRequest.USED_MEM_CURRENT));
                assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT), "held until a synchronisation");
                Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
                long kept = Math.min(threshold, 3 * mib4);
                assertEquals(kept, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT), "threshold " + threshold);
                assertEquals(freeBefore - kept, freeBytes(cu), "cuMemGetInfo, threshold " + threshold);
                assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_HIGH));
                assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.USED_MEM_HIGH));
            }
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, mib4, pool, s2), "from the cache, on another stream");
            long again = c.get(JAVA_LONG, 0);
            assertEquals(3 * mib4, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT), "nothing new mapped");
            Cuda.ok(d.cuMemFreeAsync(again, s2), "cuMemFreeAsync");
            Cuda.ok(d.cuMemPoolTrimTo(pool, mib4), "cuMemPoolTrimTo");
            assertEquals(mib4, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT), "trimmed to 4 MiB");
            Cuda.ok(d.cuMemPoolTrimTo(pool, 0), "cuMemPoolTrimTo");
            assertEquals(0, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_CURRENT), "trimmed to nothing");
            assertEquals(freeBefore, freeBytes(cu), "all given back");
            Cuda.ok(d.cuMemPoolSetAttribute(pool, PoolAttributeRequest.RESERVED_MEM_HIGH, cu.u64(0)), "reset the high mark");
            assertEquals(0, poolAttr(cu, pool, PoolAttributeRequest.RESERVED_MEM_HIGH));
            Cuda.ok(d.cuMemPoolDestroy(pool), "cuMemPoolDestroy");

            props.set(JAVA_LONG, MemoryProps.POOL_MAX_SIZE, 2 * mib4);
            Cuda.ok(d.cuMemPoolCreate(c, props), "a pool of at most 8 MiB");
            long capped = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, mib4, capped, s), "4 MiB");
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, mib4, capped, s), "8 MiB");
            long last = c.get(JAVA_LONG, 0);
            assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, d.cuMemAllocFromPoolAsync(c, mib4, capped, s), "past maxSize");
            Cuda.ok(d.cuMemFreeAsync(last, s), "cuMemFreeAsync");
            Cuda.ok(d.cuMemAllocFromPoolAsync(c, mib4, capped, s), "the freed one again");
            assertEquals(last, c.get(JAVA_LONG, 0));
        }
        CopyOutStagingTest.awaitNoSessions(server);
    }
}
