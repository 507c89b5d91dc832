package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_FILE_NOT_FOUND;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_STATE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_PERMITTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_OUT_OF_MEMORY;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_UNSUPPORTED_LIMIT;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.CallbackProbe;
import io.gpusockets.backend.testing.CallbackProbe.Invocation;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The device, context and stream queries of issue 3, callbacks and module files, on the emulated device. */
class ContextStreamQueriesTest {
    private static final long MS = 1_000_000L;

    private static int readInt(MemorySegment s) {
        return s.get(ValueLayout.JAVA_INT, 0);
    }

    private static long readLong(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, 0);
    }

    @Test
    void pciBusIdsRoundTripInEachFormTheDriverAccepts() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            MemorySegment id = e.arena.allocate(64);
            e.ok(e.device.cuDeviceGetPCIBusId(Emulated.asNative(id), 64, 1));
            assertEquals("0000:01:00.0", id.getString(0));
            e.ok(e.device.cuDeviceGetPCIBusId(id, 13, 0));
            assertEquals("0000:00:00.0", id.getString(0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetPCIBusId(id, 12, 0), "no room for the NUL");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetPCIBusId(MemorySegment.NULL, 64, 0));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceGetPCIBusId(id, 64, 2));

            MemorySegment dev = e.arena.allocate(4);
            for (String form : List.of("0000:01:00.0", "0000:01:00", "01:00.0", "0:1:0.0")) {
                dev.set(ValueLayout.JAVA_INT, 0, -1);
                e.ok(e.device.cuDeviceGetByPCIBusId(dev, e.nativeString(form)));
                assertEquals(1, readInt(dev), form);
            }
            e.ok(e.device.cuDeviceGetByPCIBusId(dev, e.nativeString("0000:00:00.0")));
            assertEquals(0, readInt(dev));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceGetByPCIBusId(dev, e.nativeString("0000:ff:1f.7")));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceGetByPCIBusId(dev, e.nativeString("0000:02:00.0")));
            for (String bad : List.of("", "garbage", "01:00", "0000:00:00.0.0", "0000:000:00.0")) {
                assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetByPCIBusId(dev, e.nativeString(bad)), bad);
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetByPCIBusId(MemorySegment.NULL, e.nativeString("01:00.0")));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetByPCIBusId(dev, MemorySegment.NULL));
        }
    }

    @Test
    void peerAccessIsNotOfferedAndBothDevicesAreChecked() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            MemorySegment can = e.arena.allocate(4);
            can.set(ValueLayout.JAVA_INT, 0, 7);
            e.ok(e.device.cuDeviceCanAccessPeer(can, 0, 0));
            assertEquals(0, readInt(can), "a device about itself, as the real driver answers");
            can.set(ValueLayout.JAVA_INT, 0, 7);
            e.ok(e.device.cuDeviceCanAccessPeer(Emulated.asNative(can), 0, 1));
            assertEquals(0, readInt(can));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceCanAccessPeer(can, 0, 2));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceCanAccessPeer(can, -1, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceCanAccessPeer(MemorySegment.NULL, 0, 1));
        }
    }

    @Test
    void computeCapabilityAndLegacyPropertiesAgreeWithTheAttributes() {
        try (Emulated e = new Emulated()) {
            MemorySegment major = e.arena.allocate(4), minor = e.arena.allocate(4);
            e.ok(e.device.cuDeviceComputeCapability(major, minor, 0));
            assertEquals(9, readInt(major));
            assertEquals(0, readInt(minor));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceComputeCapability(MemorySegment.NULL, minor, 0));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceComputeCapability(major, minor, 9));

            MemorySegment prop = e.arena.allocate(56);
            e.ok(e.device.cuDeviceGetProperties(Emulated.asNative(prop), 0));
            // What the H200 answers: block 1024 x 1024 x 64, grid 2^31-1 x 65535 x 65535, 48 KiB shared,
            // 64 KiB constant, warp 32, pitch 2^31-1, 64 Ki registers, 1.98 GHz, texture alignment 512.
            int[] h200 = {1024, 1024, 1024, 64, 2147483647, 65535, 65535, 49152, 65536, 32, 2147483647, 65536, 1980000, 512};
            MemorySegment attr = e.arena.allocate(4);
            for (int i = 0; i < 14; i++) {
                assertEquals(h200[i], prop.getAtIndex(ValueLayout.JAVA_INT, i), "CUdevprop int " + i);
                e.ok(e.device.cuDeviceGetAttribute(attr, i + 1, 0));
                assertEquals(readInt(attr), prop.getAtIndex(ValueLayout.JAVA_INT, i), "attribute " + (i + 1));
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetProperties(e.arena.allocate(40), 0), "too short");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetProperties(MemorySegment.NULL, 0));
        }
    }

    @Test
    void limitsStartAtTheH200DefaultsAndAreRoundedClampedOrRefusedAsThere() {
        // an H200's memory: a 64 KiB stack reserves 64 KiB for each of 270336 resident threads (17 GiB)
        try (Emulated e = new Emulated(new EmulatedDevice(1, 141L << 30))) {
            MemorySegment v = e.arena.allocate(8);
            long[] defaults = {1024, 8650752, 8 << 20, -1, 2048, 64, 11796480, 232448, 0, -1};
            for (int limit = 0; limit < defaults.length; limit++) {
                int r = e.device.cuCtxGetLimit(v, limit);
                if (defaults[limit] < 0) {
                    assertEquals(CUDA_ERROR_UNSUPPORTED_LIMIT, r, "limit " + limit);
                } else {
                    assertEquals(CUDA_SUCCESS, r, "limit " + limit);
                    assertEquals(defaults[limit], readLong(v), "limit " + limit);
                }
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxGetLimit(v, 10));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxGetLimit(v, -1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxGetLimit(MemorySegment.NULL, 0));

            // {limit, requested, read back} as the H200 answered; -1: refused with INVALID_VALUE, value kept
            long[][] sets = {{0, 1, 16}, {0, 1000, 1008}, {0, 65536, 65536}, {0, 1L << 20, -1}, {1, 12345, 524288},
                {1, 1L << 32, 1L << 31}, {2, 0, 4 << 20}, {4, 0, 32}, {4, 1L << 30, 599186}, {5, 100, 100}, {5, 200, -1},
                {6, 1000, 3932160}, {6, 8000000, 11796480}, {6, 39321600, 39321600}, {6, 40000000, -1}, {6, 0, 0}};
            for (long[] s : sets) {
                e.ok(e.device.cuCtxGetLimit(v, (int) s[0]));
                long before = readLong(v);
                int r = e.device.cuCtxSetLimit((int) s[0], s[1]);
                e.ok(e.device.cuCtxGetLimit(Emulated.asNative(v), (int) s[0]));
                String what = "limit " + s[0] + " = " + s[1];
                if (s[2] < 0) {
                    assertEquals(CUDA_ERROR_INVALID_VALUE, r, what);
                    assertEquals(before, readLong(v), what);
                } else {
                    assertEquals(CUDA_SUCCESS, r, what);
                    assertEquals(s[2], readLong(v), what);
                }
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetLimit(0, -1), "size_t 2^64-1");
            e.ok(e.device.cuCtxSetLimit(2, -1));
            e.ok(e.device.cuCtxGetLimit(v, 2));
            assertEquals(e.device.memoryBytesPerDevice() / 8, readLong(v), "malloc heap clamped");
            assertEquals(CUDA_ERROR_UNSUPPORTED_LIMIT, e.device.cuCtxSetLimit(3, 2));
            assertEquals(CUDA_ERROR_NOT_PERMITTED, e.device.cuCtxSetLimit(7, 0));
            assertEquals(CUDA_ERROR_NOT_PERMITTED, e.device.cuCtxSetLimit(8, 1));
            assertEquals(CUDA_ERROR_UNSUPPORTED_LIMIT, e.device.cuCtxSetLimit(9, 1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetLimit(10, 0));
        }
    }

    @Test
    void limitsCacheConfigAndFlagsBelongToTheirContext() {
        try (Emulated e = new Emulated()) {
            MemorySegment v = e.arena.allocate(8);
            e.ok(e.device.cuCtxSetLimit(0, 4096));
            e.ok(e.device.cuCtxSetCacheConfig(2));
            e.ok(e.device.cuCtxGetCacheConfig(v));
            assertEquals(2, readInt(v));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetCacheConfig(4));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxSetCacheConfig(-1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuCtxGetCacheConfig(MemorySegment.NULL));
            e.ok(e.device.cuCtxGetFlags(v));
            assertEquals(0, readInt(v));

            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0x4 | 0x8, 0));   // BLOCKING_SYNC | MAP_HOST
            long second = readLong(out);
            e.ok(e.device.cuCtxGetFlags(Emulated.asNative(v)));
            assertEquals(0xc, readInt(v));
            e.ok(e.device.cuCtxGetLimit(v, 0));
            assertEquals(1024, readLong(v), "a new context starts at the defaults");
            e.ok(e.device.cuCtxGetCacheConfig(v));
            assertEquals(0, readInt(v));
            e.ok(e.device.cuCtxDestroy(second));

            e.ok(e.device.cuCtxGetLimit(v, 0));
            assertEquals(4096, readLong(v), "the first context kept its own");
            e.ok(e.device.cuCtxGetCacheConfig(v));
            assertEquals(2, readInt(v));
            e.ok(e.device.cuCtxSetCurrent(0));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuCtxGetLimit(v, 0));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuCtxSetLimit(0, 0));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuCtxGetCacheConfig(v));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, e.device.cuCtxGetFlags(v));
        }
    }

    @Test
    void streamsRememberTheirFlagsAndClampedPriority() {
        try (Emulated e = new Emulated()) {
            MemorySegment v = e.arena.allocate(4);
            long nonBlocking = e.stream(1);
            e.ok(e.device.cuStreamGetFlags(nonBlocking, v));
            assertEquals(1, readInt(v));
            e.ok(e.device.cuStreamGetPriority(nonBlocking, v));
            assertEquals(0, readInt(v));
            MemorySegment out = e.arena.allocate(8);
            int[][] priorities = {{-3, -3}, {-100, -5}, {5, 0}};
            for (int[] p : priorities) {
                e.ok(e.device.cuStreamCreateWithPriority(out, 0, p[0]));
                e.ok(e.device.cuStreamGetPriority(readLong(out), Emulated.asNative(v)));
                assertEquals(p[1], readInt(v), "priority " + p[0]);
                e.ok(e.device.cuStreamGetFlags(readLong(out), v));
                assertEquals(0, readInt(v));
            }
            for (long special : new long[] {0, 1, 2}) {
                v.set(ValueLayout.JAVA_INT, 0, 7);
                e.ok(e.device.cuStreamGetFlags(special, v));
                assertEquals(0, readInt(v));
                v.set(ValueLayout.JAVA_INT, 0, 7);
                e.ok(e.device.cuStreamGetPriority(special, v));
                assertEquals(0, readInt(v));
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamGetFlags(nonBlocking, MemorySegment.NULL));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamGetPriority(nonBlocking, MemorySegment.NULL));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuStreamGetFlags(0x1234, v));
            e.ok(e.device.cuStreamDestroy(nonBlocking));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuStreamGetPriority(nonBlocking, v));
        }
    }

    @Test
    void eventRecordWithFlagsRecordsAndRefusesExternalOutsideCapture() {
        try (Emulated e = new Emulated()) {
            long sleep = e.function(e.loadShippedModule(), "gpus_sleep");
            long s = e.stream(0);
            long ev = e.event(0);
            e.ok(e.launch(sleep, 1, 1, 0, s, 200 * MS));
            e.ok(e.device.cuEventRecordWithFlags(ev, s, 0));
            assertEquals(CUDA_ERROR_NOT_READY, e.device.cuEventQuery(ev), "records where the stream is");
            e.ok(e.device.cuEventSynchronize(ev));
            assertEquals(CUDA_ERROR_ILLEGAL_STATE, e.device.cuEventRecordWithFlags(ev, s, 1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuEventRecordWithFlags(ev, s, 2));
            e.ok(e.device.cuEventRecordWithFlags(ev, 0, 0));
            e.ok(e.device.cuEventSynchronize(ev));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuEventRecordWithFlags(0x1234, s, 0));
        }
    }

    @Test
    void callbacksRunInStreamOrderAndHoldLaterWork() throws Exception {
        try (Emulated e = new Emulated()) {
            long sleep = e.function(e.loadShippedModule(), "gpus_sleep");
            long s = e.stream(0);
            long before = e.event(0), after = e.event(0);
            long userData = 0x5eed_0001L;
            CountDownLatch held = CallbackProbe.holdUntil(userData);
            e.ok(e.launch(sleep, 1, 1, 0, s, 300 * MS));
            e.ok(e.device.cuEventRecord(before, s));
            e.ok(e.device.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0));
            e.ok(e.device.cuLaunchHostFunc(s, CallbackProbe.HOST_FN, MemorySegment.ofAddress(userData + 1)));
            e.ok(e.device.cuEventRecord(after, s));
            assertTrue(CallbackProbe.callsWith(userData).isEmpty(), "the caller is not blocked and the kernel still sleeps");

            List<Invocation> calls = CallbackProbe.awaitCalls(userData, 1, 5000);
            assertEquals(1, calls.size());
            assertEquals(CUDA_SUCCESS, e.device.cuEventQuery(before), "earlier work completed before the callback");
            Thread.sleep(50);
            assertEquals(CUDA_ERROR_NOT_READY, e.device.cuEventQuery(after), "later work waits for the callback");
            assertTrue(CallbackProbe.callsWith(userData + 1).isEmpty(), "the host function comes after the callback");
            held.countDown();
            e.ok(e.device.cuStreamSynchronize(s));

            Invocation cb = calls.getFirst();
            assertEquals(s, cb.stream());
            assertEquals(CUDA_SUCCESS, cb.status());
            Invocation fn = CallbackProbe.callsWith(userData + 1).getFirst();
            assertTrue(fn.hostFunction());
            assertTrue(fn.nanos() >= cb.nanos());

            // The legacy stream: the program's handle (0) is what the callback receives.
            e.ok(e.device.cuStreamAddCallback(0, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData + 2), 0));
            e.ok(e.device.cuCtxSynchronize());
            assertEquals(0, CallbackProbe.callsWith(userData + 2).getFirst().stream());
        }
    }

    @Test
    void afterAFaultStreamCallbacksGetTheErrorAndHostFunctionsAreSkipped() throws Exception {
        try (Emulated e = new Emulated()) {
            long module = e.loadShippedModule();
            long sleep = e.function(module, "gpus_sleep");
            long fill = e.function(module, "gpus_fill_u32");
            long p = e.alloc(16);
            long s = e.stream(0);
            long userData = 0x5eed_0100L;
            e.ok(e.launch(sleep, 1, 1, 0, s, 200 * MS));
            e.ok(e.launch(fill, 1, 8, 0, s, p, 1, 8));   // 8 words into 4: faults when it runs
            e.ok(e.device.cuStreamAddCallback(s, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0));
            e.ok(e.device.cuLaunchHostFunc(s, CallbackProbe.HOST_FN, MemorySegment.ofAddress(userData + 1)));
            assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuStreamSynchronize(s));
            List<Invocation> calls = CallbackProbe.awaitCalls(userData, 1, 5000);
            assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, calls.getFirst().status());
            assertTrue(CallbackProbe.callsWith(userData + 1).isEmpty(), "host functions are not called after an error");
        }
    }

    @Test
    void refusesNullFunctionsNonzeroFlagsAndForeignStreams() {
        try (Emulated e = new Emulated()) {
            MemorySegment data = MemorySegment.ofAddress(0x5eed_0200L);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamAddCallback(0, MemorySegment.NULL, data, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamAddCallback(0, CallbackProbe.STREAM_CALLBACK, data, 1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchHostFunc(0, MemorySegment.NULL, data));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuLaunchHostFunc(0x1234, CallbackProbe.HOST_FN, data));
            assertTrue(CallbackProbe.callsWith(0x5eed_0200L).isEmpty());
        }
    }

    @Test
    void loadsAModuleFromAFileWithTheDriversErrors(@TempDir Path dir) throws Exception {
        try (Emulated e = new Emulated()) {
            Path ptx = dir.resolve("kernels.ptx");
            Files.writeString(ptx, Emulated.shippedPtx(), StandardCharsets.UTF_8);
            MemorySegment module = e.arena.allocate(8);
            e.ok(e.device.cuModuleLoad(module, e.nativeString(ptx.toString())));
            long f = e.function(readLong(module), "gpus_fill_u32");
            long p = e.alloc(16);
            e.ok(e.launch(f, 1, 4, 0, 0, p, 7, 4));
            assertEquals(7, e.downloadInts(p, 4)[3]);

            assertEquals(CUDA_ERROR_FILE_NOT_FOUND, e.device.cuModuleLoad(module, e.nativeString(dir.resolve("missing.ptx").toString())));
            assertEquals(CUDA_ERROR_OUT_OF_MEMORY, e.device.cuModuleLoad(module, e.nativeString(dir.toString())), "as driver 580");
            Path empty = Files.createFile(dir.resolve("empty.ptx"));
            assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoad(module, e.nativeString(empty.toString())));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuModuleLoad(module, MemorySegment.NULL));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuModuleLoad(MemorySegment.NULL, e.nativeString(ptx.toString())));
        }
    }

    @Test
    void aCallbackBlockedOnItsStreamDoesNotStopOtherStreams() throws Exception {
        try (Emulated e = new Emulated()) {
            long blocked = e.stream(1), free = e.stream(1);
            long userData = 0x5eed_0300L;
            CountDownLatch held = CallbackProbe.holdUntil(userData);
            e.ok(e.device.cuStreamAddCallback(blocked, CallbackProbe.STREAM_CALLBACK, MemorySegment.ofAddress(userData), 0));
            CallbackProbe.awaitCalls(userData, 1, 5000);
            CompletableFuture<Integer> other = CompletableFuture.supplyAsync(() -> e.device.cuStreamQuery(free));
            assertEquals(CUDA_SUCCESS, other.get());
            assertEquals(CUDA_ERROR_NOT_READY, e.device.cuStreamQuery(blocked));
            held.countDown();
            e.ok(e.device.cuStreamSynchronize(blocked));
        }
    }
}
