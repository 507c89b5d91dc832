package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ASSERT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.IntSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Device-side assert(): nvcc compiles a failing assert to a call of the extern
 * {@code __assertfail(message, file, line, function, charSize)}. Each failing thread prints the
 * driver's message on stderr, the launch ends, and the context's sticky error is CUDA_ERROR_ASSERT.
 */
class AssertTest {
    /** Thread {@code bad} (global index) fails "x < n"; every other thread stores 1 to out[its index]. */
    static final String HAND_WRITTEN = Rig.HEADER + """
            .extern .func __assertfail
            (
                .param .b64 m,
                .param .b64 f,
                .param .b32 line,
                .param .b64 fn,
                .param .b64 cs
            )
            ;
            .global .align 1 .b8 msg[6] = {120, 32, 60, 32, 110, 0};
            .global .align 1 .b8 file[5] = {107, 46, 99, 117, 0};
            .global .align 1 .b8 func[9] = {118, 111, 105, 100, 32, 107, 40, 41, 0};
            .visible .entry k(.param .u64 out, .param .u32 bad)
            {
                .reg .pred %p<2>;
                .reg .b32 %r<6>;
                .reg .b64 %rd<12>;
                ld.param.u64 %rd1, [out];
                ld.param.u32 %r1, [bad];
                mov.u32 %r2, %tid.x;
                mov.u32 %r3, %ctaid.x;
                mov.u32 %r4, %ntid.x;
                mad.lo.s32 %r5, %r3, %r4, %r2;
                setp.ne.u32 %p1, %r5, %r1;
                @%p1 bra OK;
                mov.u64 %rd2, msg;
                cvta.global.u64 %rd3, %rd2;
                mov.u64 %rd4, file;
                cvta.global.u64 %rd5, %rd4;
                mov.u64 %rd6, func;
                cvta.global.u64 %rd7, %rd6;
                {
                .param .b64 p0;
                st.param.b64 [p0+0], %rd3;
                .param .b64 p1;
                st.param.b64 [p1+0], %rd5;
                .param .b32 p2;
                st.param.b32 [p2+0], 7;
                .param .b64 p3;
                st.param.b64 [p3+0], %rd7;
                .param .b64 p4;
                st.param.b64 [p4+0], 1;
                call.uni __assertfail, (p0, p1, p2, p3, p4);
                }
            OK:
                cvta.to.global.u64 %rd8, %rd1;
                mul.wide.u32 %rd9, %r5, 4;
                add.s64 %rd10, %rd8, %rd9;
                st.global.u32 [%rd10], 1;
                ret;
            }
            """;

    Rig rig;

    @BeforeEach
    void open() {
        rig = new Rig();
    }

    @AfterEach
    void close() {
        rig.close();
    }

    /** What {@link #stderrOf} captured: the assertion messages printed (lines "FILE.cu:LINE: ...") and r's result. */
    record Captured(String text, int result) {
    }

    /** Runs {@code r} with System.err captured (the context's log may write there too: only the lines of .cu files are kept). */
    static Captured stderrOf(IntSupplier r) {
        PrintStream old = System.err;
        ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        System.setErr(new PrintStream(buffer, true, StandardCharsets.UTF_8));
        int result;
        try {
            result = r.getAsInt();
        } finally {
            System.setErr(old);
        }
        StringBuilder messages = new StringBuilder();
        for (String line : buffer.toString(StandardCharsets.UTF_8).split("\n")) {
            if (line.matches("\\S+\\.cu:\\d+: .*")) {
                messages.append(line).append('\n');
            }
        }
        return new Captured(messages.toString(), result);
    }

    private int launchAndSync(long f, int grid, int block, Object... args) {
        int rc = rig.launch(f, new int[] {grid, 1, 1}, new int[] {block, 1, 1}, 0, args);
        return rc != CUDA_SUCCESS ? rc : rig.device.cuCtxSynchronize();
    }

