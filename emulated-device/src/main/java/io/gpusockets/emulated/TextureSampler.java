package io.gpusockets.emulated;

import io.gpusockets.emulated.ptx.TextureUnit;
import io.gpusockets.protocol.structs.Array3DDescriptor.Shape;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * How a texture object samples (tex): its texels' layout and format, and its CUDA_TEXTURE_DESC (address
 * modes, filtering, read mode, normalized coordinates, border color). The arithmetic is the one the
 * CUDA C++ Programming Guide documents in its appendix "Texture Fetching": nearest-point sampling
 * {@code T[floor(x)]}; linear filtering {@code (1-α)T[i] + αT[i+1]} with {@code i = floor(xB)},
 * {@code α = frac(xB)}, {@code xB = x - 0.5}, and α, β, γ held in 9-bit fixed point with 8 fractional bits
 * (here: rounded to the nearest 1/256, ties to even); its address modes (wrap and mirror with normalized coordinates
 * only), its table of cubemap faces, and its conversions of 8- and 16-bit integers to normalized floats
 * ({@code cudaReadModeNormalizedFloat}). Not emulated, so refused when the object is created: sRGB
 * conversion, seamless cubemap filtering, resource views, linear filtering of integer reads.
 */
final class TextureSampler {
    static final int ADDRESS_WRAP = 0;
    static final int ADDRESS_CLAMP = 1;
    static final int ADDRESS_MIRROR = 2;
    static final int ADDRESS_BORDER = 3;
    static final int FLAG_READ_AS_INTEGER = 0x01;
    static final int FLAG_NORMALIZED_COORDINATES = 0x02;
    static final int FLAG_SRGB = 0x10;
    static final int FLAG_DISABLE_TRILINEAR_OPTIMIZATION = 0x20;
    static final int FLAG_SEAMLESS_CUBEMAP = 0x40;

    /** CUDA_TEXTURE_DESC offsets (cuda.h 13.0): addressMode[3], filterMode, flags, maxAnisotropy, mipmap fields, borderColor[4]. */
    static final long ADDRESS_MODE = 0, FILTER_MODE = 12, FLAGS = 16, MIPMAP_FILTER_MODE = 24, MIPMAP_BIAS = 28,
            MIN_LEVEL_CLAMP = 32, MAX_LEVEL_CLAMP = 36, BORDER_COLOR = 40;

    /** What the texels are: an array of a shape, or linear / pitch-2D device memory. */
    enum Source { ARRAY, LINEAR, PITCH2D }

    final Source source;
    /** The array's shape; null for device memory (LINEAR reads as 1D, PITCH2D as 2D). */
    final Shape shape;
    final int format;
    final int channels;
    final int elementBytes;
    final long width;
    final long height;
    /** Slices: 3D depth, layers, 6 faces per cubemap layer; 1 for the others. */
    final long slices;
    /** Bytes from one row to the next (an array's row, a pitch-2D resource's pitch). */
    final long pitch;
    final int[] addressModes = new int[3];
    final boolean linearFilter;
    final boolean normalizedCoords;
    /** Integer formats of 8 and 16 bits read as normalized floats (the normalized formats always). */
    final boolean normalizedRead;
    /** Whether results are integers (the 32-bit integer formats, and the others under READ_AS_INTEGER). */
    final boolean integerResult;
    final float[] border = new float[4];

