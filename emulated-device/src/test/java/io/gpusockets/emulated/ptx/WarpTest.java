package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Lockstep warps: divergence and reconvergence, shuffles, votes (full and partial warps), barriers. */
class WarpTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /** Every thread runs {@code body} with %r1 = %tid.x, %rd1 = out + 4 * tid (one u32 result per thread per slot). */
    private int[] run(String body, int threads, int slots) {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<8>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    .shared .align 4 .b8 buf[1024];
                    ld.param.u64 %rd2, [out];
                    cvta.to.global.u64 %rd2, %rd2;
                    mov.u32 %r1, %tid.x;
                    mul.wide.u32 %rd3, %r1, 4;
                    add.s64 %rd1, %rd2, %rd3;
                """ + body + "\n    ret;\n}\n";
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[threads * slots]);
        rig.run(f, 1, threads, out);
        return rig.ints(out, threads * slots);
    }

    @Test
    void divergentBranchesReconvergeBeforeAShuffle() {
        int[] r = run("""
                and.b32 %r2, %r1, 1;
                setp.eq.s32 %p1, %r2, 0;
                @%p1 bra EVEN;
                mul.lo.s32 %r3, %r1, 10;
                bra.uni JOIN;
                EVEN:
                mul.lo.s32 %r3, %r1, 100;
                JOIN:
                shfl.sync.idx.b32 %r4, %r3, 3, 31, -1;
                shfl.sync.idx.b32 %r5, %r3, 4, 31, -1;
                add.s32 %r6, %r4, %r5;
                st.global.u32 [%rd1], %r6;
                """, 32, 1);
        for (int i = 0; i < 32; i++) {
            assertEquals(30 + 400, r[i], "every lane read lanes 3 (odd path) and 4 (even path) after reconverging, lane " + i);
        }
    }

    @Test
    void shuffleModesClampAtTheWarpEdge() {
        int[] r = run("""
                mul.lo.s32 %r2, %r1, 7;
                shfl.sync.down.b32 %r3|%p1, %r2, 5, 31, -1;
                st.global.u32 [%rd1], %r3;
                shfl.sync.up.b32 %r4|%p2, %r2, 3, 0, -1;
                st.global.u32 [%rd1+128], %r4;
                shfl.sync.bfly.b32 %r5, %r2, 6, 31, -1;
                st.global.u32 [%rd1+256], %r5;
                selp.u32 %r6, 1, 0, %p1;
                st.global.u32 [%rd1+384], %r6;
                shfl.sync.idx.b32 %r7, %r2, 0, 0x181f, -1;
                st.global.u32 [%rd1+512], %r7;
                """, 32, 5);
        for (int l = 0; l < 32; l++) {
            assertEquals(7 * (l + 5 <= 31 ? l + 5 : l), r[l], "down " + l);
            assertEquals(7 * (l >= 3 ? l - 3 : l), r[32 + l], "up " + l);
            assertEquals(7 * (l ^ 6), r[64 + l], "bfly " + l);
            assertEquals(l + 5 <= 31 ? 1 : 0, r[96 + l], "down's predicate " + l);
            assertEquals(7 * (l & ~7), r[128 + l], "idx 0 within 8-lane segments (width 8) " + l);
        }
    }

    @Test
    void votesOverAPartialWarp() {
        int[] r = run("""
                setp.lt.u32 %p1, %r1, 5;
                vote.sync.ballot.b32 %r2, %p1, -1;
                st.global.u32 [%rd1], %r2;
                vote.sync.any.pred %p2, %p1, -1;
                selp.u32 %r3, 1, 0, %p2;
                vote.sync.all.pred %p3, %p1, -1;
                selp.u32 %r4, 1, 0, %p3;
                shl.b32 %r4, %r4, 1;
                or.b32 %r3, %r3, %r4;
                setp.ne.u32 %p4, %r1, 99;
                vote.sync.all.pred %p5, %p4, -1;
                selp.u32 %r5, 4, 0, %p5;
                or.b32 %r3, %r3, %r5;
                vote.sync.uni.pred %p6, !%p1, -1;
                selp.u32 %r6, 8, 0, %p6;
                or.b32 %r3, %r3, %r6;
                st.global.u32 [%rd1+80], %r3;
                activemask.b32 %r7;
                st.global.u32 [%rd1+160], %r7;
                """, 20, 3);
        for (int l = 0; l < 20; l++) {
            assertEquals(0b11111, r[l], "ballot " + l);
            assertEquals(1 | 4, r[20 + l], "any, not all, all of the 20 live lanes, not uniform " + l);
            assertEquals(0xFFFFF, r[40 + l], "activemask of a 20-thread block " + l);
        }
    }

    @Test
    void matchGroupsTheLanesOfEqualValuesFullAndPartialWarps() {
        // 40 threads: a full warp and 8 lanes of a second. b32 values tid / 4 % 3; b64 values differing only in
        // their high word (tid % 2) << 32; match.all over a uniform value, over one that is not, and over the
        // lanes 8..15 only (every member equal).
        int[] r = run("""
                shr.u32 %r2, %r1, 2;
                rem.u32 %r2, %r2, 3;
                match.any.sync.b32 %r3, %r2, -1;
                st.global.u32 [%rd1], %r3;
                and.b32 %r4, %r1, 1;
                cvt.u64.u32 %rd4, %r4;
                shl.b64 %rd4, %rd4, 32;
                or.b64 %rd4, %rd4, 7;
                match.any.sync.b64 %r5, %rd4, -1;
                st.global.u32 [%rd1+160], %r5;
                match.all.sync.b64 %r6|%p1, 7, -1;
                selp.u32 %r7, 1, 0, %p1;
                st.global.u32 [%rd1+320], %r6;
                match.all.sync.b32 %r8|%p2, %r2, -1;
                selp.u32 %r9, 1, 0, %p2;
                shl.b32 %r9, %r9, 1;
                or.b32 %r7, %r7, %r9;
                st.global.u32 [%rd1+480], %r8;
                shr.u32 %r10, %r1, 3;
                setp.eq.u32 %p3, %r10, 1;
                @!%p3 bra SKIP;
                match.all.sync.b32 %r11|%p4, %r10, 0xff00;
                selp.u32 %r12, 4, 0, %p4;
                or.b32 %r7, %r7, %r12;
                st.global.u32 [%rd1+640], %r11;
                SKIP:
                st.global.u32 [%rd1+800], %r7;
                """, 40, 6);
        for (int t = 0; t < 40; t++) {
            int warp = t / 32;
            int lanes = warp == 0 ? -1 : 0xFF;
            int any = 0;
            int parity = 0;
            for (int u = 32 * warp; u < Math.min(40, 32 * warp + 32); u++) {
                any |= (u / 4 % 3 == t / 4 % 3 ? 1 : 0) << (u % 32);
                parity |= (u % 2 == t % 2 ? 1 : 0) << (u % 32);
            }
            assertEquals(any, r[t], "match.any.b32 " + t);
            assertEquals(parity, r[40 + t], "match.any.b64 tells values apart by the high word " + t);
            assertEquals(lanes, r[80 + t], "match.all.b64 of a uniform value: the lanes taking part " + t);
            assertEquals(0, r[120 + t], "match.all.b32 of values that differ (in both warps) " + t);
            boolean group = t / 8 == 1;
            assertEquals(group ? 0xFF00 : 0, r[160 + t], "match.all over lanes 8..15 " + t);
            assertEquals(1 | (group ? 4 : 0), r[200 + t], "match.all's predicates " + t);
        }
    }

    @Test
    void barrierOrdersSharedMemoryAcrossWarps() {
        int[] r = run("""
                mov.u32 %r2, buf;
                shl.b32 %r3, %r1, 2;
                add.s32 %r4, %r2, %r3;
                add.s32 %r5, %r1, 1000;
                st.shared.u32 [%r4], %r5;
                bar.sync 0;
                sub.s32 %r6, 127, %r1;
                shl.b32 %r7, %r6, 2;
                add.s32 %r8, %r2, %r7;
                ld.shared.u32 %r9, [%r8];
                st.global.u32 [%rd1], %r9;
                """, 128, 1);
        int[] expected = new int[128];
        for (int i = 0; i < 128; i++) {
            expected[i] = 1000 + 127 - i;
        }
        assertArrayEquals(expected, r);
    }

    @Test
    void globalAtomicsFromCtasRunningOnSeveralCoresLoseNoUpdate() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<2>;
                    .reg .b32 %r<8>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, 0;
                LOOP:
                    atom.global.add.u32 %r2, [%rd1], 1;
                    add.s32 %r1, %r1, 1;
                    setp.lt.u32 %p1, %r1, 64;
                    @%p1 bra LOOP;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[1]);
        rig.run(f, 64, 128, out);
        assertEquals(64 * 128 * 64, rig.ints(out, 1)[0]);
    }

    @Test
    void atomicsTotalUnderContentionAcrossBlocks() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<2>;
                    .reg .b32 %r<16>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, %ctaid.x;
                    atom.global.add.u32 %r3, [%rd1], 1;
                    sub.s32 %r4, %r1, 100;
                    atom.global.max.s32 %r5, [%rd1+4], %r4;
                    atom.global.min.s32 %r6, [%rd1+8], %r4;
                    atom.global.inc.u32 %r7, [%rd1+12], 9;
                    red.global.add.u64 [%rd1+16], 3;
                    add.s32 %r11, %r1, 1;
                    atom.global.cas.b32 %r8, [%rd1+24], 0, %r11;
                    setp.eq.u32 %p1, %r8, 0;
                    @%p1 atom.global.add.u32 %r12, [%rd1+36], 1;
                    atom.global.or.b32 %r9, [%rd1+28], %r1;
                    atom.global.add.f32 %r10, [%rd1+32], 0f3F000000;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[10]);
        rig.run(f, 8, 256, out);
        int[] r = rig.ints(out, 10);
        int n = 8 * 256;
        assertEquals(n, r[0], "add");
        assertEquals(155, r[1], "max");
        assertEquals(-100, r[2], "min");
        assertEquals(n % 10, r[3], "inc wraps at 9");
        assertEquals(3L * n, (r[4] & 0xFFFF_FFFFL) | (long) r[5] << 32, "red.add.u64");
        assertEquals(1, r[9], "exactly one cas found 0");
        assertTrue(r[6] >= 1 && r[6] <= 256, "cas swapped in a tid + 1: " + r[6]);
        assertEquals(255, r[7], "or");
        assertEquals(n * 0.5f, Float.intBitsToFloat(r[8]), "add.f32 of halves is exact");
    }
}
