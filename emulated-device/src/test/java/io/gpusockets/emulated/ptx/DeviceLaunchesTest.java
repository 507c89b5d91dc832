package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Device-side launches as nvcc writes them for {@code child<<<grid, block>>>(...)} in device code (-rdc=true): the
 * address of the child entry, cudaGetParameterBufferV2, stores into the buffer, cudaLaunchDeviceV2; the children run
 * before the launch from the host completes, in order, and a bad configuration is the launch's error, not a fault.
 */
class DeviceLaunchesTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    private static final String RUNTIME = """
            .extern .func  (.param .b64 func_retval0) cudaGetParameterBufferV2
            (
                .param .b64 cudaGetParameterBufferV2_param_0,
                .param .align 4 .b8 cudaGetParameterBufferV2_param_1[12],
                .param .align 4 .b8 cudaGetParameterBufferV2_param_2[12],
                .param .b32 cudaGetParameterBufferV2_param_3
            )
            ;
            .extern .func  (.param .b32 func_retval0) cudaLaunchDeviceV2
            (
                .param .b64 cudaLaunchDeviceV2_param_0,
                .param .b64 cudaLaunchDeviceV2_param_1
            )
            ;
            .extern .func  (.param .b32 func_retval0) cudaGetLastError
            (
            )
            ;
            .visible .entry child(.param .u64 out, .param .u32 base)
            {
                .reg .b32 %r<8>;
                .reg .b64 %rd<8>;
                ld.param.u64 %rd1, [out];
                ld.param.u32 %r1, [base];
                mov.u32 %r2, %tid.x;
                mov.u32 %r3, %ctaid.x;
                mov.u32 %r4, %ntid.x;
                mad.lo.s32 %r5, %r3, %r4, %r2;
                mul.wide.u32 %rd2, %r5, 4;
                add.s64 %rd3, %rd1, %rd2;
                ld.global.u32 %r6, [%rd3];
                add.s32 %r7, %r1, %r5;
                add.s32 %r7, %r7, %r6;
                st.global.u32 [%rd3], %r7;
                ret;
            }
            """;

    /**
     * The parent: thread 0 of each block launches child<<<2, BLOCK>>>(out + 64 * ctaid, 1000 * (ctaid + 1)) twice. As nvcc
     * does, its call sequences reuse the names param0.. and retval0 with other sizes (one variable each, as large as the
     * largest: the 12-byte p1 is the launch's 8-byte stream argument too).
     */
    private static final String PARENT = """
            .visible .entry parent(.param .u64 out, .param .u64 errors)
            {
                .reg .pred %p<4>;
                .reg .b32 %r<16>;
                .reg .b64 %rd<16>;
                mov.u32 %r1, %tid.x;
                setp.ne.u32 %p1, %r1, 0;
                @%p1 bra DONE;
                ld.param.u64 %rd1, [out];
                ld.param.u64 %rd9, [errors];
                mov.u32 %r2, %ctaid.x;
                mul.wide.u32 %rd4, %r2, 256;
                add.s64 %rd5, %rd1, %rd4;
                add.s32 %r3, %r2, 1;
                mul.lo.s32 %r4, %r3, 1000;
                mov.u64 %rd2, child;
                mov.u32 %r10, 0;
            AGAIN:
                {
                .param .b64 p0;
                st.param.b64 [p0], %rd2;
                .param .align 4 .b8 p1[12];
                st.param.b32 [p1], 2;
                st.param.b32 [p1+4], 1;
                st.param.b32 [p1+8], 1;
                .param .align 4 .b8 p2[12];
                st.param.b32 [p2], BLOCK;
                st.param.b32 [p2+4], 1;
                st.param.b32 [p2+8], 1;
                .param .b32 p3;
                st.param.b32 [p3], 0;
                .param .b64 r0;
                call.uni (r0), cudaGetParameterBufferV2, (p0, p1, p2, p3);
                ld.param.b64 %rd3, [r0];
                }
                setp.eq.s64 %p2, %rd3, 0;
                @%p2 bra SKIP;
                st.u64 [%rd3], %rd5;
                st.u32 [%rd3+8], %r4;
                {
                .param .b64 p0;
                st.param.b64 [p0], %rd3;
                .param .b64 p1;
                st.param.b64 [p1], 0;
                .param .b32 r0;
                call.uni (r0), cudaLaunchDeviceV2, (p0, p1);
                ld.param.b32 %r5, [r0];
                }
            SKIP:
                {
                .param .b32 r0;
                call.uni (r0), cudaGetLastError, ();
                ld.param.b32 %r6, [r0];
                }
                mul.wide.u32 %rd6, %r2, 8;
                add.s64 %rd7, %rd9, %rd6;
                mul.wide.u32 %rd8, %r10, 4;
                add.s64 %rd7, %rd7, %rd8;
                st.global.u32 [%rd7], %r6;
                add.s32 %r10, %r10, 1;
                setp.lt.u32 %p3, %r10, 2;
                @%p3 bra AGAIN;
            DONE:
                ret;
            }
            """;

    @Test
    void childrenRunInOrderWithTheirParametersBeforeTheHostLaunchCompletes() {
        long module = rig.module(Rig.HEADER + RUNTIME + PARENT.replace("BLOCK", "32"));
        long f = rig.function(module, "parent");
        long out = rig.upload(new int[4 * 64]);
        long errors = rig.upload(new int[4 * 2]);
        rig.run(f, 4, 64, out, errors);
        int[] r = rig.ints(out, 4 * 64);
        for (int b = 0; b < 4; b++) {
            for (int i = 0; i < 64; i++) {
                assertEquals(2 * (1000 * (b + 1) + i), r[64 * b + i], "block " + b + " element " + i + ": both children ran");
            }
        }
        int[] e = rig.ints(errors, 8);
        for (int k = 0; k < 8; k++) {
            assertEquals(0, e[k], "cudaGetLastError after launch " + k);
        }
    }

    @Test
    void aBadConfigurationIsTheLaunchesErrorAndRunsNothing() {
        long module = rig.module(Rig.HEADER + RUNTIME + PARENT.replace("BLOCK", "2048"));
        long f = rig.function(module, "parent");
        long out = rig.upload(new int[4 * 64]);
        long errors = rig.upload(new int[4 * 2]);
        rig.run(f, 4, 64, out, errors);
        int[] r = rig.ints(out, 4 * 64);
        for (int i = 0; i < r.length; i++) {
            assertEquals(0, r[i], "nothing ran: element " + i);
        }
        int[] e = rig.ints(errors, 8);
        for (int k = 0; k < 8; k++) {
            assertEquals(9, e[k], "cudaErrorInvalidConfiguration from cudaGetLastError after launch " + k);
        }
    }
}
