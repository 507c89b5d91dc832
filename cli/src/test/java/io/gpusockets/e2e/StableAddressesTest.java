package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Address-stable memory (issue 22, item 2, first part; {@code -Dgpusockets.backend.stableAddresses=true}): a
 * session's cuMemAlloc allocations lie in its own address window in the upper TiB (at the address its session
 * id gives), small ones in shared granules, large ones in granules of their own; what the program sees (data,
 * kernels, cuMemGetAddressRange, range attributes) is as without it, and everything goes back when the session
 * ends.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StableAddressesTest {
    private static final long WINDOWS_BASE = 0x7f00_0000_0000L;
    private static final long WINDOWS_END = 0x7fff_0000_0000L;

    @Test
    void allocationsLieInTheSessionsWindowAndBehaveAsTheDriversDo() throws Exception {
        String was = System.setProperty("gpusockets.backend.stableAddresses", "true");
        EmulatedDevice device = new EmulatedDevice();
        Path dir = Files.createTempDirectory("gpusockets-stable");
        try (BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"), BackendSettings.fromSystemProperties());
             Arena arena = Arena.ofConfined()) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
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
                    assertTrue(p >= WINDOWS_BASE && p < WINDOWS_END, "0x" + Long.toHexString(p) + " outside the windows");
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
                assertTrue(p >= WINDOWS_BASE && p < WINDOWS_END);
                assertNotEquals(firstSmall, p, "another session, another window");
            }
            CopyOutStagingTest.awaitNoSessions(server);
        } finally {
            if (was == null) {
                System.clearProperty("gpusockets.backend.stableAddresses");
            } else {
                System.setProperty("gpusockets.backend.stableAddresses", was);
            }
            device.close();
        }
    }
}
