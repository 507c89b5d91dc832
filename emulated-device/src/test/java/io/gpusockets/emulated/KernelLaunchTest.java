package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class KernelLaunchTest {
    private Emulated e;
    private long module;

    @BeforeEach
    void load() {
        e = new Emulated();
        module = e.loadShippedModule();
    }

    @AfterEach
    void close() {
        e.close();
    }

    @Test
    void addsOneMillionFloats() {
        int n = 1 << 20;
        float[] a = new float[n];
        float[] b = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = i;
            b[i] = 0.25f * i;
        }
        long da = e.alloc(4L * n);
        long db = e.alloc(4L * n);
        long dc = e.alloc(4L * n);
        e.upload(da, a);
        e.upload(db, b);
        e.ok(e.launch(e.function(module, "gpus_vector_add"), n / 256, 256, 0, 0, da, db, dc, n));
        float[] c = e.downloadFloats(dc, n);
        for (int i = 0; i < n; i++) {
            assertEquals(a[i] + b[i], c[i], "c[" + i + "]");
        }
    }

    @Test
    void vectorAddComputesOnlyIndicesTheGridCovers() {
        long da = e.alloc(4 * 100);
        long dc = e.alloc(4 * 100);
        float[] ones = new float[100];
        java.util.Arrays.fill(ones, 1f);
        e.upload(da, ones);
        e.ok(e.device.cuMemsetD32(dc, Float.floatToIntBits(-1f), 100));
        // 2 blocks of 32 threads: indices 0..63 of n = 100.
        e.ok(e.launch(e.function(module, "gpus_vector_add"), 2, 32, 0, 0, da, da, dc, 100));
        float[] c = e.downloadFloats(dc, 100);
        assertEquals(2f, c[63]);
        assertEquals(-1f, c[64]);
    }

    @Test
    void saxpyFusesMultiplyAndAddLikeThePtx() {
        int n = 1000;
        float[] x = new float[n];
        float[] y = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = 1.1f * i;
            y[i] = 3.3f - i;
        }
        long dx = e.alloc(4L * n);
        long dy = e.alloc(4L * n);
        e.upload(dx, x);
        e.upload(dy, y);
        e.ok(e.launch(e.function(module, "gpus_saxpy"), 4, 256, 0, 0, 2.5f, dx, dy, n));
        float[] out = e.downloadFloats(dy, n);
        for (int i = 0; i < n; i++) {
            assertEquals(Math.fma(x[i], 2.5f, y[i]), out[i], "y[" + i + "]");
        }
    }

    @Test
    void fillsThirtyTwoBitWords() {
        long p = e.alloc(4 * 10);
        e.ok(e.launch(e.function(module, "gpus_fill_u32"), 1, 8, 0, 0, p, 0xDEADBEEF, 10));
        int[] words = e.downloadInts(p, 10);
        assertEquals(0xDEADBEEF, words[7]);
        assertEquals(0, words[8], "thread 8 does not exist");
    }

    @Test
    void blockSumReducesEachBlockInSharedMemory() {
        int n = 1000;
        int block = 128;
        int grid = (n + block - 1) / block;
        float[] in = new float[n];
        for (int i = 0; i < n; i++) {
            in[i] = i % 7 + 0.125f;
        }
        long din = e.alloc(4L * n);
        long dout = e.alloc(4L * grid);
        e.upload(din, in);
        e.ok(e.launch(e.function(module, "gpus_block_sum"), grid, block, 4 * block, 0, din, dout, n));
        float[] sums = e.downloadFloats(dout, grid);
        for (int b = 0; b < grid; b++) {
            float[] partial = new float[block];
            for (int t = 0; t < block; t++) {
                int i = b * block + t;
                partial[t] = i < n ? in[i] : 0f;
            }
            for (int s = block / 2; s > 0; s >>= 1) {
                for (int t = 0; t < s; t++) {
                    partial[t] += partial[t + s];
                }
            }
            assertEquals(partial[0], sums[b], "block " + b);
        }
    }

    @Test
    void blockSumWithoutEnoughSharedMemoryFaults() {
        long din = e.alloc(4 * 64);
        long dout = e.alloc(4);
        e.ok(e.launch(e.function(module, "gpus_block_sum"), 1, 64, 4 * 32, 0, din, dout, 64));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize());
    }

    /** Each parameter's bytes land in its 16-byte slot, as the CUDA kernel writes them. */
    @Test
    void mixed12WritesEveryParameterIntoItsSlot() {
        long out = e.alloc(176);
        e.ok(e.device.cuMemsetD8(out, (byte) 0x55, 176));
        byte[] p6 = le(8).putFloat(1.5f).putFloat(-2f).array();
        byte[] p7 = le(16).putInt(1).putInt(-2).putInt(3).putInt(0x7fffffff).array();
        byte[] p9 = {1, -2, 3, -4};
        byte[] p10 = le(16).putDouble(Math.PI).putDouble(-Math.E).array();
        e.ok(e.launch(e.function(module, "gpus_mixed12"), 1, 1, 0, 0,
                (byte) 0xA5, (short) -1234, 0x12345678, 0x0102030405060708L, 3.25f, 6.5,
                p6, p7, (short) 0xBEEF, p9, p10, out));
        byte[] got = new byte[176];
        MemorySegment host = e.arena.allocate(176);
        e.ok(e.device.cuMemcpyDtoH(host, out, 176));
        MemorySegment.copy(host, ValueLayout.JAVA_BYTE, 0, got, 0, 176);

        ByteBuffer expected = le(176);
        expected.put(0, (byte) 0xA5);
        expected.putShort(16, (short) -1234);
        expected.putInt(32, 0x12345678);
        expected.putLong(48, 0x0102030405060708L);
        expected.putFloat(64, 3.25f);
        expected.putDouble(80, 6.5);
        expected.put(96, p6);
        expected.put(112, p7);
        expected.putShort(128, (short) 0xBEEF);
        expected.put(144, p9);
        expected.put(160, p10);
        assertArrayEquals(expected.array(), got);
    }

    /** An {@code extra}-style launch: the parameters packed at the offsets cuFuncGetParamInfo reports. */
    @Test
    void launchesWithAPackedParameterBufferAtTheReportedOffsets() {
        long f = e.function(module, "gpus_fill_u32");
        long p = e.alloc(16);
        MemorySegment offset = e.arena.allocate(8);
        MemorySegment size = e.arena.allocate(8);
        MemorySegment buffer = e.arena.allocate(16, 8);
        long[][] values = {{p}, {77}, {4}};
        for (int i = 0; i < 3; i++) {
            e.ok(e.device.cuFuncGetParamInfo(f, i, offset, size));
            long off = offset.get(ValueLayout.JAVA_LONG, 0);
            if (size.get(ValueLayout.JAVA_LONG, 0) == 8) {
                buffer.set(ValueLayout.JAVA_LONG, off, values[i][0]);
            } else {
                buffer.set(ValueLayout.JAVA_INT, off, (int) values[i][0]);
            }
        }
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuFuncGetParamInfo(f, 3, offset, size));
        MemorySegment bufferSize = e.arena.allocateFrom(ValueLayout.JAVA_LONG, 16);
        MemorySegment extra = e.arena.allocate(8 * 5, 8);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 0, LaunchParams.PARAM_BUFFER_POINTER);
        extra.setAtIndex(ValueLayout.ADDRESS, 1, buffer);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 2, LaunchParams.PARAM_BUFFER_SIZE);
        extra.setAtIndex(ValueLayout.ADDRESS, 3, bufferSize);
        extra.setAtIndex(ValueLayout.JAVA_LONG, 4, LaunchParams.PARAM_END);
        e.ok(e.device.cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, 0, MemorySegment.NULL, Emulated.asNative(extra)));
        assertArrayEquals(new int[] {77, 77, 77, 77}, e.downloadInts(p, 4));

        bufferSize.set(ValueLayout.JAVA_LONG, 0, 12);
        assertEquals(CUDA_ERROR_INVALID_VALUE,
                e.device.cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, 0, MemorySegment.NULL, extra), "buffer too small");
    }

    @Test
    void copiesParametersAtLaunchSoTheCallerMayReuseThem() {
        long f = e.function(module, "gpus_fill_u32");
        long sleep = e.function(module, "gpus_sleep");
        long p = e.alloc(16);
        long stream = e.stream(0);
        e.ok(e.launch(sleep, 1, 1, 0, stream, 50_000_000L));
        MemorySegment params = e.params(p, 5, 4);
        e.ok(e.device.cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, stream, params, MemorySegment.NULL));
        params.get(ValueLayout.ADDRESS, 8).reinterpret(4).set(ValueLayout.JAVA_INT, 0, 9);   // while the kernel waits
        e.ok(e.device.cuStreamSynchronize(stream));
        assertArrayEquals(new int[] {5, 5, 5, 5}, e.downloadInts(p, 4));
    }

    @Test
    void rejectsBadLaunchGeometryAndParameters() {
        long f = e.function(module, "gpus_fill_u32");
        long p = e.alloc(16);
        MemorySegment params = e.params(p, 1, 4);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, 0, params, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, 0, params, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, 1, 1, 1, 64, 32, 1, 0, 0, params, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 50_000, 0, params, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, -1, 1, 1, 1, 1, 1, 0, 0, params, MemorySegment.NULL),
                "2^32-1 blocks is beyond the x limit");
        assertEquals(CUDA_ERROR_INVALID_VALUE,
                e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, MemorySegment.NULL, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, params, params));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuLaunchKernel(module, 1, 1, 1, 1, 1, 1, 0, 0, params, MemorySegment.NULL));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0x999, params, MemorySegment.NULL));
        e.ok(e.device.cuFuncSetAttribute(f, EmulatedFunction.MAX_DYNAMIC_SHARED_SIZE_BYTES, 100_000));
        e.ok(e.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 50_000, 0, params, MemorySegment.NULL));
        e.ok(e.device.cuCtxSynchronize());
    }

    @Test
    void illegalAddressInAKernelIsStickyAndReportedAtSynchronization() {
        long f = e.function(module, "gpus_fill_u32");
        long p = e.alloc(16);
        long stream = e.stream(0);
        e.ok(e.launch(f, 1, 8, 0, stream, p, 1, 8));   // 8 words into a 4-word buffer: the launch itself succeeds
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuStreamSynchronize(stream));
        assertTrue(e.device.lastErrorDetail().contains("gpus_fill_u32"), e.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize(), "sticky");
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.launch(f, 1, 1, 0, 0, p, 1, 1));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuMemcpyDtoH(e.arena.allocate(4), p, 4));
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuMemAlloc(out, 16));
    }

    /** As the real driver (H200, driver 580): a kernel fault poisons the process, every context and every later creation. */
    @Test
    void aKernelFaultPoisonsTheWholeDeviceByDefault() {
        assertEquals(FaultScope.PROCESS, e.device.faultScope());
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0)); // another session's context, current now
        long other = out.get(ValueLayout.JAVA_LONG, 0);
        long q = e.alloc(16);
        e.ok(e.device.cuCtxSetCurrent(e.context));
        long f = e.function(module, "gpus_fill_u32");
        long p = e.alloc(16);
        e.ok(e.launch(f, 1, 8, 0, 0, p, 1, 8));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize());

        e.ok(e.device.cuCtxSetCurrent(other));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxSynchronize(), "the other context takes the error");
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuMemcpyDtoH(e.arena.allocate(4), q, 4));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0), "no new context");
        assertTrue(e.device.lastErrorDetail().contains("poisoned"), e.device.lastErrorDetail());
        e.ok(e.device.cuCtxDestroy(other));
        e.ok(e.device.cuCtxDestroy(e.context));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, e.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0),
                "still none once the faulting context is gone");
    }

    @Test
    void inFaultScopeContextAFaultStaysInItsContext() {
        try (Emulated c = new Emulated(new EmulatedDevice(1, EmulatedDevice.DEFAULT_MEMORY_BYTES, FaultScope.CONTEXT))) {
            long m = c.loadShippedModule();
            long p = c.alloc(16);
            c.ok(c.launch(c.function(m, "gpus_fill_u32"), 1, 8, 0, 0, p, 1, 8));
            assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, c.device.cuCtxSynchronize());
            MemorySegment out = c.arena.allocate(8);
            c.ok(c.device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
            c.ok(c.device.cuCtxSynchronize());
            c.ok(c.device.cuMemAlloc(out, 16));
        }
    }

    @Test
    void aKernelOutsideTheInterpretersSubsetFailsWithNotSupportedNamingItsInstructionAndLine() {
        String ptx = """
                .version 8.0
                .target sm_80
                .address_size 64
                .visible .entry my_custom_kernel(.param .u64 p)
                {
                    .reg .b32 %r<2>;
                    mov.u32 %r1, 1;
                    pmevent 1;
                }
                """;
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, e.nativeString(ptx)));
        long custom = out.get(ValueLayout.JAVA_LONG, 0);
        long f = e.function(custom, "my_custom_kernel");
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.launch(f, 1, 1, 0, 0, 0L));
        String detail = e.device.lastErrorDetail();
        assertTrue(detail.contains("my_custom_kernel") && detail.contains("pmevent") && detail.contains("line 8"), detail);
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.launch(f, 1, 1, 0, 0, 0L), "a second launch fails the same");
        e.ok(e.device.cuCtxSynchronize());
        assertEquals(CUDA_ERROR_NOT_FOUND, e.device.cuModuleGetFunction(out, custom, e.nativeString("nope")));
    }

    @Test
    void aJavaKernelTakesPrecedenceOverItsPtxBody() {
        // gpus_sleep's PTX body here returns at once; the Java kernel parks for the time asked
        String ptx = """
                .version 8.0
                .target sm_80
                .address_size 64
                .visible .entry gpus_sleep(.param .u64 ns)
                {
                    ret;
                }
                """;
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, e.nativeString(ptx)));
        long start = System.nanoTime();
        e.ok(e.launch(e.function(out.get(ValueLayout.JAVA_LONG, 0), "gpus_sleep"), 1, 1, 0, 0, 200_000_000L));
        e.ok(e.device.cuCtxSynchronize());
        assertTrue(System.nanoTime() - start >= 200_000_000L, "the Java sleep ran, not the empty PTX body");
    }

    @Test
    void aKernelNameWithAnotherSignatureIsNotRunAsTheShippedOne() {
        String ptx = ".version 8.0\n.target sm_80\n.visible .entry gpus_sleep(.param .u32 ns, .param .u64 n) { ret; }\n";
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadData(out, e.nativeString(ptx)));
        long f = e.function(out.get(ValueLayout.JAVA_LONG, 0), "gpus_sleep");
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.launch(f, 1, 1, 0, 0, 0, 0L));
    }

    /** Compiled images are read (FatbinImageTest has nvcc's); these are cut short, so invalid. */
    @Test
    void refusesTruncatedCompiledImagesAsInvalid() {
        MemorySegment out = e.arena.allocate(8);
        MemorySegment elf = e.arena.allocateFrom(ValueLayout.JAVA_BYTE, (byte) 0x7f, (byte) 'E', (byte) 'L', (byte) 'F', (byte) 2, (byte) 1);
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoadData(out, elf));
        assertTrue(e.device.lastErrorDetail().contains("cubin"), e.device.lastErrorDetail());
        MemorySegment fatbin = e.arena.allocateFrom(ValueLayout.JAVA_INT, 0xBA55ED50, 0x00100001);
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoadFatBinary(out, fatbin));
        MemorySegment wrapper = e.arena.allocateFrom(ValueLayout.JAVA_INT, 0x466243B1, 1, 0, 0);
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoadData(out, wrapper));
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoadData(out, Emulated.asNative(wrapper)), "NULL fatbin pointer");
        MemorySegment lib = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuLibraryLoadData(lib, elf, MemorySegment.NULL, MemorySegment.NULL, 0,
                MemorySegment.NULL, MemorySegment.NULL, 0));
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.device.cuModuleLoadData(out, e.nativeString("")));
    }

    @Test
    void exposesModuleGlobalsAsDeviceMemory() {
        String ptx = """
                .version 8.0
                .target sm_80
                .address_size 64
                .visible .global .align 4 .u32 table[4] = {10, 20, 30, 40};
                .visible .entry k() { ret; }
                """;
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuModuleLoadDataEx(out, e.nativeString(ptx), 0, MemorySegment.NULL, MemorySegment.NULL));
        long m = out.get(ValueLayout.JAVA_LONG, 0);
        MemorySegment dptr = e.arena.allocate(8);
        MemorySegment bytes = e.arena.allocate(8);
        e.ok(e.device.cuModuleGetGlobal(dptr, bytes, m, e.nativeString("table")));
        assertEquals(16, bytes.get(ValueLayout.JAVA_LONG, 0));
        long table = dptr.get(ValueLayout.JAVA_LONG, 0);
        assertArrayEquals(new int[] {10, 20, 30, 40}, e.downloadInts(table, 4));
        e.ok(e.device.cuModuleGetGlobal(MemorySegment.NULL, bytes, m, e.nativeString("table")));
        assertEquals(CUDA_ERROR_NOT_FOUND, e.device.cuModuleGetGlobal(dptr, bytes, m, e.nativeString("missing")));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemFree(table), "a variable is not a cuMemAlloc allocation");
        long before = e.freeBytes();
        e.ok(e.device.cuModuleUnload(m));
        assertEquals(before + 16 + Emulated.codeBytes(ptx), e.freeBytes(), "the variable and the code (footprint model)");
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpyDtoH(e.arena.allocate(16), table, 16));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuModuleGetGlobal(dptr, bytes, m, e.nativeString("table")));
    }

    @Test
    void answersFunctionAttributesAndOccupancy() {
        long f = e.function(module, "gpus_vector_add");
        assertEquals(f, e.function(module, "gpus_vector_add"), "one handle per entry");
        MemorySegment v = e.arena.allocate(4);
        e.ok(e.device.cuFuncGetAttribute(v, EmulatedFunction.NUM_REGS, f));
        assertEquals(32, v.get(ValueLayout.JAVA_INT, 0));
        e.ok(e.device.cuFuncGetAttribute(v, EmulatedFunction.MAX_THREADS_PER_BLOCK, f));
        assertEquals(1024, v.get(ValueLayout.JAVA_INT, 0));
        e.ok(e.device.cuFuncGetAttribute(v, EmulatedFunction.PTX_VERSION, f));
        assertEquals(90, v.get(ValueLayout.JAVA_INT, 0));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuFuncGetAttribute(v, 99, f));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuFuncSetAttribute(f, EmulatedFunction.NUM_REGS, 8), "read-only");
        e.ok(e.device.cuOccupancyMaxActiveBlocksPerMultiprocessor(v, f, 256, 0));
        assertEquals(8, v.get(ValueLayout.JAVA_INT, 0));
        e.ok(e.device.cuOccupancyMaxActiveBlocksPerMultiprocessor(v, f, 1024, 0));
        assertEquals(2, v.get(ValueLayout.JAVA_INT, 0));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuOccupancyMaxActiveBlocksPerMultiprocessor(v, f, 0, 0));
    }

    @Test
    void runsKernelsOfAContextIndependentLibrary() {
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuLibraryLoadData(out, e.nativeString(Emulated.shippedPtx()), MemorySegment.NULL, MemorySegment.NULL, 0,
                MemorySegment.NULL, MemorySegment.NULL, 0));
        long lib = out.get(ValueLayout.JAVA_LONG, 0);
        e.ok(e.device.cuLibraryGetKernel(out, lib, e.nativeString("gpus_fill_u32")));
        long kernel = out.get(ValueLayout.JAVA_LONG, 0);
        e.ok(e.device.cuKernelGetFunction(out, kernel));
        long f = out.get(ValueLayout.JAVA_LONG, 0);
        e.ok(e.device.cuLibraryGetModule(out, lib));
        assertEquals(f, e.function(out.get(ValueLayout.JAVA_LONG, 0), "gpus_fill_u32"));
        long p = e.alloc(8);
        e.ok(e.launch(f, 1, 2, 0, 0, p, 3, 2));
        e.ok(e.launch(kernel, 1, 1, 0, 0, p, 4, 1));   // a CUkernel launches as its function in the current context
        assertArrayEquals(new int[] {4, 3}, e.downloadInts(p, 2));
        assertEquals(CUDA_ERROR_NOT_FOUND, e.device.cuLibraryGetKernel(out, lib, e.nativeString("nope")));
        e.ok(e.device.cuLibraryUnload(lib));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuKernelGetFunction(out, kernel));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.launch(f, 1, 1, 0, 0, p, 4, 1));
        assertEquals(CUDA_SUCCESS, e.device.cuCtxSynchronize());
    }

    private static ByteBuffer le(int size) {
        return ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    }
}
