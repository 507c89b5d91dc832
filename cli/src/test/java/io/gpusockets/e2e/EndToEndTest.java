package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** A backend process (emulated device) driven through the Java frontend over tcp:// and unix://. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EndToEndTest extends EmulatedBackendTest {

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void queriesTheEmulatedDeviceAndSaysItIsEmulated(String scheme) throws Exception {
        try (RemoteCudaDriver d = connect(scheme)) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            assertEquals(1, cu.deviceCount());
            assertTrue(cu.deviceName().contains("emulated"), cu.deviceName());
            assertTrue(d.backendDescription().toLowerCase().contains("emulated"), d.backendDescription());
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuDriverGetVersion(v), "cuDriverGetVersion");
            assertTrue(v.get(java.lang.foreign.ValueLayout.JAVA_INT, 0) >= 12000);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void addsVectorsOfAMillionFloatsLikeTheCpu(String scheme) throws Exception {
        try (RemoteCudaDriver d = connect(scheme)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int n = 1 << 20;
            float[] a = new float[n], b = new float[n];
            Random r = new Random(1);
            for (int i = 0; i < n; i++) {
                a[i] = r.nextFloat();
                b[i] = r.nextFloat();
            }
            long da = cu.alloc(4L * n), db = cu.alloc(4L * n), dc = cu.alloc(4L * n);
            MemorySegment ha = cu.arena.allocate(4L * n), hb = cu.arena.allocate(4L * n), hc = cu.arena.allocate(4L * n);
            MemorySegment.copy(a, 0, ha, JAVA_FLOAT, 0, n);
            MemorySegment.copy(b, 0, hb, JAVA_FLOAT, 0, n);
            Cuda.ok(d.cuMemcpyHtoD(da, ha, 4L * n), "HtoD a");
            Cuda.ok(d.cuMemcpyHtoD(db, hb, 4L * n), "HtoD b");
            long f = cu.function(cu.loadKernels(), "gpus_vector_add");
            Cuda.ok(d.cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, 0,
                    cu.params(cu.u64(da), cu.u64(db), cu.u64(dc), cu.u32(n)), MemorySegment.NULL), "launch");
            Cuda.ok(d.cuMemcpyDtoH(hc, dc, 4L * n), "DtoH c");
            for (int i = 0; i < n; i++) {
                assertEquals(a[i] + b[i], hc.getAtIndex(JAVA_FLOAT, i), "element " + i);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 7, 4095, 4096, (1 << 20) + 3, 9 << 20})
    void copiesRoundTripByteForByte(int size) throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            byte[] data = new byte[size];
            new Random(size).nextBytes(data);
            long p = cu.alloc(size);
            cu.put(p, data);
            assertArrayEquals(data, cu.get(p, size));
        }
    }

    @Test
    void launchesWithAPackedExtraBuffer() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long p = cu.alloc(4 * 1000);
            long f = cu.function(cu.loadKernels(), "gpus_fill_u32");
            // gpus_fill_u32(unsigned int* p @0, unsigned int value @8, unsigned int n @12): 16 bytes
            MemorySegment buf = cu.arena.allocate(16, 8);
            buf.set(JAVA_LONG, 0, p);
            buf.set(java.lang.foreign.ValueLayout.JAVA_INT, 8, 0xCAFE);
            buf.set(java.lang.foreign.ValueLayout.JAVA_INT, 12, 1000);
            MemorySegment size = cu.u64(16);
            MemorySegment extra = cu.arena.allocate(JAVA_LONG, 5);
            extra.setAtIndex(JAVA_LONG, 0, 1);
            extra.setAtIndex(java.lang.foreign.ValueLayout.ADDRESS, 1, buf);
            extra.setAtIndex(JAVA_LONG, 2, 2);
            extra.setAtIndex(java.lang.foreign.ValueLayout.ADDRESS, 3, size);
            extra.setAtIndex(JAVA_LONG, 4, 0);
            Cuda.ok(d.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, 0, MemorySegment.NULL, extra), "launch extra");
            Cuda.ok(d.cuCtxSynchronize(), "sync");
            MemorySegment out = MemorySegment.ofArray(cu.get(p, 4000));
            for (int i = 0; i < 1000; i++) {
                assertEquals(0xCAFE, out.getAtIndex(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, i));
            }
        }
    }

    @Test
    void passesTwelveParametersOfMixedSizes() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long out = cu.alloc(176);
            long f = cu.function(cu.loadKernels(), "gpus_mixed12");
            MemorySegment[] v = new MemorySegment[12];
            int[] sizes = {1, 2, 4, 8, 4, 8, 8, 16, 2, 4, 16};
            byte[] expected = new byte[176];
            for (int k = 0; k < 11; k++) {
                v[k] = cu.arena.allocate(sizes[k], 16);
                for (int j = 0; j < sizes[k]; j++) {
                    byte b = (byte) (0x10 * k + j + 1);
                    v[k].set(JAVA_BYTE, j, b);
                    expected[16 * k + j] = b;
                }
            }
            v[11] = cu.u64(out);
            Cuda.ok(d.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, cu.params(v), MemorySegment.NULL), "launch");
            assertArrayEquals(expected, cu.get(out, 176));
        }
    }

    @Test
    void streamsAndEventsKeepOrderAndMeasureTime() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long s = cu.stream(), start = cu.event(), end = cu.event();
            long p = cu.alloc(4096);
            long mod = cu.loadKernels();
            Cuda.ok(d.cuEventRecord(start, s), "record start");
            Cuda.ok(d.cuLaunchKernel(cu.function(mod, "gpus_sleep"), 1, 1, 1, 1, 1, 1, 0, s,
                    cu.params(cu.u64(50_000_000L)), MemorySegment.NULL), "sleep");
            Cuda.ok(d.cuMemsetD32Async(p, 7, 1024, s), "memset async");
            Cuda.ok(d.cuEventRecord(end, s), "record end");
            Cuda.ok(d.cuEventSynchronize(end), "event sync");
            MemorySegment ms = cu.cell();
            Cuda.ok(d.cuEventElapsedTime(ms, start, end), "elapsed");
            assertTrue(ms.get(JAVA_FLOAT, 0) >= 45f, "elapsed " + ms.get(JAVA_FLOAT, 0));
            MemorySegment data = MemorySegment.ofArray(cu.get(p, 4096));
            assertEquals(7, data.getAtIndex(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 1023));
            Cuda.ok(d.cuStreamDestroy(s), "stream destroy");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuStreamSynchronize(s));
        }
    }

    @Test
    void latchesAsyncErrorsUntilTheNextSynchronizingCall() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            assertTrue(d.pipelining());
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long empty = cu.function(cu.loadKernels(), "gpus_empty");
            long bogusStream = 0x12345;
            assertEquals(CuResult.CUDA_SUCCESS, d.cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, bogusStream,
                    MemorySegment.NULL, MemorySegment.NULL), "pipelined launch returns at once");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuCtxSynchronize());
            assertEquals(CuResult.CUDA_SUCCESS, d.cuCtxSynchronize(), "reported once");
        }
    }

    @Test
    void withoutPipeliningAsyncErrorsComeBackAtOnce() throws Exception {
        FrontendConfig config = FrontendConfig.fromEnvironment(Map.of(FrontendConfig.SERVER_ENV, backend.tcp(),
                FrontendConfig.ASYNC_ENV, "0"));
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(config)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long empty = cu.function(cu.loadKernels(), "gpus_empty");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, 0x12345,
                    MemorySegment.NULL, MemorySegment.NULL));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuLaunchKernel(0x12345, 1, 1, 1, 1, 1, 1, 0, 0,
                    MemorySegment.NULL, MemorySegment.NULL), "an unknown function is refused before sending");
        }
    }

    @Test
    void aBlockingCallOnOneThreadDoesNotDelayAnother() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            long ctx = cu.primaryContext();
            long sleep = cu.function(cu.loadKernels(), "gpus_sleep");
            CompletableFuture<Long> slow = CompletableFuture.supplyAsync(() -> {
                Cuda.ok(d.cuCtxSetCurrent(ctx), "set current");
                long t0 = System.nanoTime();
                Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, 0, cu.params(cu.u64(600_000_000L)),
                        MemorySegment.NULL), "sleep");
                Cuda.ok(d.cuCtxSynchronize(), "sync");
                return System.nanoTime() - t0;
            });
            Thread.sleep(100);
            long t0 = System.nanoTime();
            MemorySegment c = cu.cell();
            for (int i = 0; i < 200; i++) {
                Cuda.ok(d.cuCtxGetDevice(c), "cuCtxGetDevice");
            }
            long fast = System.nanoTime() - t0;
            assertTrue(fast < TimeUnit.MILLISECONDS.toNanos(400), "null calls took " + fast / 1_000_000 + " ms");
            assertTrue(slow.get() >= TimeUnit.MILLISECONDS.toNanos(550), "sleep kernel returned early");
        }
    }

    @Test
    void answersErrorNamesLocally() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            MemorySegment p = new Cuda(d).cell();
            Cuda.ok(d.cuGetErrorName(CuResult.CUDA_ERROR_INVALID_VALUE, p), "cuGetErrorName");
            assertEquals("CUDA_ERROR_INVALID_VALUE", p.get(java.lang.foreign.ValueLayout.ADDRESS, 0).reinterpret(100).getString(0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGetErrorString(123456, p));
        }
    }

    @Test
    void releasesEverythingWhenAClientIsKilled() throws Exception {
        Process client = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                VanishingClient.class.getName(), backend.tcp()).redirectErrorStream(true).start();
        try {
            var out = new java.io.BufferedReader(new java.io.InputStreamReader(client.getInputStream()));
            String ready = out.readLine();
            assertTrue(ready != null && ready.startsWith("session "), "client said: " + ready);
            client.destroyForcibly(); // SIGKILL: no GOODBYE, no cleanup on the client side
            String line = backend.awaitLog(ready.strip() + " ended", 10_000);
            assertTrue(line.contains("1 context(s), 1 allocation(s) (3145728 bytes)") && line.contains("1 stream(s)"), line);
        } finally {
            client.destroyForcibly();
        }
    }

    @Test
    void anUnreachableBackendFailsWithinTheTimeout() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        FrontendConfig config = new FrontendConfig(List.of("tcp://127.0.0.1:" + port), Duration.ofMillis(1000), true,
                null, "test");
        long t0 = System.nanoTime();
        assertThrows(IOException.class, () -> RemoteCudaDriver.connect(config));
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(3));
    }

    @Test
    void theContextStackFollowsTheLaneWhicheverBackendThreadRunsTheCall() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuCtxCreate(c, MemorySegment.NULL, 0, 0), "cuCtxCreate A");
            long a = c.get(JAVA_LONG, 0);
            long pa = cu.alloc(4096); // made in A (quick calls run on the reader, copies on the lane thread)
            Cuda.ok(d.cuCtxCreate(c, MemorySegment.NULL, 0, 0), "cuCtxCreate B");
            long b = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuCtxGetCurrent(c), "get");
            assertEquals(b, c.get(JAVA_LONG, 0), "a new context is pushed");
            byte[] data = new byte[4096];
            new Random(11).nextBytes(data);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyHtoD(pa, MemorySegment.ofArray(new byte[16]), 16),
                    "A's memory is not B's");
            Cuda.ok(d.cuCtxPopCurrent(c), "pop");
            assertEquals(b, c.get(JAVA_LONG, 0));
            Cuda.ok(d.cuCtxGetCurrent(c), "get");
            assertEquals(a, c.get(JAVA_LONG, 0), "A is current again");
            cu.put(pa, data);
            assertArrayEquals(data, cu.get(pa, 4096));
            Cuda.ok(d.cuCtxPushCurrent(b), "push B");
            Cuda.ok(d.cuCtxSetCurrent(a), "set A over B");
            Cuda.ok(d.cuCtxGetCurrent(c), "get");
            assertEquals(a, c.get(JAVA_LONG, 0));
            Cuda.ok(d.cuCtxDestroy(a), "destroy A");
            Cuda.ok(d.cuCtxGetCurrent(c), "get");
            assertEquals(0, c.get(JAVA_LONG, 0), "a destroyed context leaves the stack");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPushCurrent(a));
            Cuda.ok(d.cuCtxDestroy(b), "destroy B");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPopCurrent(c), "empty stack");
        }
    }
}
