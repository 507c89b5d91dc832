package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.ModuleImageKind;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 11 through the Java frontend against a backend process (emulated device): libraries loaded
 * as cudart loads them (with CU_LIBRARY_BINARY_IS_PRESERVED), their CUkernels launched through
 * cuLaunchKernel and queried where a CUfunction is taken, the library/kernel/function queries,
 * launches with a CUlaunchConfig, the occupancy calls, and the context and stream queries; another
 * session's kernel is refused. nvcc-built fatbins (in a version-1 wrapper, and the -rdc form of a
 * version-2 wrapper) are loaded when nvcc is present.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LibraryKernelApiTest extends EmulatedBackendTest {
    private static final int CU_LIBRARY_BINARY_IS_PRESERVED = 1;
    private static final int KERNELS_IN_SHIPPED_PTX = 7;

    private static int readInt(MemorySegment s) {
        return s.get(JAVA_INT, 0);
    }

    private static long readLong(MemorySegment s) {
        return s.get(JAVA_LONG, 0);
    }

    /** cuLibraryLoadData as cudart calls it: library option CU_LIBRARY_BINARY_IS_PRESERVED = 1. */
    private static long loadLibrary(Cuda cu, MemorySegment image) {
        MemorySegment opts = cu.arena.allocate(JAVA_INT, 1);
        opts.set(JAVA_INT, 0, CU_LIBRARY_BINARY_IS_PRESERVED);
        MemorySegment vals = cu.arena.allocate(ADDRESS, 1);
        vals.set(ADDRESS, 0, MemorySegment.ofAddress(1));
        MemorySegment lib = cu.cell();
        Cuda.ok(cu.d.cuLibraryLoadData(lib, MemorySegment.ofAddress(image.address()), MemorySegment.NULL, MemorySegment.NULL, 0,
                opts, vals, 1), "cuLibraryLoadData");
        return readLong(lib);
    }

    private static MemorySegment nativeBytes(Cuda cu, byte[] b) {
        MemorySegment s = cu.arena.allocate(b.length + 16L, 16);
        MemorySegment.copy(b, 0, s, JAVA_BYTE, 0, b.length);
        return s;
    }

    private static long kernel(Cuda cu, long lib, String name) {
        MemorySegment k = cu.cell();
        Cuda.ok(cu.d.cuLibraryGetKernel(k, lib, cu.arena.allocateFrom(name)), "cuLibraryGetKernel " + name);
        return readLong(k);
    }

    private static void fill(Cuda cu, long f, long p, int value, int n) {
        Cuda.ok(cu.d.cuLaunchKernel(f, 1, 1, 1, n, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(value), cu.u32(n)), MemorySegment.NULL),
                "launch");
    }

    private static void assertFilled(Cuda cu, long p, int value, int n) {
        ByteBuffer b = ByteBuffer.wrap(cu.get(p, 4 * n)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            assertEquals(value, b.getInt(), "element " + i);
        }
    }

    @Test
    void aCuKernelIsTakenWhereverACuFunctionIs() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long lib = loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            long k = kernel(cu, lib, "gpus_fill_u32");
            long p = cu.alloc(4 * 64);
            fill(cu, k, p, 0xC0FFEE, 64);
            assertFilled(cu, p, 0xC0FFEE, 64);

            MemorySegment v = cu.cell(), w = cu.cell();
            // as the real driver (580, H200): the two queries take a CUfunction only, their cuKernel* forms a CUkernel
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuFuncGetAttribute(v, 0, k), "cuFuncGetAttribute(kernel)");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuFuncGetParamInfo(k, 1, v, w), "cuFuncGetParamInfo(kernel)");
            Cuda.ok(d.cuKernelGetAttribute(v, 0, k, 0), "cuKernelGetAttribute");
            assertEquals(1024, readInt(v));
            Cuda.ok(d.cuFuncSetAttribute(k, 8, 1024), "cuFuncSetAttribute(kernel)");
            Cuda.ok(d.cuKernelGetParamInfo(k, 1, v, w), "cuKernelGetParamInfo");
            assertEquals(8, readLong(v));
            assertEquals(4, readLong(w));
            Cuda.ok(d.cuFuncSetCacheConfig(k, 1), "cuFuncSetCacheConfig(kernel)");
            Cuda.ok(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(v, k, 256, 0), "occupancy(kernel)");
            assertEquals(8, readInt(v), "2048 threads per SM / 256");
            Cuda.ok(d.cuLibraryUnload(lib), "cuLibraryUnload");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuKernelGetAttribute(v, 0, k, 0), "the kernel went with its library");
        }
    }

    @Test
    void libraryKernelAndFunctionQueriesAnswer() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long lib = loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            MemorySegment v = cu.cell(), w = cu.cell();
            Cuda.ok(d.cuLibraryGetKernelCount(v, lib), "cuLibraryGetKernelCount");
            assertEquals(KERNELS_IN_SHIPPED_PTX, readInt(v));
            MemorySegment all = cu.cell(8L * KERNELS_IN_SHIPPED_PTX);
            Cuda.ok(d.cuLibraryEnumerateKernels(all, KERNELS_IN_SHIPPED_PTX, lib), "cuLibraryEnumerateKernels");
            Set<String> names = new HashSet<>();
            long fillKernel = 0;
            for (int i = 0; i < KERNELS_IN_SHIPPED_PTX; i++) {
                long k = all.getAtIndex(JAVA_LONG, i);
                MemorySegment name = cu.cell();
                Cuda.ok(d.cuKernelGetName(name, k), "cuKernelGetName");
                String n = name.get(ADDRESS, 0).reinterpret(256).getString(0);
                names.add(n);
                if (n.equals("gpus_fill_u32")) {
                    fillKernel = k;
                }
                Cuda.ok(d.cuKernelGetLibrary(v, k), "cuKernelGetLibrary");
                assertEquals(lib, readLong(v));
            }
            assertTrue(names.containsAll(List.of("gpus_vector_add", "gpus_fill_u32", "gpus_empty", "gpus_sleep")), names.toString());
            assertEquals(kernel(cu, lib, "gpus_fill_u32"), fillKernel, "an enumerated kernel is the same handle");
            MemorySegment n1 = cu.cell(), n2 = cu.cell();
            Cuda.ok(d.cuKernelGetName(n1, fillKernel), "name");
            Cuda.ok(d.cuKernelGetName(n2, fillKernel), "name again");
            assertEquals(readLong(n1), readLong(n2), "one copy per name");

            Cuda.ok(d.cuKernelGetParamInfo(fillKernel, 2, v, w), "cuKernelGetParamInfo");
            assertEquals(12, readLong(v));
            assertEquals(4, readLong(w));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuKernelGetParamInfo(fillKernel, 3, v, w));
            Cuda.ok(d.cuKernelGetAttribute(v, 0, fillKernel, 0), "cuKernelGetAttribute");
            assertEquals(1024, readInt(v));
            Cuda.ok(d.cuKernelSetAttribute(8, 4096, fillKernel, 0), "cuKernelSetAttribute");
            Cuda.ok(d.cuKernelGetAttribute(v, 8, fillKernel, 0), "cuKernelGetAttribute");
            assertEquals(4096, readInt(v));
            Cuda.ok(d.cuKernelSetCacheConfig(fillKernel, 2, 0), "cuKernelSetCacheConfig");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuKernelSetCacheConfig(fillKernel, 9, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuKernelGetAttribute(v, 0, fillKernel, 3));

            MemorySegment f = cu.cell();
            Cuda.ok(d.cuKernelGetFunction(f, fillKernel), "cuKernelGetFunction");
            Cuda.ok(d.cuFuncGetName(n1, readLong(f)), "cuFuncGetName");
            assertEquals("gpus_fill_u32", n1.get(ADDRESS, 0).reinterpret(64).getString(0));
            Cuda.ok(d.cuFuncIsLoaded(v, readLong(f)), "cuFuncIsLoaded");
            assertEquals(1, readInt(v));
            Cuda.ok(d.cuFuncLoad(readLong(f)), "cuFuncLoad");
            Cuda.ok(d.cuFuncSetSharedMemConfig(readLong(f), 1), "cuFuncSetSharedMemConfig");
            Cuda.ok(d.cuFuncGetModule(v, readLong(f)), "cuFuncGetModule");
            long mod = readLong(v);
            MemorySegment libMod = cu.cell();
            Cuda.ok(d.cuLibraryGetModule(libMod, lib), "cuLibraryGetModule");
            assertEquals(readLong(libMod), mod);
            Cuda.ok(d.cuModuleGetFunctionCount(v, mod), "cuModuleGetFunctionCount");
            assertEquals(KERNELS_IN_SHIPPED_PTX, readInt(v));
            MemorySegment funcs = cu.cell(8L * KERNELS_IN_SHIPPED_PTX);
            Cuda.ok(d.cuModuleEnumerateFunctions(funcs, KERNELS_IN_SHIPPED_PTX, mod), "cuModuleEnumerateFunctions");
            long p = cu.alloc(4 * 8);
            boolean launched = false;
            for (int i = 0; i < KERNELS_IN_SHIPPED_PTX; i++) {
                long fn = funcs.getAtIndex(JAVA_LONG, i);
                Cuda.ok(d.cuFuncGetName(n1, fn), "cuFuncGetName");
                if (n1.get(ADDRESS, 0).reinterpret(64).getString(0).equals("gpus_fill_u32")) {
                    fill(cu, fn, p, 77, 8);
                    launched = true;
                }
            }
            assertTrue(launched);
            assertFilled(cu, p, 77, 8);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLibraryEnumerateKernels(all, 1 << 20, lib), "bounded");
            assertEquals(CuResult.CUDA_ERROR_NOT_FOUND, d.cuLibraryGetManaged(v, w, lib, cu.arena.allocateFrom("x")),
                    "a managed variable the library does not have");
            Cuda.ok(d.cuLibraryUnload(lib), "cuLibraryUnload");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuFuncGetName(n1, funcs.getAtIndex(JAVA_LONG, 0)),
                    "enumerated functions went with the library's module");
        }
    }

    /** cudaDeviceReset destroys the primary context; cudart keeps its libraries and CUkernels and launches them again. */
    @Test
    void librariesAndKernelsOutliveTheContextTheyWereLoadedIn() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long lib = loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            long k = kernel(cu, lib, "gpus_fill_u32");
            fill(cu, k, cu.alloc(4 * 8), 1, 8);
            Cuda.ok(d.cuDevicePrimaryCtxReset(0), "cuDevicePrimaryCtxReset");
            cu.primaryContext();
            long p = cu.alloc(4 * 8);
            fill(cu, k, p, 2, 8);
            assertFilled(cu, p, 2, 8);
            MemorySegment v = cu.cell();
            Cuda.ok(d.cuKernelGetLibrary(v, k), "cuKernelGetLibrary");
            assertEquals(lib, readLong(v));
        }
    }

    private static final String PTX_WITH_A_VARIABLE = """
            .version 8.0
            .target sm_90
            .address_size 64
            .visible .global .align 4 .u32 counter = 5;
            .visible .entry touch()
            {
                ret;
            }
            """;

    /** The driver frees a library's variable with the library or the context: the session loses its range with either. */
    @Test
    void aLibraryVariableIsReachableOnlyWhileItsLibraryAndContextLive() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            byte[] ptx = (PTX_WITH_A_VARIABLE + "\0").getBytes(java.nio.charset.StandardCharsets.US_ASCII);
            MemorySegment g = cu.cell(), size = cu.cell();
            MemorySegment four = cu.arena.allocate(4);
            for (boolean byReset : new boolean[] {false, true}) {
                long lib = loadLibrary(cu, nativeBytes(cu, ptx));
                Cuda.ok(d.cuLibraryGetGlobal(g, size, lib, cu.arena.allocateFrom("counter")), "cuLibraryGetGlobal");
                assertEquals(4, readLong(size));
                assertEquals(5, java.nio.ByteBuffer.wrap(cu.get(readLong(g), 4)).order(ByteOrder.LITTLE_ENDIAN).getInt());
                Cuda.ok(d.cuMemcpyHtoD(readLong(g), four, 4), "write the variable");
                if (byReset) {
                    Cuda.ok(d.cuDevicePrimaryCtxReset(0), "cuDevicePrimaryCtxReset");
                    cu.primaryContext();
                } else {
                    Cuda.ok(d.cuLibraryUnload(lib), "cuLibraryUnload");
                }
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyHtoD(readLong(g), four, 4),
                        byReset ? "the context is gone" : "the library is gone");
            }
        }
    }

    @Test
    void anotherSessionsKernelIsRefused() throws Exception {
        try (RemoteCudaDriver a = connect("tcp"); RemoteCudaDriver b = connect("tcp")) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long lib = loadLibrary(ca, nativeBytes(ca, Cuda.kernelsPtx()));
            long k = kernel(ca, lib, "gpus_fill_u32");
            MemorySegment v = cb.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuFuncGetAttribute(v, 0, k));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuKernelGetAttribute(v, 0, k, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuKernelGetName(v, k));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuLibraryGetKernelCount(v, lib));
            long p = cb.alloc(16);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuLaunchKernel(k, 1, 1, 1, 4, 1, 1, 0, 0,
                    cb.params(cb.u64(p), cb.u32(1), cb.u32(4)), MemorySegment.NULL));
            Cuda.ok(a.cuKernelGetAttribute(ca.cell(), 0, k, 0), "its own session still may");
        }
    }

    @Test
    void aSessionsEndUnloadsItsLibraries() throws Exception {
        RemoteCudaDriver d = connect("unix");
        long session = d.sessionId();
        try {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
        } finally {
            d.close();
        }
        String line = backend.awaitLog("session " + session + " ended", 10_000);
        assertTrue(line.contains("2 module(s)/librar(ies)") && !line.contains("failed"), line);
    }

    @Test
    void launchesWithALaunchConfigAndCooperatively() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long lib = loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            long k = kernel(cu, lib, "gpus_fill_u32");
            long p = cu.alloc(4 * 128);
            long s = cu.stream();
            // CUlaunchConfig: grid 2x1x1, block 64x1x1, no shared memory, stream s, two attributes
            MemorySegment attrs = cu.arena.allocate(72L * 2, 8);
            attrs.set(JAVA_INT, 0, 8);            // CU_LAUNCH_ATTRIBUTE_PRIORITY
            attrs.set(JAVA_INT, 8, -1);
            attrs.set(JAVA_INT, 72, 4);           // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION 1x1x1
            attrs.set(JAVA_INT, 80, 1);
            attrs.set(JAVA_INT, 84, 1);
            attrs.set(JAVA_INT, 88, 1);
            MemorySegment config = cu.arena.allocate(56, 8);
            int[] dims = {2, 1, 1, 64, 1, 1, 0};
            for (int i = 0; i < dims.length; i++) {
                config.set(JAVA_INT, 4L * i, dims[i]);
            }
            config.set(JAVA_LONG, 32, s);
            config.set(ADDRESS, 40, attrs);
            config.set(JAVA_INT, 48, 2);
            Cuda.ok(d.cuLaunchKernelEx(config, k, cu.params(cu.u64(p), cu.u32(0xABC), cu.u32(128)), MemorySegment.NULL),
                    "cuLaunchKernelEx");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertFilled(cu, p, 0xABC, 128);

            MemorySegment v = cu.cell();
            Cuda.ok(d.cuOccupancyMaxPotentialClusterSize(v, k, config), "cuOccupancyMaxPotentialClusterSize");
            assertEquals(1, readInt(v), "a cluster is one block on the emulated device");
            Cuda.ok(d.cuOccupancyMaxActiveClusters(v, k, config), "cuOccupancyMaxActiveClusters");
            assertEquals(32 * 132, readInt(v), "64-thread blocks: 32 per SM (the block limit), 132 SMs");

            // refused launches are pipelined: their error comes back from the next synchronizing call
            attrs.set(JAVA_INT, 0, 13);           // DEVICE_UPDATABLE_KERNEL_NODE: graphs only
            int r = d.cuLaunchKernelEx(config, k, cu.params(cu.u64(p), cu.u32(1), cu.u32(128)), MemorySegment.NULL);
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, r == CuResult.CUDA_SUCCESS ? d.cuCtxSynchronize() : r);
            attrs.set(JAVA_INT, 0, 7);            // PROGRAMMATIC_EVENT with an event that is not ours
            attrs.set(JAVA_LONG, 8, 0x1234_5678L);
            r = d.cuLaunchKernelEx(config, k, cu.params(cu.u64(p), cu.u32(1), cu.u32(128)), MemorySegment.NULL);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, r == CuResult.CUDA_SUCCESS ? d.cuCtxSynchronize() : r);
            assertFilled(cu, p, 0xABC, 128);
            config.set(JAVA_INT, 48, 33);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLaunchKernelEx(config, k,
                    cu.params(cu.u64(p), cu.u32(1), cu.u32(128)), MemorySegment.NULL), "more attributes than allowed");

            Cuda.ok(d.cuLaunchCooperativeKernel(k, 2, 1, 1, 64, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(0xDEF), cu.u32(128))),
                    "cuLaunchCooperativeKernel");
            assertFilled(cu, p, 0xDEF, 128);
            r = d.cuLaunchCooperativeKernel(k, 1_000_000, 1, 1, 64, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(0), cu.u32(0)));
            assertEquals(LaunchTooLarge.CODE, r == CuResult.CUDA_SUCCESS ? d.cuCtxSynchronize() : r,
                    "a grid that cannot be resident at once");
        }
    }

    /** CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE (cuda.h). */
    private static final class LaunchTooLarge {
        static final int CODE = 720;
    }

    /** blockSize -> 8 bytes per thread of dynamic shared memory: an upcall the frontend calls in this process. */
    static long eightBytesPerThread(int blockSize) {
        return 8L * blockSize;
    }

    @Test
    void occupancyAnswersWithAndWithoutABlockSizeCallback() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long lib = loadLibrary(cu, nativeBytes(cu, Cuda.kernelsPtx()));
            long k = kernel(cu, lib, "gpus_fill_u32");
            MemorySegment grid = cu.cell(), block = cu.cell(), v = cu.cell();
            Cuda.ok(d.cuOccupancyMaxPotentialBlockSize(grid, block, k, MemorySegment.NULL, 0, 0), "no callback");
            assertEquals(1024, readInt(block));
            assertEquals(2 * 132, readInt(grid));
            Cuda.ok(d.cuOccupancyMaxPotentialBlockSizeWithFlags(grid, block, k, MemorySegment.NULL, 0, 200, 0), "limit 200");
            assertEquals(128, readInt(block), "200 (1800 resident threads) down to 128, the first to fill an SM");
            assertEquals(16 * 132, readInt(grid));

            MemorySegment callback = Linker.nativeLinker().upcallStub(MethodHandles.lookup().findStatic(LibraryKernelApiTest.class,
                    "eightBytesPerThread", MethodType.methodType(long.class, int.class)),
                    FunctionDescriptor.of(JAVA_LONG, JAVA_INT), Arena.ofAuto());
            Cuda.ok(d.cuOccupancyMaxPotentialBlockSize(grid, block, k, callback, 0, 0), "with a callback");
            int best = readInt(block);
            int expectedBlocks = 0, expectedBest = 0, bestThreads = 0;
            for (int size = 1024; size > 0; size -= 32) {
                Cuda.ok(d.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(v, k, size, 8L * size, 0), "occupancy " + size);
                if (size * readInt(v) > bestThreads) {
                    bestThreads = size * readInt(v);
                    expectedBest = size;
                    expectedBlocks = readInt(v);
                }
            }
            assertEquals(expectedBest, best);
            assertEquals(expectedBlocks * 132, readInt(grid));

            Cuda.ok(d.cuOccupancyAvailableDynamicSMemPerBlock(v, k, 2, 1024), "cuOccupancyAvailableDynamicSMemPerBlock");
            assertEquals(49152, readLong(v), "within the function's 48 KiB limit");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(v, k, 256, 0, 4));
        }
    }

    @Test
    void contextAndStreamQueriesAnswerWithSessionIds() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            long ctx = cu.primaryContext();
            MemorySegment v = cu.cell(), w = cu.cell();
            Cuda.ok(d.cuCtxGetDevice_v2(v, 0), "cuCtxGetDevice_v2(NULL)");
            assertEquals(0, readInt(v));
            Cuda.ok(d.cuCtxGetDevice_v2(v, ctx), "cuCtxGetDevice_v2(ctx)");
            Cuda.ok(d.cuCtxSynchronize_v2(ctx), "cuCtxSynchronize_v2");
            Cuda.ok(d.cuCtxSynchronize_v2(0), "cuCtxSynchronize_v2(NULL)");
            Cuda.ok(d.cuCtxGetId(ctx, v), "cuCtxGetId");
            long id = readLong(v);
            Cuda.ok(d.cuCtxGetId(0, w), "cuCtxGetId(NULL)");
            assertEquals(id, readLong(w));
            assertEquals(ctx, id, "a context's id is its session handle id");
            assertEquals(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuCtxGetId(0x7777_0000L, v));

            long s = cu.stream();
            Cuda.ok(d.cuStreamGetId(s, v), "cuStreamGetId");
            assertEquals(s, readLong(v));
            Cuda.ok(d.cuStreamGetId(0, v), "cuStreamGetId(legacy)");
            Cuda.ok(d.cuStreamGetId(0, w), "again");
            assertEquals(readLong(v), readLong(w), "stable");
            assertNotEquals(s, readLong(v));
            Cuda.ok(d.cuStreamGetCtx(s, v), "cuStreamGetCtx");
            assertEquals(ctx, readLong(v));
            w.set(JAVA_LONG, 0, -1);
            Cuda.ok(d.cuStreamGetCtx_v2(s, v, w), "cuStreamGetCtx_v2");
            assertEquals(ctx, readLong(v));
            assertEquals(0, readLong(w), "no green context");
            Cuda.ok(d.cuStreamGetDevice(s, v), "cuStreamGetDevice");
            assertEquals(0, readInt(v));
            Cuda.ok(d.cuCtxGetStreamPriorityRange(v, w), "cuCtxGetStreamPriorityRange");
            assertEquals(0, readInt(v));
            assertEquals(-5, readInt(w));
            Cuda.ok(d.cuCtxGetSharedMemConfig(v), "cuCtxGetSharedMemConfig");
            assertEquals(1, readInt(v));
            Cuda.ok(d.cuCtxSetSharedMemConfig(2), "cuCtxSetSharedMemConfig");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuCtxSetSharedMemConfig(3));
            Cuda.ok(d.cuModuleGetLoadingMode(v), "cuModuleGetLoadingMode");
            assertEquals(System.getenv("CUDA_MODULE_LOADING") != null && System.getenv("CUDA_MODULE_LOADING").equals("EAGER") ? 1 : 2,
                    readInt(v));
        }
    }

    @Test
    void loadsALibraryFromAGuestFileAndRefusesBadOptions(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("kernels.ptx"), Cuda.kernelsPtx());
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment lib = cu.cell();
            Cuda.ok(d.cuLibraryLoadFromFile(lib, cu.arena.allocateFrom(file.toString()), MemorySegment.NULL, MemorySegment.NULL, 0,
                    MemorySegment.NULL, MemorySegment.NULL, 0), "cuLibraryLoadFromFile");
            long p = cu.alloc(4 * 16);
            fill(cu, kernel(cu, readLong(lib), "gpus_fill_u32"), p, 5, 16);
            assertFilled(cu, p, 5, 16);
            assertEquals(CuResult.CUDA_ERROR_FILE_NOT_FOUND, d.cuLibraryLoadFromFile(lib,
                    cu.arena.allocateFrom(dir.resolve("none").toString()), MemorySegment.NULL, MemorySegment.NULL, 0,
                    MemorySegment.NULL, MemorySegment.NULL, 0));

            MemorySegment image = nativeBytes(cu, Cuda.kernelsPtx());
            MemorySegment opts = cu.arena.allocate(JAVA_INT, 2);
            opts.set(JAVA_INT, 0, 7);   // no such CUlibraryOption
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLibraryLoadData(lib, image, MemorySegment.NULL,
                    MemorySegment.NULL, 0, opts, cu.arena.allocate(16), 1));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLibraryLoadData(lib, image, MemorySegment.NULL,
                    MemorySegment.NULL, 0, opts, cu.arena.allocate(16), 100_000), "too many options");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLibraryLoadData(lib, image, MemorySegment.NULL,
                    MemorySegment.NULL, 3, MemorySegment.NULL, MemorySegment.NULL, 0), "a count without its array");
            MemorySegment jit = cu.arena.allocate(JAVA_INT, 1);
            jit.set(JAVA_INT, 0, 0);    // CU_JIT_MAX_REGISTERS, ignored
            MemorySegment jitValues = cu.arena.allocate(ADDRESS, 1);
            jitValues.set(ADDRESS, 0, MemorySegment.ofAddress(32));
            Cuda.ok(d.cuLibraryLoadData(lib, image, jit, jitValues, 1, MemorySegment.NULL, MemorySegment.NULL, 0),
                    "JIT options are accepted and ignored");
        }
    }

    // ---- nvcc-built images ----

    private static final String SOURCE = """
            __device__ int bias = 5;
            extern "C" __global__ void add_bias(int *p, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) p[i] += bias + i;
            }
            """;

    private static byte[] nvcc(Path dir, String name, String... options) throws Exception {
        Path nvcc = NativePrograms.nvcc();
        assumeTrue(nvcc != null, "nvcc is not installed");
        Path cu = dir.resolve("lib.cu");
        Files.writeString(cu, SOURCE);
        Path out = dir.resolve(name);
        List<String> cmd = new java.util.ArrayList<>(List.of(nvcc.toString()));
        cmd.addAll(List.of(options));
        cmd.addAll(List.of("-fatbin", "-o", out.toString(), cu.toString()));
        NativePrograms.Run r = NativePrograms.run(cmd, Map.of(), dir, 300);
        assertEquals(0, r.exit(), () -> "nvcc: " + r.stdout() + r.stderr());
        return Files.readAllBytes(out);
    }

    /** A __fatBinC_Wrapper_t: magic, version, fatbin pointer, and (version 2) the NULL-terminated prelinked array. */
    private static MemorySegment wrapper(Cuda cu, int version, MemorySegment fatbin, MemorySegment... prelinked) {
        MemorySegment w = cu.arena.allocate(24, 8);
        w.set(JAVA_INT, 0, ModuleImageKind.FATBIN_WRAPPER_MAGIC);
        w.set(JAVA_INT, 4, version);
        w.set(ADDRESS, 8, fatbin);
        if (version == 2) {
            MemorySegment array = cu.arena.allocate(ADDRESS, prelinked.length + 1);
            for (int i = 0; i < prelinked.length; i++) {
                array.setAtIndex(ADDRESS, i, prelinked[i]);
            }
            w.set(ADDRESS, 16, array);
        }
        return w;
    }

    private static void addBiasThroughLibrary(Cuda cu, MemorySegment image) {
        long lib = loadLibrary(cu, image);
        MemorySegment g = cu.cell(), size = cu.cell();
        Cuda.ok(cu.d.cuLibraryGetGlobal(g, size, lib, cu.arena.allocateFrom("bias")), "cuLibraryGetGlobal");
        assertEquals(4, readLong(size));
        cu.put(readLong(g), new byte[] {7, 0, 0, 0});   // a library's variable is device memory of the session
        long p = cu.alloc(4 * 32);
        cu.put(p, new byte[4 * 32]);
        Cuda.ok(cu.d.cuLaunchKernel(kernel(cu, lib, "add_bias"), 1, 1, 1, 32, 1, 1, 0, 0, cu.params(cu.u64(p), cu.u32(32)),
                MemorySegment.NULL), "add_bias");
        ByteBuffer b = ByteBuffer.wrap(cu.get(p, 4 * 32)).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 32; i++) {
            assertEquals(7 + i, b.getInt(), "element " + i);
        }
        Cuda.ok(cu.d.cuLibraryUnload(lib), "cuLibraryUnload");
    }

    @Test
    void loadsAnNvccFatbinInTheWrapperCudartPasses(@TempDir Path dir) throws Exception {
        byte[] fatbin = nvcc(dir, "lib.fatbin", "-arch=sm_90");
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            addBiasThroughLibrary(cu, nativeBytes(cu, fatbin));
            addBiasThroughLibrary(cu, wrapper(cu, 1, nativeBytes(cu, fatbin)));
        }
    }

    /**
     * An -rdc program's wrapper: version 2, its fatbin the device-linked one (nvlink's output, SASS
     * only), its array the translation units' fatbins (PTX and relocatable SASS).
     */
    @Test
    void loadsTheVersionTwoWrapperOfAnRdcBuild(@TempDir Path dir) throws Exception {
        byte[] linked = nvcc(dir, "linked.fatbin", "-gencode", "arch=compute_90,code=sm_90");
        byte[] unit = nvcc(dir, "unit.fatbin", "-rdc=true", "-arch=sm_90");
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment sassOnly = nativeBytes(cu, linked);
            MemorySegment lib = cu.cell();
            assertEquals(CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU, d.cuLibraryLoadData(lib, MemorySegment.ofAddress(sassOnly.address()),
                    MemorySegment.NULL, MemorySegment.NULL, 0, MemorySegment.NULL, MemorySegment.NULL, 0),
                    "the linked fatbin alone has no PTX for the emulated device");
            addBiasThroughLibrary(cu, wrapper(cu, 2, sassOnly, nativeBytes(cu, unit)));
        }
    }
}
