package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_LAUNCH_FAILED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * trap (what __trap() compiles to) and brkpt: a thread that executes one fails the launch, and the next
 * synchronizing call, and every later one, returns the context's sticky CUDA_ERROR_LAUNCH_FAILED (719).
 * A guarded trap whose guard is false does nothing. Each test runs under both engines.
 */
class TrapTest {
    /** Thread {@code bad} (global index) traps (or hits a brkpt); every thread first stores 1 to out[its index]. */
    private static final String KERNEL = Rig.HEADER + """
            .visible .entry k(.param .u64 out, .param .u32 bad)
            {
                .reg .pred %p<2>;
                .reg .b32 %r<6>;
                .reg .b64 %rd<6>;
                ld.param.u64 %rd1, [out];
                ld.param.u32 %r1, [bad];
                mov.u32 %r2, %tid.x;
                mov.u32 %r3, %ctaid.x;
                mov.u32 %r4, %ntid.x;
                mad.lo.s32 %r5, %r3, %r4, %r2;
                mul.wide.u32 %rd2, %r5, 4;
                add.s64 %rd3, %rd1, %rd2;
                st.global.u32 [%rd3], 1;
                setp.eq.u32 %p1, %r5, %r1;
                @%p1 TRAP;
                nanosleep.u32 100;
                ret;
            }
            """;

    private static void underBothEngines(java.util.function.Consumer<PtxEngine> test) {
        String before = System.getProperty(PtxEngine.PROPERTY);
        try {
            for (PtxEngine engine : new PtxEngine[] {PtxEngine.INTERPRETER, PtxEngine.JIT}) {
                System.setProperty(PtxEngine.PROPERTY, engine.name().toLowerCase(java.util.Locale.ROOT));
                test.accept(engine);
            }
        } finally {
            if (before == null) {
                System.clearProperty(PtxEngine.PROPERTY);
            } else {
                System.setProperty(PtxEngine.PROPERTY, before);
            }
        }
    }

    private static int launchAndSync(Rig rig, long f, int grid, int block, Object... args) {
        int rc = rig.launch(f, new int[] {grid, 1, 1}, new int[] {block, 1, 1}, 0, args);
        return rc != CUDA_SUCCESS ? rc : rig.device.cuCtxSynchronize();
    }

    private static void trapFailsTheLaunchStickily(String instruction) {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(KERNEL.replace("TRAP", instruction)), "k");
                long out = rig.alloc(4L * 192);
                PtxEngine.Statistics s0 = PtxEngine.statistics();
                assertEquals(CUDA_SUCCESS, launchAndSync(rig, f, 3, 64, out, 1000), engine + ": no thread traps");
                PtxEngine.Statistics s1 = PtxEngine.statistics();
                if (engine == PtxEngine.JIT) {
                    assertEquals(1, s1.compiledLaunches() - s0.compiledLaunches(), "the compiler takes a guarded " + instruction);
                }
                int[] ones = new int[192];
                Arrays.fill(ones, 1);
                assertEquals(Arrays.toString(ones), Arrays.toString(rig.ints(out, 192)));

                assertEquals(CUDA_ERROR_LAUNCH_FAILED, launchAndSync(rig, f, 3, 64, out, 64 + 37), engine + ": thread 101 traps");
                String detail = rig.device.lastErrorDetail();
                assertTrue(detail.contains(instruction) && detail.contains("thread [37,0,0] of block [1,0,0]"), detail);
                assertEquals(CUDA_ERROR_LAUNCH_FAILED, rig.device.cuCtxSynchronize(), "sticky");
                assertEquals(CUDA_ERROR_LAUNCH_FAILED, launchAndSync(rig, f, 1, 32, out, 1000), "a later launch in the context");
            }
        });
    }

    @Test
    void aTrapFailsTheLaunchWithTheStickyLaunchFailedError() {
        trapFailsTheLaunchStickily("trap");
    }

    @Test
    void aBreakpointWithoutADebuggerFailsTheLaunchLikeATrap() {
        trapFailsTheLaunchStickily("brkpt");
    }
}
