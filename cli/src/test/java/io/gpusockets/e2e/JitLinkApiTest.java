package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 11's JIT-link API through the Java frontend against a backend process (emulated device):
 * link states made, fed PTX (as data and as a file the guest reads), completed into an image the
 * guest holds a copy of, which cuModuleLoadData loads through us and whose kernel runs; the log
 * options filled in guest memory; another session's link state refused; a session's end destroys
 * its link states. The PTX units are nvcc's ({@code -rdc=true -ptx} of the runtime test program
 * rdc.cu and rdc_lib.cu) when nvcc is present, else that test is skipped, saying so.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class JitLinkApiTest extends EmulatedBackendTest {
    static final int CU_JIT_INPUT_PTX = 1;
    static final int CU_JIT_ERROR_LOG_BUFFER = 5;
    static final int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

    static final String HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n";
    /** out[i] = twice(i) + offset, twice() and offset from the other unit. */
    static final String KERNEL = HEAD + """
            .extern .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0);
            .extern .global .align 4 .b32 offset;
            .visible .entry k(.param .u64 k_param_0)
            {
                .reg .b32 %r<5>;
                .reg .b64 %rd<5>;
                ld.param.u64 %rd1, [k_param_0];
                cvta.to.global.u64 %rd2, %rd1;
                mov.u32 %r1, %tid.x;
                {
                .param .b32 param0;
                st.param.b32 [param0+0], %r1;
                .param .b32 retval0;
                call.uni (retval0), twice, (param0);
                ld.param.b32 %r2, [retval0+0];
                }
                ld.global.u32 %r3, [offset];
                add.s32 %r4, %r2, %r3;
                mul.wide.u32 %rd3, %r1, 4;
                add.s64 %rd4, %rd2, %rd3;
                st.global.u32 [%rd4], %r4;
                ret;
            }
            """;
    static final String LIBRARY = HEAD + """
            .visible .global .align 4 .b32 offset = 100;
            .visible .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)
            {
                .reg .b32 %r<3>;
                ld.param.u32 %r1, [twice_param_0];
                shl.b32 %r2, %r1, 1;
                st.param.b32 [func_retval0+0], %r2;
                ret;
            }
            """;

    private static long readLong(MemorySegment s) {
        return s.get(JAVA_LONG, 0);
    }

    private static long create(Cuda cu, MemorySegment options, MemorySegment values, int n) {
        MemorySegment state = cu.cell();
        Cuda.ok(cu.d.cuLinkCreate(n, options, values, state), "cuLinkCreate");
        return readLong(state);
    }

    private static int addPtx(Cuda cu, long state, String ptx, String name) {
        byte[] b = ptx.getBytes(StandardCharsets.UTF_8);
        MemorySegment data = cu.arena.allocate(b.length + 1L);
        MemorySegment.copy(b, 0, data, JAVA_BYTE, 0, b.length);
        return cu.d.cuLinkAddData(state, CU_JIT_INPUT_PTX, data, b.length + 1L, cu.arena.allocateFrom(name), 0,
                MemorySegment.NULL, MemorySegment.NULL);
    }

    /** cuLinkComplete, then the image loaded from the guest's copy; returns the module. */
    private static long completeAndLoad(Cuda cu, long state) {
        MemorySegment cubin = cu.cell();
        MemorySegment size = cu.cell();
        Cuda.ok(cu.d.cuLinkComplete(state, cubin, size), "cuLinkComplete");
        MemorySegment image = cubin.get(ADDRESS, 0);
        assertTrue(image.address() != 0 && readLong(size) > 0, "an image in guest memory");
        MemorySegment module = cu.cell();
        Cuda.ok(cu.d.cuModuleLoadData(module, image), "cuModuleLoadData(the linked image)");
        return readLong(module);
    }

    private static int[] ints(byte[] b) {
        int[] out = new int[b.length / 4];
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(out);
        return out;
    }

    @Test
    void twoPtxUnitsLinkLoadAndRun(@TempDir Path dir) throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment opts = cu.arena.allocate(JAVA_INT, 2);
            opts.setAtIndex(JAVA_INT, 0, CU_JIT_ERROR_LOG_BUFFER);
            opts.setAtIndex(JAVA_INT, 1, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
            MemorySegment log = cu.arena.allocate(256).fill((byte) 'x');
            MemorySegment vals = cu.arena.allocate(ADDRESS, 2);
            vals.setAtIndex(ADDRESS, 0, log);
            vals.setAtIndex(JAVA_LONG, 1, 256);
            long state = create(cu, opts, vals, 2);
            Cuda.ok(addPtx(cu, state, KERNEL, "kernel.ptx"), "cuLinkAddData(kernel)");
            Path lib = Files.writeString(dir.resolve("library.ptx"), LIBRARY);
            Cuda.ok(d.cuLinkAddFile(state, CU_JIT_INPUT_PTX, cu.arena.allocateFrom(lib.toString()), 0, MemorySegment.NULL,
                    MemorySegment.NULL), "cuLinkAddFile (read in the guest)");
            long module = completeAndLoad(cu, state);
            assertEquals(0, log.get(JAVA_BYTE, 0), "an empty error log after success");
            assertEquals(1, vals.getAtIndex(JAVA_LONG, 1), "the log's size: its NUL");
            long f = cu.function(module, "k");
            long out = cu.alloc(4 * 32);
            Cuda.ok(d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, cu.params(cu.u64(out)), MemorySegment.NULL), "launch");
            int[] got = ints(cu.get(out, 4 * 32));
            for (int i = 0; i < 32; i++) {
                assertEquals(2 * i + 100, got[i], "out[" + i + "]");
            }
            Cuda.ok(d.cuLinkDestroy(state), "cuLinkDestroy");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuLinkComplete(state, cu.cell(), cu.cell()), "destroyed");
            Cuda.ok(d.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, 0, cu.params(cu.u64(out)), MemorySegment.NULL),
                    "the module outlives the link state");
            Cuda.ok(d.cuCtxSynchronize(), "sync");
        }
    }

    /** An image over 64 KiB (a big initialized table), which may come back through the shared window. */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"unix", "tcp"})
    void aLargeLinkedImageReachesTheGuestWhole(String scheme) throws Exception {
        StringBuilder table = new StringBuilder(HEAD).append(".visible .global .align 4 .b8 big[40000] = {");
        for (int i = 0; i < 40000; i++) {
            table.append(i == 0 ? "" : ", ").append(i % 251);
        }
        table.append("};\n");
        try (RemoteCudaDriver d = connect(scheme)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long state = create(cu, MemorySegment.NULL, MemorySegment.NULL, 0);
            Cuda.ok(addPtx(cu, state, KERNEL, "kernel.ptx"), "cuLinkAddData(kernel)");
            Cuda.ok(addPtx(cu, state, LIBRARY, "library.ptx"), "cuLinkAddData(library)");
            Cuda.ok(addPtx(cu, state, table.toString(), "table.ptx"), "cuLinkAddData(table)");
            MemorySegment cubin = cu.cell();
            MemorySegment size = cu.cell();
            Cuda.ok(d.cuLinkComplete(state, cubin, size), "cuLinkComplete");
            assertTrue(readLong(size) > 64 << 10, "an image over 64 KiB: " + readLong(size));
            long module = completeAndLoad(cu, state);
            MemorySegment dptr = cu.cell(), bytes = cu.cell();
            Cuda.ok(d.cuModuleGetGlobal(dptr, bytes, module, cu.arena.allocateFrom("big")), "cuModuleGetGlobal(big)");
            assertEquals(40000, readLong(bytes));
            byte[] got = cu.get(readLong(dptr), 40000);
            for (int i = 0; i < 40000; i++) {
                assertEquals((byte) (i % 251), got[i], "big[" + i + "]");
            }
            Cuda.ok(d.cuLinkDestroy(state), "cuLinkDestroy");
        }
    }

    @Test
    void aLinkErrorFailsCompletionAndFillsTheErrorLog() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment opts = cu.arena.allocate(JAVA_INT, 2);
            opts.setAtIndex(JAVA_INT, 0, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
            opts.setAtIndex(JAVA_INT, 1, CU_JIT_ERROR_LOG_BUFFER);
            MemorySegment log = cu.arena.allocate(40);
            MemorySegment vals = cu.arena.allocate(ADDRESS, 2);
            vals.setAtIndex(JAVA_LONG, 0, 40);
            vals.setAtIndex(ADDRESS, 1, log);
            long state = create(cu, opts, vals, 2);
            Cuda.ok(addPtx(cu, state, KERNEL, "kernel.ptx"), "cuLinkAddData");
            assertEquals(CuResult.CUDA_ERROR_INVALID_PTX, d.cuLinkComplete(state, cu.cell(), cu.cell()), "twice() is undefined");
            String text = log.getString(0);
            assertTrue(text.startsWith("gpusockets: cuLinkComplete failed"), text);
            assertEquals(40, vals.getAtIndex(JAVA_LONG, 0), "cut to the buffer: 39 bytes and the NUL");
            MemorySegment tooMany = cu.arena.allocate(JAVA_INT, 1);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLinkCreate(65, tooMany, vals, cu.cell()), "over 64 options");
            tooMany.set(JAVA_INT, 0, 99);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuLinkCreate(1, tooMany, vals, cu.cell()), "not a CUjit_option");
            Cuda.ok(d.cuLinkDestroy(state), "cuLinkDestroy");
        }
    }

    @Test
    void anotherSessionsLinkStateIsRefusedAndASessionsEndDestroysItsOwn() throws Exception {
        RemoteCudaDriver a = connect("tcp");
        long session = a.sessionId();
        try (RemoteCudaDriver b = connect("tcp")) {
            Cuda ca = new Cuda(a), cb = new Cuda(b);
            ca.primaryContext();
            cb.primaryContext();
            long state = create(ca, MemorySegment.NULL, MemorySegment.NULL, 0);
            create(ca, MemorySegment.NULL, MemorySegment.NULL, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, addPtx(cb, state, LIBRARY, "x.ptx"));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuLinkComplete(state, cb.cell(), cb.cell()));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuLinkDestroy(state));
            Cuda.ok(addPtx(ca, state, LIBRARY, "library.ptx"), "its own session still may");
        } finally {
            a.close();
        }
        String line = backend.awaitLog("session " + session + " ended", 10_000);
        assertTrue(line.contains("2 link state(s)") && !line.contains("failed"), line);
    }

    /** nvcc's relocatable PTX of rdc.cu (the kernel, with extern functions and table) and rdc_lib.cu. */
    @Test
    void nvccsRelocatablePtxUnitsLinkAndRun(@TempDir Path dir) throws Exception {
        Path nvcc = NativePrograms.nvcc();
        assumeTrue(nvcc != null, "nvcc is not installed: the nvcc-built PTX units cannot be made");
        Path src = RuntimeProgramsTest.runtimeDir();
        String[] ptx = new String[2];
        String[] names = {"rdc", "rdc_lib"};
        for (int i = 0; i < 2; i++) {
            Path out = dir.resolve(names[i] + ".ptx");
            NativePrograms.Run r = NativePrograms.run(List.of(nvcc.toString(), "-arch=sm_90", "-O2", "-rdc=true", "-ptx",
                    "-I" + src, src.resolve(names[i] + ".cu").toString(), "-o", out.toString()), Map.of(), dir, 120);
            String name = names[i];
            assertEquals(0, r.exit(), () -> "nvcc -ptx " + name + ".cu: " + r.stdout() + r.stderr());
            ptx[i] = Files.readString(out);
        }
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long state = create(cu, MemorySegment.NULL, MemorySegment.NULL, 0);
            Cuda.ok(addPtx(cu, state, ptx[0], "rdc.ptx"), "cuLinkAddData(rdc.ptx)");
            Cuda.ok(addPtx(cu, state, ptx[1], "rdc_lib.ptx"), "cuLinkAddData(rdc_lib.ptx)");
            long module = completeAndLoad(cu, state);
            Cuda.ok(d.cuLinkDestroy(state), "cuLinkDestroy");
            int n = 512;
            byte[] input = new byte[4 * n];
            ByteBuffer in = ByteBuffer.wrap(input).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < n; i++) {
                in.putInt(1 + (i * 7919) % 5000);
            }
            long din = cu.alloc(4L * n), dout = cu.alloc(4L * n);
            cu.put(din, input);
            long f = cu.function(module, "_Z8evaluatePKiPii");
            Cuda.ok(d.cuLaunchKernel(f, n / 128, 1, 1, 128, 1, 1, 0, 0, cu.params(cu.u64(din), cu.u64(dout), cu.u32(n)),
                    MemorySegment.NULL), "launch evaluate");
            int[] got = ints(cu.get(dout, 4 * n));
            for (int i = 0; i < n; i++) {
                int h = 1 + (i * 7919) % 5000, x = h, steps = 0;
                while (x != 1 && steps < 1000) {
                    x = x % 2 != 0 ? 3 * x + 1 : x / 2;
                    steps++;
                }
                int v = h % 100;
                assertEquals(v * v * 3 - 7 * v + 11 + (h % 16) * (h % 16) + steps, got[i], "out[" + i + "] for " + h);
            }
        }
    }
}
