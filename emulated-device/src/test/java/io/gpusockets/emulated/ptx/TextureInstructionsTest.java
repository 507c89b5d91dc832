package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.ResourceDesc;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Locale;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * tex, tex.level, suld.b and sust.b in the forms nvcc 13 emits for texture and surface objects, under both
 * engines (interpreter and compiled), against CPU references written from the CUDA C++ Programming Guide's
 * "Texture Fetching" appendix: point sampling, linear filtering with 8-bit fractional weights, normalized
 * coordinates, the wrap / clamp / mirror / border address modes, element and normalized-float read modes,
 * 1D/2D/3D/layered/cubemap geometries, integer texel fetches from linear memory, surface boundary modes.
 */
class TextureInstructionsTest {
    private static final int FLOAT = 0x20, U8 = 0x01, S32 = 0x0a;

    /**
     * Thread i reads 16 bytes of coordinates at coords[i] (x, y, z as f32, a layer as s32) and writes the four
     * results of {@code TEX} (a tex instruction over %f1..%f3, %r2 the layer, %r3 = x's bits) to out[i].
     */
    private static String texKernel(String tex, boolean integerResults) {
        String d = integerResults ? "{%r4, %r5, %r6, %r7}" : "{%f4, %f5, %f6, %f7}";
        String st = integerResults ? "st.global.v4.u32 [%rd7], {%r4, %r5, %r6, %r7};" : "st.global.v4.f32 [%rd7], {%f4, %f5, %f6, %f7};";
        return Rig.HEADER + """
                .visible .entry k(.param .u64 tex, .param .u64 coords, .param .u64 out)
                {
                    .reg .b32 %r<8>;
                    .reg .f32 %f<8>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [tex];
                    ld.param.u64 %rd2, [coords];
                    ld.param.u64 %rd3, [out];
                    mov.u32 %r1, %tid.x;
                    mul.wide.u32 %rd4, %r1, 16;
                    add.s64 %rd5, %rd2, %rd4;
                    ld.global.f32 %f1, [%rd5];
                    ld.global.f32 %f2, [%rd5+4];
                    ld.global.f32 %f3, [%rd5+8];
                    ld.global.u32 %r2, [%rd5+12];
                    ld.global.u32 %r3, [%rd5];
                    TEX
                    add.s64 %rd7, %rd3, %rd4;
                    STORE
                    ret;
                }
                """.replace("TEX", tex.replace("DEST", d)).replace("STORE", st);
    }

    private static void underBothEngines(Consumer<PtxEngine> test) {
        String before = System.getProperty(PtxEngine.PROPERTY);
        try {
            for (PtxEngine engine : new PtxEngine[] {PtxEngine.INTERPRETER, PtxEngine.JIT}) {
                System.setProperty(PtxEngine.PROPERTY, engine.name().toLowerCase(Locale.ROOT));
                PtxEngine.Statistics s0 = PtxEngine.statistics();
                test.accept(engine);
                PtxEngine.Statistics s1 = PtxEngine.statistics();
                if (engine == PtxEngine.JIT) {
                    assertEquals(0, s1.interpretedLaunches() - s0.interpretedLaunches(), "the compiler takes every kernel here");
                }
            }
        } finally {
            if (before == null) {
                System.clearProperty(PtxEngine.PROPERTY);
            } else {
                System.setProperty(PtxEngine.PROPERTY, before);
            }
        }
    }

    // ---- fixtures --------------------------------------------------------------------------------

