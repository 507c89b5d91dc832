package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Host-to-device copies of several DATA chunks, which a backend with pinned host memory stages through
 * two pinned buffers (DMA of one chunk overlapping the receipt of the next), against an in-process
 * backend on the emulated device: every chunking edge, sync and async, the data checked on the device,
 * no pinned source reused or freed while its DMA may be in flight, and nothing left allocated.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CopyInStagingTest {
    private static final int CHUNK = 1 << 20;   // SessionLimits.DEFAULT.chunkBytes(): one DATA frame
    private static final int STAGING = 4 << 20; // one staging buffer
    private static final long[] SIZES = {1, CHUNK - 1, CHUNK, CHUNK + 1, STAGING - 1, STAGING, STAGING + 1,
            2L * STAGING, 2L * STAGING + 1, 5L * STAGING + 4097, 16L << 20};

    @ParameterizedTest(name = "pinned={0}")
    @ValueSource(booleans = {false, true})
    void everyChunkingEdgeArrivesIntactAndNoPinnedSourceIsReusedEarly(boolean pinned) throws Exception {
        CopyOutStagingTest.PinnedHost h = new CopyOutStagingTest.PinnedHost();
        Path dir = Files.createTempDirectory("gpusockets-staging");
        CudaDriver driver = pinned ? h.driver : h.device;
        long max = java.util.Arrays.stream(SIZES).max().orElseThrow();
        byte[] data = new byte[(int) max + 64];
        new Random(11).nextBytes(data);
        try (BackendServer server = new BackendServer(DriverHost.initialise(driver, "emulated"), BackendSettings.fromSystemProperties())) {
            long freeBefore = h.deviceFree();
            String address = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long dptr = cu.alloc(data.length);
                long stream = cu.stream();
                MemorySegment host = Arena.ofAuto().allocate(data.length);
                host.copyFrom(MemorySegment.ofArray(data));
                MemorySegment back = Arena.ofAuto().allocate(data.length);
                for (long n : SIZES) {
                    for (int mode = 0; mode < 2; mode++) { // sync (staged when pinned), async on a stream
                        int at = (int) (n % 13); // an unaligned source and destination
                        Cuda.ok(d.cuMemsetD8(dptr, (byte) 0x5A, data.length), "cuMemsetD8");
                        MemorySegment src = host.asSlice(at, n);
                        int r = mode == 0 ? d.cuMemcpyHtoD(dptr + at, src, n) : d.cuMemcpyHtoDAsync(dptr + at, src, n, stream);
                        assertEquals("CUDA_SUCCESS", CuResult.name(r), "size " + n + " mode " + mode);
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        Cuda.ok(d.cuMemcpyDtoH(back, dptr, data.length), "cuMemcpyDtoH");
                        byte[] got = back.toArray(JAVA_BYTE);
                        assertArrayEquals(java.util.Arrays.copyOfRange(data, at, at + (int) n),
                                java.util.Arrays.copyOfRange(got, at, at + (int) n), "size " + n + " mode " + mode);
                        assertEquals((byte) 0x5A, got[at + (int) n], "byte past the end written, size " + n);
                        if (at > 0) {
                            assertEquals((byte) 0x5A, got[at - 1], "byte before the start written, size " + n);
                        }
                    }
                }
                // A copy running past the allocation is refused, and the session goes on.
                assertEquals("CUDA_ERROR_INVALID_VALUE", CuResult.name(d.cuMemcpyHtoD(dptr + 1, host, data.length)));
                Cuda.ok(d.cuMemcpyHtoD(dptr, host, 3L * CHUNK), "cuMemcpyHtoD after a refused one");
            }
            CopyOutStagingTest.awaitNoSessions(server);
            assertEquals(freeBefore, h.deviceFree(), "device memory left allocated after the session");
        } finally {
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
        assertEquals(List.of(), h.violations);
        if (pinned) {
            assertTrue(h.pinnedDmas.get() > 0, "no copy went through pinned staging");
            assertTrue(h.allocated.get() >= 2 && h.allocated.get() <= 4, "pinned buffers made: " + h.allocated.get());
            assertEquals(h.allocated.get(), h.freed.get(), "pinned buffers freed");
            assertEquals(Map.of(), h.live);
        } else {
            assertEquals(0, h.pinnedDmas.get());
        }
        h.device.close();
    }
}
