package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Vector loads and stores of at most 8 bytes are one access, and ordered 16-byte ones are whole to one another, under
 * both engines, as on the device: CUB's decoupled look-back (DeviceScan, DeviceReduceByKey...) publishes a tile's
 * status and value with one {@code st.relaxed.gpu.v2.u32} ({@code v2.u64} for 8-byte values) and a CTA running beside
 * it reads both with one {@code ld}; made element by element, the reader could see the new status with the old value
 * (a scan of 6000 ints came out wrong from element 3072, the second tile, in CI). Also: the elements land where
 * element-wise accesses put them, sign- and zero-extended alike.
 */
class VectorAccessTest {
    private static final int ROUNDS = 200_000;

    /**
     * CTA 1 raises a flag and loads the vector at cell with one ordered load (%LOAD) until it reads ROUNDS, counting
     * vectors whose first and last elements differ (out[0]) and how often the value changed (out[1]: evidence that the
     * CTAs overlapped); CTA 0 waits for the flag, then stores i into both for i = 1..ROUNDS with one ordered store
     * each (%STORE). Every wait is bounded, so that CTAs run one after the other end too (and the check is then
     * skipped).
     */
    private static final String PAIRS_TEMPLATE = Rig.HEADER + """
            .visible .entry k(.param .u64 out, .param .u64 cell)
            {
                .reg .pred %p<4>;
                .reg .b32 %r<16>;
                .reg .b64 %rd<8>;
                ld.param.u64 %rd1, [out];
                ld.param.u64 %rd2, [cell];
                mov.u32 %r1, %ctaid.x;
                mov.u32 %r2, 0;
                mov.u32 %r9, 0;
                mov.u32 %r11, 7;
                setp.ne.u32 %p1, %r1, 0;
                @%p1 bra READ;
            WAIT:
                ld.relaxed.gpu.global.u32 %r10, [%rd2+16];
                setp.ne.u32 %p3, %r10, 0;
                @%p3 bra WRITE;
                add.u32 %r9, %r9, 1;
                setp.lt.u32 %p2, %r9, 20000000;
                @%p2 bra WAIT;
            WRITE:
                add.u32 %r2, %r2, 1;
                %STORE
                setp.lt.u32 %p2, %r2, %ROUNDS;
                @%p2 bra WRITE;
                ret;
            READ:
                st.relaxed.gpu.global.u32 [%rd2+16], 1;
                mov.u32 %r5, 0;
                mov.u32 %r6, 0;
                mov.u32 %r7, 0;
            AGAIN:
                %LOAD
                setp.ne.u32 %p2, %r3, %r4;
                selp.u32 %r8, 1, 0, %p2;
                add.u32 %r5, %r5, %r8;
                setp.ne.u32 %p3, %r3, %r7;
                selp.u32 %r8, 1, 0, %p3;
                add.u32 %r6, %r6, %r8;
                mov.u32 %r7, %r3;
                setp.eq.u32 %p3, %r3, %ROUNDS;
                @%p3 bra DONE;
                add.u32 %r2, %r2, 1;
                setp.lt.u32 %p2, %r2, 20000000;
                @%p2 bra AGAIN;
            DONE:
                st.global.u32 [%rd1], %r5;
                st.global.u32 [%rd1+4], %r6;
                ret;
            }
            """.replace("%ROUNDS", Integer.toString(ROUNDS));

    /**
     * The writer's and reader's vector forms: {store, load}. Each compares the first and last 4-byte words the pair
     * holds (%r3, %r4): v2.u32 (8 bytes, one access), v2.u64 and v4.u32 (16 bytes, a pair of words under a lock).
     */
    private static final java.util.Map<String, String[]> FORMS = java.util.Map.of(
            "v2.u32", new String[] {"st.relaxed.gpu.global.v2.u32 [%rd2], {%r2, %r2};",
                    "ld.relaxed.gpu.global.v2.u32 {%r3, %r4}, [%rd2];"},
            "v2.u64", new String[] {"cvt.u64.u32 %rd3, %r2;\n    st.relaxed.gpu.global.v2.u64 [%rd2], {%rd3, %rd3};",
                    "ld.relaxed.gpu.global.v2.u64 {%rd3, %rd4}, [%rd2];\n    cvt.u32.u64 %r3, %rd3;\n    cvt.u32.u64 %r4, %rd4;"},
            "v4.u32", new String[] {"st.volatile.global.v4.u32 [%rd2], {%r2, %r11, %r11, %r2};",
                    "ld.volatile.global.v4.u32 {%r3, %r12, %r13, %r4}, [%rd2];"});

