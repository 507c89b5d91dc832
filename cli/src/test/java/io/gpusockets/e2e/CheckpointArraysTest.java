package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.ResourceDesc;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * CUDA arrays, mipmapped arrays, texture and surface objects in a checkpoint (issue 22, item 3): a program makes
 * arrays of several shapes (2D by cuArrayCreate; 3D, 2D layered, cubemap and a 2D array of several chunks by
 * cuArray3DCreate; a 3D array whose slices share chunks), a mipmapped array whose four levels it fills, a texture
 * object over the 2D array whose value it keeps in device memory, and a surface object over a surface-load/store
 * array; a kernel fetches through the texture (reading the object from device memory) and another adds 1 to every
 * element through the surface. Checkpointed with stop in backend A, restored in backend B on a new emulated device:
 * every array's contents are back byte for byte, the handles and the texture and surface values are unchanged, and
 * the kernels give what an uninterrupted run gives. A damaged array chunk is refused at restore; a restore whose
 * driver gives a texture object another value is refused naming it.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CheckpointArraysTest extends CheckpointTestSupport {
    static final String PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .entry fetch(.param .u64 texAt, .param .u64 out, .param .u32 w)
            {
                .reg .b32 %r<8>;
                .reg .f32 %f<8>;
                .reg .b64 %rd<6>;
                ld.param.u64 %rd5, [texAt];
                ld.global.u64 %rd1, [%rd5];
                ld.param.u64 %rd2, [out];
                ld.param.u32 %r1, [w];
                mov.u32 %r2, %tid.x;
                mov.u32 %r3, %ctaid.x;
                cvt.rn.f32.u32 %f1, %r2;
                add.f32 %f1, %f1, 0f3F000000;
                cvt.rn.f32.u32 %f2, %r3;
                add.f32 %f2, %f2, 0f3F000000;
                tex.2d.v4.f32.f32 {%f4, %f5, %f6, %f7}, [%rd1, {%f1, %f2}];
                mad.lo.u32 %r4, %r3, %r1, %r2;
                mul.wide.u32 %rd3, %r4, 4;
                add.s64 %rd4, %rd2, %rd3;
                st.global.f32 [%rd4], %f4;
                ret;
            }
            .visible .entry bump(.param .u64 surf)
            {
                .reg .b32 %r<8>;
                .reg .b64 %rd<2>;
                ld.param.u64 %rd1, [surf];
                mov.u32 %r1, %tid.x;
                mov.u32 %r2, %ctaid.x;
                shl.b32 %r3, %r1, 2;
                suld.b.2d.b32.trap {%r4}, [%rd1, {%r3, %r2}];
                add.s32 %r5, %r4, 1;
                sust.b.2d.b32.trap [%rd1, {%r3, %r2}], {%r5};
                ret;
            }
            """;
    private static final int FLOAT = 0x20, U8 = 0x01, S32 = 0x0a;
    /** The 2D texture's array: W x H floats. */
    private static final int W = 64, H = 32;
    /** The surface's array: SW x SH s32. */
    private static final int SW = 16, SH = 8;

    /** One array the program filled: its handle, its shape and the bytes it holds. */
    record Filled(String name, long array, Array3DDescriptor shape, byte[] bytes) {
    }

    /** The program: its arrays, mipmapped array, texture and surface, kernels, and what it expects of them. */
    static final class Program {
        final RemoteCudaDriver d;
        final Cuda cu;
        final Arena arena = Arena.ofShared();
        final List<Filled> arrays = new ArrayList<>();
        final Random random = new Random(22);
        long mipmap, tex, texAt, surf, out, fetch, bump;
        long[] levels = new long[4];
        byte[][] levelBytes = new byte[4][];
        int bumps;

        Program(RemoteCudaDriver d) {
            this.d = d;
            this.cu = new Cuda(d);
        }

        private static long rowBytes(Array3DDescriptor s) {
            return s.width() * ArrayDescriptor.elementBytes(s.format(), s.numChannels());
        }

        /** Copies {@code bytes} into (or, with {@code in} false, out of) {@code array} of shape {@code s}, whole. */
        void copy(long array, Array3DDescriptor s, byte[] bytes, boolean in) {
            MemorySegment host = arena.allocate(bytes.length, 16);
            MemorySegment.copy(bytes, 0, host, JAVA_BYTE, 0, bytes.length);
            long row = rowBytes(s);
            Memcpy3D.Side h = new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, host.address(), 0, 0, row, s.rows(), 0);
            Memcpy3D.Side a = new Memcpy3D.Side(Memcpy3D.ARRAY, 0, 0, 0, 0, 0, 0, array, 0, 0, 0);
            MemorySegment m = arena.allocate(Memcpy3D.SIZE_3D, 8);
            (in ? new Memcpy3D(h, a, row, s.rows(), s.slices()) : new Memcpy3D(a, h, row, s.rows(), s.slices())).write3D(m);
            Cuda.ok(d.cuMemcpy3D(m), "cuMemcpy3D " + (in ? "into" : "out of") + " array " + array);
            if (!in) {
                MemorySegment.copy(host, JAVA_BYTE, 0, bytes, 0, bytes.length);
            }
        }

        byte[] read(long array, Array3DDescriptor s) {
            byte[] b = new byte[(int) s.bytes(1)];
            copy(array, s, b, false);
            return b;
        }

        private byte[] randomBytes(long n) {
            byte[] b = new byte[(int) n];
            random.nextBytes(b);
            return b;
        }

        private void add3D(String name, Array3DDescriptor s, byte[] bytes) {
            MemorySegment desc = arena.allocate(Array3DDescriptor.SIZE, 8);
            s.write(desc);
            MemorySegment c = arena.allocate(8);
            Cuda.ok(d.cuArray3DCreate(c, desc), "cuArray3DCreate " + name);
            long a = c.get(JAVA_LONG, 0);
            copy(a, s, bytes, true);
            arrays.add(new Filled(name, a, s, bytes));
        }

        void build() {
            cu.primaryContext();
            // 2D by cuArrayCreate: the texture's array, floats of known values
            MemorySegment desc = arena.allocate(ArrayDescriptor.SIZE, 8);
            new ArrayDescriptor(W, H, FLOAT, 1).write(desc);
            MemorySegment c = arena.allocate(8);
            Cuda.ok(d.cuArrayCreate(c, desc), "cuArrayCreate");
            long texArray = c.get(JAVA_LONG, 0);
            Array3DDescriptor texShape = new Array3DDescriptor(W, H, 0, FLOAT, 1, 0);
            java.nio.ByteBuffer texels = java.nio.ByteBuffer.allocate(4 * W * H).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < W * H; i++) {
                texels.putFloat(i * 0.25f - 100);
            }
            copy(texArray, texShape, texels.array(), true);
            arrays.add(new Filled("2D texture array", texArray, texShape, texels.array()));
            add3D("3D", new Array3DDescriptor(16, 8, 4, U8, 4, 0), randomBytes(16 * 8 * 4 * 4));
            add3D("2D layered", new Array3DDescriptor(16, 8, 3, FLOAT, 2, Array3DDescriptor.LAYERED), randomBytes(16 * 8 * 3 * 8));
            add3D("cubemap", new Array3DDescriptor(8, 8, 6, FLOAT, 1, Array3DDescriptor.CUBEMAP), randomBytes(8 * 8 * 6 * 4));
            // rows of 64 KiB: three chunks of whole rows (128, 128, 44)
            add3D("2D of several chunks", new Array3DDescriptor(4096, 300, 0, FLOAT, 4, 0), randomBytes(4096L * 300 * 16));
            // slices of 4 MiB: chunks of two slices and of one
            add3D("3D of several chunks", new Array3DDescriptor(2048, 2048, 3, U8, 1, 0), randomBytes(2048L * 2048 * 3));
            // the surface's array
            Array3DDescriptor surfShape = new Array3DDescriptor(SW, SH, 0, S32, 1, Array3DDescriptor.SURFACE_LDST);
            add3D("surface array", surfShape, randomBytes(4 * SW * SH));
            // a mipmapped array: 32 x 16 floats, four levels, each filled
            MemorySegment md = arena.allocate(Array3DDescriptor.SIZE, 8);
            Array3DDescriptor mipShape = new Array3DDescriptor(32, 16, 0, FLOAT, 1, 0);
            mipShape.write(md);
            Cuda.ok(d.cuMipmappedArrayCreate(c, md, 4), "cuMipmappedArrayCreate");
            mipmap = c.get(JAVA_LONG, 0);
            for (int l = 0; l < 4; l++) {
                Cuda.ok(d.cuMipmappedArrayGetLevel(c, mipmap, l), "cuMipmappedArrayGetLevel " + l);
                levels[l] = c.get(JAVA_LONG, 0);
                levelBytes[l] = randomBytes(mipShape.level(l).bytes(1));
                copy(levels[l], mipShape.level(l), levelBytes[l], true);
            }
            // the texture object over the 2D array (point sampling, clamp, element reads), its value in device memory
            MemorySegment res = arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
            res.set(JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, texArray);
            MemorySegment td = arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8).fill((byte) 0);
            for (int k = 0; k < 3; k++) {
                td.set(JAVA_INT, 4L * k, 1); // CU_TR_ADDRESS_MODE_CLAMP
            }
            Cuda.ok(d.cuTexObjectCreate(c, res, td, MemorySegment.NULL), "cuTexObjectCreate");
            tex = c.get(JAVA_LONG, 0);
            texAt = cu.alloc(8);
            cu.put(texAt, CheckpointRestoreTest.le(tex));
            // the surface object
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, arrays.get(arrays.size() - 1).array());
            Cuda.ok(d.cuSurfObjectCreate(c, res), "cuSurfObjectCreate");
            surf = c.get(JAVA_LONG, 0);
            out = cu.alloc(4L * W * H);
            byte[] ptx = (PTX + "\0").getBytes(StandardCharsets.US_ASCII);
            MemorySegment image = arena.allocate(ptx.length);
            MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
            Cuda.ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
            long module = c.get(JAVA_LONG, 0);
            fetch = cu.function(module, "fetch");
            bump = cu.function(module, "bump");
        }

        /** Fetches the whole 2D array through the texture (whose value the kernel reads from device memory). */
        byte[] fetchAll() {
            cu.put(out, new byte[4 * W * H]);
            Cuda.ok(d.cuLaunchKernel(fetch, H, 1, 1, W, 1, 1, 0, 0, cu.params(cu.u64(texAt), cu.u64(out), cu.u32(W)),
                    MemorySegment.NULL), "launch fetch");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            return cu.get(out, 4 * W * H);
        }

        /** Adds 1 to every element of the surface's array through the surface object. */
        void bumpAll() {
            Cuda.ok(d.cuLaunchKernel(bump, SH, 1, 1, SW, 1, 1, 0, 0, cu.params(cu.u64(surf)), MemorySegment.NULL),
                    "launch bump");
            Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
            Filled s = arrays.get(arrays.size() - 1);
            java.nio.IntBuffer v = java.nio.ByteBuffer.wrap(s.bytes()).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            for (int i = 0; i < v.limit(); i++) {
                v.put(i, v.get(i) + 1);
            }
            bumps++;
        }

        /** Everything the program can see of its arrays, texture and surface, as an uninterrupted run has it. */
        void check() {
            for (Filled f : arrays) {
                assertArrayEquals(f.bytes(), read(f.array(), f.shape()), f.name() + "'s contents");
                MemorySegment desc = arena.allocate(Array3DDescriptor.SIZE, 8);
                Cuda.ok(d.cuArray3DGetDescriptor(desc, f.array()), "cuArray3DGetDescriptor " + f.name());
                assertEquals(f.shape(), Array3DDescriptor.read(desc), f.name() + "'s shape");
            }
            MemorySegment c = arena.allocate(8);
            Array3DDescriptor mipShape = new Array3DDescriptor(32, 16, 0, FLOAT, 1, 0);
            for (int l = 0; l < 4; l++) {
                Cuda.ok(d.cuMipmappedArrayGetLevel(c, mipmap, l), "cuMipmappedArrayGetLevel " + l);
                assertEquals(levels[l], c.get(JAVA_LONG, 0), "level " + l + "'s handle");
                assertArrayEquals(levelBytes[l], read(levels[l], mipShape.level(l)), "level " + l + "'s contents");
            }
            assertArrayEquals(arrays.get(0).bytes(), fetchAll(), "the texture fetches the 2D array");
            assertArrayEquals(CheckpointRestoreTest.le(tex), cu.get(texAt, 8), "the texture's value in device memory");
            MemorySegment res = arena.allocate(ResourceDesc.SIZE, 8);
            Cuda.ok(d.cuTexObjectGetResourceDesc(res, tex), "cuTexObjectGetResourceDesc");
            assertEquals(arrays.get(0).array(), res.get(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER), "the texture's array");
            Cuda.ok(d.cuSurfObjectGetResourceDesc(res, surf), "cuSurfObjectGetResourceDesc");
            assertEquals(arrays.get(arrays.size() - 1).array(), res.get(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER),
                    "the surface's array");
        }
    }

    @Test
    void arraysWithTheirContentsTexturesAndSurfacesComeBackUnchangedInAnotherBackend() throws Exception {
        Path sock = dir.resolve("b.sock");
        Path image = dir.resolve("arrays.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        BackendServer serverA = server(a);
        String uri = serverA.listen(TransportUri.parse("unix://" + sock)).toString();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            Program p = new Program(d);
            p.build();
            p.bumpAll();
            p.check();
            long texValue = p.tex, surfValue = p.surf;
            long id = onlySession(serverA);
            CheckpointResult r = serverA.checkpoint(id, image, true, null);
            // allocations: texAt, out, the module's none; arrays: 7; mipmap levels: 4
            assertEquals(2 + 7 + 4, r.allocations(), "every allocation, array and level has its contents in the image");
            long arrayBytes = p.arrays.stream().mapToLong(f -> f.bytes().length).sum();
            assertTrue(r.bytesWritten() > arrayBytes, "the arrays' contents are in the image: " + r.bytesWritten());
            serverA.close();
            a.close();
            Files.deleteIfExists(sock);
            try (BackendServer serverB = server(b)) {
                assertEquals(id, serverB.restore(image, null));
                serverB.listen(TransportUri.parse("unix://" + sock));
                p.check(); // the program resumes on B here: arrays, levels, texture and surface as they were
                assertEquals(texValue, p.tex);
                assertEquals(surfValue, p.surf);
                p.bumpAll();
                p.check();
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            b.close();
        }
    }

    /**
     * A flipped byte in an array's chunk (the image's last: the mipmapped array's last level) is refused at restore,
     * leaving no session; a restore on a device that gives the texture object another value (it made one before) is
     * refused naming the object; the undamaged image restores on a fresh device.
     */
    @Test
    void aDamagedArrayChunkAndATextureObjectOfAnotherValueAreRefused() throws Exception {
        Path image = dir.resolve("s.ckpt");
        EmulatedDevice a = new EmulatedDevice();
        long texValue;
        try (BackendServer server = server(a)) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Program p = new Program(d);
                p.build();
                texValue = p.tex;
                server.checkpoint(onlySession(server), image, false, null);
            }
        }
        a.close();
        byte[] bytes = Files.readAllBytes(image);
        Path damaged = dir.resolve("damaged.ckpt");
        byte[] flipped = bytes.clone();
        flipped[flipped.length - 8 - 4 - 3] ^= 0x40; // inside the last chunk: level 3 of the mipmapped array
        Files.write(damaged, flipped);
        EmulatedDevice b = new EmulatedDevice(), c = new EmulatedDevice(), e = new EmulatedDevice();
        try (BackendServer serverB = server(b); BackendServer serverC = server(c); BackendServer serverE = server(e);
             Arena arena = Arena.ofConfined()) {
            Exception x = assertThrows(Exception.class, () -> serverB.restore(damaged, null));
            assertTrue(x.getMessage().contains("does not match its hash") && x.getMessage().contains("level 3 of mipmapped array"),
                    x.getMessage());
            assertEquals(0, serverB.sessionCount(), "no session left");
            // device C made a texture object of its own first: the restored one would get another value
            MemorySegment out = arena.allocate(8), desc = arena.allocate(Array3DDescriptor.SIZE, 8);
            Cuda.ok(c.cuInit(0), "cuInit");
            Cuda.ok(c.cuCtxCreate_v2(out, 0, 0), "cuCtxCreate");
            new Array3DDescriptor(4, 4, 0, FLOAT, 1, 0).write(desc);
            Cuda.ok(c.cuArray3DCreate(out, desc), "cuArray3DCreate");
            MemorySegment res = arena.allocate(ResourceDesc.SIZE, 8).fill((byte) 0);
            res.set(JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, out.get(JAVA_LONG, 0));
            Cuda.ok(c.cuTexObjectCreate(out, res, arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8).fill((byte) 0),
                    MemorySegment.NULL), "cuTexObjectCreate");
            CheckpointRefused other = assertThrows(CheckpointRefused.class, () -> serverC.restore(image, null));
            assertTrue(other.getMessage().contains(String.format("the texture object 0x%x", texValue))
                    && other.getMessage().contains("came back from the driver as"), other.getMessage());
            assertEquals(0, serverC.sessionCount(), "no session left");
            assertEquals(onlyRestored(serverE, image), 1);
        } finally {
            b.close();
            c.close();
            e.close();
        }
    }

    private static int onlyRestored(BackendServer s, Path image) throws Exception {
        s.restore(image, null);
        return s.sessionCount();
    }
}
