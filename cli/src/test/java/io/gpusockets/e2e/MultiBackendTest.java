package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.FrontendDrivers;
import io.gpusockets.frontend.MultiBackendDriver;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.ServerSocket;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Two backend processes (one emulated device each) merged by GPUSOCKETS_SERVER=uri0,uri1. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MultiBackendTest {
    private static BackendProcess first;
    private static BackendProcess second;

    @BeforeAll
    static void startBackends() throws Exception {
        // the device list across backends, not isolation: mode context spares a worker JVM per session
        first = BackendProcess.start("--isolation", "context");
        second = BackendProcess.start("--isolation", "context");
    }

    @AfterAll
    static void stopBackends() throws Exception {
        first.close();
        second.close();
    }

    /** Both backends, over different transports; {@code async} off makes a refused launch answer at once. */
    private static MultiBackendDriver merged(boolean async) throws IOException {
        FrontendConfig config = FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, first.tcp() + ", " + second.unix(),
                FrontendConfig.ASYNC_ENV, async ? "1" : "0"));
        CudaDriver d = FrontendDrivers.connect(config);
        MultiBackendDriver m = assertInstanceOf(MultiBackendDriver.class, d);
        Cuda.ok(m.cuInit(0), "cuInit");
        return m;
    }

    private static byte[] uuid(Cuda cu, int dev) {
        MemorySegment u = cu.arena.allocate(16);
        Cuda.ok(cu.d.cuDeviceGetUuid(u, dev), "cuDeviceGetUuid " + dev);
        return u.toArray(JAVA_BYTE);
    }

    private static int intOut(Cuda cu, java.util.function.Function<MemorySegment, Integer> call, String what) {
        MemorySegment c = cu.cell();
        Cuda.ok(call.apply(c), what);
        return c.get(JAVA_INT, 0);
    }

    private static long createContext(Cuda cu, int dev) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuCtxCreate(c, MemorySegment.NULL, 0, dev), "cuCtxCreate " + dev);
        return c.get(JAVA_LONG, 0);
    }

    private static long current(Cuda cu) {
        MemorySegment c = cu.cell();
        Cuda.ok(cu.d.cuCtxGetCurrent(c), "cuCtxGetCurrent");
        return c.get(JAVA_LONG, 0);
    }

    @Test
    void oneServerGivesAPlainRemoteDriver() throws Exception {
        try (var d = (AutoCloseable) FrontendDrivers.connect(FrontendConfig.forServer(first.tcp()))) {
            assertInstanceOf(RemoteCudaDriver.class, d);
        }
    }

    @Test
    void mergesTheDevicesOfBothBackendsIntoOneOrdinalList() throws Exception {
        try (MultiBackendDriver d = merged(true);
             RemoteCudaDriver direct0 = RemoteCudaDriver.connect(first.tcp());
             RemoteCudaDriver direct1 = RemoteCudaDriver.connect(second.tcp())) {
            Cuda cu = new Cuda(d);
            assertEquals(2, d.backendCount());
            assertEquals(2, cu.deviceCount());
            assertEquals(0, intOut(cu, c -> d.cuDeviceGet(c, 0), "cuDeviceGet 0"));
            assertEquals(1, intOut(cu, c -> d.cuDeviceGet(c, 1), "cuDeviceGet 1"));
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceGet(cu.cell(), 2));
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceGet(cu.cell(), -1));
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceGetName(cu.arena.allocate(64), 64, 2));
            MemorySegment name = cu.arena.allocate(256);
            Cuda.ok(d.cuDeviceGetName(name, 256, 1), "cuDeviceGetName 1");
            assertTrue(name.getString(0).contains("emulated"), name.getString(0));
            // Each emulated device has a random UUID: the merged ordinals must lead to the right backend.
            Cuda.ok(direct0.cuInit(0), "cuInit direct 0");
            Cuda.ok(direct1.cuInit(0), "cuInit direct 1");
            assertArrayEquals(uuid(new Cuda(direct0), 0), uuid(cu, 0));
            assertArrayEquals(uuid(new Cuda(direct1), 0), uuid(cu, 1));
            assertFalse(java.util.Arrays.equals(uuid(cu, 0), uuid(cu, 1)));
            int version = intOut(cu, d::cuDriverGetVersion, "cuDriverGetVersion");
            assertEquals(intOut(new Cuda(direct0), direct0::cuDriverGetVersion, "version 0"), version);
        }
    }

    @Test
    void addsVectorsOnEachDeviceInItsOwnContext() throws Exception {
        try (MultiBackendDriver d = merged(true)) {
            Cuda cu = new Cuda(d);
            int n = 1 << 16;
            long[] ctx = new long[2], fn = new long[2], a = new long[2], b = new long[2], c = new long[2];
            for (int dev = 0; dev < 2; dev++) {
                ctx[dev] = createContext(cu, dev);
                assertEquals(dev, MultiBackendDriver.backendOf(ctx[dev]), "context tagged with its backend");
                assertEquals(ctx[dev], current(cu), "cuCtxCreate makes the context current");
                assertEquals(dev, intOut(cu, d::cuCtxGetDevice, "cuCtxGetDevice"));
                fn[dev] = cu.function(cu.loadKernels(), "gpus_vector_add");
                a[dev] = cu.alloc(4L * n);
                b[dev] = cu.alloc(4L * n);
                c[dev] = cu.alloc(4L * n);
            }
            // Interleaved: each device's pointers are only meaningful while its context is current.
            MemorySegment ha = cu.arena.allocate(4L * n), hb = cu.arena.allocate(4L * n), hc = cu.arena.allocate(4L * n);
            for (int dev = 0; dev < 2; dev++) {
                Cuda.ok(d.cuCtxSetCurrent(ctx[dev]), "set current " + dev);
                for (int i = 0; i < n; i++) {
                    ha.setAtIndex(JAVA_FLOAT, i, i * (dev + 1));
                    hb.setAtIndex(JAVA_FLOAT, i, 0.5f + dev);
                }
                Cuda.ok(d.cuMemcpyHtoD(a[dev], ha, 4L * n), "HtoD a");
                Cuda.ok(d.cuMemcpyHtoD(b[dev], hb, 4L * n), "HtoD b");
                Cuda.ok(d.cuLaunchKernel(fn[dev], n / 256, 1, 1, 256, 1, 1, 0, 0,
                        cu.params(cu.u64(a[dev]), cu.u64(b[dev]), cu.u64(c[dev]), cu.u32(n)), MemorySegment.NULL), "launch");
            }
            for (int dev = 1; dev >= 0; dev--) {
                Cuda.ok(d.cuCtxSetCurrent(ctx[dev]), "set current " + dev);
                Cuda.ok(d.cuMemcpyDtoH(hc, c[dev], 4L * n), "DtoH c");
                for (int i = 0; i < n; i++) {
                    assertEquals(i * (dev + 1) + 0.5f + dev, hc.getAtIndex(JAVA_FLOAT, i), "device " + dev + " element " + i);
                }
            }
            for (int dev = 0; dev < 2; dev++) {
                Cuda.ok(d.cuCtxDestroy(ctx[dev]), "destroy " + dev);
            }
        }
    }

    @Test
    void refusesHandlesOfTheOtherBackendWhileThisOnesContextIsCurrent() throws Exception {
        try (MultiBackendDriver d = merged(false)) {
            Cuda cu = new Cuda(d);
            long ctx1 = createContext(cu, 1);
            long f1 = cu.function(cu.loadKernels(), "gpus_empty");
            long event1 = cu.event();
            long ctx0 = createContext(cu, 0);
            long stream0 = cu.stream();
            assertEquals(ctx0, current(cu));

            // Backend 1 has no context current for this thread: it refuses, as a driver refuses another context's handle.
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuLaunchKernel(f1, 1, 1, 1, 1, 1, 1, 0, 0,
                    MemorySegment.NULL, MemorySegment.NULL), "backend 1's function with backend 0's context current");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuEventRecord(event1, 0), "backend 1's event");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuStreamWaitEvent(stream0, event1, 0),
                    "handles of two backends in one call");
            long untagged = (1L << 56) - 1;
            long foreign = stream0 & untagged | 8L << 56;
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuStreamSynchronize(foreign), "a tag no backend has");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxSetCurrent(ctx0 & untagged),
                    "an untagged context");

            Cuda.ok(d.cuCtxSetCurrent(ctx1), "set current 1");
            Cuda.ok(d.cuLaunchKernel(f1, 1, 1, 1, 1, 1, 1, 0, 0, MemorySegment.NULL, MemorySegment.NULL),
                    "the same launch with its own context current");
            Cuda.ok(d.cuEventRecord(event1, 0), "record with its own context current");
            Cuda.ok(d.cuEventSynchronize(event1), "event sync");
        }
    }

    /** The stream inside a CUlaunchConfig is a handle too: untagged on its way, and refused for another backend. */
    @Test
    void launchesWithALaunchConfigOnTheSecondBackend() throws Exception {
        try (MultiBackendDriver d = merged(false)) {
            Cuda cu = new Cuda(d);
            createContext(cu, 0);
            long stream0 = cu.stream();
            createContext(cu, 1);
            long f1 = cu.function(cu.loadKernels(), "gpus_empty");
            long stream1 = cu.stream();
            MemorySegment config = cu.arena.allocate(56, 8);
            int[] dims = {1, 1, 1, 32, 1, 1, 0};
            for (int i = 0; i < dims.length; i++) {
                config.set(JAVA_INT, 4L * i, dims[i]);
            }
            config.set(JAVA_LONG, 32, stream1);
            Cuda.ok(d.cuLaunchKernelEx(config, f1, MemorySegment.NULL, MemorySegment.NULL), "cuLaunchKernelEx on backend 1");
            Cuda.ok(d.cuStreamSynchronize(stream1), "sync");
            assertEquals(stream1, config.get(JAVA_LONG, 32), "the program's config is left as it was");
            config.set(JAVA_LONG, 32, stream0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuLaunchKernelEx(config, f1, MemorySegment.NULL, MemorySegment.NULL),
                    "backend 0's stream with backend 1's function");
        }
    }

    @Test
    void keepsOneContextStackAcrossBackends() throws Exception {
        try (MultiBackendDriver d = merged(true)) {
            Cuda cu = new Cuda(d);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuDevicePrimaryCtxRetain(c, 0), "retain 0");
            long p0 = c.get(JAVA_LONG, 0);
            Cuda.ok(d.cuDevicePrimaryCtxRetain(c, 1), "retain 1");
            long p1 = c.get(JAVA_LONG, 0);
            assertEquals(0, MultiBackendDriver.backendOf(p0));
            assertEquals(1, MultiBackendDriver.backendOf(p1));
            assertEquals(0, current(cu), "retaining makes nothing current");

            Cuda.ok(d.cuCtxPushCurrent(p0), "push 0");
            Cuda.ok(d.cuCtxPushCurrent(p1), "push 1");
            assertEquals(p1, current(cu));
            assertEquals(1, intOut(cu, d::cuCtxGetDevice, "device of p1"));
            long dptr = cu.alloc(64);
            Cuda.ok(d.cuMemsetD32(dptr, 0x1234, 16), "memset on device 1");
            MemorySegment attr = cu.cell();
            Cuda.ok(d.cuPointerGetAttribute(attr, 9, dptr), "device ordinal of a pointer");
            assertEquals(1, attr.get(JAVA_INT, 0));
            Cuda.ok(d.cuPointerGetAttribute(attr, 1, dptr), "context of a pointer");
            assertEquals(p1, attr.get(JAVA_LONG, 0));

            Cuda.ok(d.cuCtxPopCurrent(c), "pop");
            assertEquals(p1, c.get(JAVA_LONG, 0));
            assertEquals(p0, current(cu));
            assertEquals(0, intOut(cu, d::cuCtxGetDevice, "device of p0"));
            Cuda.ok(d.cuCtxSetCurrent(0), "set current NULL pops");
            assertEquals(0, current(cu));
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPopCurrent(c), "empty stack");

            Cuda.ok(d.cuCtxSetCurrent(p1), "set current 1");
            assertArrayEquals(new byte[] {0x34, 0x12, 0, 0}, cu.get(dptr, 4), "device 1's memory is still there");
            Cuda.ok(d.cuDevicePrimaryCtxRelease(0), "release 0");
            Cuda.ok(d.cuDevicePrimaryCtxRelease(1), "release 1");
        }
    }

    @Test
    void failsWhenOneBackendCannotBeReached() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        FrontendConfig config = FrontendConfig.fromEnvironment(Map.of(
                FrontendConfig.SERVER_ENV, first.tcp() + ",tcp://127.0.0.1:" + port,
                FrontendConfig.CONNECT_TIMEOUT_ENV, "2000"));
        assertThrows(IOException.class, () -> FrontendDrivers.connect(config));
    }
}
