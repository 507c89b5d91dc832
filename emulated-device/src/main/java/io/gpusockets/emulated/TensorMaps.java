package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import io.gpusockets.emulated.ptx.TensorMapLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress: each
 * input checked as cuda.h 13.0's comments on these functions state the driver's requirements (CUDA_ERROR_INVALID_VALUE
 * for any that fails), then written in this device's own 128-byte layout ({@link TensorMapLayout}), which its TMA
 * instructions read. The global address is only checked for alignment, as the driver does: a map is a value a program
 * may forge, and what it points at is checked when an instruction reaches it.
 */
final class TensorMaps {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;
    private static final long MAX_DIM = 1L << 32, MAX_STRIDE = 1L << 40;

    private TensorMaps() {
    }

    static void encodeTiled(MemorySegment map, int type, int rank, long address, MemorySegment globalDim,
                            MemorySegment globalStrides, MemorySegment boxDim, MemorySegment elementStrides, int interleave,
                            int swizzle, int l2, int oobFill) {
        MemorySegment out = common(map, type, rank, 1, interleave, swizzle, l2, oobFill);
        long[] dims = dims(type, rank, address, interleave, globalDim);
        long[] strides = strides(type, rank, interleave, globalStrides);
        int[] box = new int[rank];
        MemorySegment b = HostSegments.sized(boxDim, 4L * rank, "boxDim");
        for (int i = 0; i < rank; i++) {
            box[i] = b.get(INT, 4L * i);
            require(box[i] >= 1 && box[i] <= 256, "boxDim[" + i + "]=" + Integer.toUnsignedString(box[i]) + " (1..256)");
        }
        int bits = TensorMapLayout.elementBits(type);
        if (interleave == TensorMapLayout.INTERLEAVE_NONE) {
            require((long) box[0] * bits % 128 == 0, "boxDim[0]=" + box[0] + " elements are not a multiple of 16 bytes");
            innerFitsSwizzle((long) box[0] * bits / 8, swizzle);
        }
        if (type == TensorMapLayout.TYPE_16U4_ALIGN16B || type == TensorMapLayout.TYPE_16U6_ALIGN16B) {
            require(box[0] == 128, "boxDim[0]=" + box[0] + " (the packed 16-byte-aligned types need 128)");
        }
        int[] es = elementStrides(rank, elementStrides);
        TensorMapLayout.write(out, TensorMapLayout.KIND_TILED, rank, type, interleave, swizzle, l2, oobFill, 0, 0, address,
                dims, strides, box, es, 0, null, null);
    }

    static void encodeIm2col(MemorySegment map, int type, int rank, long address, MemorySegment globalDim,
                             MemorySegment globalStrides, MemorySegment lowerCorner, MemorySegment upperCorner,
                             int channelsPerPixel, int pixelsPerColumn, MemorySegment elementStrides, int interleave,
                             int swizzle, int l2, int oobFill) {
        MemorySegment out = common(map, type, rank, 3, interleave, swizzle, l2, oobFill);
        long[] dims = dims(type, rank, address, interleave, globalDim);
        long[] strides = strides(type, rank, interleave, globalStrides);
        int spatial = rank - 2;
        int limit = rank == 3 ? 32768 : rank == 4 ? 128 : 16;
        int[] lower = corner(lowerCorner, spatial, limit, "pixelBoxLowerCorner");
        int[] upper = corner(upperCorner, spatial, limit, "pixelBoxUpperCorner");
        pixels(type, channelsPerPixel, pixelsPerColumn, interleave, swizzle);
        int[] es = elementStrides(rank, elementStrides);
        TensorMapLayout.write(out, TensorMapLayout.KIND_IM2COL, rank, type, interleave, swizzle, l2, oobFill, 0,
                channelsPerPixel, address, dims, strides, null, es, pixelsPerColumn, lower, upper);
    }

