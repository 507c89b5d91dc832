package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.ResourceDesc;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Texture and surface kernels as nvcc 13 compiles them to PTX (-O3, compute_90): tex2D with linear
 * filtering, tex2DLayered, tex3D, texCubemap, tex1Dfetch, surf2Dread/surf2Dwrite with the zero boundary,
 * surf3Dwrite, run by both engines (interpreter and compiled) and checked against CPU references (the
 * runtime programs textures.cu and surfaces.cu run the same forms through cudart, on whichever engine
 * compiles them).
 */
class NvccTextureKernelsTest {
    static final String SOURCE = """
            extern "C" __global__ void bilinear(cudaTextureObject_t t, const float2* c, float* out, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) out[i] = tex2D<float>(t, c[i].x, c[i].y);
            }
            extern "C" __global__ void layered(cudaTextureObject_t t, const float2* c, float* out, int n, int layer) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) out[i] = tex2DLayered<float>(t, c[i].x, c[i].y, layer);
            }
            extern "C" __global__ void volume(cudaTextureObject_t t, const float4* c, float* out, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) out[i] = tex3D<float>(t, c[i].x, c[i].y, c[i].z);
            }
            extern "C" __global__ void cube(cudaTextureObject_t t, const float4* c, float* out, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) out[i] = texCubemap<float>(t, c[i].x, c[i].y, c[i].z);
            }
            extern "C" __global__ void fetch(cudaTextureObject_t t, int* out, int n) {
                int i = blockIdx.x * blockDim.x + threadIdx.x;
                if (i < n) out[i] = tex1Dfetch<int>(t, i - 2);
            }
            extern "C" __global__ void blur(cudaSurfaceObject_t in, cudaSurfaceObject_t out, int w, int h) {
                int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
                if (x >= w || y >= h) return;
                float s = surf2Dread<float>(in, (x - 1) * 4, y, cudaBoundaryModeZero) + surf2Dread<float>(in, x * 4, y)
                        + surf2Dread<float>(in, (x + 1) * 4, y, cudaBoundaryModeZero);
                surf2Dwrite(s, out, x * 4, y);
            }
            extern "C" __global__ void stamp(cudaSurfaceObject_t s, int w, int h, int d) {
                int x = threadIdx.x, y = threadIdx.y, z = blockIdx.x;
                if (x < w && y < h && z < d) surf3Dwrite(make_short2(x + 10 * y, z), s, x * 4, y, z);
            }
            """;

    static String ptx;

    @BeforeAll
    static synchronized void compile() throws IOException, InterruptedException {
        if (ptx != null) {
            return;
        }
        Path nvcc = Path.of(System.getProperty("gpusockets.nvcc", "/usr/local/bin/nvcc"));
        assumeTrue(Files.isExecutable(nvcc), "nvcc not found at " + nvcc + ": the nvcc-compiled kernel tests need it");
        Path dir = Files.createTempDirectory("gpusockets-nvcc-textures");
        Path cu = dir.resolve("textures.cu");
        Files.writeString(cu, SOURCE);
        Path out = dir.resolve("textures.ptx");
        Process p = new ProcessBuilder(nvcc.toString(), "-ptx", "-arch=compute_90", "-O3", cu.toString(), "-o", out.toString())
                .redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        assumeTrue(p.waitFor(120, TimeUnit.SECONDS) && p.exitValue() == 0, "nvcc failed: " + log);
        ptx = Files.readString(out);
        Files.delete(cu);
        Files.delete(out);
        Files.delete(dir);
    }

    private interface EngineTest {
        void run(Rig rig, long module, PtxEngine engine);
    }

