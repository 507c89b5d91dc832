package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_READY;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class StreamOrderingTest {
    private static final long MS = 1_000_000L;
    private static final int NON_BLOCKING = 1;
    private static final int DISABLE_TIMING = 2;

    private Emulated e;
    private long sleep;
    private long fill;

    @BeforeEach
    void load() {
        e = new Emulated();
        long module = e.loadShippedModule();
        sleep = e.function(module, "gpus_sleep");
        fill = e.function(module, "gpus_fill_u32");
    }

    @AfterEach
    void close() {
        e.close();
    }

    private int[] asyncDownload(long dptr, int count, long stream, MemorySegment host) {
        e.ok(e.device.cuMemcpyDtoHAsync(Emulated.asNative(host), dptr, 4L * count, stream));
        e.ok(e.device.cuStreamSynchronize(stream));
        return host.toArray(ValueLayout.JAVA_INT);
    }

    @Test
    void workOnOneStreamRunsInOrder() {
        long s = e.stream(0);
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, s, 100 * MS));
        e.ok(e.launch(fill, 1, 4, 0, s, p, 42, 4));
        assertEquals(CUDA_ERROR_NOT_READY, e.device.cuStreamQuery(s));
        assertArrayEquals(new int[] {42, 42, 42, 42}, asyncDownload(p, 4, s, e.arena.allocate(16)));
        assertEquals(CUDA_SUCCESS, e.device.cuStreamQuery(s));
    }

    /**
     * cuMemFree of memory that queued work still uses waits for that work, as the driver's does (a free is a
     * synchronizing call): the work completes with the memory's contents, and no fault follows. (The emulated device
     * used to unmap first, so the queued copy faulted with a sticky CUDA_ERROR_ILLEGAL_ADDRESS, which the program's
     * next call, thrust's cuMemsetD8Async on memory just allocated, returned.)
     */
    @Test
    void freeWaitsForQueuedWorkThatUsesTheMemory() {
        long s = e.stream(NON_BLOCKING);
        long a = e.alloc(4096);
        long b = e.alloc(4096);
        e.ok(e.launch(fill, 4, 256, 0, 0, a, 7, 1024));
        e.ok(e.device.cuCtxSynchronize());
        e.ok(e.launch(sleep, 1, 1, 0, s, 100 * MS));
        e.ok(e.device.cuMemcpyDtoDAsync(b, a, 4096, s));
        e.ok(e.device.cuMemFree(a));
        long c = e.alloc(64);
        e.ok(e.device.cuMemsetD8Async(c, (byte) 0, 64, s));
        assertEquals(CUDA_SUCCESS, e.device.cuCtxSynchronize());
        int[] got = e.downloadInts(b, 1024);
        for (int i = 0; i < got.length; i++) {
            assertEquals(7, got[i], "copied before the free: element " + i);
        }
    }

    /** cuModuleUnload likewise: a queued kernel still reads the module's variable, and sees its value. */
    @Test
    void unloadWaitsForQueuedKernelsThatUseTheModulesVariables() {
        String ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .global .align 4 .u32 g = 5;\n"
                + ".visible .entry k(.param .u64 out)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<2>;\nld.param.u64 %rd1, [out];\n"
                + "ld.global.u32 %r1, [g];\nst.global.u32 [%rd1], %r1;\nret;\n}\n";
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, Emulated.asNative(e.arena.allocateFrom(ptx))));
        long module = out.get(ValueLayout.JAVA_LONG, 0);
        long k = e.function(module, "k");
        long s = e.stream(NON_BLOCKING);
        long p = e.alloc(4);
        e.ok(e.launch(sleep, 1, 1, 0, s, 100 * MS));
        e.ok(e.launch(k, 1, 1, 0, s, p));
        e.ok(e.device.cuModuleUnload(module));
        assertEquals(CUDA_SUCCESS, e.device.cuCtxSynchronize());
        assertEquals(5, e.downloadInts(p, 1)[0]);
    }

    @Test
    void synchronousCopyWaitsForBlockingStreams() {
        long s = e.stream(0);
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, s, 80 * MS));
        e.ok(e.launch(fill, 1, 4, 0, s, p, 7, 4));
        assertArrayEquals(new int[] {7, 7, 7, 7}, e.downloadInts(p, 4), "the legacy stream waits for blocking streams");
    }

    @Test
    void blockingStreamWaitsForEarlierLegacyWork() {
        long s = e.stream(0);
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, 0, 80 * MS));
        e.ok(e.launch(fill, 1, 4, 0, 0, p, 3, 4));
        assertArrayEquals(new int[] {3, 3, 3, 3}, asyncDownload(p, 4, s, e.arena.allocate(16)));
    }

    @Test
    void nonBlockingStreamDoesNotWaitForTheLegacyStream() {
        long s = e.stream(NON_BLOCKING);
        e.ok(e.launch(sleep, 1, 1, 0, 0, 300 * MS));
        long start = System.nanoTime();
        e.ok(e.launch(e.function(e.loadShippedModule(), "gpus_empty"), 1, 1, 0, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertTrue(System.nanoTime() - start < 200 * MS, "non-blocking stream overtook the sleeping legacy stream");
        assertEquals(CUDA_ERROR_NOT_READY, e.device.cuStreamQuery(0));
    }

    @Test
    void twoStreamsRunConcurrently() {
        long a = e.stream(0);
        long b = e.stream(0);
        long start = System.nanoTime();
        e.ok(e.launch(sleep, 1, 1, 0, a, 200 * MS));
        e.ok(e.launch(sleep, 1, 1, 0, b, 200 * MS));
        e.ok(e.device.cuStreamSynchronize(a));
        e.ok(e.device.cuStreamSynchronize(b));
        long elapsed = System.nanoTime() - start;
        assertTrue(elapsed >= 200 * MS && elapsed < 350 * MS, "took " + elapsed / MS + " ms");
    }

    @Test
    void eventsMeasureAtLeastTheSleep() {
        long s = e.stream(0);
        long start = e.event(0);
        long end = e.event(0);
        e.ok(e.device.cuEventRecord(start, s));
        e.ok(e.launch(sleep, 1, 1, 0, s, 50 * MS));
        e.ok(e.device.cuEventRecord(end, s));
        MemorySegment ms = e.arena.allocate(4);
        assertEquals(CUDA_ERROR_NOT_READY, e.device.cuEventElapsedTime(ms, start, end));
        assertEquals(CUDA_ERROR_NOT_READY, e.device.cuEventQuery(end));
        e.ok(e.device.cuEventSynchronize(end));
        e.ok(e.device.cuEventQuery(end));
        e.ok(e.device.cuEventElapsedTime(Emulated.asNative(ms), start, end));
        float elapsed = ms.get(ValueLayout.JAVA_FLOAT, 0);
        assertTrue(elapsed >= 50f && elapsed < 1000f, elapsed + " ms");
    }

    @Test
    void refusesElapsedTimeWithoutTimingOrRecording() {
        long timed = e.event(0);
        long untimed = e.event(DISABLE_TIMING);
        MemorySegment ms = e.arena.allocate(4);
        e.ok(e.device.cuEventQuery(timed));   // an event never recorded is complete
        e.ok(e.device.cuEventSynchronize(timed));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuEventElapsedTime(ms, timed, timed));
        e.ok(e.device.cuEventRecord(timed, 0));
        e.ok(e.device.cuEventRecord(untimed, 0));
        e.ok(e.device.cuCtxSynchronize());
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuEventElapsedTime(ms, timed, untimed));
        e.ok(e.device.cuEventDestroy(untimed));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuEventQuery(untimed));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuEventCreate(ms, 0x40));
    }

    @Test
    void streamWaitsForAnEventRecordedOnAnother() {
        long producer = e.stream(NON_BLOCKING);
        long consumer = e.stream(NON_BLOCKING);
        long ready = e.event(0);
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, producer, 80 * MS));
        e.ok(e.launch(fill, 1, 4, 0, producer, p, 11, 4));
        e.ok(e.device.cuEventRecord(ready, producer));
        e.ok(e.device.cuStreamWaitEvent(consumer, ready, 0));
        assertArrayEquals(new int[] {11, 11, 11, 11}, asyncDownload(p, 4, consumer, e.arena.allocate(16)));
    }

    @Test
    void asyncHostToDeviceCopyTakesTheSourceAtTheCall() {
        long s = e.stream(0);
        long p = e.alloc(16);
        MemorySegment host = e.arena.allocateFrom(ValueLayout.JAVA_INT, 1, 2, 3, 4);
        e.ok(e.launch(sleep, 1, 1, 0, s, 50 * MS));
        e.ok(e.device.cuMemcpyHtoDAsync(p, Emulated.asNative(host), 16, s));
        host.fill((byte) 0);   // reused before the stream gets to the copy
        assertArrayEquals(new int[] {1, 2, 3, 4}, asyncDownload(p, 4, s, e.arena.allocate(16)));
    }

    @Test
    void perThreadStreamIsOwnedByItsThread() throws Exception {
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, 2, 100 * MS));
        e.ok(e.launch(fill, 1, 4, 0, 2, p, 9, 4));
        // Another thread's per-thread stream is another stream: its sync does not wait for ours.
        long elapsed = CompletableFuture.supplyAsync(() -> {
            e.device.cuCtxPushCurrent(e.context);
            long start = System.nanoTime();
            int rc = e.device.cuStreamSynchronize(2);
            e.device.cuCtxPopCurrent(MemorySegment.NULL);
            return rc == CUDA_SUCCESS ? System.nanoTime() - start : -1;
        }).get(5, TimeUnit.SECONDS);
        assertTrue(elapsed >= 0 && elapsed < 80 * MS, elapsed / MS + " ms");
        e.ok(e.device.cuStreamSynchronize(2));
        assertArrayEquals(new int[] {9, 9, 9, 9}, e.downloadInts(p, 4));
    }

    @Test
    void destroyedStreamFinishesItsWorkAndIsThenInvalid() {
        long s = e.stream(0);
        long p = e.alloc(16);
        e.ok(e.launch(sleep, 1, 1, 0, s, 50 * MS));
        e.ok(e.launch(fill, 1, 4, 0, s, p, 5, 4));
        e.ok(e.device.cuStreamDestroy(s));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuStreamQuery(s));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.launch(fill, 1, 4, 0, s, p, 6, 4));
        assertArrayEquals(new int[] {5, 5, 5, 5}, e.downloadInts(p, 4), "the legacy stream still orders after its work");
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuStreamCreate(e.arena.allocate(8), 0x4));
    }

    @Test
    void destroyingAContextStopsALongSleepEarly() {
        long s = e.stream(0);
        e.ok(e.launch(sleep, 1, 1, 0, s, 60_000 * MS));
        long start = System.nanoTime();
        e.ok(e.device.cuCtxDestroy(e.context));
        assertTrue(System.nanoTime() - start < 1_000 * MS);
    }
}