    @ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource({"INTERPRETER, v2.u32", "JIT, v2.u32", "INTERPRETER, v2.u64", "JIT, v2.u64",
            "INTERPRETER, v4.u32", "JIT, v4.u32"})
    void aVectorStoredWithOneOrderedStoreIsNeverSeenHalfWritten(PtxEngine engine, String form) throws Exception {
        String ptx = PAIRS_TEMPLATE.replace("%STORE", FORMS.get(form)[0]).replace("%LOAD", FORMS.get(form)[1]);
        assumeTrue(Runtime.getRuntime().availableProcessors() >= 2, "two CTAs run at once only with two cores");
        // the CTAs must overlap for the check to mean anything; on a loaded machine they may not: up to twenty launches
        int torn = 0;
        int changes = 0;
        for (int attempt = 0; attempt < 20 && changes <= 100; attempt++) {
            int[] seen = EnginesTest.withEngine(engine, () -> {
                try (Rig rig = new Rig()) {
                    long f = rig.function(rig.module(ptx), "k");
                    long out = rig.upload(new int[2]);
                    long cell = rig.upload(new int[8]);
                    rig.run(f, 2, 1, out, cell);
                    return rig.ints(out, 2);
                }
            });
            torn += seen[0];
            changes = seen[1];
        }
        assertEquals(0, torn, form + ": vectors seen part written");
        assumeTrue(changes > 100, "the reader saw the value change " + changes + " times: the CTAs hardly overlapped");
    }

    /** Each vector type of at most 8 bytes loaded and stored back through registers, and sign extension checked. */
    @ParameterizedTest
    @EnumSource(value = PtxEngine.class, names = {"INTERPRETER", "JIT"})
    void elementsLandWhereElementWiseAccessesPutThem(PtxEngine engine) throws Exception {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .b16 %h<8>;
                    .reg .b32 %r<8>;
                    .reg .f32 %f<4>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    ld.global.v2.u32 {%r1, %r2}, [%rd2];
                    st.global.v2.u32 [%rd1], {%r2, %r1};
                    ld.global.v4.s16 {%h1, %h2, %h3, %h4}, [%rd2+8];
                    cvt.s32.s16 %r3, %h4;
                    st.global.u32 [%rd1+8], %r3;
                    st.global.v4.u16 [%rd1+16], {%h4, %h3, %h2, %h1};
                    ld.global.v4.u8 {%r4, %r5, %r6, %r7}, [%rd2+16];
                    st.global.v4.u8 [%rd1+24], {%r7, %r6, %r5, %r4};
                    st.global.u32 [%rd1+28], %r7;
                    ld.volatile.global.v2.f32 {%f1, %f2}, [%rd2+24];
                    st.volatile.global.v2.f32 [%rd1+32], {%f2, %f1};
                    ld.global.v2.u16 {%h5, %h6}, [%rd2+32];
                    st.global.v2.u16 [%rd1+40], {%h6, %h5};
                    st.global.v2.u32 [%rd1+48], {7, -1};
                    ret;
                }
                """;
        int[] input = {0x11111111, 0x22222222, 0x7FFF_0001, 0x8000_FFFE, 0xF1E2D3C4, 0, Float.floatToIntBits(1.5f),
                Float.floatToIntBits(-2.25f), 0xBEEF_CAFE};
        int[] r = EnginesTest.withEngine(engine, () -> {
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(ptx), "k");
                long out = rig.upload(new int[14]);
                rig.run(f, 1, 1, out, rig.upload(input));
                return rig.ints(out, 14);
            }
        });
        assertArrayEquals(new int[] {0x22222222, 0x11111111, 0xFFFF_8000, 0, 0xFFFE_8000, 0x0001_7FFF, 0xC4D3E2F1, 0xF1,
                Float.floatToIntBits(-2.25f), Float.floatToIntBits(1.5f), 0xCAFE_BEEF, 0, 7, -1}, r);
    }
}
