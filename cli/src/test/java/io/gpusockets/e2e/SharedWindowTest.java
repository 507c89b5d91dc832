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
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Bulk data through the shared window of a ring:// connection, whose few slots each side reuses once
 * the other is done with them: copies both ways, sync and async, from below the threshold to several
 * times the window's size, back-to-back copies, pitched copies whose rows are gathered into it, and a
 * module image; with plain and with pinned host memory on the backend. Then the window's protocol against a raw client: references outside it, or on a session
 * that did not agree to it, close that session and leave the backend serving.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SharedWindowTest {
    private static final int WINDOW = 8 << 20;
    private static int next;

    private static String ringUri(String what, String params) {
        return "ring://window-" + what + "-" + ProcessHandle.current().pid() + "-" + (next++) + params;
    }

    @ParameterizedTest(name = "pinned={0}")
    @ValueSource(booleans = {false, true})
    void copiesOfAnySizeGoThroughTheWindowSlotsIntact(boolean pinned) throws Exception {
        CopyOutStagingTest.PinnedHost h = new CopyOutStagingTest.PinnedHost();
        long[] sizes = {1000, (64 << 10) - 1, 64 << 10, (1 << 20) + 3, (4 << 20) + 4097, WINDOW, WINDOW + 1, 3L * WINDOW + 5};
        long max = Arrays.stream(sizes).max().orElseThrow();
        byte[] data = new byte[(int) max + 64];
        new Random(3).nextBytes(data);
        long windowed = 0;
        try (BackendServer server = new BackendServer(DriverHost.initialise(pinned ? h.driver : h.device, "emulated"),
                BackendSettings.fromSystemProperties())) {
            long freeBefore = h.deviceFree();
            String address = server.listen(TransportUri.parse(ringUri("copies", "?size=1m&window=8m"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long dptr = cu.alloc(data.length);
                long stream = cu.stream();
                MemorySegment host = Arena.ofAuto().allocate(data.length);
                host.copyFrom(MemorySegment.ofArray(data));
                MemorySegment back = Arena.ofAuto().allocate(data.length);
                for (long n : sizes) {
                    for (int mode = 0; mode < 2; mode++) { // sync, async on a stream
                        int at = (int) (n % 11);
                        Cuda.ok(d.cuMemsetD8(dptr, (byte) 0x5A, data.length), "cuMemsetD8");
                        MemorySegment src = host.asSlice(at, n);
                        int r = mode == 0 ? d.cuMemcpyHtoD(dptr + at, src, n) : d.cuMemcpyHtoDAsync(dptr + at, src, n, stream);
                        assertEquals("CUDA_SUCCESS", CuResult.name(r), "HtoD size " + n + " mode " + mode);
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        back.fill((byte) 0x33);
                        r = mode == 0 ? d.cuMemcpyDtoH(back.asSlice(at, n), dptr + at, n)
                                : d.cuMemcpyDtoHAsync(back.asSlice(at, n), dptr + at, n, stream);
                        assertEquals("CUDA_SUCCESS", CuResult.name(r), "DtoH size " + n + " mode " + mode);
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        byte[] got = back.toArray(JAVA_BYTE);
                        assertArrayEquals(Arrays.copyOfRange(data, at, at + (int) n), Arrays.copyOfRange(got, at, at + (int) n),
                                "size " + n + " mode " + mode);
                        assertEquals((byte) 0x33, got[at + (int) n], "byte past the end written, size " + n);
                        if (mode == 0 && n >= 64 << 10) {
                            windowed += n; // a synchronous copy in (async ones are pipelined: no reply to wait for)
                        }
                        if (n > 64 << 10) {
                            windowed += n; // a copy out above the small-copy size, sync or async
                        }
                    }
                }
                // Synchronous copies back to back, nothing in between: each reuses the window, so each must
                // have waited for its DMA from the window before it returned.
                for (int i = 0; i < 3; i++) {
                    Cuda.ok(d.cuMemcpyHtoD(dptr + i * (2L << 20), host.asSlice(i * 7L, 2L << 20), 2L << 20), "back to back " + i);
                    windowed += 2L << 20;
                }
                for (int i = 0; i < 3; i++) {
                    assertArrayEquals(Arrays.copyOfRange(data, i * 7, i * 7 + (2 << 20)), cu.get(dptr + i * (2L << 20), 2 << 20),
                            "back-to-back copy " + i);
                    windowed += 2L << 20;
                }
                // Pitched copies gather their rows into the window, and scatter them out of it.
                long pitch = 4096, width = 3000, height = 700;
                MemorySegment rows = Arena.ofAuto().allocate(pitch * height);
                rows.copyFrom(MemorySegment.ofArray(data).asSlice(0, pitch * height));
                Cuda.ok(d.cuMemsetD8(dptr, (byte) 0, data.length), "cuMemsetD8");
                copy2D(cu, d, rows, dptr, pitch, width, height, true);
                MemorySegment rowsBack = Arena.ofAuto().allocate(pitch * height).fill((byte) 0x44);
                copy2D(cu, d, rowsBack, dptr, pitch, width, height, false);
                for (long y = 0; y < height; y++) {
                    assertArrayEquals(rows.asSlice(y * pitch, width).toArray(JAVA_BYTE),
                            rowsBack.asSlice(y * pitch, width).toArray(JAVA_BYTE), "row " + y);
                    assertEquals((byte) 0x44, rowsBack.get(JAVA_BYTE, y * pitch + width), "pitch gap written, row " + y);
                }
                windowed += width * height; // the rows going in (rows coming out ride in the byte stream)
                // A module image of more than 64 KiB goes through the window too.
                byte[] ptx = Cuda.kernelsPtx();
                byte[] padded = new byte[Math.max(ptx.length, 70 << 10) + 1];
                System.arraycopy(ptx, 0, padded, 0, ptx.length - 1);
                Arrays.fill(padded, ptx.length - 1, padded.length - 1, (byte) ' ');
                MemorySegment image = Arena.ofAuto().allocate(padded.length);
                image.copyFrom(MemorySegment.ofArray(padded));
                MemorySegment module = cu.cell();
                Cuda.ok(d.cuModuleLoadData(module, image), "cuModuleLoadData through the window");
                windowed += padded.length;
            }
            CopyOutStagingTest.awaitNoSessions(server);
            assertEquals(windowed, server.windowBytesCarried(), "bytes through the window");
            assertEquals(freeBefore, h.deviceFree(), "device memory left allocated after the session");
        }
        assertEquals(List.of(), h.violations);
        if (pinned) {
            assertEquals(h.allocated.get(), h.freed.get(), "pinned buffers freed");
            assertEquals(Map.of(), h.live);
            assertEquals(1, h.registrations.get(), "the window is page-locked once per session");
            assertEquals(Map.of(), h.registered, "the window's registration is undone before the session ends");
            assertTrue(h.pinnedDmas.get() > 0, "DMA straight from the window");
        } else {
            assertEquals(0, h.registrations.get());
        }
        h.device.close();
    }

    private static void copy2D(Cuda cu, RemoteCudaDriver d, MemorySegment host, long dptr, long pitch, long width,
                               long height, boolean toDevice) {
        MemorySegment p = cu.cell(128).fill((byte) 0); // CUDA_MEMCPY2D: src fields from 0, dst fields from 56
        int hostType = 1, deviceType = 2;
        var INT = java.lang.foreign.ValueLayout.JAVA_INT;
        var LONG = java.lang.foreign.ValueLayout.JAVA_LONG;
        p.set(INT, 16, toDevice ? hostType : deviceType);      // srcMemoryType
        p.set(INT, 72, toDevice ? deviceType : hostType);      // dstMemoryType
        if (toDevice) {
            p.set(LONG, 24, host.address());                    // srcHost
            p.set(LONG, 88, dptr);                              // dstDevice
        } else {
            p.set(LONG, 32, dptr);                              // srcDevice
            p.set(LONG, 80, host.address());                    // dstHost
        }
        p.set(LONG, 48, pitch);   // srcPitch
        p.set(LONG, 104, pitch);  // dstPitch
        p.set(LONG, 112, width);  // WidthInBytes
        p.set(LONG, 120, height); // Height
        Cuda.ok(d.cuMemcpy2D(p), "cuMemcpy2D " + (toDevice ? "HtoD" : "DtoH"));
    }

    @Test
    void windowReferencesOutsideItOrWithoutItCloseThatSessionOnly() throws Exception {
        try (BackendServer server = new BackendServer(DriverHost.initialise(new io.gpusockets.emulated.EmulatedDevice(),
                "emulated"), BackendSettings.fromSystemProperties())) {
            String address = server.listen(TransportUri.parse(ringUri("bad", "?size=64k&window=64k"))).toString();
            long[][] refs = {{0, 0}, {-1, 16}, {60 << 10, 8 << 10}, {Long.MAX_VALUE, 1}, {0, (64 << 10) + 1}};
            for (int i = 0; i <= refs.length; i++) {
                boolean agreed = i < refs.length;
                try (RawClient c = new RawClient(address)) {
                    RawClient.Frame f = c.hello(Handshake.PROTOCOL_VERSION, agreed ? Handshake.FEATURE_WINDOW : 0);
                    assertEquals(Opcodes.WELCOME, f.header().opcode());
                    int features = Handshake.Welcome.decode(f.body().order(ByteOrder.LITTLE_ENDIAN)).features();
                    assertEquals(agreed, (features & Handshake.FEATURE_WINDOW) != 0, "window granted as asked");
                    long[] ref = agreed ? refs[i] : new long[] {0, 16};
                    ByteBuffer body = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(ref[0]).putLong(ref[1]).flip();
                    c.channel.send(Opcodes.DATA, FrameHeader.FLAG_WINDOW, 1, 1, body);
                    assertTrue(c.closedByPeerWithin(5000), "session closed after window reference " + Arrays.toString(ref)
                            + (agreed ? "" : " without the window feature"));
                }
            }
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(address)) {
                assertEquals(1, new Cuda(d).deviceCount(), "the backend still serves");
            }
        }
    }
}
