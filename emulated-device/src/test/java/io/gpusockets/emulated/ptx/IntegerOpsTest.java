package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Integer instructions at their edges: wrap-around, shift counts past the width, high halves, signed division. */
class IntegerOpsTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /** Runs {@code body} in one thread with %r1 = in[0], %r2 = in[1], %rd1 = out; results stored by the body. */
    private int[] run(String body, int x, int y, int results) {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    ld.global.u32 %r1, [%rd2];
                    ld.global.u32 %r2, [%rd2+4];
                """ + body + "\n    ret;\n}\n";
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[results]);
        rig.run(f, 1, 1, out, rig.upload(new int[] {x, y}));
        return rig.ints(out, results);
    }

    @Test
    void addAndMultiplyWrapAndHighHalvesAreExact() {
        int[] r = run("""
                add.s32 %r3, %r1, %r2;
                st.global.u32 [%rd1], %r3;
                mul.lo.s32 %r4, %r1, %r1;
                st.global.u32 [%rd1+4], %r4;
                mul.hi.s32 %r5, %r1, %r2;
                st.global.u32 [%rd1+8], %r5;
                mul.hi.u32 %r6, %r1, %r2;
                st.global.u32 [%rd1+12], %r6;
                mul.wide.s32 %rd3, %r1, %r2;
                st.global.u64 [%rd1+16], %rd3;
                mad.lo.s32 %r7, %r1, %r2, %r1;
                st.global.u32 [%rd1+24], %r7;
                sub.s32 %r8, %r2, %r1;
                st.global.u32 [%rd1+28], %r8;
                """, Integer.MAX_VALUE, -3, 8);
        int a = Integer.MAX_VALUE;
        int b = -3;
        assertEquals(a + b, r[0]);
        assertEquals(a * a, r[1], "mul.lo wraps");
        assertEquals((int) (((long) a * b) >> 32), r[2], "mul.hi.s32");
        assertEquals((int) ((Integer.toUnsignedLong(a) * Integer.toUnsignedLong(b)) >>> 32), r[3], "mul.hi.u32");
        assertEquals((long) a * b, (r[4] & 0xFFFF_FFFFL) | (long) r[5] << 32, "mul.wide.s32");
        assertEquals(a * b + a, r[6]);
        assertEquals(b - a, r[7]);
    }

    @Test
    void shiftCountsAtOrPastTheWidthClamp() {
        int[] r = run("""
                shl.b32 %r3, %r1, %r2;
                st.global.u32 [%rd1], %r3;
                shr.u32 %r4, %r1, %r2;
                st.global.u32 [%rd1+4], %r4;
                shr.s32 %r5, %r1, %r2;
                st.global.u32 [%rd1+8], %r5;
                shr.s32 %r6, %r1, 4;
                st.global.u32 [%rd1+12], %r6;
                shl.b32 %r7, %r1, 31;
                st.global.u32 [%rd1+16], %r7;
                """, 0x8000_00F1, 70, 5);
        assertEquals(0, r[0], "shl by 70");
        assertEquals(0, r[1], "shr.u32 by 70");
        assertEquals(-1, r[2], "shr.s32 by 70 fills with the sign");
        assertEquals(0x8000_00F1 >> 4, r[3]);
        assertEquals(0x8000_0000, r[4]);
    }

    @Test
    void divisionAndRemainderFollowTheSignsLikeC() {
        int[] r = run("""
                div.s32 %r3, %r1, %r2;
                st.global.u32 [%rd1], %r3;
                rem.s32 %r4, %r1, %r2;
                st.global.u32 [%rd1+4], %r4;
                div.u32 %r5, %r1, %r2;
                st.global.u32 [%rd1+8], %r5;
                rem.u32 %r6, %r1, %r2;
                st.global.u32 [%rd1+12], %r6;
                min.s32 %r7, %r1, %r2;
                st.global.u32 [%rd1+16], %r7;
                min.u32 %r8, %r1, %r2;
                st.global.u32 [%rd1+20], %r8;
                abs.s32 %r9, %r1;
                st.global.u32 [%rd1+24], %r9;
                """, -7, 2, 7);
        assertEquals(-3, r[0]);
        assertEquals(-1, r[1]);
        assertEquals(Integer.divideUnsigned(-7, 2), r[2]);
        assertEquals(Integer.remainderUnsigned(-7, 2), r[3]);
        assertEquals(-7, r[4], "signed min");
        assertEquals(2, r[5], "unsigned min");
        assertEquals(7, r[6]);
    }

    @Test
    void bitInstructions() {
        int[] r = run("""
                popc.b32 %r3, %r1;
                st.global.u32 [%rd1], %r3;
                clz.b32 %r4, %r1;
                st.global.u32 [%rd1+4], %r4;
                brev.b32 %r5, %r1;
                st.global.u32 [%rd1+8], %r5;
                bfe.u32 %r6, %r1, 4, 8;
                st.global.u32 [%rd1+12], %r6;
                bfe.s32 %r7, %r1, 4, 4;
                st.global.u32 [%rd1+16], %r7;
                bfi.b32 %r8, %r2, %r1, 8, 8;
                st.global.u32 [%rd1+20], %r8;
                prmt.b32 %r9, %r1, %r2, 0x3210;
                st.global.u32 [%rd1+24], %r9;
                prmt.b32 %r10, %r1, %r2, 0x0123;
                st.global.u32 [%rd1+28], %r10;
                not.b32 %r11, %r1;
                st.global.u32 [%rd1+32], %r11;
                cnot.b32 %r12, %r2;
                st.global.u32 [%rd1+36], %r12;
                setp.lt.s32 %p1, %r1, 0;
                selp.b32 %r13, 11, 22, %p1;
                st.global.u32 [%rd1+40], %r13;
                """, 0x00F0_0FA0, 0xAB, 11);
        int a = 0x00F0_0FA0;
        assertEquals(Integer.bitCount(a), r[0]);
        assertEquals(Integer.numberOfLeadingZeros(a), r[1]);
        assertEquals(Integer.reverse(a), r[2]);
        assertEquals((a >>> 4) & 0xFF, r[3]);
        assertEquals(-6, r[4], "bfe.s32 of 0b1010 sign-extends");
        assertEquals((a & ~0xFF00) | 0xAB00, r[5]);
        assertEquals(a, r[6]);
        assertEquals(Integer.reverseBytes(a), r[7]);
        assertEquals(~a, r[8]);
        assertEquals(0, r[9]);
        assertEquals(22, r[10]);
    }
}