    @Test
    void aFailedAssertPrintsTheDriversMessageAndIsAStickyAssertError() {
        long f = rig.function(rig.module(HAND_WRITTEN), "k");
        long out = rig.alloc(4L * 192);
        // no thread fails: nothing printed, every thread stored
        Captured passing = stderrOf(() -> launchAndSync(f, 3, 64, out, 1000));
        assertEquals(CUDA_SUCCESS, passing.result(), () -> rig.device.lastErrorDetail());
        assertEquals("", passing.text());
        int[] ones = new int[192];
        Arrays.fill(ones, 1);
        assertEquals(Arrays.toString(ones), Arrays.toString(rig.ints(out, 192)));

        Captured failing = stderrOf(() -> launchAndSync(f, 3, 64, out, 64 + 37));
        assertEquals(CUDA_ERROR_ASSERT, failing.result(), () -> rig.device.lastErrorDetail());
        String message = "k.cu:7: void k(): block: [1,0,0], thread: [37,0,0] Assertion `x < n` failed.";
        assertEquals(message + "\n", failing.text());
        assertTrue(rig.device.lastErrorDetail().contains(message), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_ASSERT, rig.device.cuCtxSynchronize(), "sticky");
        assertEquals(CUDA_ERROR_ASSERT, launchAndSync(f, 1, 32, out, 1000), "a later launch in the context");
    }

    @Test
    void everyFailingLaneOfTheWarpPrintsInLaneOrderWithItsBlockAndThreadCoordinates(@TempDir Path dir)
            throws IOException, InterruptedException {
        String ptx = CallsTest.nvcc(dir, """
                #line 1 "lanes.cu"
                #include <assert.h>
                extern "C" __global__ void k(int *out) {
                    unsigned int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
                    if (blockIdx.x == 1 && blockIdx.y == 2 && t < 32) {
                        assert(t % 8 != 3);
                    }
                    out[t] = 1;
                }
                """);
        assertTrue(ptx.contains("__assertfail"), "nvcc calls __assertfail");
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.alloc(4L * 64);
        // blocks of 4 x 4 x 4 threads: the first warp's lanes 3, 11, 19, 27 fail, in block (1,2,0) of a 2 x 3 grid
        Captured failing = stderrOf(() -> {
            int rc = rig.launch(f, new int[] {2, 3, 1}, new int[] {4, 4, 4}, 0, out);
            return rc != CUDA_SUCCESS ? rc : rig.device.cuCtxSynchronize();
        });
        assertEquals(CUDA_ERROR_ASSERT, failing.result(), () -> rig.device.lastErrorDetail());
        StringBuilder expected = new StringBuilder();
        for (int t = 3; t < 32; t += 8) {
            expected.append("lanes.cu:5: void k(int *): block: [1,2,0], thread: [").append(t % 4).append(',').append(t / 4 % 4)
                    .append(',').append(t / 16).append("] Assertion `t % 8 != 3` failed.\n");
        }
        assertEquals(expected.toString(), failing.text());
        assertEquals(CUDA_ERROR_ASSERT, rig.device.cuCtxSynchronize(), "sticky");
    }

    @Test
    void anAssertfailDeclaredWithOtherParameterSizesIsNotSupported() {
        String wrongLine = HAND_WRITTEN.replace(".param .b32 line,", ".param .b64 line,")
                .replace(".param .b32 p2;\n    st.param.b32 [p2+0], 7;", ".param .b64 p2;\n    st.param.b64 [p2+0], 7;");
        assertTrue(wrongLine.contains(".param .b64 p2;"), "the call site passes a 64-bit line");
        int rc = rig.launch(rig.function(rig.module(wrongLine), "k"), new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0,
                rig.alloc(4), 0);
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, rc, () -> rig.device.lastErrorDetail());
        assertTrue(rig.device.lastErrorDetail().contains("__assertfail"), rig.device.lastErrorDetail());
    }
}