    static void encodeIm2colWide(MemorySegment map, int type, int rank, long address, MemorySegment globalDim,
                                 MemorySegment globalStrides, int lowerWidth, int upperWidth, int channelsPerPixel,
                                 int pixelsPerColumn, MemorySegment elementStrides, int interleave, int mode, int swizzle,
                                 int l2, int oobFill) {
        MemorySegment out = common(map, type, rank, 3, interleave, swizzle, l2, oobFill);
        require(mode == 0 || mode == 1, "mode=" + mode + " is no CUtensorMapIm2ColWideMode");
        // only these: "other swizzle modes are not supported" (cuda.h on cuTensorMapEncodeIm2colWide)
        require(swizzle == TensorMapLayout.SWIZZLE_64B || swizzle == TensorMapLayout.SWIZZLE_128B || swizzle == 4,
                "swizzle=" + swizzle + " (im2col wide: 64B, 128B or 128B_ATOM_32B)");
        long[] dims = dims(type, rank, address, interleave, globalDim);
        long[] strides = strides(type, rank, interleave, globalStrides);
        require(lowerWidth >= -32768 && lowerWidth <= 32767, "pixelBoxLowerCornerWidth=" + lowerWidth);
        require(upperWidth >= -32768 && upperWidth <= 32767, "pixelBoxUpperCornerWidth=" + upperWidth);
        pixels(type, channelsPerPixel, mode == 1 ? 1 : pixelsPerColumn, interleave, swizzle);
        int[] es = elementStrides(rank, elementStrides);
        TensorMapLayout.write(out, TensorMapLayout.KIND_IM2COL_WIDE, rank, type, interleave, swizzle, l2, oobFill, mode,
                channelsPerPixel, address, dims, strides, null, es, pixelsPerColumn, new int[] {lowerWidth},
                new int[] {upperWidth});
    }

    /** Replaces the global address of a map this device encoded, under the alignment its encoder required. */
    static void replaceAddress(MemorySegment map, long address) {
        MemorySegment m = mapSegment(map);
        require(TensorMapLayout.valid(m), "tensorMap is not a map cuTensorMapEncode* wrote");
        TensorMapLayout.Map f = TensorMapLayout.read(m);
        address(f.dataType(), f.interleave(), address);
        TensorMapLayout.setAddress(m, address);
    }

    private static MemorySegment mapSegment(MemorySegment map) {
        MemorySegment m = HostSegments.sized(map, TensorMapLayout.SIZE, "tensorMap");
        require(!m.isNative() || (m.address() & 63) == 0, "tensorMap is not aligned to 64 bytes");
        return m;
    }

    /** The checks every encoder shares: the map, the enums, the rank. */
    private static MemorySegment common(MemorySegment map, int type, int rank, int minRank, int interleave, int swizzle,
                                        int l2, int oobFill) {
        MemorySegment out = mapSegment(map);
        require(type >= 0 && type <= 15, "tensorDataType=" + type + " is no CUtensorMapDataType");
        require(interleave >= 0 && interleave <= 2, "interleave=" + interleave + " is no CUtensorMapInterleave");
        require(swizzle >= 0 && swizzle <= 6, "swizzle=" + swizzle + " is no CUtensorMapSwizzle");
        require(l2 >= 0 && l2 <= 3, "l2Promotion=" + l2 + " is no CUtensorMapL2promotion");
        require(oobFill == 0 || oobFill == 1, "oobFill=" + oobFill + " is no CUtensorMapFloatOOBfill");
        int low = interleave != TensorMapLayout.INTERLEAVE_NONE ? Math.max(3, minRank) : minRank;
        require(rank >= low && rank <= 5, "tensorRank=" + Integer.toUnsignedString(rank) + " (" + low + "..5)");
        require(interleave != TensorMapLayout.INTERLEAVE_32B || swizzle == TensorMapLayout.SWIZZLE_32B,
                "interleave 32B needs swizzle 32B");
        require(type != TensorMapLayout.TYPE_16U6_ALIGN16B || interleave == TensorMapLayout.INTERLEAVE_NONE,
                "16U6_ALIGN16B needs interleave NONE");
        if (type == TensorMapLayout.TYPE_16U6_ALIGN16B) {
            require(swizzle == 0 || swizzle == 3 || swizzle == 4 || swizzle == 6, "swizzle=" + swizzle + " with 16U6_ALIGN16B");
        } else if (type == TensorMapLayout.TYPE_16U4_ALIGN16B) {
            require(swizzle == 0 || swizzle == 3 || swizzle == 4, "swizzle=" + swizzle + " with 16U4_ALIGN16B");
        }
        require(oobFill == 0 || TensorMapLayout.floating(type), "oobFill NAN_REQUEST_ZERO_FMA needs a floating-point type");
        return out;
    }

    private static void address(int type, int interleave, long address) {
        boolean wide = interleave == TensorMapLayout.INTERLEAVE_32B || type == TensorMapLayout.TYPE_16U4_ALIGN16B
                || type == TensorMapLayout.TYPE_16U6_ALIGN16B;
        require((address & (wide ? 31 : 15)) == 0, "globalAddress=0x" + Long.toHexString(address) + " is not aligned to "
                + (wide ? 32 : 16) + " bytes");
    }

