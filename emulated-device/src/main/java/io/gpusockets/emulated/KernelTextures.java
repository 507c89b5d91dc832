package io.gpusockets.emulated;

import io.gpusockets.emulated.ptx.TextureUnit;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The texture and surface objects one launch reaches (tex, suld, sust): only those of the launching
 * context, found by the handle the kernel received as a parameter (the same value the program got from
 * cuTexObjectCreate or cuSurfObjectCreate). A value that names none of them, a geometry other than the
 * object's (tex.2d on a 3D array), or a surface access outside the array in .trap mode ends the launch
 * with CUDA_ERROR_ILLEGAL_ADDRESS, the context's sticky error, as a bad access does on a GPU.
 */
final class KernelTextures implements TextureUnit {
    private static final String[] GEOMETRY = {"1d", "2d", "3d", "a1d", "a2d", "cube", "acube"};

    private final EmulatedContext context;
    private final Handles handles;
    private final EmulatedMemory memory;

    KernelTextures(EmulatedContext context, Handles handles, EmulatedMemory memory) {
        this.context = context;
        this.handles = handles;
        this.memory = memory;
    }

    private static KernelFault fault(String detail) {
        return new KernelFault(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS, detail);
    }

    @Override
    public void sample(long handle, int geometry, boolean integerCoords, float x, float y, float z, int ix, int iy, int iz,
                       int layer, float level, float[] gradients, int result, long[] out) {
        EmulatedTexture t = handles.find(handle, EmulatedTexture.class);
        if (t == null || t.context() != context) {
            throw fault("tex." + GEOMETRY[geometry] + ": 0x" + Long.toHexString(handle) + " is no texture object of the launching context");
        }
        TextureSampler s = t.sampler();
        if (s.geometry() != geometry) {
            throw fault("tex." + GEOMETRY[geometry] + " on a texture object whose resource is sampled as ." + GEOMETRY[s.geometry()]);
        }
        MemorySegment data;
        if (t.mip() != null) {
            int l = level(t.mip(), s, level, gradients);
            s = t.mip().samplers()[l];
            data = t.mip().arrays()[l].memory;
        } else if (t.array() != null) {
            data = t.array().memory;
        } else {
            data = memory.resolve(context, t.devPtr(), s.deviceBytes());
            if (data == null) {
                throw KernelFault.illegalAddress(t.devPtr(), s.deviceBytes());
            }
        }
        s.sample(data, integerCoords, x, y, z, ix, iy, iz, layer, out);
    }

    /**
     * The level a fetch of a mipmapped texture reads: λ from tex.level, or from tex.grad's gradients (the larger
     * of the two derivative vectors' lengths in level-0 texels, log2: isotropic, as with maxAnisotropy 1), plus
     * the bias, within the level clamps, rounded to the nearest level (mipmapFilterMode POINT).
     */
    private static int level(EmulatedTexture.Mip mip, TextureSampler level0, float lambda, float[] gradients) {
        if (gradients != null) {
            double[] size = {level0.width, level0.height, level0.slices};
            int dims = switch (level0.geometry()) {
                case G1D, A1D -> 1;
                case G3D -> 3;
                default -> 2;
            };
            double rho = 0;
            for (int v = 0; v < 2; v++) {
                double sq = 0;
                for (int k = 0; k < dims; k++) {
                    double g = gradients[4 * v + k] * (level0.normalizedCoords ? size[k] : 1);
                    sq += g * g;
                }
                rho = Math.max(rho, Math.sqrt(sq));
            }
            lambda = rho > 0 ? (float) (Math.log(rho) / Math.log(2)) : Float.NEGATIVE_INFINITY;
        }
        float l = lambda + mip.bias();
        l = Math.max(mip.minClamp(), Math.min(l, mip.maxClamp()));
        int n = mip.samplers().length;
        if (Float.isNaN(l)) {
            return 0;
        }
        return (int) Math.max(0, Math.min(n - 1, Math.floor(l + 0.5)));
    }

