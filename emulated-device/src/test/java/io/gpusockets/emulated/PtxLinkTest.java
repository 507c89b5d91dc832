package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NO_BINARY_FOR_GPU;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.emulated.ptx.PtxEngine;
import io.gpusockets.protocol.images.FatbinImage;
import java.io.ByteArrayOutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

/**
 * Linking PTX across translation units ({@link PtxLinker}), as an -rdc image brings it: a
 * device-linked fatbin without PTX followed by one fatbin per unit ({@link ModuleImage}). Each
 * linked module runs on both engines.
 */
class PtxLinkTest {
    static final String HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n";

    /** Calls twice() and reads offset from the other unit; its own private scale collides with the library's. */
    static final String KERNEL = HEAD + """
            .extern .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0);
            .extern .global .align 4 .b32 offset;
            .global .align 4 .b32 scale = 1000;
            .visible .entry k(.param .u64 k_param_0)
            {
                .reg .b32 %r<6>;
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
                ld.global.u32 %r4, [scale];
                add.s32 %r5, %r2, %r3;
                add.s32 %r5, %r5, %r4;
                mul.wide.u32 %rd3, %r1, 4;
                add.s64 %rd4, %rd2, %rd3;
                st.global.u32 [%rd4], %r5;
                ret;
            }
            """;

    static final String LIBRARY = HEAD + """
            .global .align 4 .b32 scale = 3;
            .visible .global .align 4 .b32 offset = 100;
            .visible .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)
            {
                .reg .b32 %r<4>;
                ld.param.u32 %r1, [twice_param_0];
                ld.global.u32 %r2, [scale];
                mul.lo.s32 %r3, %r1, %r2;
                st.param.b32 [func_retval0+0], %r3;
                ret;
            }
            """;

    /** A weak twice() that the library's strong one overrides (it would give 7 * x). */
    static final String WEAK = HEAD + """
            .weak .func (.param .b32 func_retval0) twice(.param .b32 twice_param_0)
            {
                .reg .b32 %r<3>;
                ld.param.u32 %r1, [twice_param_0];
                mul.lo.s32 %r2, %r1, 7;
                st.param.b32 [func_retval0+0], %r2;
                ret;
            }
            """;

    /** No calls (so the compiled engine takes it): reads the library's offset and its own private scale. */
    static final String READER = HEAD + """
            .extern .global .align 4 .b32 offset;
            .global .align 4 .b32 scale = 1000;
            .visible .entry k(.param .u64 k_param_0)
            {
                .reg .b32 %r<6>;
                .reg .b64 %rd<5>;
                ld.param.u64 %rd1, [k_param_0];
                cvta.to.global.u64 %rd2, %rd1;
                mov.u32 %r1, %tid.x;
                ld.global.u32 %r3, [offset];
                ld.global.u32 %r4, [scale];
                add.s32 %r5, %r1, %r3;
                add.s32 %r5, %r5, %r4;
                mul.wide.u32 %rd3, %r1, 4;
                add.s64 %rd4, %rd2, %rd3;
                st.global.u32 [%rd4], %r5;
                ret;
            }
            """;

    static final int THREADS = 32;

    @ParameterizedTest
    @EnumSource(value = PtxEngine.class, names = {"INTERPRETER", "JIT"})
    void anExternVariableResolvesAgainstTheOtherUnitOnBothEngines(PtxEngine engine) {
        int[] out = run(engine, rdcImage(List.of(READER, LIBRARY)));
        for (int i = 0; i < THREADS; i++) {
            assertEquals(i + 1100, out[i], "out[" + i + "]");
        }
    }

    @ParameterizedTest
    @EnumSource(value = PtxEngine.class, names = {"INTERPRETER", "JIT"})
    void anExternFunctionAndVariableResolveAgainstTheOtherUnit(PtxEngine engine) {
        int[] out = run(engine, rdcImage(List.of(KERNEL, LIBRARY)));
        int[] want = new int[THREADS];
        for (int i = 0; i < THREADS; i++) {
            want[i] = 3 * i + 100 + 1000;   // the library's scale in twice(), the kernel's own in k
        }
        assertArrayEquals(want, out);
    }

