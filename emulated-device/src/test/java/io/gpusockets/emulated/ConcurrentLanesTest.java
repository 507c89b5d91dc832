package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Many threads at once, as the backend's lanes call the driver. */
class ConcurrentLanesTest {
    private static final int LANES = 8;
    private static final int ROUNDS = 40;

    /** One lane: its own stream, allocations, launches and checks; returns the number of wrong words. */
    private static int lane(EmulatedDevice d, long ctx, long fill, int id) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            check(d.cuCtxPushCurrent(ctx));
            check(d.cuStreamCreate(out, id % 2));
            long stream = out.get(ValueLayout.JAVA_LONG, 0);
            int wrong = 0;
            for (int r = 0; r < ROUNDS; r++) {
                int n = 64 + r;
                check(d.cuMemAlloc(out, 4L * n));
                long p = out.get(ValueLayout.JAVA_LONG, 0);
                MemorySegment params = arena.allocate(24, 8);
                MemorySegment value = arena.allocateFrom(ValueLayout.JAVA_INT, id * 1000 + r);
                params.setAtIndex(ValueLayout.ADDRESS, 0, arena.allocateFrom(ValueLayout.JAVA_LONG, p));
                params.setAtIndex(ValueLayout.ADDRESS, 1, value);
                params.setAtIndex(ValueLayout.ADDRESS, 2, arena.allocateFrom(ValueLayout.JAVA_INT, n));
                check(d.cuLaunchKernel(fill, 1, 1, 1, 128, 1, 1, 0, stream, params, MemorySegment.NULL));
                MemorySegment host = arena.allocate(4L * n);   // confined: the copy must happen on this thread
                check(d.cuMemcpyDtoHAsync(host, p, 4L * n, stream));
                check(d.cuStreamSynchronize(stream));
                for (int i = 0; i < n; i++) {
                    wrong += host.getAtIndex(ValueLayout.JAVA_INT, i) == id * 1000 + r ? 0 : 1;
                }
                check(d.cuMemFree(p));
            }
            check(d.cuStreamDestroy(stream));
            check(d.cuCtxPopCurrent(MemorySegment.NULL));
            return wrong;
        }
    }

    private static void check(int rc) {
        if (rc != CUDA_SUCCESS) {
            throw new AssertionError("CUresult " + rc);
        }
    }

    @Test
    void lanesSharingAContextDoNotDisturbEachOther() throws Exception {
        try (Emulated e = new Emulated(); ExecutorService pool = Executors.newFixedThreadPool(LANES)) {
            long fill = e.function(e.loadShippedModule(), "gpus_fill_u32");
            long freeBefore = e.freeBytes();
            List<Future<Integer>> lanes = new ArrayList<>();
            for (int id = 0; id < LANES; id++) {
                int lane = id;
                lanes.add(pool.submit(() -> lane(e.device, e.context, fill, lane)));
            }
            for (Future<Integer> f : lanes) {
                assertEquals(0, f.get(30, TimeUnit.SECONDS));
            }
            assertEquals(freeBefore, e.freeBytes());
        }
    }

    /** Fault scope CONTEXT only: by default a fault poisons every context, as on the real driver (KernelLaunchTest). */
    @Test
    void inFaultScopeContextAFaultInOneContextLeavesAnotherUsable() throws Exception {
        try (Emulated e = new Emulated(new EmulatedDevice(1, EmulatedDevice.DEFAULT_MEMORY_BYTES, FaultScope.CONTEXT))) {
            long module = e.loadShippedModule();
            long fill = e.function(module, "gpus_fill_u32");
            long p = e.alloc(16);
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            long other = e.function(e.loadShippedModule(), "gpus_fill_u32");
            // The first context's pointer is an illegal address in the second context's kernel.
            e.ok(e.launch(other, 1, 4, 0, 0, p, 1, 4));
            assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize());
            e.ok(e.device.cuCtxPopCurrent(out));
            e.ok(e.launch(fill, 1, 4, 0, 0, p, 2, 4));
            e.ok(e.device.cuCtxSynchronize());
            assertEquals(2, e.downloadInts(p, 4)[3]);
        }
    }
}
