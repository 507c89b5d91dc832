package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What nvcc 13 emits for CUB's and thrust's kernels and cooperative groups, one construct at a time: shared variables
 * named by symbol (module scope, in the entry, from a device function), membar/fence in every form, redux.sync,
 * %envreg, ordered loads and stores, and cp.async with its commit and wait groups; under the engine this run uses.
 */
class LibraryConstructsTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /**
     * Runs entry k of {@code ptx} (one block of {@code threads}) with out (ints); returns them. Unless the interpreter
     * is asked for, an entry without calls must have run compiled: the compiler covers these constructs too.
     */
    private int[] run(String ptx, int threads, int ints, Object... more) {
        long f = rig.function(rig.module(Rig.HEADER + ptx), "k");
        long out = rig.upload(new int[ints]);
        Object[] args = new Object[1 + more.length];
        args[0] = out;
        System.arraycopy(more, 0, args, 1, more.length);
        long compiled = PtxEngine.statistics().compiledLaunches();
        rig.run(f, 1, threads, args);
        if (PtxEngine.current() != PtxEngine.INTERPRETER && !ptx.contains("call")) {
            assertEquals(compiled + 1, PtxEngine.statistics().compiledLaunches(), "the launch ran compiled");
        }
        return rig.ints(out, ints);
    }

    @Test
    void sharedVariablesNamedBySymbolAtModuleScopeInTheEntryAndFromAFunction() {
        int[] r = run("""
                .shared .align 4 .b8 _ZZ1kPiE4temp[256];
                .shared .align 16 .b8 _ZZ5otherPiE4huge[40000];
                .func (.param .b32 ret) peek(.param .b32 i)
                {
                    .reg .b32 %q<4>;
                    ld.param.b32 %q1, [i];
                    shl.b32 %q2, %q1, 2;
                    ld.shared.u32 %q3, [_ZZ1kPiE4temp+%q2];
                    st.param.b32 [ret], %q3;
                    ret;
                }
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<16>;
                    .reg .b64 %rd<8>;
                    .shared .align 8 .b8 _ZZ1kPiE5local[64];
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, _ZZ1kPiE4temp;
                    shl.b32 %r3, %r1, 2;
                    add.s32 %r4, %r2, %r3;
                    mul.lo.s32 %r5, %r1, 7;
                    st.shared.u32 [%r4], %r5;
                    st.shared.u32 [_ZZ1kPiE5local+4], 99;
                    bar.sync 0;
                    ld.shared.u32 %r6, [_ZZ1kPiE4temp+12];
                    ld.shared.u32 %r7, [_ZZ1kPiE5local+4];
                    xor.b32 %r8, %r1, 1;
                    {
                    .param .b32 a;
                    .param .b32 b;
                    st.param.b32 [a], %r8;
                    call.uni (b), peek, (a);
                    ld.param.b32 %r9, [b];
                    }
                    mov.u32 %r10, %total_smem_size;
                    mul.wide.u32 %rd2, %r1, 16;
                    add.s64 %rd3, %rd1, %rd2;
                    st.global.v4.u32 [%rd3], {%r6, %r7, %r9, %r10};
                    ret;
                }
                """.replace("ld.shared.u32 %q3, [_ZZ1kPiE4temp+%q2];", """
                    mov.u32 %q3, _ZZ1kPiE4temp;
                    add.s32 %q3, %q3, %q2;
                    ld.shared.u32 %q3, [%q3];"""), 64, 64 * 4);
        for (int t = 0; t < 64; t++) {
            assertEquals(21, r[4 * t], "temp[3] written by thread 3, read by " + t);
            assertEquals(99, r[4 * t + 1], "the entry's own shared variable");
            assertEquals(7 * (t ^ 1), r[4 * t + 2], "temp read by symbol in a device function, thread " + t);
            assertEquals(256 + 64, r[4 * t + 3], "only this kernel's variables count: not the module's other kernel's 40000 bytes");
        }
    }

    @Test
    void fencesOfEveryFormOrderAndRun() {
        int[] r = run("""
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<8>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mul.wide.u32 %rd2, %r1, 4;
                    add.s64 %rd3, %rd1, %rd2;
                    st.global.u32 [%rd3], 1;
                    membar.gl;
                    membar.cta;
                    membar.sys;
                    fence.sc.gpu;
                    fence.acq_rel.sys;
                    fence.acq_rel.cta;
                    fence.proxy.alias;
                    fence.proxy.async.global;
                    fence.proxy.async.shared::cta;
                    st.release.gpu.global.u32 [%rd3], 2;
                    st.volatile.global.u32 [%rd3], 3;
                    ld.acquire.gpu.global.u32 %r2, [%rd3];
                    ld.relaxed.gpu.global.u32 %r3, [%rd3];
                    ld.volatile.global.u32 %r4, [%rd3];
                    add.s32 %r5, %r2, %r3;
                    add.s32 %r5, %r5, %r4;
                    st.relaxed.sys.global.u32 [%rd3], %r5;
                    ret;
                }
                """, 40, 40);
        for (int t = 0; t < 40; t++) {
            assertEquals(9, r[t]);
        }
    }

    @Test
    void reduxOverFullAndDivergentWarps() {
        int[] r = run("""
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<20>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mul.lo.s32 %r2, %r1, 37;
                    sub.s32 %r2, %r2, 500;
                    redux.sync.add.s32 %r3, %r2, -1;
                    redux.sync.min.s32 %r4, %r2, -1;
                    redux.sync.max.s32 %r5, %r2, -1;
                    redux.sync.min.u32 %r6, %r2, -1;
                    redux.sync.max.u32 %r7, %r2, -1;
                    redux.sync.and.b32 %r8, %r2, -1;
                    redux.sync.or.b32 %r9, %r2, -1;
                    redux.sync.xor.b32 %r10, %r2, -1;
                    mov.u32 %r11, 0;
                    and.b32 %r12, %r1, 1;
                    setp.eq.u32 %p1, %r12, 0;
                    @!%p1 bra ODD;
                    redux.sync.add.u32 %r11, %r1, 0x55555555;
                ODD:
                    mov.u32 %r13, %envreg1;
                    mov.u32 %r14, %envreg2;
                    mov.u32 %r15, %envreg0;
                    or.b32 %r13, %r13, %r14;
                    or.b32 %r13, %r13, %r15;
                    mul.wide.u32 %rd2, %r1, 48;
                    add.s64 %rd3, %rd1, %rd2;
                    st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r6};
                    st.global.v4.u32 [%rd3+16], {%r7, %r8, %r9, %r10};
                    st.global.v4.u32 [%rd3+32], {%r11, %r13, %r13, %r13};
                    ret;
                }
                """, 32, 32 * 12);
        int sum = 0;
        int min = Integer.MAX_VALUE;
        int max = Integer.MIN_VALUE;
        int umin = -1;
        int umax = 0;
        int and = -1;
        int or = 0;
        int xor = 0;
        int evens = 0;
        for (int t = 0; t < 32; t++) {
            int v = 37 * t - 500;
            sum += v;
            min = Math.min(min, v);
            max = Math.max(max, v);
            umin = Integer.compareUnsigned(umin, v) <= 0 ? umin : v;
            umax = Integer.compareUnsigned(umax, v) >= 0 ? umax : v;
            and &= v;
            or |= v;
            xor ^= v;
            evens += (t & 1) == 0 ? t : 0;
        }
        for (int t = 0; t < 32; t++) {
            assertArrayEquals(new int[] {sum, min, max, umin, umax, and, or, xor}, java.util.Arrays.copyOfRange(r, 12 * t, 12 * t + 8),
                    "lane " + t);
            assertEquals((t & 1) == 0 ? evens : 0, r[12 * t + 8], "redux over the even lanes only, lane " + t);
            assertEquals(0, r[12 * t + 9], "%envreg: no grid workspace outside a cooperative launch");
        }
    }

    @Test
    void copyAsyncWithSourceSizesAndIgnoreSourceThenWait() {
        int[] src = new int[64];
        for (int i = 0; i < src.length; i++) {
            src[i] = 0x01010101 * (i + 1);
        }
        int[] r = run("""
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<20>;
                    .reg .b64 %rd<12>;
                    .shared .align 16 .b8 buf[1024];
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    cvta.to.global.u64 %rd2, %rd2;
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, buf;
                    shl.b32 %r3, %r1, 6;
                    add.s32 %r4, %r2, %r3;
                    mul.wide.u32 %rd3, %r1, 16;
                    add.s64 %rd4, %rd2, %rd3;
                    and.b32 %r5, %r1, 7;
                    setp.eq.u32 %p1, %r5, 3;
                    cp.async.ca.shared.global [%r4], [%rd4], 16;
                    cp.async.cg.shared.global.L2::128B [%r4+16], [%rd4], 16, %r5;
                    cp.async.ca.shared.global [%r4+32], [%rd4+8], 8;
                    cp.async.ca.shared.global [%r4+40], [%rd4+4], 4, %p1;
                    cp.async.commit_group;
                    cp.async.wait_group 0;
                    cp.async.wait_all;
                    bar.sync 0;
                    ld.shared.v4.u32 {%r6, %r7, %r8, %r9}, [%r4];
                    ld.shared.v4.u32 {%r10, %r11, %r12, %r13}, [%r4+16];
                    ld.shared.v2.u32 {%r14, %r15}, [%r4+32];
                    ld.shared.u32 %r16, [%r4+40];
                    mul.wide.u32 %rd5, %r1, 44;
                    add.s64 %rd6, %rd1, %rd5;
                    st.global.u32 [%rd6], %r6;
                    st.global.u32 [%rd6+4], %r7;
                    st.global.u32 [%rd6+8], %r8;
                    st.global.u32 [%rd6+12], %r9;
                    st.global.u32 [%rd6+16], %r10;
                    st.global.u32 [%rd6+20], %r11;
                    st.global.u32 [%rd6+24], %r12;
                    st.global.u32 [%rd6+28], %r13;
                    st.global.u32 [%rd6+32], %r14;
                    st.global.u32 [%rd6+36], %r15;
                    st.global.u32 [%rd6+40], %r16;
                    ret;
                }
                """, 16, 16 * 11, rig.upload(src));
        for (int t = 0; t < 16; t++) {
            int[] w = java.util.Arrays.copyOfRange(src, 4 * t, 4 * t + 4);
            int n = t & 7;   // the src-size of the second copy: bytes read, the rest zero
            int[] partial = new int[4];
            for (int b = 0; b < n; b++) {
                partial[b / 4] |= (w[b / 4] >>> (8 * (b % 4)) & 0xFF) << (8 * (b % 4));
            }
            int[] want = {w[0], w[1], w[2], w[3], partial[0], partial[1], partial[2], partial[3], w[2], w[3], (t & 7) == 3 ? 0 : w[1]};
            assertArrayEquals(want, java.util.Arrays.copyOfRange(r, 11 * t, 11 * t + 11), "thread " + t);
        }
    }

    @Test
    void funnelShiftsGridDependencyControlAndCachePolicies() {
        int[][] cases = {{0x89ABCDEF, 0x01234567, 0}, {0x89ABCDEF, 0x01234567, 4}, {0x89ABCDEF, 0x01234567, 31},
            {0x89ABCDEF, 0x01234567, 32}, {0x89ABCDEF, 0x01234567, 36}, {-1, 0, 17}, {0x80000001, 0x7FFFFFFF, 63}};
        int[] flat = new int[cases.length * 3];
        for (int i = 0; i < cases.length; i++) {
            System.arraycopy(cases[i], 0, flat, 3 * i, 3);
        }
        int[] r = run("""
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .b32 %r<12>;
                    .reg .b64 %rd<12>;
                    griddepcontrol.wait;
                    createpolicy.fractional.L2::evict_last.b64 %rd9, 1.0;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    mov.u32 %r1, %tid.x;
                    mul.wide.u32 %rd3, %r1, 12;
                    add.s64 %rd4, %rd2, %rd3;
                    ld.global.L2::cache_hint.u32 %r2, [%rd4], %rd9;
                    ld.global.u32 %r3, [%rd4+4];
                    ld.global.u32 %r4, [%rd4+8];
                    shf.l.wrap.b32 %r5, %r2, %r3, %r4;
                    shf.r.wrap.b32 %r6, %r2, %r3, %r4;
                    shf.l.clamp.b32 %r7, %r2, %r3, %r4;
                    shf.r.clamp.b32 %r8, %r2, %r3, %r4;
                    mul.wide.u32 %rd5, %r1, 16;
                    add.s64 %rd6, %rd1, %rd5;
                    st.global.L2::cache_hint.v4.u32 [%rd6], {%r5, %r6, %r7, %r8}, %rd9;
                    griddepcontrol.launch_dependents;
                    ret;
                }
                """, cases.length, cases.length * 4, rig.upload(flat));
        for (int i = 0; i < cases.length; i++) {
            long v = (cases[i][1] & 0xFFFF_FFFFL) << 32 | (cases[i][0] & 0xFFFF_FFFFL);
            int wrap = cases[i][2] & 31;
            int clamp = Math.min(cases[i][2], 32);
            int[] want = {(int) (v << wrap >>> 32), (int) (v >>> wrap), (int) (v << clamp >>> 32), (int) (v >>> clamp)};
            assertArrayEquals(want, java.util.Arrays.copyOfRange(r, 4 * i, 4 * i + 4), "case " + i);
        }
    }

    /**
     * What CUB's bulk-copy transform kernel does on sm_90 (thrust::transform): an elected thread initializes an mbarrier,
     * bulk-copies a tile from global to shared memory completing its bytes on it and arrives expecting them; after a
     * barrier every thread waits for the phase, then reads the tile.
     */
    @Test
    void bulkCopyIntoSharedMemoryCompletesAnMbarrierPhase() {
        int[] in = new int[128];
        for (int i = 0; i < in.length; i++) {
            in[i] = 3 * i + 1;
        }
        int[] r = run("""
                .visible .entry k(.param .u64 out, .param .u64 in)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<20>;
                    .reg .b64 %rd<12>;
                    .shared .align 8 .u64 bar;
                    .shared .align 16 .b8 tile[512];
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, -1;
                    elect.sync %r3|%p1, %r2;
                    setp.gt.u32 %p2, %r1, 31;
                    @%p2 bra WAIT;
                    @!%p1 bra WAIT;
                    mov.u32 %r4, bar;
                    mbarrier.init.shared.b64 [%r4], 1;
                    fence.proxy.async.shared::cta;
                    mov.u32 %r5, tile;
                    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r5], [%rd2], 256, [%r4];
                    add.s64 %rd3, %rd2, 256;
                    add.s32 %r6, %r5, 256;
                    mov.u32 %r7, 256;
                    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd3], %r7, [%r4];
                    mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd4, [%r4], 512;
                WAIT:
                    bar.sync 0;
                    mov.u32 %r8, bar;
                LOOP:
                    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
                    @!%p3 bra LOOP;
                    mov.u32 %r9, tile;
                    shl.b32 %r10, %r1, 2;
                    add.s32 %r11, %r9, %r10;
                    ld.shared.u32 %r12, [%r11];
                    mbarrier.test_wait.parity.shared::cta.b64 %p3, [%r8], 1;
                    selp.u32 %r13, 1, 0, %p3;
                    mul.wide.u32 %rd5, %r1, 16;
                    add.s64 %rd6, %rd1, %rd5;
                    st.global.v4.u32 [%rd6], {%r12, %r3, %r13, %r1};
                    ret;
                }
                """, 128, 128 * 4, rig.upload(in));
        for (int t = 0; t < 128; t++) {
            assertArrayEquals(new int[] {3 * t + 1, 0, 0, t}, java.util.Arrays.copyOfRange(r, 4 * t, 4 * t + 4),
                    "thread " + t + ": the tile, the elected lane (0) of its warp, phase 1 not complete");
        }
    }

    @Test
    void anMbarrierWaitNoThreadCanCompleteFailsTheLaunchInsteadOfHanging() {
        long f = rig.function(rig.module(Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .pred %p<2>;
                    .reg .b32 %r<4>;
                    .shared .align 8 .u64 bar;
                    mov.u32 %r1, bar;
                    mbarrier.init.shared.b64 [%r1], 64;
                LOOP:
                    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;
                    @!%p1 bra LOOP;
                    ret;
                }
                """), "k");
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {32, 1, 1}, 0, rig.alloc(16)));
        assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_FAILED, rig.device.cuCtxSynchronize());
    }
}