    TextureSampler(Source source, Shape shape, int format, int channels, long width, long height, long slices, long pitch,
                   MemorySegment textureDesc) {
        this.source = source;
        this.shape = shape;
        this.format = format;
        this.channels = channels;
        this.elementBytes = ArrayDescriptor.elementBytes(format, channels);
        this.width = width;
        this.height = Math.max(height, 1);
        this.slices = Math.max(slices, 1);
        this.pitch = pitch;
        for (int k = 0; k < 3; k++) {
            addressModes[k] = textureDesc.get(ValueLayout.JAVA_INT_UNALIGNED, ADDRESS_MODE + 4L * k);
            if (addressModes[k] < ADDRESS_WRAP || addressModes[k] > ADDRESS_BORDER) {
                throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, "addressMode[" + k + "]=" + addressModes[k]);
            }
        }
        int filter = textureDesc.get(ValueLayout.JAVA_INT_UNALIGNED, FILTER_MODE);
        if (filter != 0 && filter != 1) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, "filterMode=" + filter);
        }
        int flags = textureDesc.get(ValueLayout.JAVA_INT_UNALIGNED, FLAGS);
        if ((flags & (FLAG_SRGB | FLAG_SEAMLESS_CUBEMAP)) != 0) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "sRGB conversion and seamless cubemap filtering are not emulated (flags=0x" + Integer.toHexString(flags) + ")");
        }
        this.linearFilter = filter == 1;
        this.normalizedCoords = (flags & FLAG_NORMALIZED_COORDINATES) != 0;
        boolean small = ArrayDescriptor.channelBytes(format) < 4 && format != 0x10;   // 8/16-bit integers and normalized formats
        boolean normalizedFormat = ArrayDescriptor.impliedChannels(format) != 0;
        this.normalizedRead = normalizedFormat || small && (flags & FLAG_READ_AS_INTEGER) == 0;
        this.integerResult = !normalizedRead && format != 0x10 && format != 0x20;
        if (linearFilter && integerResult) {
            throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "linear filtering of a texture read as integers (filterMode=LINEAR with an integer result) is not emulated");
        }
        for (int k = 0; k < 4; k++) {
            border[k] = textureDesc.get(ValueLayout.JAVA_FLOAT_UNALIGNED, BORDER_COLOR + 4L * k);
        }
    }

    /** Bytes of device memory a LINEAR or PITCH2D source reads. */
    long deviceBytes() {
        return source == Source.LINEAR ? width * elementBytes : (height - 1) * pitch + width * elementBytes;
    }

    /** The geometry a tex instruction must name for this texture (the PTX ISA's texture geometries). */
    int geometry() {
        if (shape == null) {
            return source == Source.LINEAR ? TextureUnit.G1D : TextureUnit.G2D;
        }
        return switch (shape) {
            case ONE_D -> TextureUnit.G1D;
            case TWO_D -> TextureUnit.G2D;
            case THREE_D -> TextureUnit.G3D;
            case LAYERED_1D -> TextureUnit.A1D;
            case LAYERED_2D -> TextureUnit.A2D;
            case CUBEMAP -> TextureUnit.CUBE;
            case CUBEMAP_LAYERED -> TextureUnit.ACUBE;
        };
    }

    // ---- one fetch ----------------------------------------------------------------------------------

    /**
     * tex on {@code data} (the texels, from the first): the four results into {@code out} as 32-bit values
     * (f32 bits, or the integers).
     */
    void sample(MemorySegment data, boolean integerCoords, float x, float y, float z, int ix, int iy, int iz, int layer,
                long[] out) {
        float[] v = new float[4];
        int[] iv = new int[4];
        long slice = 0;
        int dims = switch (geometry()) {
            case TextureUnit.G1D, TextureUnit.A1D -> 1;
            case TextureUnit.G2D, TextureUnit.A2D, TextureUnit.CUBE, TextureUnit.ACUBE -> 2;
            default -> 3;
        };
        int g = geometry();
        if (g == TextureUnit.A1D || g == TextureUnit.A2D) {
            slice = clamp(layer, slices - 1);
        }
        boolean normalized = normalizedCoords;
        int[] modes = addressModes;
        if (g == TextureUnit.CUBE || g == TextureUnit.ACUBE) {
            float[] face = cubeFace(x, y, z);
            slice = (g == TextureUnit.ACUBE ? clamp(layer, slices / 6 - 1) * 6 : 0) + (long) face[0];
            x = face[1];
            y = face[2];
            normalized = true;
            modes = new int[] {ADDRESS_CLAMP, ADDRESS_CLAMP, ADDRESS_CLAMP};
            integerCoords = false;
        }
        if (integerCoords) {
            long[] idx = {ix, dims > 1 ? iy : 0, dims > 2 ? iz : 0};
            long[] size = {width, height, dims > 2 ? slices : 1};
            boolean outside = false;
            for (int k = 0; k < dims; k++) {
                long i = address(idx[k], size[k], source == Source.ARRAY ? modes[k] : ADDRESS_BORDER);
                outside |= i < 0;
                idx[k] = i;
            }
            if (outside) {
                borderValue(v, iv, source != Source.ARRAY);
            } else {
                texel(data, idx[0], idx[1], dims > 2 ? idx[2] : slice, v, iv);
            }
            write(v, iv, out);
            return;
        }
        float[] coords = {x, y, z};
        long[] size = {width, height, dims > 2 ? slices : 1};
        float[] u = new float[3];
        for (int k = 0; k < dims; k++) {
            u[k] = unnormalized(coords[k], size[k], normalized, modes[k]);
        }
        if (!linearFilter) {
            long[] idx = new long[3];
            boolean outside = false;
            for (int k = 0; k < dims; k++) {
                idx[k] = address((long) Math.floor(u[k]), size[k], normalized ? modes[k] : unnormalizedMode(modes[k]));
                outside |= idx[k] < 0;
            }
            if (outside) {
                borderValue(v, iv, false);
            } else {
                texel(data, idx[0], idx[1], dims > 2 ? idx[2] : slice, v, iv);
            }
            write(v, iv, out);
            return;
        }
        // linear filtering: 2^dims taps, weights with 8 fractional bits
        long[] i0 = new long[3];
        float[] w = new float[3];
        for (int k = 0; k < dims; k++) {
            float xb = u[k] - 0.5f;
            double fl = Math.floor(xb);
            i0[k] = (long) fl;
            w[k] = (float) Math.rint((xb - (float) fl) * 256.0f) / 256.0f;
        }
        float[] sum = new float[4];
        float[] t = new float[4];
        int[] ignored = new int[4];
        for (int corner = 0; corner < 1 << dims; corner++) {
            float weight = 1;
            long[] idx = new long[3];
            boolean outside = false;
            for (int k = 0; k < dims; k++) {
                int bit = corner >> k & 1;
                weight *= bit == 1 ? w[k] : 1 - w[k];
                idx[k] = address(i0[k] + bit, size[k], normalized ? modes[k] : unnormalizedMode(modes[k]));
                outside |= idx[k] < 0;
            }
            if (outside) {
                borderValue(t, ignored, false);
            } else {
                texel(data, idx[0], idx[1], dims > 2 ? idx[2] : slice, t, ignored);
            }
            for (int c = 0; c < 4; c++) {
                sum[c] += weight * t[c];
            }
        }
        write(sum, iv, out);
    }

    private void write(float[] v, int[] iv, long[] out) {
        for (int c = 0; c < 4; c++) {
            out[c] = integerResult ? iv[c] & 0xFFFF_FFFFL : Float.floatToRawIntBits(v[c]) & 0xFFFF_FFFFL;
        }
    }

    private static long clamp(long v, long max) {
        return Math.max(0, Math.min(v, max));
    }

    /** Wrap and mirror need normalized coordinates; without them they act as clamp (the guide). */
    private static int unnormalizedMode(int mode) {
        return mode == ADDRESS_BORDER ? ADDRESS_BORDER : ADDRESS_CLAMP;
    }

    /** The coordinate in texels: normalized ones scaled by the size (wrapped to [0, 1) first in wrap mode). */
    private static float unnormalized(float c, long size, boolean normalized, int mode) {
        if (!normalized) {
            return c;
        }
        if (mode == ADDRESS_WRAP) {
            c = c - (float) Math.floor(c);
        }
        return c * size;
    }

    /** A texel index by the address mode: its index in [0, size), or -1 when it reads the border. */
    private static long address(long i, long size, int mode) {
        return switch (mode) {
            case ADDRESS_WRAP -> Math.floorMod(i, size);
            case ADDRESS_MIRROR -> {
                long j = Math.floorMod(i, 2 * size);
                yield j < size ? j : 2 * size - 1 - j;
            }
            case ADDRESS_BORDER -> i < 0 || i >= size ? -1 : i;
            default -> clamp(i, size - 1);
        };
    }

    /** The border color (a linear resource reads zeros outside, as tex1Dfetch does). */
    private void borderValue(float[] v, int[] iv, boolean zero) {
        for (int c = 0; c < 4; c++) {
            v[c] = zero ? 0 : border[c];
            iv[c] = zero ? 0 : (int) border[c];
        }
    }

    /**
     * The cubemap face and its normalized coordinates for direction (x, y, z), by the guide's table: the
     * major axis picks the face, then {@code s = (sc/|ma| + 1)/2}, {@code t = (tc/|ma| + 1)/2}.
     */
    static float[] cubeFace(float x, float y, float z) {
        float ax = Math.abs(x), ay = Math.abs(y), az = Math.abs(z);
        int face;
        float ma, sc, tc;
        if (ax >= ay && ax >= az) {
            face = x >= 0 ? 0 : 1;
            ma = ax;
            sc = x >= 0 ? -z : z;
            tc = -y;
        } else if (ay >= az) {
            face = y >= 0 ? 2 : 3;
            ma = ay;
            sc = x;
            tc = y >= 0 ? z : -z;
        } else {
            face = z >= 0 ? 4 : 5;
            ma = az;
            sc = z >= 0 ? x : -x;
            tc = -y;
        }
        return new float[] {face, (sc / ma + 1) / 2, (tc / ma + 1) / 2};
    }

    /** Texel (x, y, slice) converted: floats into {@code v} (missing channels 0, alpha 1), integers into {@code iv}. */
    private void texel(MemorySegment data, long x, long y, long slice, float[] v, int[] iv) {
        long offset = source == Source.ARRAY ? ((slice * height + y) * width + x) * elementBytes : y * pitch + x * elementBytes;
        int cb = ArrayDescriptor.channelBytes(format);
        for (int c = 0; c < 4; c++) {
            if (c >= channels) {
                v[c] = c == 3 ? 1 : 0;
                iv[c] = c == 3 ? 1 : 0;
                continue;
            }
            long at = offset + (long) c * cb;
            int raw = switch (cb) {
                case 1 -> data.get(ValueLayout.JAVA_BYTE, at);
                case 2 -> data.get(ValueLayout.JAVA_SHORT_UNALIGNED, at);
                default -> data.get(ValueLayout.JAVA_INT_UNALIGNED, at);
            };
            boolean signed = isSigned(format);
            int value = cb == 4 || signed ? raw : cb == 1 ? raw & 0xFF : raw & 0xFFFF;
            iv[c] = value;
            if (format == 0x20) {
                v[c] = Float.intBitsToFloat(raw);
            } else if (format == 0x10) {
                v[c] = Float.float16ToFloat((short) raw);
            } else if (normalizedRead) {
                // the guide: unsigned n-bit integers map to [0.0, 1.0], signed ones to [-1.0, 1.0] (-2^(n-1) to -1.0)
                float scale = cb == 1 ? (signed ? 127f : 255f) : (signed ? 32767f : 65535f);
                v[c] = Math.max(value / scale, -1.0f);
            } else {
                v[c] = value;
            }
        }
    }

    private static boolean isSigned(int format) {
        return format == 0x08 || format == 0x09 || format == 0x0a || (format >= 0xc6 && format <= 0xcb);
    }
}
