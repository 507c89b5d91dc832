package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** .param, .global (variables too), .const, .shared, .local and generic addressing; faults; unsupported code. */
class MemorySpacesTest {
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    @Test
    void genericAddressesOfSharedLocalAndModuleVariablesResolveToTheirSpaces() {
        String ptx = Rig.HEADER + """
                .global .align 4 .u32 counter = 41;
                .const .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};
                .visible .entry k(.param .u64 out, .param .align 8 .b8 pair[8])
                {
                    .local .align 8 .b8 depot[16];
                    .shared .align 8 .b8 sh[64];
                    .reg .b32 %r<16>;
                    .reg .b64 %rd<16>;
                    ld.param.u64 %rd1, [out];
                    ld.param.v2.u32 {%r1, %r2}, [pair];
                    mov.u64 %rd2, depot;
                    cvta.local.u64 %rd3, %rd2;
                    st.u32 [%rd3+8], %r1;
                    ld.local.u32 %r3, [depot+8];
                    mov.u64 %rd4, sh;
                    cvta.shared.u64 %rd5, %rd4;
                    st.v2.u32 [%rd5+16], {%r2, %r3};
                    ld.shared.v2.u32 {%r4, %r5}, [sh+16];
                    cvta.to.shared.u64 %rd6, %rd5;
                    ld.shared.u32 %r6, [%rd6+20];
                    ld.global.u32 %r7, [counter];
                    add.s32 %r7, %r7, 1;
                    mov.u64 %rd7, counter;
                    st.u32 [%rd7], %r7;
                    ld.const.u8 %r8, [table+6];
                    mov.b64 %rd8, {%r4, %r5};
                    st.global.v4.u32 [%rd1], {%r4, %r5, %r6, %r7};
                    st.global.u32 [%rd1+16], %r8;
                    st.global.u64 [%rd1+24], %rd8;
                    ret;
                }
                """;
        long m = rig.module(ptx);
        long f = rig.function(m, "k");
        long out = rig.upload(new int[8]);
        MemorySegment pointers = rig.arena.allocate(16, 8);
        pointers.setAtIndex(ValueLayout.ADDRESS, 0, rig.arena.allocateFrom(ValueLayout.JAVA_LONG, out));
        pointers.setAtIndex(ValueLayout.ADDRESS, 1, rig.arena.allocateFrom(ValueLayout.JAVA_INT, 5, 9));
        rig.ok(rig.device.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, MemorySegment.ofAddress(pointers.address()), MemorySegment.NULL));
        rig.ok(rig.device.cuCtxSynchronize());
        int[] r = rig.ints(out, 8);
        assertArrayEquals(new int[] {9, 5, 5, 42, 7, 0, 9, 5}, r);
        MemorySegment addr = rig.arena.allocate(8);
        MemorySegment size = rig.arena.allocate(8);
        rig.ok(rig.device.cuModuleGetGlobal(addr, size, m, MemorySegment.ofAddress(rig.arena.allocateFrom("counter").address())));
        assertEquals(42, rig.ints(addr.get(ValueLayout.JAVA_LONG, 0), 1)[0], "the kernel wrote the variable cuModuleGetGlobal finds");
    }

    @Test
    void anOutOfBoundsGlobalStoreBecomesTheStickyIllegalAddress() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    st.global.u32 [%rd1+4096], 1;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.alloc(4096);
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, out));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize());
        assertTrue(rig.device.lastErrorDetail().contains("0x" + Long.toHexString(out + 4096)), rig.device.lastErrorDetail());
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize(), "sticky");
    }

    @Test
    void sharedMemoryPastTheDynamicSizeFaults() {
        String ptx = Rig.HEADER + """
                .extern .shared .align 16 .b8 dyn[];
                .visible .entry k()
                {
                    .reg .b32 %r<4>;
                    mov.u32 %r1, dyn;
                    st.shared.u32 [%r1+256], 1;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 260));
        rig.ok(rig.device.cuCtxSynchronize());
        long g = rig.function(rig.module(ptx), "k");
        rig.ok(rig.launch(g, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 256));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rig.device.cuCtxSynchronize());
        assertTrue(rig.device.lastErrorDetail().contains(".shared address=0x100"), rig.device.lastErrorDetail());
    }

    @Test
    void anUnsupportedModifierFailsTheLaunchNamingItAndItsLineAndRunsNothing() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .f32 %f<4>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [out];
                    st.global.u32 [%rd1], 7;
                    add.rz.s32 %f1, %f2, %f3;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[1]);
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, out));
        String detail = rig.device.lastErrorDetail();
        assertTrue(detail.contains("line 10") && detail.contains("add.rz.s32") && detail.contains(".rz"), detail);
        rig.ok(rig.device.cuCtxSynchronize());
        assertEquals(0, rig.ints(out, 1)[0], "no part of the kernel ran");
    }

    @Test
    void aModifierTheInterpreterDoesNotKnowIsNeverIgnored() {
        String ptx = Rig.HEADER + """
                .visible .entry k()
                {
                    .reg .f32 %f<4>;
                    max.NaN.f32 %f1, %f2, %f3;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        assertEquals(CUDA_ERROR_NOT_SUPPORTED, rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0));
        assertTrue(rig.device.lastErrorDetail().contains("modifier .NaN"), rig.device.lastErrorDetail());
    }
}