    private static long[] dims(int type, int rank, long address, int interleave, MemorySegment globalDim) {
        address(type, interleave, address);
        MemorySegment d = HostSegments.sized(globalDim, 8L * rank, "globalDim");
        long[] dims = new long[rank];
        for (int i = 0; i < rank; i++) {
            dims[i] = d.get(LONG, 8L * i);
            require(dims[i] >= 1 && dims[i] <= MAX_DIM, "globalDim[" + i + "]=" + Long.toUnsignedString(dims[i]) + " (1..2^32)");
        }
        if (type == TensorMapLayout.TYPE_16U4_ALIGN16B || type == TensorMapLayout.TYPE_16U6_ALIGN16B) {
            require(dims[0] % 128 == 0, "globalDim[0]=" + dims[0] + " is not a multiple of 128");
        } else if (type == TensorMapLayout.TYPE_16U4_ALIGN8B) {
            require(dims[0] % 2 == 0, "globalDim[0]=" + dims[0] + " is not a multiple of 2");
        }
        return dims;
    }

    private static long[] strides(int type, int rank, int interleave, MemorySegment globalStrides) {
        long[] strides = new long[rank - 1];
        if (rank == 1) {
            return strides;
        }
        MemorySegment s = HostSegments.sized(globalStrides, 8L * (rank - 1), "globalStrides");
        int multiple = interleave == TensorMapLayout.INTERLEAVE_32B || type == TensorMapLayout.TYPE_16U4_ALIGN16B
                || type == TensorMapLayout.TYPE_16U6_ALIGN16B ? 32 : 16;
        for (int i = 0; i < rank - 1; i++) {
            strides[i] = s.get(LONG, 8L * i);
            require(strides[i] >= 0 && strides[i] < MAX_STRIDE && strides[i] % multiple == 0,
                    "globalStrides[" + i + "]=" + Long.toUnsignedString(strides[i]) + " (a multiple of " + multiple + ", < 2^40)");
        }
        return strides;
    }

    private static int[] elementStrides(int rank, MemorySegment elementStrides) {
        MemorySegment e = HostSegments.sized(elementStrides, 4L * rank, "elementStrides");
        int[] es = new int[rank];
        for (int i = 0; i < rank; i++) {
            es[i] = e.get(INT, 4L * i);
            require(es[i] >= 1 && es[i] <= 8, "elementStrides[" + i + "]=" + Integer.toUnsignedString(es[i]) + " (1..8)");
        }
        return es;
    }

    private static int[] corner(MemorySegment corner, int count, int limit, String what) {
        MemorySegment c = HostSegments.sized(corner, 4L * count, what);
        int[] v = new int[count];
        for (int i = 0; i < count; i++) {
            v[i] = c.get(INT, 4L * i);
            require(v[i] >= -limit && v[i] < limit, what + "[" + i + "]=" + v[i] + " (" + -limit + ".." + (limit - 1) + ")");
        }
        return v;
    }

    private static void pixels(int type, int channelsPerPixel, int pixelsPerColumn, int interleave, int swizzle) {
        require(channelsPerPixel >= 1 && channelsPerPixel <= 256, "channelsPerPixel=" + Integer.toUnsignedString(channelsPerPixel)
                + " (1..256)");
        require(pixelsPerColumn >= 1 && pixelsPerColumn <= 1024, "pixelsPerColumn=" + Integer.toUnsignedString(pixelsPerColumn)
                + " (1..1024)");
        if (type == TensorMapLayout.TYPE_16U4_ALIGN16B || type == TensorMapLayout.TYPE_16U6_ALIGN16B) {
            require(channelsPerPixel == 128, "channelsPerPixel=" + channelsPerPixel + " (the packed 16-byte-aligned types need 128)");
        }
        if (interleave == TensorMapLayout.INTERLEAVE_NONE) {
            innerFitsSwizzle((long) channelsPerPixel * TensorMapLayout.elementBits(type) / 8, swizzle);
        }
    }

    /** Without interleave, a swizzled box's inner dimension fits its swizzle span (32, 64 or 128 bytes). */
    private static void innerFitsSwizzle(long innerBytes, int swizzle) {
        long span = switch (swizzle) {
            case TensorMapLayout.SWIZZLE_NONE -> Long.MAX_VALUE;
            case TensorMapLayout.SWIZZLE_32B -> 32;
            case TensorMapLayout.SWIZZLE_64B -> 64;
            default -> 128;
        };
        require(innerBytes <= span, "the box's inner dimension of " + innerBytes + " bytes exceeds the swizzle span of " + span);
    }

    private static void require(boolean ok, String why) {
        if (!ok) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, why);
        }
    }
}
