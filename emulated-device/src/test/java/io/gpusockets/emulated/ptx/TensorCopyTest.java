package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Tile-mode TMA (cp.async.bulk.tensor and cp.reduce.async.bulk.tensor, {@link TensorCopy}) on maps the device's own
 * cuTensorMapEncodeTiled wrote, each result computed again here element by element. Runs with both engines (the
 * module's surefire setup runs this package twice).
 */
class TensorCopyTest {
    private static final int U32 = 2;
    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    /**
     * A kernel whose thread 0 loads one box into {@code tile} (1024-aligned) completing an mbarrier, after which every
     * thread copies the tile's first {@code words} words to out. {@code mapAddress} sets %rd2 to the map's address.
     */
    private static String loadKernel(int dims, String mapAddress, int[] coords) {
        StringBuilder c = new StringBuilder();
        StringBuilder regs = new StringBuilder();
        for (int i = 0; i < dims; i++) {
            c.append("    mov.u32 %r").append(30 + i).append(", ").append(coords[i]).append(";\n");
            regs.append(i == 0 ? "" : ", ").append("%r").append(30 + i);
        }
        return """
                .visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128], .param .u32 words, .param .u64 gmap)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<40>;
                    .reg .b64 %rd<12>;
                    .shared .align 8 .u64 bar;
                    .shared .align 1024 .b8 tile[8192];
                    ld.param.u64 %rd1, [out];
                    ld.param.u32 %r20, [words];
                """ + mapAddress + """
                    mov.u32 %r1, %tid.x;
                    setp.ne.u32 %p1, %r1, 0;
                    @%p1 bra WAIT;
                    mov.u32 %r4, bar;
                    mbarrier.init.shared.b64 [%r4], 1;
                    fence.proxy.async.shared::cta;
                    mov.u32 %r5, tile;
                """ + c + "    cp.async.bulk.tensor." + dims + "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r5], [%rd2, {"
                + regs + "}], [%r4];\n" + """
                    shl.b32 %r21, %r20, 2;
                    mbarrier.arrive.expect_tx.shared::cta.b64 %rd4, [%r4], %r21;
                WAIT:
                    bar.sync 0;
                    mov.u32 %r8, bar;
                LOOP:
                    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
                    @!%p3 bra LOOP;
                    mov.u32 %r9, %tid.x;
                COPY:
                    setp.ge.u32 %p2, %r9, %r20;
                    @%p2 bra DONE;
                    mov.u32 %r10, tile;
                    shl.b32 %r11, %r9, 2;
                    add.s32 %r12, %r10, %r11;
                    ld.shared.u32 %r13, [%r12];
                    mul.wide.u32 %rd5, %r9, 4;
                    add.s64 %rd6, %rd1, %rd5;
                    st.global.u32 [%rd6], %r13;
                    mov.u32 %r14, %ntid.x;
                    add.u32 %r9, %r9, %r14;
                    bra COPY;
                DONE:
                    ret;
                }
                """;
    }

    /** Every thread fills tile word i with 1000 + i; thread 0 then stores (or reduces: {@code op}) the box at coords. */
    private static String storeKernel(int dims, String op, int[] coords) {
        StringBuilder c = new StringBuilder();
        StringBuilder regs = new StringBuilder();
        for (int i = 0; i < dims; i++) {
            c.append("    mov.u32 %r").append(30 + i).append(", ").append(coords[i]).append(";\n");
            regs.append(i == 0 ? "" : ", ").append("%r").append(30 + i);
        }
        return """
                .visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128], .param .u32 words, .param .u64 gmap)
                {
                    .reg .pred %p<4>;
                    .reg .b32 %r<40>;
                    .reg .b64 %rd<12>;
                    .shared .align 1024 .b8 tile[8192];
                    ld.param.u32 %r20, [words];
                    mov.u32 %r9, %tid.x;
                FILL:
                    setp.ge.u32 %p2, %r9, %r20;
                    @%p2 bra FILLED;
                    mov.u32 %r10, tile;
                    shl.b32 %r11, %r9, 2;
                    add.s32 %r12, %r10, %r11;
                    add.u32 %r13, %r9, 1000;
                    st.shared.u32 [%r12], %r13;
                    mov.u32 %r14, %ntid.x;
                    add.u32 %r9, %r9, %r14;
                    bra FILL;
                FILLED:
                    bar.sync 0;
                    fence.proxy.async.shared::cta;
                    mov.u32 %r1, %tid.x;
                    setp.ne.u32 %p1, %r1, 0;
                    @%p1 bra DONE;
                    mov.u64 %rd2, tmap;
                    mov.u32 %r5, tile;
                """ + c + "    " + op + "." + dims + "d.global.shared::cta.tile.bulk_group [%rd2, {" + regs + "}], [%r5];\n" + """
                    cp.async.bulk.commit_group;
                    cp.async.bulk.wait_group.read 0;
                DONE:
                    ret;
                }
                """;
    }

    private MemorySegment tiled(int type, long address, long[] dims, long[] strides, int[] box, int[] elementStrides,
                                int interleave, int swizzle) {
        MemorySegment map = rig.arena.allocate(128, 64);
        rig.ok(rig.device.cuTensorMapEncodeTiled(map, type, dims.length, address, rig.arena.allocateFrom(ValueLayout.JAVA_LONG, dims),
                strides.length == 0 ? MemorySegment.NULL : rig.arena.allocateFrom(ValueLayout.JAVA_LONG, strides),
                rig.arena.allocateFrom(ValueLayout.JAVA_INT, box), rig.arena.allocateFrom(ValueLayout.JAVA_INT, elementStrides),
                interleave, swizzle, 0, 0));
        return map;
    }

    /** A u32 tensor whose element at (x, y, z) is 100000 z + 1000 y + x. */
    private long tensor(int w, int h, int d) {
        int[] v = new int[w * h * d];
        for (int i = 0; i < v.length; i++) {
            v[i] = value(i % w, i / w % h, i / (w * h));
        }
        return rig.upload(v);
    }

    private static int value(int x, int y, int z) {
        return 100000 * z + 1000 * y + x;
    }

    private int[] load(String kernel, MemorySegment map, int words, long gmap) {
        long f = rig.function(rig.module(Rig.HEADER + kernel), "k");
        long out = rig.upload(new int[words]);
        long compiled = PtxEngine.statistics().compiledLaunches();
        rig.run(f, 1, 128, out, map, words, gmap);
        if (PtxEngine.current() != PtxEngine.INTERPRETER) {
            assertEquals(compiled + 1, PtxEngine.statistics().compiledLaunches(), "the launch ran compiled");
        }
        return rig.ints(out, words);
    }

    @Test
    void loads2dBoxesZeroFillingWhatLiesOutsideTheTensor() {
        long t = tensor(20, 10, 1);
        MemorySegment map = tiled(U32, t, new long[] {20, 10}, new long[] {80}, new int[] {8, 4}, new int[] {1, 1}, 0, 0);
        for (int[] at : new int[][] {{16, 8}, {-4, -2}, {4, 3}}) {
            int[] got = load(loadKernel(2, "    mov.u64 %rd2, tmap;\n", at), map, 32, 0L);
            for (int y = 0; y < 4; y++) {
                for (int x = 0; x < 8; x++) {
                    int gx = at[0] + x, gy = at[1] + y;
                    int want = gx >= 0 && gx < 20 && gy >= 0 && gy < 10 ? value(gx, gy, 0) : 0;
                    assertEquals(want, got[y * 8 + x], "box at " + at[0] + "," + at[1] + ": element " + x + "," + y);
                }
            }
        }
    }

    @Test
    void swizzle128BXorsEachChunkWithItsRowThroughCvtaParam() {
        long t = tensor(64, 16, 1);
        MemorySegment map = tiled(U32, t, new long[] {64, 16}, new long[] {256}, new int[] {32, 8}, new int[] {1, 1}, 0, 3);
        int[] got = load(loadKernel(2, "    mov.u64 %rd2, tmap;\n    cvta.param.u64 %rd2, %rd2;\n", new int[] {32, 4}), map, 256, 0L);
        int[] want = new int[256];
        for (int y = 0; y < 8; y++) {
            for (int x = 0; x < 32; x++) {
                long offset = (y * 32L + x) * 4;
                want[(int) (TensorCopy.swizzle(offset, 3) / 4)] = value(32 + x, 4 + y, 0);
            }
        }
        assertArrayEquals(want, got);
        // the pattern itself: in 128-byte row 1, 16-byte chunk 0 lands in chunk 1 (bits [4:6] ^= bits [7:9])
        assertEquals(128 + 16, TensorCopy.swizzle(128, 3));
        assertEquals(256 + 32 + 4, TensorCopy.swizzle(256 + 4, 2));
        assertEquals(128 + 16 + 8, TensorCopy.swizzle(128 + 8, 1));
    }

    @Test
    void loads3dBoxesWithElementStridesFromAMapInGlobalMemory() {
        long t = tensor(8, 6, 5);
        MemorySegment map = tiled(U32, t, new long[] {8, 6, 5}, new long[] {32, 192}, new int[] {8, 4, 3}, new int[] {1, 2, 1}, 0, 0);
        long gmap = rig.upload(map);
        int[] got = load(loadKernel(3, "    ld.param.u64 %rd2, [gmap];\n", new int[] {0, 1, 3}), map, 8 * 2 * 3, gmap);
        int i = 0;
        for (int z = 0; z < 3; z++) {
            for (int y = 0; y < 2; y++) {
                for (int x = 0; x < 8; x++) {
                    int gy = 1 + 2 * y, gz = 3 + z;
                    assertEquals(gz < 5 ? value(x, gy, gz) : 0, got[i++], "element " + x + "," + y + "," + z);
                }
            }
        }
    }

    @Test
    void storesWriteOnlyTheElementsInsideTheTensorUnswizzling64B() {
        int[] sentinel = new int[20 * 6];
        java.util.Arrays.fill(sentinel, -7);
        long t = rig.upload(sentinel);
        MemorySegment map = tiled(U32, t, new long[] {20, 6}, new long[] {80}, new int[] {16, 4}, new int[] {1, 1}, 0, 2);
        long f = rig.function(rig.module(Rig.HEADER + storeKernel(2, "cp.async.bulk.tensor", new int[] {8, 4})), "k");
        rig.run(f, 1, 64, 0L, map, 64, 0L);
        int[] got = rig.ints(t, 20 * 6);
        for (int y = 0; y < 6; y++) {
            for (int x = 0; x < 20; x++) {
                int bx = x - 8, by = y - 4;
                int want = -7;
                if (bx >= 0 && bx < 16 && by >= 0 && by < 4) {
                    want = 1000 + (int) (TensorCopy.swizzle((by * 16L + bx) * 4, 2) / 4);
                }
                assertEquals(want, got[y * 20 + x], "element " + x + "," + y);
            }
        }
    }

    @Test
    void reduceAddCombinesTheBoxWithGlobalMemory() {
        int[] start = new int[16 * 4];
        for (int i = 0; i < start.length; i++) {
            start[i] = 5 * i;
        }
        long t = rig.upload(start);
        MemorySegment map = tiled(U32, t, new long[] {16, 4}, new long[] {64}, new int[] {8, 2}, new int[] {1, 1}, 0, 0);
        long f = rig.function(rig.module(Rig.HEADER + storeKernel(2, "cp.reduce.async.bulk.tensor", new int[] {12, 3})
                .replace(".global.shared::cta.tile", ".global.shared::cta.add.tile")), "k");
        rig.run(f, 1, 32, 0L, map, 16, 0L);
        int[] got = rig.ints(t, 16 * 4);
        for (int y = 0; y < 4; y++) {
            for (int x = 0; x < 16; x++) {
                int bx = x - 12, by = y - 3;
                int add = bx >= 0 && bx < 8 && by >= 0 && by < 2 ? 1000 + by * 8 + bx : 0;
                assertEquals(5 * (y * 16 + x) + add, got[y * 16 + x], "element " + x + "," + y);
            }
        }
    }

    @Test
    void anInterleavedMapFailsTheLaunchAsNotSupported() {
        long t = tensor(4, 4, 4);
        MemorySegment map = tiled(U32, t, new long[] {4, 4, 4}, new long[] {16, 64}, new int[] {4, 4, 4}, new int[] {1, 1, 1}, 1, 0);
        long f = rig.function(rig.module(Rig.HEADER + loadKernel(3, "    mov.u64 %rd2, tmap;\n", new int[] {0, 0, 0})), "k");
        long out = rig.upload(new int[64]);
        rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {32, 1, 1}, 0, out, map, 64, 0L));
        assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, rig.device.cuCtxSynchronize());
    }
}
