package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.CallbackProbe;
import io.gpusockets.backend.testing.CallbackProbe.Invocation;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 3 through the Java frontend against a backend process (emulated device): device and context
 * queries, stream flags and priorities, event records with flags, stream callbacks and host
 * functions (C function pointers made with FFM upcall stubs, run in this process), and cuModuleLoad
 * of a file in this process's file system.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ContextStreamApiTest extends EmulatedBackendTest {
    private static final long MS = 1_000_000L;

    private static int readInt(MemorySegment s) {
        return s.get(JAVA_INT, 0);
    }

    private static long readLong(MemorySegment s) {
        return s.get(JAVA_LONG, 0);
    }

    @Test
    void devicesAnswerPciBusIdPeerAccessCapabilityAndProperties() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            MemorySegment id = cu.arena.allocate(32);
            Cuda.ok(d.cuDeviceGetPCIBusId(id, 32, 0), "cuDeviceGetPCIBusId");
            assertEquals("0000:00:00.0", id.getString(0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuDeviceGetPCIBusId(id, 8, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuDeviceGetPCIBusId(id, -1, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceGetPCIBusId(id, 32, 1));

            MemorySegment dev = cu.cell();
            for (String form : List.of("0000:00:00.0", "00:00.0", "0000:00:00")) {
                dev.set(JAVA_INT, 0, -1);
                Cuda.ok(d.cuDeviceGetByPCIBusId(dev, cu.arena.allocateFrom(form)), form);
                assertEquals(0, readInt(dev), form);
            }
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceGetByPCIBusId(dev, cu.arena.allocateFrom("0000:3B:00.0")));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuDeviceGetByPCIBusId(dev, cu.arena.allocateFrom("garbage")));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuDeviceGetByPCIBusId(dev, MemorySegment.NULL));

            MemorySegment can = cu.cell();
            can.set(JAVA_INT, 0, 7);
            Cuda.ok(d.cuDeviceCanAccessPeer(can, 0, 0), "cuDeviceCanAccessPeer");
            assertEquals(0, readInt(can), "a device about itself: 0, as the real driver answers");
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuDeviceCanAccessPeer(can, 0, 1));

            MemorySegment major = cu.cell(), minor = cu.cell();
            Cuda.ok(d.cuDeviceComputeCapability(major, minor, 0), "cuDeviceComputeCapability");
            assertEquals(9, readInt(major));
            assertEquals(0, readInt(minor));

            MemorySegment prop = cu.arena.allocate(56);
            Cuda.ok(d.cuDeviceGetProperties(MemorySegment.ofAddress(prop.address()), 0), "cuDeviceGetProperties");
            int[] h200 = {1024, 1024, 1024, 64, 2147483647, 65535, 65535, 49152, 65536, 32, 2147483647, 65536, 1980000, 512};
            for (int i = 0; i < h200.length; i++) {
                assertEquals(h200[i], prop.getAtIndex(JAVA_INT, i), "CUdevprop int " + i);
            }
        }
    }

    @Test
    void contextLimitsCacheConfigAndFlagsBelongToTheCurrentContext() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            MemorySegment v = cu.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxGetLimit(v, 0), "no context yet");
            cu.primaryContext();
            Cuda.ok(d.cuCtxGetLimit(v, 0), "cuCtxGetLimit");
            assertEquals(1024, readLong(v));
            Cuda.ok(d.cuCtxSetLimit(0, 1000), "cuCtxSetLimit");
            Cuda.ok(d.cuCtxGetLimit(v, 0), "cuCtxGetLimit");
            assertEquals(1008, readLong(v), "rounded up to 16 bytes");
            Cuda.ok(d.cuCtxSetLimit(2, 1L << 30), "heap");
            Cuda.ok(d.cuCtxGetLimit(v, 2), "heap");
            assertEquals(1L << 30, readLong(v));
            assertEquals(CuResult.CUDA_ERROR_UNSUPPORTED_LIMIT, d.cuCtxGetLimit(v, 3));
            assertEquals(CuResult.CUDA_ERROR_NOT_PERMITTED, d.cuCtxSetLimit(7, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuCtxSetLimit(5, 200));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuCtxGetLimit(v, 10));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuCtxGetLimit(MemorySegment.NULL, 0));

            Cuda.ok(d.cuCtxGetCacheConfig(v), "cuCtxGetCacheConfig");
            assertEquals(0, readInt(v));
            Cuda.ok(d.cuCtxSetCacheConfig(3), "cuCtxSetCacheConfig");
            Cuda.ok(d.cuCtxGetCacheConfig(v), "cuCtxGetCacheConfig");
            assertEquals(3, readInt(v));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuCtxSetCacheConfig(4));
            Cuda.ok(d.cuCtxGetFlags(v), "cuCtxGetFlags");
            assertEquals(0, readInt(v));

            MemorySegment ctx = cu.cell();
            Cuda.ok(d.cuCtxCreate(ctx, MemorySegment.NULL, 0x4, 0), "cuCtxCreate(BLOCKING_SYNC)");
            Cuda.ok(d.cuCtxGetFlags(v), "cuCtxGetFlags");
            assertEquals(0x4, readInt(v));
            Cuda.ok(d.cuCtxGetCacheConfig(v), "cuCtxGetCacheConfig");
            assertEquals(0, readInt(v), "each context has its own");
            Cuda.ok(d.cuCtxDestroy(readLong(ctx)), "cuCtxDestroy");
        }
    }

    @Test
    void streamsReportTheirFlagsAndPriority() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment s = cu.cell(), v = cu.cell();
            Cuda.ok(d.cuStreamCreateWithPriority(s, 1, -2), "cuStreamCreateWithPriority");
            Cuda.ok(d.cuStreamGetFlags(readLong(s), v), "cuStreamGetFlags");
            assertEquals(1, readInt(v));
            Cuda.ok(d.cuStreamGetPriority(readLong(s), v), "cuStreamGetPriority");
            assertEquals(-2, readInt(v));
            Cuda.ok(d.cuStreamCreateWithPriority(s, 0, -40), "cuStreamCreateWithPriority");
            Cuda.ok(d.cuStreamGetPriority(readLong(s), v), "cuStreamGetPriority");
            assertEquals(-5, readInt(v), "clamped to the greatest priority");
            for (long special : new long[] {0, 1, 2}) {
                v.set(JAVA_INT, 0, 9);
                Cuda.ok(d.cuStreamGetFlags(special, v), "flags of " + special);
                assertEquals(0, readInt(v));
                Cuda.ok(d.cuStreamGetPriority(special, v), "priority of " + special);
                assertEquals(0, readInt(v));
            }
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuStreamGetFlags(0x777777, v));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamGetPriority(readLong(s), MemorySegment.NULL));
        }
    }

    @Test
    void eventRecordWithFlagsRecordsAndItsRefusalComesBackAtTheNextSync() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long sleep = cu.function(cu.loadKernels(), "gpus_sleep");
            long s = cu.stream(), ev = cu.event();
            Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, s, cu.params(cu.u64(300 * MS)), MemorySegment.NULL), "sleep");
            Cuda.ok(d.cuEventRecordWithFlags(ev, s, 0), "cuEventRecordWithFlags");
            assertEquals(CuResult.CUDA_ERROR_NOT_READY, d.cuEventQuery(ev));
            Cuda.ok(d.cuEventSynchronize(ev), "cuEventSynchronize");
            int r = d.cuEventRecordWithFlags(ev, s, 1);   // CU_EVENT_RECORD_EXTERNAL outside capture
            if (d.pipelining()) {
                assertEquals(CuResult.CUDA_SUCCESS, r, "pipelined: the error is latched");
                assertEquals(CuResult.CUDA_ERROR_ILLEGAL_STATE, d.cuStreamSynchronize(s));
            } else {
                assertEquals(CuResult.CUDA_ERROR_ILLEGAL_STATE, r);
            }
            Cuda.ok(d.cuStreamSynchronize(s), "the latched error was reported once");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void streamCallbackRunsAfterEarlierWorkAndBeforeLaterWorkWhileTheCallerGoesOn(String scheme) throws Exception {
        long userData = scheme.equals("tcp") ? 0xCA11_0001L : 0xCA11_1001L;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.address(scheme))) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long module = cu.loadKernels();
            long sleep = cu.function(module, "gpus_sleep");
            long fill = cu.function(module, "gpus_fill_u32");
            long s = cu.stream(), before = cu.event(), after = cu.event();
            long p = cu.alloc(16);
            CountDownLatch held = CallbackProbe.holdUntil(userData);

            Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, s, cu.params(cu.u64(500 * MS)), MemorySegment.NULL), "sleep");
            Cuda.ok(d.cuEventRecord(before, s), "record before");
            Cuda.ok(d.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0),
                    "cuStreamAddCallback");
            Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, s, cu.params(cu.u64(p), cu.u32(0xF00D), cu.u32(4)),
                    MemorySegment.NULL), "fill after the callback");
            Cuda.ok(d.cuEventRecord(after, s), "record after");
            assertTrue(CallbackProbe.callsWith(userData).isEmpty(), "enqueued without waiting for the sleeping stream");

            List<Invocation> calls = CallbackProbe.awaitCalls(userData, 1, 10_000);
            assertEquals(1, calls.size());
            assertEquals(CuResult.CUDA_SUCCESS, d.cuEventQuery(before), "earlier work completed before the callback");
            Thread.sleep(50);
            assertEquals(CuResult.CUDA_ERROR_NOT_READY, d.cuEventQuery(after), "later work waits while the callback runs");
            assertEquals(CuResult.CUDA_ERROR_NOT_READY, d.cuStreamQuery(s));
            assertFalse(Thread.currentThread().getName().equals(calls.getFirst().thread()));
            held.countDown();
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertEquals(0xF00D, java.nio.ByteBuffer.wrap(cu.get(p, 4)).order(ByteOrder.LITTLE_ENDIAN).getInt());

            Invocation cb = calls.getFirst();
            assertEquals(s, cb.stream(), "the program's stream handle");
            assertEquals(CuResult.CUDA_SUCCESS, cb.status());
            assertEquals(userData, cb.userData());
        }
    }

    @Test
    void hostFunctionsAndCallbacksKeepStreamOrderOnEveryStreamKind() throws Exception {
        long base = 0xCA11_2000L;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long sleep = cu.function(cu.loadKernels(), "gpus_sleep");
            long s = cu.stream();
            for (int i = 0; i < 6; i++) {
                Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, s, cu.params(cu.u64(5 * MS)), MemorySegment.NULL), "sleep");
                if (i % 2 == 0) {
                    Cuda.ok(d.cuLaunchHostFunc(s, CallbackProbe.HOST_FN, MemorySegment.ofAddress(base + i)), "cuLaunchHostFunc");
                } else {
                    Cuda.ok(d.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(base + i), 0),
                            "cuStreamAddCallback");
                }
            }
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            long last = 0;
            for (int i = 0; i < 6; i++) {
                List<Invocation> calls = CallbackProbe.callsWith(base + i);
                assertEquals(1, calls.size(), "exactly once: " + i);
                assertEquals(i % 2 == 0, calls.getFirst().hostFunction());
                assertTrue(calls.getFirst().nanos() >= last, "in stream order: " + i);
                last = calls.getFirst().nanos();
            }
            // The legacy and per-thread default streams: the callback gets the handle the program passed.
            Cuda.ok(d.cuStreamAddCallback(0, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(base + 10), 0), "legacy");
            Cuda.ok(d.cuStreamAddCallback(2, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(base + 11), 0), "per-thread");
            Cuda.ok(d.cuLaunchHostFunc(1, CallbackProbe.HOST_FN, MemorySegment.ofAddress(base + 12)), "CU_STREAM_LEGACY");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            assertEquals(0, CallbackProbe.awaitCalls(base + 10, 1, 5000).getFirst().stream());
            assertEquals(2, CallbackProbe.awaitCalls(base + 11, 1, 5000).getFirst().stream());
            assertEquals(1, CallbackProbe.awaitCalls(base + 12, 1, 5000).size());
        }
    }

    @Test
    void aFaultReachesStreamCallbacksButSkipsHostFunctions() throws Exception {
        long userData = 0xCA11_3000L;
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long module = cu.loadKernels();
            long sleep = cu.function(module, "gpus_sleep");
            long fill = cu.function(module, "gpus_fill_u32");
            long p = cu.alloc(16);
            long s = cu.stream();
            Cuda.ok(d.cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, s, cu.params(cu.u64(300 * MS)), MemorySegment.NULL), "sleep");
            // 8 words into a 4-word buffer: the launch is accepted, the kernel faults when it runs
            Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 8, 1, 1, 0, s, cu.params(cu.u64(p), cu.u32(1), cu.u32(8)),
                    MemorySegment.NULL), "faulting fill");
            Cuda.ok(d.cuLaunchHostFunc(s, CallbackProbe.HOST_FN, MemorySegment.ofAddress(userData + 1)), "host function");
            Cuda.ok(d.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0), "callback");
            assertEquals(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, d.cuStreamSynchronize(s));
            List<Invocation> calls = CallbackProbe.awaitCalls(userData, 1, 5000);
            assertEquals(CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, calls.getFirst().status());
            Thread.sleep(50);
            assertTrue(CallbackProbe.callsWith(userData + 1).isEmpty(), "cuLaunchHostFunc is not called after an error");
        }
    }

    @Test
    void refusesNullFunctionsAndFlagsWithoutCallingAnything() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment data = MemorySegment.ofAddress(0xCA11_4000L);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAddCallback(0, MemorySegment.NULL, data, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamAddCallback(0, CallbackProbe.STREAM_CALLBACK, data, 4));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLaunchHostFunc(0, MemorySegment.NULL, data));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuLaunchHostFunc(0x777777, CallbackProbe.HOST_FN, data));
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            assertTrue(CallbackProbe.callsWith(0xCA11_4000L).isEmpty());
        }
    }

    // ---- a callback that calls CUDA, which CUDA forbids ----

    private static volatile RemoteCudaDriver insideCallbackDriver;
    private static volatile int insideCallbackResult;
    private static final CountDownLatch INSIDE_CALLBACK_DONE = new CountDownLatch(1);

    private static void callsCuda(MemorySegment stream, int status, MemorySegment userData) {
        try {
            insideCallbackResult = insideCallbackDriver.cuStreamSynchronize(stream.address());
        } catch (Throwable t) {
            insideCallbackResult = Integer.MIN_VALUE;
        }
        INSIDE_CALLBACK_DONE.countDown();
    }

    @Test
    void cudaCallsFromInsideACallbackAreRefusedInsteadOfDeadlocking() throws Exception {
        MemorySegment stub = Linker.nativeLinker().upcallStub(
                MethodHandles.lookup().findStatic(ContextStreamApiTest.class, "callsCuda",
                        MethodType.methodType(void.class, MemorySegment.class, int.class, MemorySegment.class)),
                FunctionDescriptor.ofVoid(ADDRESS, JAVA_INT, ADDRESS), Arena.global());
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            insideCallbackDriver = d;
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long s = cu.stream();
            Cuda.ok(d.cuStreamAddCallback(s, stub, MemorySegment.NULL, 0), "cuStreamAddCallback");
            assertTrue(INSIDE_CALLBACK_DONE.await(10, TimeUnit.SECONDS));
            assertEquals(CuResult.CUDA_ERROR_NOT_PERMITTED, insideCallbackResult);
            Cuda.ok(d.cuStreamSynchronize(s), "the stream goes on");
        }
    }

    // ---- sessions that end with callbacks pending ----

    @Test
    void aSessionEndingWhileACallbackRunsReleasesItsStreamsOnTheBackend() throws Exception {
        long userData = 0xCA11_5000L;
        RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix());
        long session = d.sessionId();
        CountDownLatch held = CallbackProbe.holdUntil(userData);
        try {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long s = cu.stream();
            Cuda.ok(d.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0), "callback");
            CallbackProbe.awaitCalls(userData, 1, 5000);
        } finally {
            d.close();   // the guest goes away with the gate still closed
        }
        String line = backend.awaitLog("session " + session + " ended", 10_000);
        assertTrue(line.contains("1 context(s)") && line.contains("1 stream(s)"), line);
        held.countDown();
    }

    // ---- module files ----

    private static byte[] shippedPtx() throws IOException {
        try (InputStream in = ContextStreamApiTest.class.getResourceAsStream("/io/gpusockets/kernels/gpusockets_kernels.ptx")) {
            return in.readAllBytes();
        }
    }

    @Test
    void loadsAModuleFileFromTheGuestFileSystem(@TempDir Path dir) throws Exception {
        Path ptx = Files.write(dir.resolve("kernels.ptx"), shippedPtx());
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment module = cu.cell();
            Cuda.ok(d.cuModuleLoad(module, cu.arena.allocateFrom(ptx.toString())), "cuModuleLoad");
            long fill = cu.function(readLong(module), "gpus_fill_u32");
            long p = cu.alloc(16);
            Cuda.ok(d.cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(0xBEEF), cu.u32(4)),
                    MemorySegment.NULL), "fill");
            assertEquals(0xBEEF, ByteBuffer.wrap(cu.get(p, 16)).order(ByteOrder.LITTLE_ENDIAN).getInt(12));
            Cuda.ok(d.cuModuleUnload(readLong(module)), "cuModuleUnload");

            assertEquals(CuResult.CUDA_ERROR_FILE_NOT_FOUND,
                    d.cuModuleLoad(module, cu.arena.allocateFrom(dir.resolve("missing.ptx").toString())));
            assertEquals(CuResult.CUDA_ERROR_FILE_NOT_FOUND, d.cuModuleLoad(module, cu.arena.allocateFrom("")));
            assertEquals(CuResult.CUDA_ERROR_OUT_OF_MEMORY, d.cuModuleLoad(module, cu.arena.allocateFrom(dir.toString())),
                    "a directory, answered as driver 580 does");
            Path empty = Files.createFile(dir.resolve("empty.ptx"));
            assertEquals(CuResult.CUDA_ERROR_INVALID_IMAGE, d.cuModuleLoad(module, cu.arena.allocateFrom(empty.toString())));
            Path text = Files.writeString(dir.resolve("notes.txt"), "not a module", StandardCharsets.UTF_8);
            assertNotEquals(CuResult.CUDA_SUCCESS, d.cuModuleLoad(module, cu.arena.allocateFrom(text.toString())));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuModuleLoad(module, MemorySegment.NULL));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuModuleLoad(MemorySegment.NULL, cu.arena.allocateFrom(ptx.toString())));
        }
    }

    @Test
    void theBackendNeverOpensAClientNamedPathNorOpensAnotherSessionsGate() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            byte[] path = "/etc/hostname".getBytes(StandardCharsets.US_ASCII);
            RawClient.Frame f = c.call(RawClient.opcode("cuModuleLoad"), RawClient.body(64).putInt(path.length).put(path));
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
            f = c.call(RawClient.opcode("cuStreamAddCallback"), RawClient.body(12).putInt(2).putLong(1));   // OPEN gate 1
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
            f = c.call(RawClient.opcode("cuDeviceGetCount"), RawClient.body(0));
            assertEquals(CuResult.CUDA_SUCCESS, f.body().order(ByteOrder.LITTLE_ENDIAN).getInt(), "the session goes on");
        }
    }
}