    @ParameterizedTest
    @EnumSource(value = PtxEngine.class, names = {"INTERPRETER", "JIT"})
    void aStrongDefinitionWinsOverAWeakOne(PtxEngine engine) {
        int[] out = run(engine, rdcImage(List.of(WEAK, KERNEL, LIBRARY)));
        assertEquals(3 * 5 + 1100, out[5]);
        String alone = PtxLinker.link(List.of(new PtxLinker.Unit("a", KERNEL), new PtxLinker.Unit("w", WEAK),
                new PtxLinker.Unit("v", HEAD + ".visible .global .align 4 .b32 offset = 1;\n")), null);
        assertTrue(alone.contains(".weak .func"), "with no strong twice() the weak one is kept:\n" + alone);
    }

    @Test
    void anUnresolvedReferenceFailsNamingTheSymbol() {
        CudaError e = assertThrows(CudaError.class, () -> ModuleImage.ptxText(rdcImage(List.of(KERNEL))));
        assertEquals(CUDA_ERROR_INVALID_PTX, e.code);
        assertTrue(e.getMessage().contains("twice") || e.getMessage().contains("offset"), e.getMessage());
        assertTrue(e.getMessage().contains("unresolved"), e.getMessage());
    }

    @Test
    void anUnresolvedReferenceNamesTheSkippedImages() {
        byte[] sassOnly = fatbin(List.of());   // no PTX entry at all, as cudadevrt's images have none ≤ sm_90 here
        CudaError e = assertThrows(CudaError.class, () -> ModuleImage.ptxText(image(List.of(fatbin(List.of()),
                fatbin(List.of(KERNEL)), sassOnly))));
        assertEquals(CUDA_ERROR_INVALID_PTX, e.code);
        assertTrue(e.getMessage().contains("left out"), e.getMessage());
    }

    @Test
    void aDuplicateStrongDefinitionFailsNamingTheSymbol() {
        CudaError e = assertThrows(CudaError.class, () -> ModuleImage.ptxText(rdcImage(List.of(KERNEL, LIBRARY, LIBRARY))));
        assertEquals(CUDA_ERROR_INVALID_PTX, e.code);
        assertTrue(e.getMessage().contains("duplicate definition of symbol"), e.getMessage());
        assertTrue(e.getMessage().contains("offset") || e.getMessage().contains("twice"), e.getMessage());
    }

    @Test
    void imagesWithoutPtxAreSkippedAndOnlyPtxLessImagesAreRefused() {
        String linked = ModuleImage.ptxText(image(List.of(fatbin(List.of()), fatbin(List.of(KERNEL)), fatbin(List.of()),
                fatbin(List.of(LIBRARY)))));
        assertTrue(linked.contains(".entry k"), linked);
        CudaError none = assertThrows(CudaError.class, () -> ModuleImage.ptxText(image(List.of(fatbin(List.of()),
                fatbin(List.of())))));
        assertEquals(CUDA_ERROR_NO_BINARY_FOR_GPU, none.code);
    }

    @Test
    void privateNamesAreRenamedOnlyWhereTheyCollide() {
        String linked = PtxLinker.link(List.of(new PtxLinker.Unit("a", KERNEL), new PtxLinker.Unit("b", LIBRARY)), null);
        assertTrue(linked.contains("scale$u1") && linked.contains("scale$u2"), linked);
        assertTrue(!linked.contains(".extern"), "the resolved extern declarations are gone:\n" + linked);
        PtxModule m = PtxModule.parse(linked);
        assertEquals(List.of("k"), List.copyOf(m.entries.keySet()));
        assertTrue(m.globals.containsKey("offset") && m.funcs.containsKey("twice"), linked);
    }

