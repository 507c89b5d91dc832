package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * bar.red.popc.u32 / .and.pred / .or.pred (what __syncthreads_count/_and/_or compile to): over every
 * thread of the CTA that arrives (exited threads do not count), a partial last warp, successive
 * reductions in a loop, a barrier id other than 0, and several CTAs; the forms not covered are refused.
 */
class BarrierReductionTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    private static final String KERNEL = Rig.HEADER + """
            .visible .entry k(.param .u64 out, .param .u32 v)
            {
                .reg .pred %p<8>;
                .reg .b32 %r<32>;
                .reg .b64 %rd<8>;
                ld.param.u64 %rd1, [out];
                ld.param.u32 %r1, [v];
                mov.u32 %r2, %tid.x;
                mov.u32 %r20, %ctaid.x;
                setp.ge.u32 %p1, %r2, 90;
                @%p1 exit;
                setp.lt.u32 %p2, %r2, %r1;
                bar.red.popc.u32 %r3, 0, %p2;
                bar.red.and.pred %p3, 0, %p2;
                selp.u32 %r4, 1, 0, %p3;
                bar.red.or.pred %p4, 0, !%p2;
                selp.u32 %r5, 1, 0, %p4;
                mov.u32 %r6, 0;
                mov.u32 %r7, 0;
            LOOP:
                add.u32 %r8, %r6, 2;
                rem.u32 %r9, %r2, %r8;
                setp.eq.u32 %p5, %r9, 0;
                bar.red.popc.u32 %r10, 1, %p5;
                mad.lo.u32 %r7, %r7, 1000, %r10;
                add.u32 %r6, %r6, 1;
                setp.lt.u32 %p6, %r6, 3;
                @%p6 bra LOOP;
                mad.lo.u32 %r21, %r20, 100, %r2;
                mul.wide.u32 %rd2, %r21, 16;
                add.s64 %rd3, %rd1, %rd2;
                st.global.u32 [%rd3], %r3;
                st.global.u32 [%rd3+4], %r4;
                st.global.u32 [%rd3+8], %r5;
                st.global.u32 [%rd3+12], %r7;
                ret;
            }
            """;

    @Test
    void reductionsCountTheArrivedThreadsOfEachCta() {
        long f = rig.function(rig.module(KERNEL), "k");
        int ctas = 8;
        for (int v : new int[] {50, 95, 0}) {
            long out = rig.upload(new int[4 * 100 * ctas]);
            rig.run(f, ctas, 100, out, v);
            int[] r = rig.ints(out, 4 * 100 * ctas);
            int popc = Math.min(v, 90);
            for (int c = 0; c < ctas; c++) {
                for (int t = 0; t < 100; t++) {
                    int o = 4 * (100 * c + t);
                    if (t >= 90) {
                        assertEquals(0, r[o] | r[o + 1] | r[o + 2] | r[o + 3], "thread " + t + " exited");
                        continue;
                    }
                    assertEquals(popc, r[o], "popc, v=" + v + " cta " + c + " thread " + t);
                    assertEquals(v >= 90 ? 1 : 0, r[o + 1], "and");
                    assertEquals(v < 90 ? 1 : 0, r[o + 2], "or of the negated predicate");
                    assertEquals(45_030_023, r[o + 3], "three reductions in a loop: 45, 30, 23 multiples of 2, 3, 4");
                }
            }
        }
    }

    @Test
    void nvccSyncthreadsCountAndOr() throws Exception {
        java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("barred");
        String ptx = CallsTest.nvcc(dir, """
                extern "C" __global__ void s(int* out, int v) {
                    int t = threadIdx.x;
                    int c = __syncthreads_count(t < v);
                    int a = __syncthreads_and(t < v);
                    int o = __syncthreads_or(t < v);
                    out[t] = c * 100 + a * 10 + o;
                }
                """);
        long f = rig.function(rig.module(ptx), "s");
        long out = rig.upload(new int[70]);
        rig.run(f, 1, 70, out, 40);
        int[] r = rig.ints(out, 70);
        for (int t = 0; t < 70; t++) {
            assertEquals(40 * 100 + 0 + 1, r[t], "thread " + t);
        }
        rig.run(f, 1, 70, out, 70);
        assertEquals(70 * 100 + 10 + 1, rig.ints(out, 70)[69]);
    }

    @Test
    void formsNotCoveredAreRefused() {
        for (String insn : new String[] {"bar.red.popc.u32 %r1, 0, 64, %p1;", "@%p2 bar.red.or.pred %p3, 0, %p1;", "bar.arrive 1, 64;",
                "bar.red.popc.u64 %rd1, 0, %p1;", "bar.red.and.u32 %r1, 0, %p1;", "bar.red.min.u32 %r1, 0, %p1;", "bar.sync 1, 64;"}) {
            String ptx = Rig.HEADER + ".visible .entry k()\n{\n    .reg .pred %p<4>;\n    .reg .b32 %r<4>;\n    .reg .b64 %rd<4>;\n    "
                    + insn + "\n    ret;\n}\n";
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, rig.launch(rig.function(rig.module(ptx), "k"), new int[] {1, 1, 1}, new int[] {64, 1, 1}, 0),
                    insn);
            assertTrue(rig.device.lastErrorDetail().contains("bar"), rig.device.lastErrorDetail());
        }
    }
}
