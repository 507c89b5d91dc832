package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** %smid, %nsmid, %dynamic_smem_size, %total_smem_size and %gridid, under the engine this run uses. */
class SpecialRegistersTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    @Test
    void smAndSharedMemorySizesAreTheLaunchesAndTheDevicesOwn() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<16>;
                    .reg .b64 %rd<8>;
                    .shared .align 8 .b8 buf[1000];
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, %ctaid.x;
                    mov.u32 %r3, %ntid.x;
                    mad.lo.s32 %r4, %r2, %r3, %r1;
                    mul.wide.u32 %rd2, %r4, 20;
                    add.s64 %rd3, %rd1, %rd2;
                    mov.u32 %r5, %smid;
                    st.global.u32 [%rd3], %r5;
                    mov.u32 %r6, %nsmid;
                    st.global.u32 [%rd3+4], %r6;
                    mov.u32 %r7, %dynamic_smem_size;
                    st.global.u32 [%rd3+8], %r7;
                    mov.u32 %r8, %total_smem_size;
                    st.global.u32 [%rd3+12], %r8;
                    mov.u64 %rd4, %gridid;
                    cvt.u32.u64 %r9, %rd4;
                    st.global.u32 [%rd3+16], %r9;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        int blocks = 140;
        int threads = 40;
        long out = rig.upload(new int[blocks * threads * 5]);
        rig.ok(rig.launch(f, new int[] {blocks, 1, 1}, new int[] {threads, 1, 1}, 100, out));
        rig.ok(rig.device.cuCtxSynchronize());
        int[] r = rig.ints(out, blocks * threads * 5);
        for (int b = 0; b < blocks; b++) {
            for (int t = 0; t < threads; t++) {
                int i = 5 * (b * threads + t);
                assertEquals(b % 132, r[i], "%smid: the block's index modulo the SM count, block " + b);
                assertEquals(132, r[i + 1], "%nsmid: the device's multiprocessor count");
                assertEquals(100, r[i + 2], "%dynamic_smem_size: the launch's sharedMemBytes");
                // 1000 static bytes; the dynamic ones start 16-aligned after them
                assertEquals(1008 + 100, r[i + 3], "%total_smem_size: static and dynamic");
                assertEquals(0, r[i + 4], "%gridid");
            }
        }
    }
}