    private static long array(Rig rig, long w, long h, long d, int format, int channels, int flags, MemorySegment texels) {
        MemorySegment desc = rig.arena.allocate(Array3DDescriptor.SIZE, 8);
        new Array3DDescriptor(w, h, d, format, channels, flags).write(desc);
        MemorySegment out = rig.arena.allocate(8);
        rig.ok(rig.device.cuArray3DCreate(out, desc));
        long a = out.get(ValueLayout.JAVA_LONG, 0);
        long row = texels.byteSize() / Math.max(h, 1) / Math.max(d, 1);
        MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_3D, 8);
        new Memcpy3D(new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, texels.address(), 0, 0, row, Math.max(h, 1), 0),
                new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, a, 0, 0, 0), row, Math.max(h, 1), Math.max(d, 1)).write3D(copy);
        rig.ok(rig.device.cuMemcpy3D(copy));
        return a;
    }

    private static MemorySegment textureDesc(Rig rig, int address, int filter, int flags, float... border) {
        MemorySegment t = rig.arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8).fill((byte) 0);
        for (int k = 0; k < 3; k++) {
            t.set(ValueLayout.JAVA_INT, 4L * k, address);
        }
        t.set(ValueLayout.JAVA_INT, 12, filter);
        t.set(ValueLayout.JAVA_INT, 16, flags);
        for (int k = 0; k < border.length; k++) {
            t.set(ValueLayout.JAVA_FLOAT, 40 + 4L * k, border[k]);
        }
        return t;
    }

    private static long texture(Rig rig, long array, MemorySegment texDesc) {
        MemorySegment res = rig.arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
        res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
        res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, array);
        MemorySegment out = rig.arena.allocate(8);
        rig.ok(rig.device.cuTexObjectCreate(out, res, texDesc, MemorySegment.NULL));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private static long surface(Rig rig, long array) {
        MemorySegment res = rig.arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
        res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
        res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, array);
        MemorySegment out = rig.arena.allocate(8);
        rig.ok(rig.device.cuSurfObjectCreate(out, res));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    /** Coordinates: per thread x, y, z and a layer. */
    private static long coords(Rig rig, float[][] c) {
        MemorySegment s = rig.arena.allocate(16L * c.length, 16);
        for (int i = 0; i < c.length; i++) {
            for (int k = 0; k < 3; k++) {
                s.set(ValueLayout.JAVA_FLOAT, 16L * i + 4 * k, k < c[i].length ? c[i][k] : 0);
            }
            s.set(ValueLayout.JAVA_INT, 16L * i + 12, c[i].length > 3 ? (int) c[i][3] : 0);
        }
        return rig.upload(s);
    }

    private static float[] fetch(Rig rig, String tex, long texObject, float[][] c) {
        long f = rig.function(rig.module(texKernel(tex, false)), "k");
        long out = rig.alloc(16L * c.length);
        rig.run(f, 1, c.length, texObject, coords(rig, c), out);
        return rig.floats(out, 4 * c.length);
    }

    private static MemorySegment floats(Rig rig, float[] v) {
        return rig.arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
    }

    // ---- CPU references: the guide's formulas, written out again ------------------------------------

    /** The guide's linear weight: frac(x - 0.5) in 9-bit fixed point with 8 fractional bits. */
    private static float weight(float xb) {
        return (float) Math.rint((xb - (float) Math.floor(xb)) * 256f) / 256f;
    }

    private static float clampIndex(float[] t, int w, long i) {
        return t[(int) Math.max(0, Math.min(i, w - 1))];
    }

    // ---- tests -----------------------------------------------------------------------------------

    @Test
    void twoDPointSamplingReadsTheTexelUnderTheCoordinate() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                int w = 8, h = 4;
                float[] t = new float[w * h];
                for (int i = 0; i < t.length; i++) {
                    t[i] = i * 1.5f;
                }
                long tex = texture(rig, array(rig, w, h, 0, FLOAT, 1, 0, floats(rig, t)), textureDesc(rig, 1, 0, 0));
                float[][] c = {{0.5f, 0.5f}, {3.99f, 2.0f}, {7.5f, 3.5f}, {-3f, 1f}, {100f, 100f}, {2.5f, -0.1f}};
                float[] got = fetch(rig, "tex.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}];", tex, c);
                for (int i = 0; i < c.length; i++) {
                    int x = (int) Math.max(0, Math.min(Math.floor(c[i][0]), w - 1)), y = (int) Math.max(0, Math.min(Math.floor(c[i][1]), h - 1));
                    assertEquals(t[y * w + x], got[4 * i], engine + " point " + i);
                    assertEquals(0f, got[4 * i + 1], "missing channels read 0");
                    assertEquals(1f, got[4 * i + 3], "a missing alpha reads 1");
                }
            }
        });
    }

    @Test
    void linearFilteringUsesEightBitWeightsAndTheAddressModes() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                int w = 16;
                float[] t = new float[w];
                for (int i = 0; i < w; i++) {
                    t[i] = (float) Math.sin(i) * 10 + i;
                }
                long a = array(rig, w, 0, 0, FLOAT, 1, 0, floats(rig, t));
                float[][] c = {{0.1f}, {0.37f}, {0.5f}, {0.999f}, {1.23f}, {-0.3f}, {0.0101f}, {2.71828f}};
                // normalized coordinates: wrap, clamp, mirror, border
                for (int mode = 0; mode < 4; mode++) {
                    long tex = texture(rig, a, textureDesc(rig, mode, 1, 2, 7f, 0, 0, 0));
                    float[] got = fetch(rig, "tex.1d.v4.f32.f32 DEST, [%rd1, {%f1}];", tex, c);
                    for (int i = 0; i < c.length; i++) {
                        float x = c[i][0];
                        if (mode == 0) {
                            x -= (float) Math.floor(x);
                        }
                        float xb = x * w - 0.5f;
                        long i0 = (long) Math.floor(xb);
                        float alpha = weight(xb);
                        float[] tap = new float[2];
                        for (int k = 0; k < 2; k++) {
                            long j = i0 + k;
                            tap[k] = switch (mode) {
                                case 0 -> t[(int) Math.floorMod(j, w)];
                                case 2 -> {
                                    long m = Math.floorMod(j, 2 * w);
                                    yield t[(int) (m < w ? m : 2 * w - 1 - m)];
                                }
                                case 3 -> j < 0 || j >= w ? 7f : t[(int) j];
                                default -> clampIndex(t, w, j);
                            };
                        }
                        float want = (1 - alpha) * tap[0] + alpha * tap[1];
                        assertEquals(want, got[4 * i], engine + " mode " + mode + " x=" + c[i][0]);
                    }
                }
            }
        });
    }

    @Test
    void threeDLayeredAndCubemapGeometriesReachTheirSlices() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                int n = 4;
                float[] vol = new float[n * n * 6];
                for (int i = 0; i < vol.length; i++) {
                    vol[i] = i;
                }
                MemorySegment texels = floats(rig, vol);
                MemorySegment point = textureDesc(rig, 1, 0, 0);
                long t3 = texture(rig, array(rig, n, n, 6, FLOAT, 1, 0, texels), point);
                float[][] c3 = {{1.5f, 2.5f, 3.5f}, {0.2f, 3.9f, 5.9f}};
                float[] got = fetch(rig, "tex.3d.v4.f32.f32 DEST, [%rd1, {%f1, %f2, %f3, %f3}];", t3, c3);
                assertEquals(vol[(3 * n + 2) * n + 1], got[0], engine + " 3d");
                assertEquals(vol[(5 * n + 3) * n], got[4], engine + " 3d");

                long ta2 = texture(rig, array(rig, n, n, 6, FLOAT, 1, 1, texels), point);
                float[][] ca = {{1.5f, 2.5f, 0, 4}, {3.5f, 0.5f, 0, 9}};   // layer 9 is clamped to the last
                got = fetch(rig, "tex.a2d.v4.f32.f32 DEST, [%rd1, {%r2, %f1, %f2, %f2}];", ta2, ca);
                assertEquals(vol[(4 * n + 2) * n + 1], got[0], engine + " a2d");
                assertEquals(vol[(5 * n) * n + 3], got[4], engine + " a2d clamped layer");

                long ta1 = texture(rig, array(rig, n * n, 0, 6, FLOAT, 1, 1, texels), point);
                got = fetch(rig, "tex.a1d.v4.f32.f32 DEST, [%rd1, {%r2, %f1}];", ta1, new float[][] {{7.5f, 0, 0, 3}});
                assertEquals(vol[3 * n * n + 7], got[0], engine + " a1d");

                // a cubemap of 4x4 faces, normalized face coordinates from directions (the guide's table)
                long tc = texture(rig, array(rig, n, n, 6, FLOAT, 1, 4, texels), point);
                float[][] dirs = {{1, 0.25f, -0.5f}, {-1, 0, 0}, {0.1f, 1, 0.3f}, {0.2f, -1, -0.9f}, {0.3f, 0.2f, 1}, {-0.6f, 0.6f, -1}};
                got = fetch(rig, "tex.cube.v4.f32.f32 DEST, [%rd1, {%f1, %f2, %f3, %f3}];", tc, dirs);
                for (int i = 0; i < dirs.length; i++) {
                    float x = dirs[i][0], y = dirs[i][1], z = dirs[i][2];
                    float ax = Math.abs(x), ay = Math.abs(y), az = Math.abs(z);
                    int face;
                    float ma, sc, tcc;
                    if (ax >= ay && ax >= az) {
                        face = x > 0 ? 0 : 1;
                        ma = ax;
                        sc = x > 0 ? -z : z;
                        tcc = -y;
                    } else if (ay >= az) {
                        face = y > 0 ? 2 : 3;
                        ma = ay;
                        sc = x;
                        tcc = y > 0 ? z : -z;
                    } else {
                        face = z > 0 ? 4 : 5;
                        ma = az;
                        sc = z > 0 ? x : -x;
                        tcc = -y;
                    }
                    int s = (int) Math.min(n - 1, Math.floor((sc / ma + 1) / 2 * n));
                    int tt = (int) Math.min(n - 1, Math.floor((tcc / ma + 1) / 2 * n));
                    assertEquals(vol[(face * n + tt) * n + s], got[4 * i], engine + " cube direction " + i);
                }
            }
        });
    }

    @Test
    void readModesConvertOrKeepIntegers() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                byte[] px = {0, (byte) 255, 51, (byte) 128, 10, 20, 30, 40};
                MemorySegment texels = rig.arena.allocate(8).copyFrom(MemorySegment.ofArray(px));
                long a = array(rig, 2, 0, 0, U8, 4, 0, texels);
                // normalized float (READ_AS_INTEGER off): x / 255
                float[] got = fetch(rig, "tex.1d.v4.f32.f32 DEST, [%rd1, {%f1}];", texture(rig, a, textureDesc(rig, 1, 0, 0)),
                        new float[][] {{0.5f}});
                assertArrayEquals(new float[] {0f, 1f, 51 / 255f, 128 / 255f}, got, engine + " uchar4 as normalized float");
                // element type: integers in .u32 results
                long f = rig.function(rig.module(texKernel("tex.1d.v4.u32.f32 DEST, [%rd1, {%f1}];", true)), "k");
                long out = rig.alloc(16);
                rig.run(f, 1, 1, texture(rig, a, textureDesc(rig, 1, 0, 1)), coords(rig, new float[][] {{1.5f}}), out);
                assertArrayEquals(new int[] {10, 20, 30, 40}, rig.ints(out, 4), engine + " uchar4 as elements");
                // signed 32-bit elements through .s32 results
                MemorySegment ints = rig.arena.allocateFrom(ValueLayout.JAVA_INT, -5, 7, -9, 11);
                long si = array(rig, 4, 0, 0, S32, 1, 0, ints);
                f = rig.function(rig.module(texKernel("tex.1d.v4.s32.f32 DEST, [%rd1, {%f1}];", true)), "k");
                rig.run(f, 1, 1, texture(rig, si, textureDesc(rig, 1, 0, 1)), coords(rig, new float[][] {{2.2f}}), out);
                assertEquals(-9, rig.ints(out, 4)[0], engine + " int elements");
            }
        });
    }

    @Test
    void integerFetchesFromLinearMemoryReadZeroOutside() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                float[] v = {1.25f, 2.5f, 3.75f, 5f, 6.25f};
                long dev = rig.upload(v);
                MemorySegment res = rig.arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
                res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_LINEAR);
                res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, dev);
                res.set(ValueLayout.JAVA_INT, ResourceDesc.FORMAT, FLOAT);
                res.set(ValueLayout.JAVA_INT, ResourceDesc.NUM_CHANNELS, 1);
                res.set(ValueLayout.JAVA_LONG, ResourceDesc.LINEAR_SIZE, 4L * v.length);
                MemorySegment out = rig.arena.allocate(8);
                rig.ok(rig.device.cuTexObjectCreate(out, res, textureDesc(rig, 1, 0, 0), MemorySegment.NULL));
                long tex = out.get(ValueLayout.JAVA_LONG, 0);
                float[][] c = new float[7][];
                for (int i = 0; i < c.length; i++) {
                    c[i] = new float[] {Float.intBitsToFloat(i - 1)};   // texel indices -1..5 as the bits of x
                }
                float[] got = fetch(rig, "tex.1d.v4.f32.s32 DEST, [%rd1, {%r3}];", tex, c);
                float[] want = {0, 1.25f, 2.5f, 3.75f, 5f, 6.25f, 0};
                for (int i = 0; i < c.length; i++) {
                    assertEquals(want[i], got[4 * i], engine + " tex1Dfetch(" + (i - 1) + ")");
                }
            }
        });
    }

    @Test
    void levelFetchesOfAnArrayReadItsOnlyLevel() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                float[] t = {1, 2, 3, 4};
                long tex = texture(rig, array(rig, 2, 2, 0, FLOAT, 1, 0, floats(rig, t)), textureDesc(rig, 1, 0, 0));
                float[] got = fetch(rig, "tex.level.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}], %f3;", tex, new float[][] {{1.5f, 0.5f, 3f}});
                assertEquals(2f, got[0], engine.toString());
            }
        });
    }

    /** A 16x16 mipmapped float texture of 5 levels, level l filled with 10 * l; normalized coordinates, levels clamped to [0, 4]. */
    private static long mipmapTexture(Rig rig) {
        MemorySegment desc = rig.arena.allocate(Array3DDescriptor.SIZE, 8);
        new Array3DDescriptor(16, 16, 0, FLOAT, 1, 0).write(desc);
        MemorySegment out = rig.arena.allocate(8);
        rig.ok(rig.device.cuMipmappedArrayCreate(out, desc, 5));
        long mip = out.get(ValueLayout.JAVA_LONG, 0);
        for (int l = 0; l < 5; l++) {
            rig.ok(rig.device.cuMipmappedArrayGetLevel(out, mip, l));
            long level = out.get(ValueLayout.JAVA_LONG, 0);
            int n = 16 >> l;
            float[] v = new float[n * n];
            java.util.Arrays.fill(v, 10f * l);
            MemorySegment texels = floats(rig, v);
            MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_3D, 8);
            new Memcpy3D(new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, texels.address(), 0, 0, 4L * n, n, 0),
                    new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, level, 0, 0, 0), 4L * n, n, 1).write3D(copy);
            rig.ok(rig.device.cuMemcpy3D(copy));
        }
        MemorySegment res = rig.arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
        res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_MIPMAPPED_ARRAY);
        res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, mip);
        MemorySegment tex = textureDesc(rig, 1, 0, 2);
        tex.set(ValueLayout.JAVA_FLOAT, 36, 4f);   // maxMipmapLevelClamp
        rig.ok(rig.device.cuTexObjectCreate(out, res, tex, MemorySegment.NULL));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    @Test
    void mipmappedTexturesPickTheNearestLevel() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                long tex = mipmapTexture(rig);
                float[] lods = {0f, 0.49f, 0.51f, 1.4f, 1.6f, 3.2f, 99f, -5f};
                float[][] c = new float[lods.length][];
                for (int i = 0; i < lods.length; i++) {
                    c[i] = new float[] {0.3f, 0.7f, lods[i]};
                }
                float[] got = fetch(rig, "tex.level.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}], %f3;", tex, c);
                for (int i = 0; i < lods.length; i++) {
                    int level = (int) Math.max(0, Math.min(4, Math.floor(Math.max(0, Math.min(4, lods[i])) + 0.5)));
                    assertEquals(10f * level, got[4 * i], engine + " tex.level lod " + lods[i]);
                }
                // tex.grad: the level from the derivatives (isotropic: log2 of the longer one, in level-0 texels)
                float[] g = {1f / 64, 0.07f, 0.1f, 0.3f, 2f};   // levels 0, 1, 1, 3, 4 (none near a boundary)
                float[][] cg = new float[g.length][];
                for (int i = 0; i < g.length; i++) {
                    cg[i] = new float[] {0.5f, 0.5f, g[i]};
                }
                got = fetch(rig, "tex.grad.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}], {%f3, %f3}, {%f3, %f3};", tex, cg);
                for (int i = 0; i < g.length; i++) {
                    double lambda = Math.log(Math.sqrt(2) * g[i] * 16) / Math.log(2);
                    int level = (int) Math.max(0, Math.min(4, Math.floor(Math.max(0, Math.min(4, lambda)) + 0.5)));
                    assertEquals(10f * level, got[4 * i], engine + " tex.grad gradient " + g[i]);
                }
            }
        });
    }

    /** Surface kernels: thread (x, y) of a 2D block: loads the b32 at byte 4x of row y, and stores it plus 1 at (x + dx, y + dy). */
    private static String surfaceKernel(String mode, String geometry, String coords) {
        return Rig.HEADER + """
                .visible .entry k(.param .u64 src, .param .u64 dst, .param .u32 dx, .param .u32 dy)
                {
                    .reg .b32 %r<12>;
                    .reg .b64 %rd<4>;
                    ld.param.u64 %rd1, [src];
                    ld.param.u64 %rd2, [dst];
                    ld.param.u32 %r8, [dx];
                    ld.param.u32 %r9, [dy];
                    mov.u32 %r1, %tid.x;
                    mov.u32 %r2, %tid.y;
                    mov.u32 %r10, %ctaid.x;
                    shl.b32 %r3, %r1, 2;
                    suld.b.GEOM.b32.MODE {%r4}, [%rd1, COORDS];
                    add.s32 %r5, %r4, 1;
                    add.s32 %r6, %r1, %r8;
                    shl.b32 %r6, %r6, 2;
                    add.s32 %r7, %r2, %r9;
                    sust.b.GEOM.b32.MODE [%rd2, COORDS2], {%r5};
                    ret;
                }
                """.replace("GEOM", geometry).replace("MODE", mode).replace("COORDS2", coords.replace("%r3", "%r6").replace("%r2,", "%r7,"))
                .replace("COORDS", coords);
    }

    @Test
    void surfaceLoadsAndStoresKeepTheirBoundaryModes() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                int w = 4, h = 3;
                int[] v = new int[w * h];
                for (int i = 0; i < v.length; i++) {
                    v[i] = 100 * i;
                }
                MemorySegment texels = rig.arena.allocateFrom(ValueLayout.JAVA_INT, v);
                long src = surface(rig, array(rig, w, h, 0, S32, 1, Array3DDescriptor.SURFACE_LDST, texels));
                long dstArray = array(rig, w, h, 0, S32, 1, Array3DDescriptor.SURFACE_LDST, rig.arena.allocate(4L * w * h).fill((byte) 0));
                long dst = surface(rig, dstArray);
                MemorySegment back = rig.arena.allocate(4L * w * h);
                MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_2D, 8);
                new Memcpy3D(new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, dstArray, 0, 0, 0),
                        new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, back.address(), 0, 0, 4L * w, 0, 0), 4L * w, h, 1).write2D(copy);

                // in place: every element plus one
                long f = rig.function(rig.module(surfaceKernel("trap", "2d", "{%r3, %r2}")), "k");
                rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {w, h, 1}, 0, src, dst, 0, 0));
                rig.ok(rig.device.cuCtxSynchronize());
                rig.ok(rig.device.cuMemcpy2D(copy));
                for (int i = 0; i < v.length; i++) {
                    assertEquals(v[i] + 1, back.getAtIndex(ValueLayout.JAVA_INT, i), engine + " element " + i);
                }
                // .zero: stores shifted by one column: the last column's go nowhere, column 0 keeps its value
                long fz = rig.function(rig.module(surfaceKernel("zero", "2d", "{%r3, %r2}")), "k");
                rig.ok(rig.launch(fz, new int[] {1, 1, 1}, new int[] {w, h, 1}, 0, src, dst, 1, 0));
                rig.ok(rig.device.cuCtxSynchronize());
                rig.ok(rig.device.cuMemcpy2D(copy));
                for (int y = 0; y < h; y++) {
                    for (int x = 0; x < w; x++) {
                        int want = x == 0 ? v[y * w] + 1 : v[y * w + x - 1] + 1;
                        assertEquals(want, back.getAtIndex(ValueLayout.JAVA_INT, (long) y * w + x), engine + " zero x=" + x + " y=" + y);
                    }
                }
                // .clamp: shifted two rows down, the rows past the end land on the last row (the last writer wins
                // there, so only rows 0 and 1, which nothing clamps onto, are compared)
                long fc = rig.function(rig.module(surfaceKernel("clamp", "2d", "{%r3, %r2}")), "k");
                rig.ok(rig.launch(fc, new int[] {1, 1, 1}, new int[] {w, h, 1}, 0, src, dst, 0, 2));
                rig.ok(rig.device.cuCtxSynchronize());
                rig.ok(rig.device.cuMemcpy2D(copy));
                int row2 = back.getAtIndex(ValueLayout.JAVA_INT, 2L * w);
                assertTrue(row2 == v[0] + 1 || row2 == v[w] + 1 || row2 == v[2 * w] + 1, engine + " clamp lands on the last row: " + row2);
                // .trap: a store past the row ends the launch with the sticky illegal-address error
                long ft = rig.function(rig.module(surfaceKernel("trap", "2d", "{%r3, %r2}")), "k");
                int rc = rig.launch(ft, new int[] {1, 1, 1}, new int[] {w, h, 1}, 0, src, dst, 1, 0);
                assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rc == CUDA_SUCCESS ? rig.device.cuCtxSynchronize() : rc, engine + " trap");
                assertTrue(rig.device.lastErrorDetail().contains("outside the surface"), rig.device.lastErrorDetail());
            }
        });
    }

    @Test
    void threeDAndLayeredSurfacesAddressTheirSlices() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                int w = 4, h = 2, d = 3;
                int[] v = new int[w * h * d];
                for (int i = 0; i < v.length; i++) {
                    v[i] = 7 * i + 1;
                }
                for (String geometry : new String[] {"3d", "a2d"}) {
                    int flags = Array3DDescriptor.SURFACE_LDST | (geometry.equals("a2d") ? Array3DDescriptor.LAYERED : 0);
                    long src = surface(rig, array(rig, w, h, d, S32, 1, flags, rig.arena.allocateFrom(ValueLayout.JAVA_INT, v)));
                    long dstArray = array(rig, w, h, d, S32, 1, flags, rig.arena.allocate(4L * v.length).fill((byte) 0));
                    // block (w, h), grid d: the slice is the block index (%r10)
                    String coords = geometry.equals("3d") ? "{%r3, %r2, %r10, %r10}" : "{%r10, %r3, %r2, %r2}";
                    long f = rig.function(rig.module(surfaceKernel("trap", geometry, coords)), "k");
                    rig.ok(rig.launch(f, new int[] {d, 1, 1}, new int[] {w, h, 1}, 0, src, surface(rig, dstArray), 0, 0));
                    rig.ok(rig.device.cuCtxSynchronize());
                    MemorySegment back = rig.arena.allocate(4L * v.length);
                    MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_3D, 8);
                    new Memcpy3D(new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, dstArray, 0, 0, 0),
                            new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, back.address(), 0, 0, 4L * w, h, 0), 4L * w, h, d).write3D(copy);
                    rig.ok(rig.device.cuMemcpy3D(copy));
                    for (int i = 0; i < v.length; i++) {
                        assertEquals(v[i] + 1, back.getAtIndex(ValueLayout.JAVA_INT, i), engine + " " + geometry + " element " + i);
                    }
                }
            }
        });
    }

    @Test
    void aValueThatIsNoObjectOfTheContextFaultsTheLaunch() {
        underBothEngines(engine -> {
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(texKernel("tex.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}];", false)), "k");
                long out = rig.alloc(16);
                int rc = rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, 0x1234L, coords(rig, new float[][] {{0, 0}}), out);
                assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rc == CUDA_SUCCESS ? rig.device.cuCtxSynchronize() : rc, engine.toString());
                assertTrue(rig.device.lastErrorDetail().contains("no texture object"), rig.device.lastErrorDetail());
            }
            try (Rig rig = new Rig()) {
                // a texture of a 3D array sampled as 2D: refused rather than read wrongly
                long tex = texture(rig, array(rig, 2, 2, 2, FLOAT, 1, 0, rig.arena.allocate(32)), textureDesc(rig, 1, 0, 0));
                long f = rig.function(rig.module(texKernel("tex.2d.v4.f32.f32 DEST, [%rd1, {%f1, %f2}];", false)), "k");
                int rc = rig.launch(f, new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0, tex, coords(rig, new float[][] {{0, 0}}), rig.alloc(16));
                assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, rc == CUDA_SUCCESS ? rig.device.cuCtxSynchronize() : rc, engine.toString());
            }
        });
    }
}