    private static void underBothEngines(EngineTest test) {
        String before = System.getProperty(PtxEngine.PROPERTY);
        try {
            for (PtxEngine engine : new PtxEngine[] {PtxEngine.INTERPRETER, PtxEngine.JIT}) {
                System.setProperty(PtxEngine.PROPERTY, engine.name().toLowerCase(Locale.ROOT));
                PtxEngine.Statistics s0 = PtxEngine.statistics();
                try (Rig rig = new Rig()) {
                    test.run(rig, rig.module(ptx), engine);
                }
                if (engine == PtxEngine.JIT) {
                    assertEquals(0, PtxEngine.statistics().interpretedLaunches() - s0.interpretedLaunches(), "all compiled");
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

    private static long array(Rig rig, long w, long h, long d, int format, int channels, int flags, MemorySegment texels) {
        MemorySegment desc = rig.arena.allocate(Array3DDescriptor.SIZE, 8);
        new Array3DDescriptor(w, h, d, format, channels, flags).write(desc);
        MemorySegment out = rig.arena.allocate(8);
        rig.ok(rig.device.cuArray3DCreate(out, desc));
        long a = out.get(ValueLayout.JAVA_LONG, 0);
        long rows = Math.max(h, 1), slices = Math.max(d, 1), row = texels.byteSize() / rows / slices;
        MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_3D, 8);
        new Memcpy3D(new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, texels.address(), 0, 0, row, rows, 0),
                new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, a, 0, 0, 0), row, rows, slices).write3D(copy);
        rig.ok(rig.device.cuMemcpy3D(copy));
        return a;
    }

    private static MemorySegment read(Rig rig, long a, long row, long rows, long slices) {
        MemorySegment back = rig.arena.allocate(row * rows * slices);
        MemorySegment copy = rig.arena.allocate(Memcpy3D.SIZE_3D, 8);
        new Memcpy3D(new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, a, 0, 0, 0),
                new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, back.address(), 0, 0, row, rows, 0), row, rows, slices).write3D(copy);
        rig.ok(rig.device.cuMemcpy3D(copy));
        return back;
    }

    private static long object(Rig rig, int type, long target, long extra, int filter, int flags, boolean surface) {
        MemorySegment res = rig.arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
        res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, type);
        res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, target);
        if (type == ResourceDesc.TYPE_LINEAR) {
            res.set(ValueLayout.JAVA_INT, ResourceDesc.FORMAT, 0x0a);
            res.set(ValueLayout.JAVA_INT, ResourceDesc.NUM_CHANNELS, 1);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.LINEAR_SIZE, extra);
        }
        MemorySegment out = rig.arena.allocate(8);
        if (surface) {
            rig.ok(rig.device.cuSurfObjectCreate(out, res));
        } else {
            MemorySegment tex = rig.arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8).fill((byte) 0);
            for (int k = 0; k < 3; k++) {
                tex.set(ValueLayout.JAVA_INT, 4L * k, 1);   // clamp
            }
            tex.set(ValueLayout.JAVA_INT, 12, filter);
            tex.set(ValueLayout.JAVA_INT, 16, flags);
            rig.ok(rig.device.cuTexObjectCreate(out, res, tex, MemorySegment.NULL));
        }
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private static float weight(float xb) {
        return (float) Math.rint((xb - (float) Math.floor(xb)) * 256f) / 256f;
    }

    @Test
    void tex2DBilinearFollowsTheGuidesArithmetic() {
        underBothEngines((rig, module, engine) -> {
            int w = 8, h = 6, n = 64;
            float[] t = new float[w * h];
            for (int i = 0; i < t.length; i++) {
                t[i] = (i * 37 % 23) - 4.5f;
            }
            long tex = object(rig, ResourceDesc.TYPE_ARRAY, array(rig, w, h, 0, 0x20, 1, 0,
                    rig.arena.allocateFrom(ValueLayout.JAVA_FLOAT, t)), 0, 1, 0, false);
            float[] c = new float[2 * n];
            for (int i = 0; i < n; i++) {
                c[2 * i] = -1 + i * 0.173f;
                c[2 * i + 1] = 7.2f - i * 0.121f;
            }
            long out = rig.alloc(4L * n);
            rig.run(rig.function(module, "bilinear"), 1, n, tex, rig.upload(c), out, n);
            float[] got = rig.floats(out, n);
            for (int i = 0; i < n; i++) {
                float xb = c[2 * i] - 0.5f, yb = c[2 * i + 1] - 0.5f, a = weight(xb), b = weight(yb);
                int i0 = (int) Math.floor(xb), j0 = (int) Math.floor(yb);
                float want = 0;
                for (int k = 0; k < 4; k++) {
                    int x = Math.max(0, Math.min(w - 1, i0 + (k & 1))), y = Math.max(0, Math.min(h - 1, j0 + (k >> 1)));
                    want += ((k & 1) == 1 ? a : 1 - a) * ((k >> 1) == 1 ? b : 1 - b) * t[y * w + x];
                }
                assertEquals(want, got[i], engine + " sample " + i);
            }
        });
    }

    @Test
    void layeredVolumeAndCubemapFetchesReadTheirTexel() {
        underBothEngines((rig, module, engine) -> {
            int s = 4;
            float[] v = new float[s * s * 6];
            for (int i = 0; i < v.length; i++) {
                v[i] = i;
            }
            MemorySegment texels = rig.arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
            long layeredTex = object(rig, ResourceDesc.TYPE_ARRAY, array(rig, s, s, 6, 0x20, 1, 1, texels), 0, 0, 0, false);
            long out = rig.alloc(4L * 4);
            rig.run(rig.function(module, "layered"), 1, 2, layeredTex, rig.upload(new float[] {1.5f, 2.5f, 3.9f, 0.1f}), out, 2, 5);
            float[] got = rig.floats(out, 2);
            assertEquals(v[(5 * s + 2) * s + 1], got[0], engine + " layered");
            assertEquals(v[(5 * s) * s + 3], got[1], engine + " layered");

            long volumeTex = object(rig, ResourceDesc.TYPE_ARRAY, array(rig, s, s, 6, 0x20, 1, 0, texels), 0, 0, 0, false);
            rig.run(rig.function(module, "volume"), 1, 1, volumeTex, rig.upload(new float[] {2.2f, 1.7f, 4.5f, 0}), out, 1);
            assertEquals(v[(4 * s + 1) * s + 2], rig.floats(out, 1)[0], engine + " volume");

            long cubeTex = object(rig, ResourceDesc.TYPE_ARRAY, array(rig, s, s, 6, 0x20, 1, 4, texels), 0, 0, 2, false);
            // +y face (2): s = x, t = z, both mapped from [-1, 1] to [0, 1]
            rig.run(rig.function(module, "cube"), 1, 1, cubeTex, rig.upload(new float[] {0.6f, 1f, -0.3f, 0}), out, 1);
            int x = (int) Math.floor((0.6f + 1) / 2 * s), y = (int) Math.floor((-0.3f + 1) / 2 * s);
            assertEquals(v[(2 * s + y) * s + x], rig.floats(out, 1)[0], engine + " cube");
        });
    }

    @Test
    void tex1DfetchReadsLinearMemoryAndZeroOutside() {
        underBothEngines((rig, module, engine) -> {
            int[] v = {11, -22, 33, -44, 55};
            long dev = rig.upload(v);
            long tex = object(rig, ResourceDesc.TYPE_LINEAR, dev, 4L * v.length, 0, 1, false);
            long out = rig.alloc(4L * 9);
            rig.run(rig.function(module, "fetch"), 1, 9, tex, out, 9);
            int[] got = rig.ints(out, 9);
            for (int i = 0; i < 9; i++) {
                int k = i - 2;
                assertEquals(k < 0 || k >= v.length ? 0 : v[k], got[i], engine + " index " + k);
            }
        });
    }

    @Test
    void surfaceKernelsReadWithTheZeroBoundaryAndWrite() {
        underBothEngines((rig, module, engine) -> {
            int w = 10, h = 3;
            float[] v = new float[w * h];
            for (int i = 0; i < v.length; i++) {
                v[i] = i * 0.5f + 1;
            }
            long in = object(rig, ResourceDesc.TYPE_ARRAY, array(rig, w, h, 0, 0x20, 1, Array3DDescriptor.SURFACE_LDST,
                    rig.arena.allocateFrom(ValueLayout.JAVA_FLOAT, v)), 0, 0, 0, true);
            long outArray = array(rig, w, h, 0, 0x20, 1, Array3DDescriptor.SURFACE_LDST, rig.arena.allocate(4L * w * h));
            long outSurface = object(rig, ResourceDesc.TYPE_ARRAY, outArray, 0, 0, 0, true);
            rig.ok(rig.launch(rig.function(module, "blur"), new int[] {1, 1, 1}, new int[] {16, 4, 1}, 0, in, outSurface, w, h));
            rig.ok(rig.device.cuCtxSynchronize());
            MemorySegment back = read(rig, outArray, 4L * w, h, 1);
            for (int y = 0; y < h; y++) {
                for (int x = 0; x < w; x++) {
                    float want = (x > 0 ? v[y * w + x - 1] : 0) + v[y * w + x] + (x < w - 1 ? v[y * w + x + 1] : 0);
                    assertEquals(want, back.getAtIndex(ValueLayout.JAVA_FLOAT, (long) y * w + x), engine + " x=" + x + " y=" + y);
                }
            }
            int d = 3;
            long vol = array(rig, 4, 2, d, 0x09, 2, Array3DDescriptor.SURFACE_LDST, rig.arena.allocate(4L * 4 * 2 * d));
            rig.ok(rig.launch(rig.function(module, "stamp"), new int[] {d, 1, 1}, new int[] {4, 2, 1}, 0,
                    object(rig, ResourceDesc.TYPE_ARRAY, vol, 0, 0, 0, true), 4, 2, d));
            rig.ok(rig.device.cuCtxSynchronize());
            MemorySegment got = read(rig, vol, 16, 2, d);
            for (int z = 0; z < d; z++) {
                for (int y = 0; y < 2; y++) {
                    for (int x = 0; x < 4; x++) {
                        long at = ((long) (z * 2 + y) * 4 + x) * 2;
                        assertEquals((short) (x + 10 * y), got.getAtIndex(ValueLayout.JAVA_SHORT, at), engine + " stamp x");
                        assertEquals((short) z, got.getAtIndex(ValueLayout.JAVA_SHORT, at + 1), engine + " stamp z");
                    }
                }
            }
        });
    }
}
