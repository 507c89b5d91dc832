package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.emulated.ptx.TensorMapLayout;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * cuTensorMapEncodeTiled/Im2col/Im2colWide and cuTensorMapReplaceAddress on the emulated device: the inputs cuda.h
 * 13.0 documents as invalid get CUDA_ERROR_INVALID_VALUE, valid ones are written in {@link TensorMapLayout} and read
 * back field by field, and a replaced address changes nothing else.
 */
class TensorMapsTest {
    private static final int U32 = 2, F32 = 7, F16 = 6;
    private static final long ADDRESS = 0x7e00_0000_1000L;

    /** One tiled encode's inputs, each test changing one of them from this base. */
    private static final class Tiled {
        int type = F32, rank = 2, interleave, swizzle, l2, oob;
        long address = ADDRESS;
        long[] dims = {64, 32};
        long[] strides = {256};
        int[] box = {32, 8};
        int[] es = {1, 1};
    }

    private static int encode(Emulated e, MemorySegment map, Tiled t) {
        return e.device.cuTensorMapEncodeTiled(map, t.type, t.rank, t.address, e.arena.allocateFrom(JAVA_LONG, t.dims),
                e.arena.allocateFrom(JAVA_LONG, t.strides.length == 0 ? new long[1] : t.strides),
                e.arena.allocateFrom(JAVA_INT, t.box), e.arena.allocateFrom(JAVA_INT, t.es), t.interleave, t.swizzle, t.l2, t.oob);
    }

    private static void invalid(Emulated e, String why, java.util.function.Consumer<Tiled> change) {
        Tiled t = new Tiled();
        change.accept(t);
        assertEquals(CUDA_ERROR_INVALID_VALUE, encode(e, e.arena.allocate(128, 64), t), why);
    }

