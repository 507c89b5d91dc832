package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_DEINITIALIZED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_INITIALIZED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class DeviceAndContextTest {
    private static long readLong(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, 0);
    }

    private static int readInt(MemorySegment s) {
        return s.get(ValueLayout.JAVA_INT, 0);
    }

    @Test
    void refusesCallsBeforeCuInitButAnswersTheDriverVersion() {
        try (EmulatedDevice d = new EmulatedDevice(); Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            assertEquals(CUDA_ERROR_NOT_INITIALIZED, d.cuDeviceGetCount(out));
            assertEquals(CUDA_SUCCESS, d.cuDriverGetVersion(out));
            assertEquals(13000, readInt(out));
            assertEquals(CUDA_ERROR_INVALID_VALUE, d.cuInit(1));
            assertEquals(CUDA_SUCCESS, d.cuInit(0));
            assertEquals(CUDA_SUCCESS, d.cuDeviceGetCount(out));
            assertEquals(1, readInt(out));
        }
    }

    @Test
    void saysItIsEmulatedInNameAndDescription() {
        try (Emulated e = new Emulated()) {
            MemorySegment name = e.arena.allocate(256);
            e.ok(e.device.cuDeviceGetName(Emulated.asNative(name), 256, 0));
            assertEquals("GPUsockets emulated device (no GPU)", name.getString(0));
            e.ok(e.device.cuDeviceGetName(name, 10, 0));
            assertEquals("GPUsocket", name.getString(0), "truncated to len-1 and NUL-terminated");
            assertTrue(e.device.description().contains("no GPU"));
            assertEquals(-1, e.device.description().indexOf('\n'));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceGetName(name, 256, 1));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetName(name, 0, 0));
        }
    }

    @Test
    void answersCommonAttributesAndRefusesUnknownOnes() {
        try (Emulated e = new Emulated()) {
            MemorySegment v = e.arena.allocate(4);
            int[][] expected = {{75, 9}, {76, 0}, {10, 32}, {1, 1024}, {2, 1024}, {4, 64}, {5, Integer.MAX_VALUE},
                {6, 65535}, {16, 132}, {8, 49152}};
            for (int[] pair : expected) {
                e.ok(e.device.cuDeviceGetAttribute(Emulated.asNative(v), pair[0], 0));
                assertEquals(pair[1], readInt(v), "attribute " + pair[0]);
            }
            e.ok(e.device.cuDeviceGetAttribute(v, 13, 0));
            assertTrue(readInt(v) > 0, "clock rate");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetAttribute(v, 0, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetAttribute(v, 9999, 0));
            assertEquals(CUDA_ERROR_INVALID_DEVICE, e.device.cuDeviceGetAttribute(v, 1, 7));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuDeviceGetAttribute(MemorySegment.NULL, 1, 0));
        }
    }

    @Test
    void reportsAdvertisedMemoryAndAStableUuid() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            MemorySegment bytes = e.arena.allocate(8);
            e.ok(e.device.cuDeviceTotalMem(bytes, 1));
            assertEquals(1L << 30, readLong(bytes));
            MemorySegment a = e.arena.allocate(16);
            MemorySegment b = e.arena.allocate(16);
            MemorySegment c = e.arena.allocate(16);
            e.ok(e.device.cuDeviceGetUuid(a, 0));
            e.ok(e.device.cuDeviceGetUuid(Emulated.asNative(b), 0));
            e.ok(e.device.cuDeviceGetUuid(c, 1));
            assertEquals(-1, a.mismatch(b));
            assertNotEquals(-1, a.mismatch(c));
        }
    }

    @Test
    void keepsAContextStackPerThreadLikeCuda() throws Exception {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            MemorySegment out = e.arena.allocate(8);
            e.ok(d.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long second = readLong(out);
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(second, readLong(out), "cuCtxCreate pushes the new context");

            CountDownLatch pushed = new CountDownLatch(1);
            CountDownLatch checked = new CountDownLatch(1);
            CompletableFuture<long[]> other = CompletableFuture.supplyAsync(() -> {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment o = arena.allocate(8);
                    long[] seen = new long[4];
                    d.cuCtxGetCurrent(o);
                    seen[0] = readLong(o);                        // a new thread starts with no context
                    d.cuCtxPushCurrent(e.context);
                    d.cuCtxGetCurrent(o);
                    seen[1] = readLong(o);
                    pushed.countDown();
                    await(checked);
                    seen[2] = d.cuCtxPopCurrent(o);
                    seen[3] = d.cuCtxPopCurrent(o);               // now empty
                    return seen;
                }
            });
            assertTrue(pushed.await(5, TimeUnit.SECONDS));
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(second, readLong(out), "the other thread's push does not touch this thread's stack");
            checked.countDown();
            long[] seen = other.get(5, TimeUnit.SECONDS);
            assertEquals(0, seen[0]);
            assertEquals(e.context, seen[1]);
            assertEquals(CUDA_SUCCESS, seen[2]);
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, seen[3]);

            e.ok(d.cuCtxPopCurrent(out));
            assertEquals(second, readLong(out));
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(e.context, readLong(out), "popping reveals the context below");
            e.ok(d.cuCtxSetCurrent(second));
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(second, readLong(out), "cuCtxSetCurrent replaces the top");
            e.ok(d.cuCtxSetCurrent(0));
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(0, readLong(out), "NULL pops the top; the replaced context is gone from the stack");
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxSynchronize());
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPushCurrent(0x1234));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPopCurrent(MemorySegment.NULL));
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await(5, TimeUnit.SECONDS);
        } catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void destroyingAContextFreesItsAllocationsAndHandles() {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            long before = e.freeBytes();
            MemorySegment out = e.arena.allocate(8);
            e.ok(d.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long ctx = readLong(out);
            e.alloc(64 << 20);
            e.alloc(1000);
            long stream = e.stream(0);
            long event = e.event(0);
            long module = e.loadShippedModule();
            // the footprint model: the context itself and the module's code take device memory too
            long model = Contexts.CONTEXT_BYTES + Emulated.codeBytes(Emulated.shippedPtx());
            assertEquals(before - (64 << 20) - 1000 - model, e.freeBytes());

            e.ok(d.cuCtxDestroy(ctx));
            e.ok(d.cuCtxGetCurrent(out));
            assertEquals(e.context, readLong(out), "destroying the current context pops it");
            assertEquals(before, e.freeBytes());
            assertEquals(CUDA_ERROR_INVALID_HANDLE, d.cuStreamSynchronize(stream));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, d.cuEventQuery(event));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, d.cuModuleUnload(module));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxDestroy(ctx));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxPushCurrent(ctx));
        }
    }

    @Test
    void aContextDestroyedElsewhereIsInvalidWhereItIsStillCurrent() throws Exception {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            int rc = CompletableFuture.supplyAsync(() -> d.cuCtxDestroy(e.context)).get(5, TimeUnit.SECONDS);
            e.ok(rc);
            MemorySegment out = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuMemAlloc(out, 16));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxGetDevice(out));
            e.ok(d.cuCtxPopCurrent(out));
        }
    }

    @Test
    void answersContextQueries() {
        try (Emulated e = new Emulated(new EmulatedDevice(2, 1L << 30))) {
            EmulatedDevice d = e.device;
            MemorySegment out = e.arena.allocate(8);
            e.ok(d.cuCtxCreate(out, MemorySegment.NULL, 0, 1));
            e.ok(d.cuCtxGetDevice(out));
            assertEquals(1, readInt(out));
            e.ok(d.cuCtxGetApiVersion(0, out));
            assertEquals(3020, readInt(out));
            e.ok(d.cuCtxGetApiVersion(e.context, out));
            e.ok(d.cuCtxSynchronize());
            assertEquals(CUDA_ERROR_INVALID_DEVICE, d.cuCtxCreate(out, MemorySegment.NULL, 0, 2));
            assertEquals(CUDA_ERROR_INVALID_VALUE, d.cuCtxCreate(MemorySegment.NULL, MemorySegment.NULL, 0, 0));
            assertEquals(CUDA_ERROR_INVALID_VALUE, d.cuCtxCreate(out, MemorySegment.NULL, 0x100, 0));
        }
    }

    @Test
    void closedDeviceAnswersDeinitialized() {
        Emulated e = new Emulated();
        e.device.close();
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_DEINITIALIZED, e.device.cuMemAlloc(out, 16));
        assertEquals(CUDA_ERROR_DEINITIALIZED, e.device.cuInit(0));
        e.arena.close();
    }
}