    private EmulatedSurface surface(long handle, String what, int geometry) {
        EmulatedSurface s = handles.find(handle, EmulatedSurface.class);
        if (s == null || s.context() != context) {
            throw fault(what + ": 0x" + Long.toHexString(handle) + " is no surface object of the launching context");
        }
        int expected = switch (s.array().shape) {
            case ONE_D -> G1D;
            case TWO_D -> G2D;
            case THREE_D -> G3D;
            case LAYERED_1D -> A1D;
            case LAYERED_2D -> A2D;
            default -> -1;   // cubemaps: their faces are read as a 2D layered surface
        };
        boolean cubeAsLayers = expected < 0 && geometry == A2D;
        if (expected != geometry && !cubeAsLayers) {
            throw fault(what + "." + GEOMETRY[geometry] + " on a surface of a " + s.array().shape + " array");
        }
        return s;
    }

    /**
     * The byte offset of an access of {@code bytes} at (x, y, z) by the boundary mode, or -1 for one that
     * reads zeros and writes nothing (.zero outside the surface).
     */
    private static long offset(EmulatedArray a, String what, int x, int y, int z, int component, int bytes, int boundary) {
        long row = a.rowBytes(), rows = a.rows(), slices = a.slices();
        if (x % component != 0) {
            throw KernelFault.misaligned(x, component);
        }
        if (bytes > row) {
            throw fault(what + " of " + bytes + " bytes is wider than the surface's row of " + row + " bytes");
        }
        boolean inside = x >= 0 && x <= row - bytes && y >= 0 && y < rows && z >= 0 && z < slices;
        if (!inside) {
            switch (boundary) {
                case TRAP -> throw fault(what + " at x=" + x + " bytes, y=" + y + ", z=" + z + " is outside the surface of "
                        + row + " bytes by " + rows + " rows by " + slices + " slices");
                case ZERO -> {
                    return -1;
                }
                default -> {
                    long last = (row - bytes) / bytes * bytes;
                    x = (int) Math.max(0, Math.min(x, last));
                    y = (int) Math.max(0, Math.min(y, rows - 1));
                    z = (int) Math.max(0, Math.min(z, slices - 1));
                }
            }
        }
        return ((long) z * rows + y) * row + x;
    }

    @Override
    public void load(long handle, int geometry, int x, int y, int z, int bytes, int count, int boundary, long[] out) {
        EmulatedArray a = surface(handle, "suld.b", geometry).array();
        long at = offset(a, "suld.b", x, y, z, bytes, bytes * count, boundary);
        for (int k = 0; k < count; k++) {
            out[k] = at < 0 ? 0 : get(a.memory, at + (long) k * bytes, bytes);
        }
    }

    @Override
    public void store(long handle, int geometry, int x, int y, int z, int bytes, int count, int boundary, long[] values) {
        EmulatedArray a = surface(handle, "sust.b", geometry).array();
        long at = offset(a, "sust.b", x, y, z, bytes, bytes * count, boundary);
        if (at < 0) {
            return;
        }
        for (int k = 0; k < count; k++) {
            put(a.memory, at + (long) k * bytes, bytes, values[k]);
        }
    }

    private static long get(MemorySegment m, long at, int bytes) {
        return switch (bytes) {
            case 1 -> m.get(ValueLayout.JAVA_BYTE, at) & 0xFFL;
            case 2 -> m.get(ValueLayout.JAVA_SHORT_UNALIGNED, at) & 0xFFFFL;
            case 4 -> m.get(ValueLayout.JAVA_INT_UNALIGNED, at) & 0xFFFF_FFFFL;
            default -> m.get(ValueLayout.JAVA_LONG_UNALIGNED, at);
        };
    }

    private static void put(MemorySegment m, long at, int bytes, long v) {
        switch (bytes) {
            case 1 -> m.set(ValueLayout.JAVA_BYTE, at, (byte) v);
            case 2 -> m.set(ValueLayout.JAVA_SHORT_UNALIGNED, at, (short) v);
            case 4 -> m.set(ValueLayout.JAVA_INT_UNALIGNED, at, (int) v);
            default -> m.set(ValueLayout.JAVA_LONG_UNALIGNED, at, v);
        }
    }
}
