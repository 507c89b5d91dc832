package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class PtxModuleTest {
    private static final PtxModule SHIPPED = PtxModule.parse(Emulated.shippedPtx());

    private static long[][] layout(PtxModule.Entry e) {
        return e.params().stream().map(p -> new long[] {p.offset(), p.size()}).toArray(long[][]::new);
    }

    @Test
    void findsAllSevenEntriesOfTheShippedPtx() {
        assertEquals(List.of("gpus_vector_add", "gpus_saxpy", "gpus_fill_u32", "gpus_empty", "gpus_sleep", "gpus_block_sum",
                "gpus_mixed12"), List.copyOf(SHIPPED.entries.keySet()));
        assertEquals(90, SHIPPED.ptxVersion);
        assertEquals(90, SHIPPED.targetSm());
        assertTrue(SHIPPED.globals.isEmpty(), "the extern .shared array is not a global");
    }

    @Test
    void everyJavaKernelIsAShippedEntryWithItsSignature() {
        assertEquals(java.util.Set.of("gpus_empty", "gpus_sleep"), EmulatedKernels.names());
        for (String name : EmulatedKernels.names()) {
            PtxModule.Entry e = SHIPPED.entries.get(name);
            assertTrue(e != null, name + " is a shipped entry");
            assertEquals(null, EmulatedKernels.find(name).mismatch(e), name);
        }
    }

    @Test
    void laysOutPointerAndScalarParameters() {
        assertArrayEquals(new long[][] {{0, 8}, {8, 8}, {16, 8}, {24, 4}}, layout(SHIPPED.entries.get("gpus_vector_add")));
        assertArrayEquals(new long[][] {{0, 4}, {8, 8}, {16, 8}, {24, 4}}, layout(SHIPPED.entries.get("gpus_saxpy")));
        assertEquals(0, SHIPPED.entries.get("gpus_empty").params().size());
        assertEquals(0, SHIPPED.entries.get("gpus_empty").paramBufferSize());
    }

    /** What the CUDA ABI gives: each parameter at the next multiple of its own alignment. */
    @Test
    void laysOutMixed12LikeTheCudaAbi() {
        PtxModule.Entry e = SHIPPED.entries.get("gpus_mixed12");
        assertArrayEquals(new long[][] {
            {0, 1},     // unsigned char
            {2, 2},     // short
            {4, 4},     // int
            {8, 8},     // long long
            {16, 4},    // float
            {24, 8},    // double
            {32, 8},    // float2, align 8
            {48, 16},   // int4, align 16
            {64, 2},    // unsigned short
            {68, 4},    // char4, align 4
            {80, 16},   // double2, align 16
            {96, 8},    // unsigned char *
        }, layout(e));
        assertEquals(List.of(1L, 2L, 4L, 8L, 4L, 8L, 8L, 16L, 2L, 4L, 16L, 8L),
                e.params().stream().map(PtxModule.Param::alignment).toList());
        assertEquals(104, e.paramBufferSize());
    }

    @Test
    void readsGlobalsWithSizesAlignmentAndInitializers() {
        PtxModule m = PtxModule.parse("""
                .version 8.0
                .target sm_80
                .address_size 64
                // .global .u32 commented_out;
                .visible .global .align 4 .u32 counter = 7;
                .global .align 8 .b8 table[12] = {1, 2, 3, 0x10};
                .const .align 4 .f32 scale[2] = {0f3F800000, 2.5};
                .global .v2 .u32 pair;
                /* .global .u64 also_commented; */
                .extern .global .u32 elsewhere;
                .visible .entry k(.param .u64 .ptr .global .align 4 k_p0) { ld.global.u32 %r1, [counter]; ret; }
                """);
        assertEquals(List.of("counter", "table", "scale", "pair"), List.copyOf(m.globals.keySet()));
        PtxModule.Global counter = m.globals.get("counter");
        assertEquals(4, counter.size());
        assertArrayEquals(new byte[] {7, 0, 0, 0}, counter.initial());
        assertEquals(12, m.globals.get("table").size());
        assertEquals(8, m.globals.get("table").alignment());
        assertArrayEquals(new byte[] {1, 2, 3, 0x10}, m.globals.get("table").initial());
        byte[] scale = m.globals.get("scale").initial();
        assertEquals(8, scale.length);
        assertEquals(1.0f, Float.intBitsToFloat((scale[0] & 0xff) | (scale[1] & 0xff) << 8 | (scale[2] & 0xff) << 16 | (scale[3] & 0xff) << 24));
        assertEquals(8, m.globals.get("pair").size());
        // .ptr .align 4 describes the pointee: the parameter itself stays a u64 aligned to 8.
        assertEquals(new PtxModule.Param("k_p0", 0, 8, 8), m.entries.get("k").params().getFirst());
    }

    @Test
    void honoursMaxntidAsTheFunctionsThreadLimit() {
        PtxModule m = PtxModule.parse(".version 8.0\n.target sm_80\n.entry small(.param .u32 n) .maxntid 128, 2, 1 { ret; }\n");
        assertEquals(256, m.entries.get("small").maxThreadsPerBlock());
    }

    @Test
    void refusesTextWithoutVersionAsNotAnImage() {
        CudaError e = assertThrows(CudaError.class, () -> PtxModule.parse("hello, world"));
        assertEquals(CUDA_ERROR_INVALID_IMAGE, e.code);
    }

    @Test
    void refusesMalformedParameterLists() {
        assertEquals(CUDA_ERROR_INVALID_PTX, assertThrows(CudaError.class,
                () -> PtxModule.parse(".version 8.0\n.entry k(.param k_p0) { ret; }")).code);
        assertEquals(CUDA_ERROR_INVALID_PTX, assertThrows(CudaError.class,
                () -> PtxModule.parse(".version 8.0\n.entry k(.param .align 3 .b8 k_p0[3]) { ret; }")).code);
        assertEquals(CUDA_ERROR_INVALID_PTX, assertThrows(CudaError.class,
                () -> PtxModule.parse(".version 8.0\n.entry k(.param .u32 a) { ret; \n")).code);
        assertEquals(CUDA_ERROR_INVALID_PTX, assertThrows(CudaError.class,
                () -> PtxModule.parse(".version 8.0\n.entry k() { ret; }\n.entry k() { ret; }")).code);
    }
}
