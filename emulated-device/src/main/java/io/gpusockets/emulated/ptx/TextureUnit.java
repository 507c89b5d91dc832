package io.gpusockets.emulated.ptx;

/**
 * Texture and surface objects as a running kernel samples, loads and stores them ({@code tex},
 * {@code tex.level}, {@code tex.grad}, {@code suld.b}, {@code sust.b}), supplied by the emulated device
 * ({@link GlobalMemory#textures}): the engines decode the instruction ({@link TextureOps}), the unit
 * finds the object among the launching context's and does the arithmetic. Faults (an object that is
 * not the context's, an access out of a surface in .trap mode) are thrown as the memory's faults.
 */
public interface TextureUnit {
    /** Geometries: tex/suld/sust .1d .2d .3d .a1d .a2d .cube .acube. */
    int G1D = 0;
    int G2D = 1;
    int G3D = 2;
    int A1D = 3;
    int A2D = 4;
    int CUBE = 5;
    int ACUBE = 6;

    /** Result types of tex (its destination type). */
    int F32 = 0;
    int S32 = 1;
    int U32 = 2;

    /** Boundary modes of suld/sust. */
    int TRAP = 0;
    int CLAMP = 1;
    int ZERO = 2;

    /**
     * Samples the texture object {@code handle}: {@code x, y, z} the coordinates (float, or texel indices when
     * {@code integerCoords}), {@code layer} the layer of a layered geometry, {@code level} the mipmap level
     * (tex.level; 0 for tex), or NaN with {@code gradients} (tex.grad: dPdx x, y, z, _, then dPdy x, y, z, _);
     * the four 32-bit results (f32 bits, or s32/u32 as {@code result} says) go to {@code out}.
     */
    void sample(long handle, int geometry, boolean integerCoords, float x, float y, float z, int ix, int iy, int iz,
                int layer, float level, float[] gradients, int result, long[] out);

    /**
     * suld.b: {@code count} elements of {@code bytes} bytes each from byte {@code x} of row {@code y} of slice
     * {@code z} (3D depth, or the layer of a layered geometry) of the surface object {@code handle}, into
     * {@code out}, zero-extended.
     */
    void load(long handle, int geometry, int x, int y, int z, int bytes, int count, int boundary, long[] out);

    /** sust.b: the low {@code bytes} bytes of each of {@code count} values to the surface, as {@link #load} reads. */
    void store(long handle, int geometry, int x, int y, int z, int bytes, int count, int boundary, long[] values);
}
