package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Float arithmetic bit for bit, unordered comparisons, and cvt's rounding and saturation. */
class FloatOpsTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /** One thread: %f1 = in[0], %f2 = in[1], %rd1 = out, then {@code body}. */
    private int[] run(String body, float x, float y, int results) {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .pred %p<8>;
                    .reg .f32 %f<32>;
                    .reg .b32 %r<32>;
                    .reg .f64 %fd<8>;
                    .reg .b64 %rd<16>;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    ld.global.f32 %f1, [%rd2];
                    ld.global.f32 %f2, [%rd2+4];
                """ + body + "\n    ret;\n}\n";
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[results]);
        rig.run(f, 1, 1, out, rig.upload(new float[] {x, y}));
        return rig.ints(out, results);
    }

    private static int bits(float f) {
        return Float.floatToRawIntBits(f);
    }

    @Test
    void fusedMultiplyAddKeepsTheBitsSeparateMultiplyAndAddRound() {
        float a = 1f + 0x1p-12f;
        int[] r = run("""
                fma.rn.f32 %f3, %f1, %f1, %f2;
                st.global.f32 [%rd1], %f3;
                mul.rn.f32 %f4, %f1, %f1;
                add.rn.f32 %f5, %f4, %f2;
                st.global.f32 [%rd1+4], %f5;
                """, a, -1f, 2);
        assertEquals(bits(0x1p-11f + 0x1p-24f), r[0], "fma rounds once");
        assertEquals(bits(0x1p-11f), r[1], "mul then add rounds twice");
    }

    @Test
    void nanIsCanonicalDenormalsSurviveAndNegativeZeroKeepsItsSign() {
        int[] r = run("""
                add.f32 %f3, %f1, %f2;
                st.global.f32 [%rd1], %f3;
                add.f32 %f4, %f2, %f2;
                st.global.f32 [%rd1+4], %f4;
                mov.f32 %f5, 0f80000000;
                add.f32 %f6, %f5, %f5;
                st.global.f32 [%rd1+8], %f6;
                neg.f32 %f7, %f5;
                st.global.f32 [%rd1+12], %f7;
                add.ftz.f32 %f8, %f2, %f2;
                st.global.f32 [%rd1+16], %f8;
                min.f32 %f9, %f1, %f2;
                st.global.f32 [%rd1+20], %f9;
                div.rn.f32 %f10, %f2, %f5;
                st.global.f32 [%rd1+24], %f10;
                sqrt.rn.f32 %f11, %f2;
                st.global.f32 [%rd1+28], %f11;
                neg.f32 %f12, %f2;
                abs.ftz.f32 %f13, %f12;
                st.global.f32 [%rd1+32], %f13;
                """, Float.intBitsToFloat(0x7FC0_1234), Float.MIN_VALUE, 9);
        assertEquals(0x7FFF_FFFF, r[0], "NaN + x is the canonical NaN");
        assertEquals(2, r[1], "denormal + denormal");
        assertEquals(0x8000_0000, r[2], "-0 + -0 = -0");
        assertEquals(0, r[3], "neg -0 = +0");
        assertEquals(0, r[4], ".ftz flushes denormals");
        assertEquals(1, r[5], "min(NaN, x) = x");
        assertEquals(bits(Float.NEGATIVE_INFINITY), r[6], "x / -0");
        assertEquals(bits((float) Math.sqrt(Float.MIN_VALUE)), r[7]);
        assertEquals(0, r[8], "abs.ftz of a negative denormal is +0");
    }

    @Test
    void orderedAndUnorderedComparisonsWithNan() {
        int[] r = run("""
                setp.eq.f32 %p1, %f1, %f2;
                selp.u32 %r1, 1, 0, %p1;
                st.global.u32 [%rd1], %r1;
                setp.equ.f32 %p2, %f1, %f2;
                selp.u32 %r2, 1, 0, %p2;
                st.global.u32 [%rd1+4], %r2;
                setp.ne.f32 %p3, %f1, %f2;
                selp.u32 %r3, 1, 0, %p3;
                st.global.u32 [%rd1+8], %r3;
                setp.neu.f32 %p4, %f1, %f2;
                selp.u32 %r4, 1, 0, %p4;
                st.global.u32 [%rd1+12], %r4;
                setp.nan.f32 %p5, %f1, %f2;
                selp.u32 %r5, 1, 0, %p5;
                st.global.u32 [%rd1+16], %r5;
                setp.lt.or.f32 %p6|%p7, %f2, %f2, %p5;
                selp.u32 %r6, 1, 0, %p6;
                st.global.u32 [%rd1+20], %r6;
                selp.u32 %r7, 1, 0, %p7;
                st.global.u32 [%rd1+24], %r7;
                setp.geu.f32 %p1, %f2, %f1;
                @%p1 st.global.u32 [%rd1+28], 5;
                @!%p1 st.global.u32 [%rd1+28], 6;
                """, Float.NaN, 1f, 8);
        assertEquals(0, r[0], "eq with NaN");
        assertEquals(1, r[1], "equ with NaN");
        assertEquals(0, r[2], "ne with NaN is ordered: false");
        assertEquals(1, r[3], "neu with NaN");
        assertEquals(1, r[4], "nan");
        assertEquals(1, r[5], "lt.or: false or true");
        assertEquals(1, r[6], "second destination: !lt or true");
        assertEquals(5, r[7], "guarded store by an unordered compare");
    }

    @Test
    void floatToIntegerRoundsThenSaturatesAndNanIsZero() {
        int[] r = run("""
                cvt.rzi.s32.f32 %r1, %f1;
                st.global.u32 [%rd1], %r1;
                neg.f32 %f3, %f1;
                cvt.rzi.s32.f32 %r2, %f3;
                st.global.u32 [%rd1+4], %r2;
                cvt.rni.s32.f32 %r3, %f1;
                st.global.u32 [%rd1+8], %r3;
                cvt.rmi.s32.f32 %r4, %f3;
                st.global.u32 [%rd1+12], %r4;
                cvt.rpi.s32.f32 %r5, %f1;
                st.global.u32 [%rd1+16], %r5;
                cvt.rzi.s32.f32 %r6, %f2;
                st.global.u32 [%rd1+20], %r6;
                neg.f32 %f4, %f2;
                cvt.rzi.s32.f32 %r7, %f4;
                st.global.u32 [%rd1+24], %r7;
                cvt.rzi.u32.f32 %r8, %f3;
                st.global.u32 [%rd1+28], %r8;
                mov.f32 %f5, 0f7FC00000;
                cvt.rzi.s32.f32 %r9, %f5;
                st.global.u32 [%rd1+32], %r9;
                mov.u32 %r10, 300;
                cvt.sat.u8.s32 %r11, %r10;
                st.global.u32 [%rd1+36], %r11;
                mov.u32 %r12, -5;
                cvt.sat.u8.s32 %r13, %r12;
                st.global.u32 [%rd1+40], %r13;
                cvt.s8.s32 %r14, %r10;
                st.global.u32 [%rd1+44], %r14;
                cvt.rn.f32.s32 %f6, %r12;
                st.global.f32 [%rd1+48], %f6;
                mov.u32 %r15, 16777217;
                cvt.rz.f32.u32 %f7, %r15;
                st.global.f32 [%rd1+52], %f7;
                cvt.rp.f32.u32 %f8, %r15;
                st.global.f32 [%rd1+56], %f8;
                cvt.f64.f32 %fd1, %f1;
                div.rn.f64 %fd2, %fd1, 0d4008000000000000;
                cvt.rz.f32.f64 %f9, %fd2;
                st.global.f32 [%rd1+60], %f9;
                cvt.rn.f32.f64 %f10, %fd2;
                st.global.f32 [%rd1+64], %f10;
                cvt.rni.f32.f32 %f11, %f3;
                st.global.f32 [%rd1+68], %f11;
                mov.u32 %r16, 200;
                cvt.s8.s32 %r17, %r16;
                st.global.u32 [%rd1+72], %r17;
                """, 2.5f, 1e20f, 19);
        assertEquals(2, r[0], "rzi 2.5");
        assertEquals(-2, r[1], "rzi -2.5");
        assertEquals(2, r[2], "rni 2.5 to even");
        assertEquals(-3, r[3], "rmi -2.5");
        assertEquals(3, r[4], "rpi 2.5");
        assertEquals(Integer.MAX_VALUE, r[5], "1e20 saturates");
        assertEquals(Integer.MIN_VALUE, r[6], "-1e20 saturates");
        assertEquals(0, r[7], "-2.5 to u32 saturates at 0");
        assertEquals(0, r[8], "NaN to int is 0");
        assertEquals(255, r[9], "sat.u8 of 300");
        assertEquals(0, r[10], "sat.u8 of -5");
        assertEquals(44, r[11], "s8 truncates 300");
        assertEquals(bits(-5f), r[12]);
        assertEquals(bits(16777216f), r[13], "rz of 2^24+1");
        assertEquals(bits(16777218f), r[14], "rp of 2^24+1");
        double third = 2.5 / 3.0;
        float nearest = (float) third;
        assertEquals(bits((double) nearest > third ? Math.nextDown(nearest) : nearest), r[15], "rz f64 to f32");
        assertEquals(bits(nearest), r[16], "rn f64 to f32");
        assertEquals(bits(-2f), r[17], "rni in float");
        assertEquals(-56, r[18], "cvt.s8 sign-extends into the 32-bit register");
    }
}