    @Test
    void tiledEncodingRefusesWhatTheDriverDocumentsAsInvalid() {
        try (Emulated e = new Emulated()) {
            e.ok(encode(e, e.arena.allocate(128, 64), new Tiled()));
            invalid(e, "rank 0", t -> t.rank = 0);
            invalid(e, "rank 6", t -> {
                t.rank = 6;
                t.dims = new long[] {1, 1, 1, 1, 1, 1};
                t.strides = new long[] {16, 16, 16, 16, 16};
                t.box = new int[] {4, 1, 1, 1, 1, 1};
                t.es = new int[] {1, 1, 1, 1, 1, 1};
            });
            invalid(e, "address not 16-aligned", t -> t.address = ADDRESS + 8);
            invalid(e, "interleave 32B: address not 32-aligned", t -> {
                t.interleave = 2;
                t.swizzle = 1;
                t.rank = 3;
                t.dims = new long[] {64, 32, 2};
                t.strides = new long[] {256, 8192};
                t.box = new int[] {8, 8, 1};
                t.es = new int[] {1, 1, 1};
                t.address = ADDRESS + 16;
            });
            invalid(e, "interleave with rank 2", t -> t.interleave = 1);
            invalid(e, "a dimension of 0", t -> t.dims = new long[] {0, 32});
            invalid(e, "a dimension over 2^32", t -> t.dims = new long[] {(1L << 32) + 1, 32});
            invalid(e, "a stride not a multiple of 16", t -> t.strides = new long[] {264 - 4});
            invalid(e, "a stride of 2^40", t -> t.strides = new long[] {1L << 40});
            invalid(e, "a box of 0", t -> t.box = new int[] {32, 0});
            invalid(e, "a box of 257", t -> t.box = new int[] {32, 257});
            invalid(e, "an inner box not a multiple of 16 bytes", t -> t.box = new int[] {6, 8});
            invalid(e, "an element stride of 0", t -> t.es = new int[] {1, 0});
            invalid(e, "an element stride of 9", t -> t.es = new int[] {1, 9});
            invalid(e, "an inner box of 256 bytes with swizzle 128B", t -> {
                t.box = new int[] {64, 8};
                t.swizzle = 3;
            });
            invalid(e, "an inner box of 128 bytes with swizzle 64B", t -> t.swizzle = 2);
            invalid(e, "an inner box of 64 bytes with swizzle 32B", t -> {
                t.box = new int[] {16, 8};
                t.swizzle = 1;
            });
            invalid(e, "a NaN fill of an integer type", t -> {
                t.type = U32;
                t.oob = 1;
            });
            invalid(e, "no such data type", t -> t.type = 16);
            invalid(e, "no such swizzle", t -> t.swizzle = 7);
            invalid(e, "no such interleave", t -> t.interleave = 3);
            invalid(e, "no such L2 promotion", t -> t.l2 = 4);
            invalid(e, "no such OOB fill", t -> t.oob = 2);
            Tiled ok = new Tiled();
            assertEquals(CUDA_ERROR_INVALID_VALUE, encode(e, e.arena.allocate(256, 64).asSlice(32, 128), ok), "a map not 64-aligned");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeTiled(e.arena.allocate(128, 64), F32, 2, ADDRESS,
                    MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, 0, 0, 0, 0), "NULL arrays");
        }
    }

    @Test
    void aTiledMapHoldsItsFieldsAndReplaceAddressChangesOnlyTheAddress() {
        try (Emulated e = new Emulated()) {
            Tiled t = new Tiled();
            t.type = F16;
            t.rank = 3;
            t.dims = new long[] {128, 10, 7};
            t.strides = new long[] {256, 2560};
            t.box = new int[] {64, 4, 2};
            t.es = new int[] {1, 2, 1};
            t.swizzle = 3;
            t.l2 = 2;
            t.oob = 1;
            MemorySegment map = e.arena.allocate(128, 64);
            e.ok(encode(e, map, t));
            TensorMapLayout.Map m = TensorMapLayout.read(map);
            assertEquals(TensorMapLayout.KIND_TILED, m.kind());
            assertEquals(3, m.rank());
            assertEquals(F16, m.dataType());
            assertEquals(ADDRESS, m.address());
            assertArrayEquals(t.dims, m.dims());
            assertArrayEquals(new long[] {2, 256, 2560}, m.strides());
            assertArrayEquals(t.box, m.box());
            assertArrayEquals(t.es, m.elementStrides());
            assertEquals(3, m.swizzle());
            assertEquals(2, m.l2());
            assertEquals(1, m.oobFill());

            byte[] before = map.toArray(JAVA_BYTE);
            e.ok(e.device.cuTensorMapReplaceAddress(map, ADDRESS + 0x4000));
            assertEquals(ADDRESS + 0x4000, TensorMapLayout.read(map).address());
            byte[] after = map.toArray(JAVA_BYTE);
            for (int i = 0; i < 128; i++) {
                if (i < 16 || i >= 24) {
                    assertEquals(before[i], after[i], "byte " + i + " beside the address");
                }
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapReplaceAddress(map, ADDRESS + 8), "not 16-aligned");
            assertEquals(ADDRESS + 0x4000, TensorMapLayout.read(map).address(), "unchanged by the refused call");
            MemorySegment forged = e.arena.allocate(128, 64);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapReplaceAddress(forged, ADDRESS), "not a map this device wrote");
        }
    }

    @Test
    void im2colEncodersCheckTheirRanksAndCorners() {
        try (Emulated e = new Emulated()) {
            MemorySegment map = e.arena.allocate(128, 64);
            MemorySegment dims = e.arena.allocateFrom(JAVA_LONG, 16, 8, 8, 2);
            MemorySegment strides = e.arena.allocateFrom(JAVA_LONG, 32, 256, 2048);
            MemorySegment es = e.arena.allocateFrom(JAVA_INT, 1, 1, 1, 1);
            e.ok(e.device.cuTensorMapEncodeIm2col(map, F16, 4, ADDRESS, dims, strides, e.arena.allocateFrom(JAVA_INT, -1, -1),
                    e.arena.allocateFrom(JAVA_INT, 1, 1), 16, 64, es, 0, 0, 0, 0));
            TensorMapLayout.Map m = TensorMapLayout.read(map);
            assertEquals(TensorMapLayout.KIND_IM2COL, m.kind());
            assertEquals(16, m.channelsPerPixel());
            assertEquals(64, m.pixelsPerColumn());
            assertArrayEquals(new int[] {-1, -1, 0}, m.lower());
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeIm2col(map, F16, 4, ADDRESS, dims, strides,
                    e.arena.allocateFrom(JAVA_INT, -129, 0), e.arena.allocateFrom(JAVA_INT, 1, 1), 16, 64, es, 0, 0, 0, 0),
                    "a rank-4 corner outside [-128, 127]");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeIm2col(map, F16, 2, ADDRESS, dims, strides,
                    e.arena.allocateFrom(JAVA_INT, 0), e.arena.allocateFrom(JAVA_INT, 0), 16, 64, es, 0, 0, 0, 0), "rank 2");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeIm2col(map, F16, 4, ADDRESS, dims, strides,
                    e.arena.allocateFrom(JAVA_INT, 0, 0), e.arena.allocateFrom(JAVA_INT, 0, 0), 257, 64, es, 0, 0, 0, 0),
                    "257 channels per pixel");
            e.ok(e.device.cuTensorMapEncodeIm2colWide(map, F16, 4, ADDRESS, dims, strides, -3, 3, 16, 64, es, 0, 0, 3, 0, 0));
            assertEquals(TensorMapLayout.KIND_IM2COL_WIDE, TensorMapLayout.read(map).kind());
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeIm2colWide(map, F16, 4, ADDRESS, dims, strides, -3, 3,
                    16, 64, es, 0, 0, 0, 0, 0), "im2col wide without a swizzle it takes");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTensorMapEncodeIm2colWide(map, F16, 4, ADDRESS, dims, strides, -3, 3,
                    16, 64, es, 0, 2, 3, 0, 0), "no such wide mode");
        }
    }
}