    @ParameterizedTest
    @EnumSource(value = PtxEngine.class, names = {"INTERPRETER", "JIT"})
    void aJitLinkStateLinksPtxInputsIntoAnImageThatLoads(PtxEngine engine) {
        try (Emulated e = new Emulated()) {
            MemorySegment state = e.arena.allocate(8);
            e.ok(e.device.cuLinkCreate(0, MemorySegment.NULL, MemorySegment.NULL, state));
            long link = state.get(ValueLayout.JAVA_LONG, 0);
            addPtx(e, link, READER, "reader.ptx");
            MemorySegment lib = e.arena.allocateFrom(LIBRARY);
            e.ok(e.device.cuLinkAddData(link, LinkStates.INPUT_FATBINARY, copy(e, fatbin(List.of(LIBRARY))),
                    fatbin(List.of(LIBRARY)).length, e.nativeString("lib.fatbin"), 0, MemorySegment.NULL, MemorySegment.NULL));
            MemorySegment cubin = e.arena.allocate(8);
            MemorySegment size = e.arena.allocate(8);
            e.ok(e.device.cuLinkComplete(link, cubin, size));
            MemorySegment image = cubin.get(ValueLayout.ADDRESS, 0).reinterpret(size.get(ValueLayout.JAVA_LONG, 0));
            // The image is the state's until cuLinkDestroy: load a copy, as the guest does with its own
            byte[] bytes = image.toArray(ValueLayout.JAVA_BYTE);
            assertEquals(0, bytes[bytes.length - 1], "NUL-terminated PTX");
            e.ok(e.device.cuLinkDestroy(link));
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE, e.device.cuLinkDestroy(link));
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE, e.device.cuLinkComplete(link, cubin, size));
            int[] out = run(engine, MemorySegment.ofAddress(copy(e, bytes).address()));
            for (int i = 0; i < THREADS; i++) {
                assertEquals(i + 1100, out[i], "out[" + i + "]");
            }
        }
    }

    @Test
    void aLinkStateRefusesWhatHasNoPtxAndReportsLinkErrorsAtCompletion() {
        try (Emulated e = new Emulated()) {
            MemorySegment state = e.arena.allocate(8);
            e.ok(e.device.cuLinkCreate(0, MemorySegment.NULL, MemorySegment.NULL, state));
            long link = state.get(ValueLayout.JAVA_LONG, 0);
            byte[] sassOnly = fatbin(List.of());
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED, e.device.cuLinkAddData(link,
                    LinkStates.INPUT_FATBINARY, copy(e, sassOnly), sassOnly.length, MemorySegment.NULL, 0, MemorySegment.NULL,
                    MemorySegment.NULL));
            byte[] elf = new byte[64];
            elf[0] = 0x7f; elf[1] = 'E'; elf[2] = 'L'; elf[3] = 'F'; elf[4] = 2;
            elf[0x28] = 64;   // e_shoff: an empty section table right after the header (a cubin without sections)
            int r = e.device.cuLinkAddData(link, LinkStates.INPUT_CUBIN, copy(e, elf), elf.length, MemorySegment.NULL, 0,
                    MemorySegment.NULL, MemorySegment.NULL);
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED, r, e.device.lastErrorDetail());
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED, e.device.cuLinkAddData(link,
                    LinkStates.INPUT_LIBRARY, copy(e, "!<arch>\n".getBytes()), 8, MemorySegment.NULL, 0,
                    MemorySegment.NULL, MemorySegment.NULL));
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, e.device.cuLinkAddData(link, 9,
                    copy(e, new byte[8]), 8, MemorySegment.NULL, 0, MemorySegment.NULL, MemorySegment.NULL));
            addPtx(e, link, KERNEL, "kernel.ptx");   // twice() and offset are defined nowhere
            MemorySegment cubin = e.arena.allocate(8);
            assertEquals(CUDA_ERROR_INVALID_PTX, e.device.cuLinkComplete(link, cubin, MemorySegment.NULL));
            assertTrue(e.device.lastErrorDetail().contains("unresolved"), e.device.lastErrorDetail());
            e.ok(e.device.cuLinkDestroy(link));
        }
    }

    @Test
    void onDemandUnitsAreLinkedOnlyWhenTheyResolveAReference() {
        // A library member defining offset again would be a duplicate, but nothing needs it: it is left out.
        String linked = PtxLinker.link(List.of(new PtxLinker.Unit("reader", READER), new PtxLinker.Unit("lib", LIBRARY),
                new PtxLinker.Unit("member 1", LIBRARY, true)), null);
        assertTrue(!linked.contains("// member 1"), linked);
        String pulled = PtxLinker.link(List.of(new PtxLinker.Unit("kernel", KERNEL), new PtxLinker.Unit("member 1", WEAK, true),
                new PtxLinker.Unit("member 2", LIBRARY, true)), null);
        assertTrue(pulled.contains("// member 2"), "member 2 defines offset:\n" + pulled);
        assertTrue(pulled.contains("// member 1") || !pulled.contains(".weak .func"), pulled);
    }

    /** An nvcc -lib device library (ar archive of objects carrying fatbins) as CU_JIT_INPUT_LIBRARY. */
    @Test
    void aDeviceLibraryArchiveLinksTheMembersThatAreNeeded(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir)
            throws Exception {
        Nvcc.assumeNvcc();
        Nvcc nvcc = new Nvcc(dir);
        java.nio.file.Path lib = nvcc.write("lib.cu", "__device__ int offset = 100;\n"
                + "__device__ __noinline__ int twice(int x) { return 2 * x; }\n"
                + "__device__ __noinline__ int unused(int x) { return x; }\n");
        java.nio.file.Path other = nvcc.write("other.cu", "__device__ int offset = 5;\n");   // a duplicate, never needed
        java.nio.file.Path archive = dir.resolve("libtwice.a");
        java.nio.file.Path kernel = dir.resolve("kernel.ptx");
        nvcc.write("kernel.cu", "extern __device__ int offset; __device__ int twice(int);\n"
                + "extern \"C\" __global__ void k(int *out) { out[threadIdx.x] = twice(threadIdx.x) + offset; }\n");
        Nvcc.await(java.util.Map.of(archive, nvcc.start(archive, "-arch=sm_90", "-rdc=true", "-lib", lib.toString()),
                kernel, nvcc.start(kernel, "-arch=sm_90", "-rdc=true", "-ptx", dir.resolve("kernel.cu").toString())));
        java.nio.file.Path archive2 = dir.resolve("libother.a");
        Nvcc.await(java.util.Map.of(archive2, nvcc.start(archive2, "-arch=sm_90", "-rdc=true", "-lib", other.toString())));
        try (Emulated e = new Emulated()) {
            MemorySegment state = e.arena.allocate(8);
            e.ok(e.device.cuLinkCreate(0, MemorySegment.NULL, MemorySegment.NULL, state));
            long link = state.get(ValueLayout.JAVA_LONG, 0);
            addPtx(e, link, java.nio.file.Files.readString(kernel), "kernel.ptx");
            for (java.nio.file.Path a : List.of(archive, archive2)) {
                byte[] bytes = java.nio.file.Files.readAllBytes(a);
                e.ok(e.device.cuLinkAddData(link, LinkStates.INPUT_LIBRARY, copy(e, bytes), bytes.length,
                        e.nativeString(a.getFileName().toString()), 0, MemorySegment.NULL, MemorySegment.NULL));
            }
            MemorySegment cubin = e.arena.allocate(8);
            MemorySegment size = e.arena.allocate(8);
            e.ok(e.device.cuLinkComplete(link, cubin, size));
            byte[] image = cubin.get(ValueLayout.ADDRESS, 0).reinterpret(size.get(ValueLayout.JAVA_LONG, 0)).toArray(ValueLayout.JAVA_BYTE);
            e.ok(e.device.cuLinkDestroy(link));
            int[] out = run(PtxEngine.INTERPRETER, copy(e, image));
            for (int i = 0; i < THREADS; i++) {
                assertEquals(2 * i + 100, out[i], "out[" + i + "]");
            }
        }
    }

    private static void addPtx(Emulated e, long link, String ptx, String name) {
        byte[] text = ptx.getBytes(StandardCharsets.UTF_8);
        e.ok(e.device.cuLinkAddData(link, LinkStates.INPUT_PTX, copy(e, text), text.length, e.nativeString(name), 0,
                MemorySegment.NULL, MemorySegment.NULL));
    }

    private static MemorySegment copy(Emulated e, byte[] bytes) {
        return e.arena.allocate(bytes.length + 1L, 8).copyFrom(MemorySegment.ofArray(bytes)).asSlice(0, bytes.length);
    }

    // ---- images

    /** Loads the image, runs k on one block, returns its output; {@code engine} picks the engine and must be the one that ran. */
    private static int[] run(PtxEngine engine, MemorySegment image) {
        String before = System.getProperty(PtxEngine.PROPERTY);
        System.setProperty(PtxEngine.PROPERTY, engine.name().toLowerCase(java.util.Locale.ROOT));
        try (Emulated e = new Emulated()) {
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuModuleLoadData(out, image));
            long f = e.function(out.get(ValueLayout.JAVA_LONG, 0), "k");
            long d = e.alloc(4L * THREADS);
            PtxEngine.Statistics s0 = PtxEngine.statistics();
            e.ok(e.launch(f, 1, THREADS, 0, 0, d));
            e.ok(e.device.cuCtxSynchronize());
            PtxEngine.Statistics s1 = PtxEngine.statistics();
            long compiled = s1.compiledLaunches() - s0.compiledLaunches();
            long interpreted = s1.interpretedLaunches() - s0.interpretedLaunches();
            // The compiler does not take entries that call device functions (JitCompiler): those run interpreted.
            boolean compilable = !PtxModule.parse(ModuleImage.ptxText(image)).bodies.get("k").text().contains("call");
            assertEquals(engine == PtxEngine.JIT && compilable ? 1 : 0, compiled, "compiled launches under " + engine);
            assertEquals(engine == PtxEngine.JIT && compilable ? 0 : 1, interpreted, "interpreted launches under " + engine);
            return e.downloadInts(d, THREADS);
        } finally {
            if (before == null) {
                System.clearProperty(PtxEngine.PROPERTY);
            } else {
                System.setProperty(PtxEngine.PROPERTY, before);
            }
        }
    }

    /** An -rdc image: an empty device-linked fatbin (as in a PTX-only build), then one fatbin per unit. */
    static MemorySegment rdcImage(List<String> units) {
        List<byte[]> parts = new java.util.ArrayList<>();
        parts.add(fatbin(List.of()));
        for (String u : units) {
            parts.add(fatbin(List.of(u)));
        }
        return image(parts);
    }

    /** The fatbins back to back in native memory of exactly their size (the backend's copy of an image). */
    static MemorySegment image(List<byte[]> fatbins) {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        fatbins.forEach(all::writeBytes);
        byte[] bytes = all.toByteArray();
        return Arena.ofAuto().allocate(bytes.length, 8).copyFrom(MemorySegment.ofArray(bytes));
    }

    /** A fatbin with one uncompressed compute_90 PTX entry per text (FatbinImage's layout). */
    static byte[] fatbin(List<String> ptx) {
        ByteArrayOutputStream entries = new ByteArrayOutputStream();
        for (String text : ptx) {
            byte[] t = text.getBytes(StandardCharsets.UTF_8);
            int size = (t.length + 1 + 7) / 8 * 8;
            ByteBuffer e = ByteBuffer.allocate(FatbinImage.ENTRY_MIN_HEADER + size).order(ByteOrder.LITTLE_ENDIAN);
            e.putShort(FatbinImage.ENTRY_KIND_OFFSET, (short) FatbinImage.KIND_PTX);
            e.putShort(2, (short) 0x0101);
            e.putInt(FatbinImage.ENTRY_HEADER_SIZE_OFFSET, FatbinImage.ENTRY_MIN_HEADER);
            e.putLong(FatbinImage.ENTRY_SIZE_OFFSET, size);
            e.putInt(FatbinImage.ENTRY_ARCH_OFFSET, 90);
            e.putLong(FatbinImage.ENTRY_FLAGS_OFFSET, 0x11);
            e.put(FatbinImage.ENTRY_MIN_HEADER, t);
            entries.writeBytes(e.array());
        }
        byte[] body = entries.toByteArray();
        ByteBuffer f = ByteBuffer.allocate(FatbinImage.HEADER_BYTES + body.length).order(ByteOrder.LITTLE_ENDIAN);
        f.putInt(0, io.gpusockets.protocol.calls.ModuleImageKind.FATBIN_MAGIC);
        f.putShort(FatbinImage.VERSION_OFFSET, (short) 1);
        f.putShort(io.gpusockets.protocol.calls.ModuleImageKind.FATBIN_HEADER_SIZE_OFFSET, (short) FatbinImage.HEADER_BYTES);
        f.putLong(io.gpusockets.protocol.calls.ModuleImageKind.FATBIN_FAT_SIZE_OFFSET, body.length);
        f.put(FatbinImage.HEADER_BYTES, body);
        return f.array();
    }
}
