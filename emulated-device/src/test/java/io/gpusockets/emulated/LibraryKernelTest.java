package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_CONTEXT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** Issue 11 on the emulated device: library and kernel queries, launches with options, context and stream queries. */
class LibraryKernelTest {
    private static long readLong(MemorySegment s) {
        return s.get(ValueLayout.JAVA_LONG, 0);
    }

    private static int readInt(MemorySegment s) {
        return s.get(ValueLayout.JAVA_INT, 0);
    }

    private static long library(Emulated e) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuLibraryLoadData(out, e.nativeString(Emulated.shippedPtx()), MemorySegment.NULL, MemorySegment.NULL, 0,
                MemorySegment.NULL, MemorySegment.NULL, 0));
        return readLong(out);
    }

    private static long kernel(Emulated e, long lib, String name) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuLibraryGetKernel(out, lib, e.nativeString(name)));
        return readLong(out);
    }

    @Test
    void kernelsAreEnumeratedNamedAndLaunchedAsFunctions() {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            long lib = library(e);
            MemorySegment v = e.arena.allocate(8), w = e.arena.allocate(8);
            e.ok(d.cuLibraryGetKernelCount(v, lib));
            int n = readInt(v);
            assertEquals(7, n);
            MemorySegment all = e.arena.allocate(8L * n);
            e.ok(d.cuLibraryEnumerateKernels(all, n, lib));
            long fill = kernel(e, lib, "gpus_fill_u32");
            boolean found = false;
            for (int i = 0; i < n; i++) {
                found |= all.getAtIndex(ValueLayout.JAVA_LONG, i) == fill;
            }
            assertEquals(true, found, "the enumeration holds cuLibraryGetKernel's handle");
            e.ok(d.cuKernelGetName(v, fill));
            assertEquals("gpus_fill_u32", v.get(ValueLayout.ADDRESS, 0).reinterpret(64).getString(0));
            e.ok(d.cuKernelGetLibrary(v, fill));
            assertEquals(lib, readLong(v));
            e.ok(d.cuKernelGetParamInfo(fill, 1, v, w));
            assertEquals(8, readLong(v));
            e.ok(d.cuKernelSetAttribute(8, 2048, fill, 0));
            e.ok(d.cuKernelGetAttribute(v, 8, fill, 0));
            assertEquals(2048, readInt(v));
            assertEquals(CUDA_ERROR_INVALID_VALUE, d.cuKernelSetCacheConfig(fill, 4, 0));

            long p = e.alloc(4 * 32);
            MemorySegment params = e.arena.allocate(8 * 3);
            MemorySegment pv = e.arena.allocate(8), value = e.arena.allocate(4), count = e.arena.allocate(4);
            pv.set(ValueLayout.JAVA_LONG, 0, p);
            value.set(ValueLayout.JAVA_INT, 0, 99);
            count.set(ValueLayout.JAVA_INT, 0, 32);
            params.setAtIndex(ValueLayout.ADDRESS, 0, pv);
            params.setAtIndex(ValueLayout.ADDRESS, 1, value);
            params.setAtIndex(ValueLayout.ADDRESS, 2, count);
            e.ok(d.cuLaunchCooperativeKernel(fill, 1, 1, 1, 32, 1, 1, 0, 0, params));
            e.ok(d.cuCtxSynchronize_v2(0));
            MemorySegment host = e.arena.allocate(4 * 32);
            e.ok(d.cuMemcpyDtoH(host, p, 4 * 32));
            assertEquals(99, host.getAtIndex(ValueLayout.JAVA_INT, 31));
            assertEquals(LaunchOptions.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                    d.cuLaunchCooperativeKernel(fill, 100_000, 1, 1, 1024, 1, 1, 0, 0, params));

            MemorySegment f = e.arena.allocate(8);
            e.ok(d.cuKernelGetFunction(f, fill));
            e.ok(d.cuFuncGetModule(v, readLong(f)));
            e.ok(d.cuModuleGetFunctionCount(w, readLong(v)));
            assertEquals(7, readInt(w));
            e.ok(d.cuFuncIsLoaded(w, readLong(f)));
            assertEquals(1, readInt(w));
            e.ok(d.cuLibraryUnload(lib));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, d.cuKernelGetName(v, fill));
        }
    }

    @Test
    void launchConfigsTakeHintsAndRefuseWhatCannotRun() {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            long k = kernel(e, library(e), "gpus_empty");
            MemorySegment attrs = e.arena.allocate(72, 8);
            MemorySegment config = e.arena.allocate(56, 8);
            config.set(ValueLayout.JAVA_INT, 0, 4);
            config.set(ValueLayout.JAVA_INT, 4, 1);
            config.set(ValueLayout.JAVA_INT, 8, 1);
            config.set(ValueLayout.JAVA_INT, 12, 32);
            config.set(ValueLayout.JAVA_INT, 16, 1);
            config.set(ValueLayout.JAVA_INT, 20, 1);
            config.set(ValueLayout.ADDRESS, 40, attrs);
            config.set(ValueLayout.JAVA_INT, 48, 1);
            attrs.set(ValueLayout.JAVA_INT, 0, 8);      // priority
            e.ok(d.cuLaunchKernelEx(config, k, MemorySegment.NULL, MemorySegment.NULL));
            attrs.set(ValueLayout.JAVA_INT, 0, 4);      // a 2x1x1 cluster
            attrs.set(ValueLayout.JAVA_INT, 8, 2);
            attrs.set(ValueLayout.JAVA_INT, 12, 1);
            attrs.set(ValueLayout.JAVA_INT, 16, 1);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, d.cuLaunchKernelEx(config, k, MemorySegment.NULL, MemorySegment.NULL));
            MemorySegment v = e.arena.allocate(8);
            e.ok(d.cuOccupancyMaxActiveClusters(v, k, config));
            assertEquals(0, readInt(v), "a cluster of two cannot run here");
            e.ok(d.cuOccupancyMaxPotentialClusterSize(v, k, config));
            assertEquals(1, readInt(v));
            attrs.set(ValueLayout.JAVA_INT, 0, 7);      // programmatic event: not modelled
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, d.cuLaunchKernelEx(config, k, MemorySegment.NULL, MemorySegment.NULL));
            e.ok(d.cuCtxSynchronize());
        }
    }

    @Test
    void contextAndStreamQueriesNameTheirObjects() {
        try (Emulated e = new Emulated()) {
            EmulatedDevice d = e.device;
            MemorySegment v = e.arena.allocate(8), w = e.arena.allocate(8);
            e.ok(d.cuCtxGetId(0, v));
            assertEquals(e.context, readLong(v));
            e.ok(d.cuCtxGetDevice_v2(v, e.context));
            assertEquals(0, readInt(v));
            MemorySegment s = e.arena.allocate(8);
            e.ok(d.cuStreamCreate(s, 0));
            e.ok(d.cuStreamGetCtx(readLong(s), v));
            assertEquals(e.context, readLong(v));
            w.set(ValueLayout.JAVA_LONG, 0, -1);
            e.ok(d.cuStreamGetCtx_v2(0, v, w));
            assertEquals(e.context, readLong(v));
            assertEquals(0, readLong(w));
            e.ok(d.cuStreamGetId(0, v));
            e.ok(d.cuStreamGetId(2, w));
            assertNotEquals(readLong(v), readLong(w), "legacy and per-thread streams differ");
            e.ok(d.cuStreamGetId(0, w));
            assertEquals(readLong(v), readLong(w));
            e.ok(d.cuStreamGetDevice(readLong(s), v));
            assertEquals(0, readInt(v));
            e.ok(d.cuCtxGetStreamPriorityRange(v, w));
            assertEquals(0, readInt(v));
            assertEquals(-5, readInt(w));
            assertEquals(CUDA_ERROR_INVALID_CONTEXT, d.cuCtxGetId(0x1234, v));
            e.ok(d.cuCtxGetSharedMemConfig(v));
            assertEquals(1, readInt(v));
        }
    }
}
