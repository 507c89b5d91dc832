package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Arrays of every shape (cuArray3DCreate, cuArray3DGetDescriptor), their copies (3D copies reaching
 * layers and cubemap faces, the array copy family cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA and Async) and the
 * backend's refusals (bad descriptors, another session's array, copies beyond an array), through the
 * Java frontend against a backend process on the emulated device.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ArrayApiTest extends EmulatedBackendTest {
    private static final int FLOAT = 0x20;
    private static final int U8 = 0x01;

    private static void expect(int expected, int actual, String what) {
        assertEquals(CuResult.name(expected), CuResult.name(actual), what);
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    private static long create3D(Cuda cu, Array3DDescriptor d) {
        MemorySegment desc = cu.cell(Array3DDescriptor.SIZE);
        d.write(desc);
        MemorySegment out = cu.cell();
        Cuda.ok(cu.d.cuArray3DCreate(out, desc), "cuArray3DCreate " + d);
        return out.get(JAVA_LONG, 0);
    }

    private static int tryCreate3D(Cuda cu, Array3DDescriptor d) {
        MemorySegment desc = cu.cell(Array3DDescriptor.SIZE);
        d.write(desc);
        return cu.d.cuArray3DCreate(cu.cell(), desc);
    }

    private static MemorySegment struct3D(Cuda cu, Memcpy3D m) {
        MemorySegment s = cu.cell(Memcpy3D.SIZE_3D);
        m.write3D(s);
        return s;
    }

    private static Side host(MemorySegment s, long pitch, long height) {
        return new Side(Memcpy3D.HOST, 0, 0, 0, 0, s.address(), 0, 0, pitch, height, 0);
    }

    private static Side array(long a, long x, long y, long z) {
        return new Side(Memcpy3D.ARRAY, x, y, z, 0, 0, 0, a, 0, 0, 0);
    }

    /** Every shape cuArray3DCreate documents is made, and its descriptor reads back as given. */
    @ParameterizedTest(name = "{0}")
    @CsvSource({
        "1D, 300, 0, 0, 0",
        "2D, 64, 32, 0, 0",
        "3D, 16, 8, 4, 0",
        "1D layered, 64, 0, 5, 1",
        "2D layered, 16, 8, 3, 1",
        "cubemap, 8, 8, 6, 4",
        "cubemap layered, 8, 8, 12, 5",
        "2D surface, 32, 16, 0, 2",
        "3D surface, 8, 8, 8, 2",
        "2D gather, 32, 32, 0, 8"})
    void everyShapeIsMadeAndDescribed(String shape, long w, long h, long depth, int flags) throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            Array3DDescriptor want = new Array3DDescriptor(w, h, depth, FLOAT, 2, flags);
            long a = create3D(cu, want);
            MemorySegment got = cu.cell(Array3DDescriptor.SIZE);
            Cuda.ok(d.cuArray3DGetDescriptor(got, a), "cuArray3DGetDescriptor");
            assertEquals(want, Array3DDescriptor.read(got));
            MemorySegment flat = cu.cell(ArrayDescriptor.SIZE);
            Cuda.ok(d.cuArrayGetDescriptor(flat, a), "cuArrayGetDescriptor");
            assertEquals(new ArrayDescriptor(w, h, FLOAT, 2), ArrayDescriptor.read(flat));
            Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuArray3DGetDescriptor(got, a), "a destroyed array");
        }
    }

    @Test
    void descriptorsTheDriverRefusesAreRefused() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int v = CuResult.CUDA_ERROR_INVALID_VALUE;
            expect(v, tryCreate3D(cu, new Array3DDescriptor(0, 0, 0, FLOAT, 1, 0)), "no width");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 0, 4, FLOAT, 1, 0)), "depth without height or LAYERED");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, FLOAT, 3, 0)), "3 channels");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 4, 6, FLOAT, 1, 4)), "a cubemap that is not square");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 5, FLOAT, 1, 4)), "a cubemap of 5 faces");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, FLOAT, 1, 1)), "LAYERED without layers");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 8, FLOAT, 1, 8)), "texture gather on a 3D array");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, FLOAT, 1, 0x1000)), "an unknown flag");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(16385, 8, 8, FLOAT, 1, 0)), "beyond the 3D limit");
            expect(v, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, 0xc2, 1, 0)), "UNORM_INT8X4 with one channel");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, 0x91, 1, 0)),
                    "block-compressed formats are not emulated");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, tryCreate3D(cu, new Array3DDescriptor(8, 8, 0, FLOAT, 1, 0x40)),
                    "sparse arrays are not emulated");
            long ok = create3D(cu, new Array3DDescriptor(8, 8, 0, 0xc2, 4, 0));   // UNORM_INT8X4, 4 channels
            Cuda.ok(d.cuArrayDestroy(ok), "cuArrayDestroy");
        }
    }

    /** A 3D copy writes one layer of a 2D layered array, one face of a cubemap; the rest stays as written before. */
    @Test
    void threeDCopiesReachLayersAndFaces() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            for (int flags : new int[] {1, 4, 5}) {
                long w = 8, h = 8, slices = flags == 1 ? 3 : flags == 4 ? 6 : 12;
                long a = create3D(cu, new Array3DDescriptor(w, h, slices, U8, 4, flags));
                long row = w * 4, slice = row * h;
                byte[] all = random((int) (slice * slices), flags);
                MemorySegment in = cu.cell(all.length).copyFrom(MemorySegment.ofArray(all));
                Cuda.ok(d.cuMemcpy3D(struct3D(cu, new Memcpy3D(host(in, row, h), array(a, 0, 0, 0), row, h, slices))),
                        "every slice in");
                // slice 2, rows 3..6, bytes 8..24 replaced
                byte[] patch = random(16 * 4, 99);
                MemorySegment p = cu.cell(patch.length).copyFrom(MemorySegment.ofArray(patch));
                Cuda.ok(d.cuMemcpy3D(struct3D(cu, new Memcpy3D(host(p, 16, 4), array(a, 8, 3, 2), 16, 4, 1))), "one slice's block");
                for (int y = 0; y < 4; y++) {
                    System.arraycopy(patch, y * 16, all, (int) (2 * slice + (3 + y) * row + 8), 16);
                }
                // out through the device: array -> device (3D), device -> host
                long dev = cu.alloc(all.length);
                Side devSide = new Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, dev, 0, row, h, 0);
                Cuda.ok(d.cuMemcpy3D(struct3D(cu, new Memcpy3D(array(a, 0, 0, 0), devSide, row, h, slices))), "AtoD 3D");
                assertArrayEquals(all, cu.get(dev, all.length), "flags " + flags);
                expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3D(struct3D(cu,
                        new Memcpy3D(array(a, 0, 0, 1), devSide, row, h, slices))), "one slice beyond the array");
                Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
                Cuda.ok(d.cuMemFree(dev), "cuMemFree");
            }
        }
    }

    /** cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA and the Async forms on 1D arrays, at byte offsets. */
    @Test
    void theArrayCopyFamilyMovesBytesAtOffsets() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int n = 4096;
            long a = create3D(cu, new Array3DDescriptor(n, 0, 0, FLOAT, 1, 0));
            long b = create3D(cu, new Array3DDescriptor(n, 0, 0, FLOAT, 1, 0));
            byte[] data = random(4 * n, 7);
            MemorySegment in = cu.cell(data.length).copyFrom(MemorySegment.ofArray(data));
            Cuda.ok(d.cuMemcpyHtoA(a, 0, in, data.length), "cuMemcpyHtoA");
            MemorySegment out = cu.cell(data.length).fill((byte) 0);
            Cuda.ok(d.cuMemcpyAtoH(out, a, 0, data.length), "cuMemcpyAtoH");
            assertArrayEquals(data, out.toArray(JAVA_BYTE));

            // AtoA of the middle half to b at offset 0, then AtoD / DtoA through device memory
            Cuda.ok(d.cuMemcpyAtoA(b, 0, a, 4 * 1024, 4 * 2048), "cuMemcpyAtoA");
            long dev = cu.alloc(4 * 2048);
            Cuda.ok(d.cuMemcpyAtoD(dev, b, 0, 4 * 2048), "cuMemcpyAtoD");
            byte[] mid = java.util.Arrays.copyOfRange(data, 4 * 1024, 4 * 3072);
            assertArrayEquals(mid, cu.get(dev, mid.length));
            Cuda.ok(d.cuMemcpyDtoA(a, 4 * 16, dev, 4 * 8), "cuMemcpyDtoA");
            System.arraycopy(mid, 0, data, 4 * 16, 4 * 8);

            long s = cu.stream();
            MemorySegment out2 = cu.cell(data.length).fill((byte) 0);
            Cuda.ok(d.cuMemcpyAtoHAsync(out2, a, 0, data.length, s), "cuMemcpyAtoHAsync");
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertArrayEquals(data, out2.toArray(JAVA_BYTE));
            byte[] tail = random(64, 8);
            MemorySegment t = cu.cell(64).copyFrom(MemorySegment.ofArray(tail));
            Cuda.ok(d.cuMemcpyHtoAAsync(a, 4L * n - 64, t, 64, s), "cuMemcpyHtoAAsync");
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            Cuda.ok(d.cuMemcpyAtoH(out2, a, 0, data.length), "cuMemcpyAtoH");
            System.arraycopy(tail, 0, data, 4 * n - 64, 64);
            assertArrayEquals(data, out2.toArray(JAVA_BYTE));

            int v = CuResult.CUDA_ERROR_INVALID_VALUE;
            expect(v, d.cuMemcpyHtoA(a, 4L * n - 60, t, 64), "HtoA beyond the array's end");
            expect(v, d.cuMemcpyAtoH(out2, a, 4L * n, 4), "AtoH from the array's end");
            expect(v, d.cuMemcpyAtoD(dev, a, 0, 4 * 2048 + 4), "AtoD beyond the device allocation");
            expect(v, d.cuMemcpyDtoA(a, 0, dev, 4 * 2048 + 4), "DtoA from beyond the device allocation");
            expect(v, d.cuMemcpyAtoA(b, 4, a, 0, 4L * n), "AtoA beyond the destination");
            expect(v, d.cuMemcpyHtoA(a, 0, MemorySegment.NULL, 4), "a NULL host pointer");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuMemcpyAtoH(out2, 0xdead, 0, 4), "an array never issued");
            Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
            Cuda.ok(d.cuArrayDestroy(b), "cuArrayDestroy");
        }
    }

    /** cuMemcpy3DPeer(Async) within the backend's device: the contexts named, the copy as its 3D form; NULL contexts refused. */
    @Test
    void peerThreeDCopiesMoveBlocksBetweenContextsOfTheBackend() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            long ctx = cu.primaryContext();
            long a = create3D(cu, new Array3DDescriptor(16, 4, 3, U8, 1, 0));
            byte[] data = random(16 * 4 * 3, 11);
            long dev = cu.alloc(data.length);
            cu.put(dev, data);
            Side devSide = new Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, dev, 0, 16, 4, 0);
            MemorySegment p = struct3D(cu, new Memcpy3D(devSide, array(a, 0, 0, 0), 16, 4, 3));
            p.set(JAVA_LONG, 64, ctx);         // srcContext
            p.set(JAVA_LONG, 88 + 64, ctx);    // dstContext
            Cuda.ok(d.cuMemcpy3DPeer(p), "cuMemcpy3DPeer DtoA");
            MemorySegment back = cu.cell(data.length).fill((byte) 0);
            MemorySegment q = struct3D(cu, new Memcpy3D(array(a, 0, 0, 0), host(back, 16, 4), 16, 4, 3));
            q.set(JAVA_LONG, 64, ctx);
            q.set(JAVA_LONG, 88 + 64, ctx);
            long s = cu.stream();
            Cuda.ok(d.cuMemcpy3DPeerAsync(q, s), "cuMemcpy3DPeerAsync AtoH");
            Cuda.ok(d.cuStreamSynchronize(s), "cuStreamSynchronize");
            assertArrayEquals(data, back.toArray(JAVA_BYTE));
            q.set(JAVA_LONG, 64, 0L);
            expect(CuResult.CUDA_ERROR_INVALID_CONTEXT, d.cuMemcpy3DPeer(q), "a NULL source context");
            Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
        }
    }

    /**
     * Mipmapped arrays: levels halve each dimension, a level is an array of its own for copies and descriptors
     * (not for cuArrayDestroy), texture objects take them; refusals for too many levels and queries of
     * arrays that are not sparse, deferred-mapping or planar.
     */
    @Test
    void mipmappedArraysGiveTheirLevelsAsArrays() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment desc = cu.cell(Array3DDescriptor.SIZE);
            new Array3DDescriptor(64, 16, 0, FLOAT, 1, 0).write(desc);
            MemorySegment out = cu.cell();
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMipmappedArrayCreate(out, desc, 8), "8 levels of 64 x 16");
            Cuda.ok(d.cuMipmappedArrayCreate(out, desc, 7), "cuMipmappedArrayCreate");
            long mip = out.get(JAVA_LONG, 0);
            long[] levels = new long[7];
            for (int l = 0; l < 7; l++) {
                Cuda.ok(d.cuMipmappedArrayGetLevel(out, mip, l), "cuMipmappedArrayGetLevel " + l);
                levels[l] = out.get(JAVA_LONG, 0);
                MemorySegment got = cu.cell(Array3DDescriptor.SIZE);
                Cuda.ok(d.cuArray3DGetDescriptor(got, levels[l]), "level descriptor");
                assertEquals(new Array3DDescriptor(Math.max(1, 64 >> l), Math.max(1, 16 >> l), 0, FLOAT, 1, 0), Array3DDescriptor.read(got));
            }
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMipmappedArrayGetLevel(out, mip, 7), "level 7 of 7");
            // level 2 (16 x 4) through a 2D copy in and out
            byte[] data = random(16 * 4 * 4, 3);
            MemorySegment in = cu.cell(data.length).copyFrom(MemorySegment.ofArray(data));
            MemorySegment c = cu.cell(Memcpy3D.SIZE_3D);
            new Memcpy3D(host(in, 64, 4), array(levels[2], 0, 0, 0), 64, 4, 1).write3D(c);
            Cuda.ok(d.cuMemcpy3D(c), "into level 2");
            MemorySegment back = cu.cell(data.length).fill((byte) 0);
            new Memcpy3D(array(levels[2], 0, 0, 0), host(back, 64, 4), 64, 4, 1).write3D(c);
            Cuda.ok(d.cuMemcpy3D(c), "out of level 2");
            assertArrayEquals(data, back.toArray(JAVA_BYTE));

            // a texture object on it: its resource names the mipmapped array by this session's id
            MemorySegment res = cu.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE).fill((byte) 0);
            res.set(java.lang.foreign.ValueLayout.JAVA_INT, 0, io.gpusockets.protocol.structs.ResourceDesc.TYPE_MIPMAPPED_ARRAY);
            res.set(JAVA_LONG, 8, mip);
            MemorySegment tex = cu.cell(io.gpusockets.protocol.structs.ResourceDesc.TEXTURE_DESC_SIZE).fill((byte) 0);
            tex.set(java.lang.foreign.ValueLayout.JAVA_INT, 16, 2);   // normalized coordinates
            Cuda.ok(d.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "cuTexObjectCreate on a mipmapped array");
            long t = out.get(JAVA_LONG, 0);
            MemorySegment rback = cu.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE);
            Cuda.ok(d.cuTexObjectGetResourceDesc(rback, t), "cuTexObjectGetResourceDesc");
            assertEquals(mip, rback.get(JAVA_LONG, 8));
            MemorySegment tback = cu.cell(io.gpusockets.protocol.structs.ResourceDesc.TEXTURE_DESC_SIZE);
            Cuda.ok(d.cuTexObjectGetTextureDesc(tback, t), "cuTexObjectGetTextureDesc");
            assertArrayEquals(tex.toArray(JAVA_BYTE), tback.toArray(JAVA_BYTE));
            tex.set(java.lang.foreign.ValueLayout.JAVA_INT, 24, 1);   // mipmapFilterMode LINEAR: not emulated
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "linear mipmap filtering");
            Cuda.ok(d.cuTexObjectDestroy(t), "cuTexObjectDestroy");

            int v = CuResult.CUDA_ERROR_INVALID_VALUE;
            expect(v, d.cuArrayDestroy(levels[1]), "a level goes with its mipmapped array");
            expect(v, d.cuArrayGetPlane(out, levels[0], 0), "no planes");
            expect(v, d.cuArrayGetMemoryRequirements(cu.cell(32), levels[0], 0), "not deferred-mapping");
            expect(v, d.cuMipmappedArrayGetMemoryRequirements(cu.cell(32), mip, 0), "not deferred-mapping");
            expect(v, d.cuArrayGetSparseProperties(cu.cell(48), levels[0]), "not sparse");
            expect(v, d.cuMipmappedArrayGetSparseProperties(cu.cell(48), mip), "not sparse");
            Cuda.ok(d.cuMipmappedArrayDestroy(mip), "cuMipmappedArrayDestroy");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuArray3DGetDescriptor(cu.cell(Array3DDescriptor.SIZE), levels[0]),
                    "the levels went with it");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuMipmappedArrayDestroy(mip), "destroyed twice");
        }
    }

    /**
     * Surface and texture objects: a surface needs an array (resType checked, the array translated), and
     * both kinds are known only to the session that made them, although their ids are the driver's values.
     */
    @Test
    void surfaceAndTextureObjectsBelongToTheirSession() throws Exception {
        try (RemoteCudaDriver d1 = connect("unix"); RemoteCudaDriver d2 = connect("tcp")) {
            Cuda one = new Cuda(d1), two = new Cuda(d2);
            one.primaryContext();
            two.primaryContext();
            long a = create3D(one, new Array3DDescriptor(16, 16, 0, FLOAT, 1, Array3DDescriptor.SURFACE_LDST));
            MemorySegment res = one.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE).fill((byte) 0);
            res.set(java.lang.foreign.ValueLayout.JAVA_INT, 0, io.gpusockets.protocol.structs.ResourceDesc.TYPE_ARRAY);
            res.set(JAVA_LONG, 8, a);
            MemorySegment out = one.cell();
            Cuda.ok(d1.cuSurfObjectCreate(out, res), "cuSurfObjectCreate");
            long surf = out.get(JAVA_LONG, 0);
            MemorySegment back = one.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE);
            Cuda.ok(d1.cuSurfObjectGetResourceDesc(back, surf), "cuSurfObjectGetResourceDesc");
            assertEquals(a, back.get(JAVA_LONG, 8), "the array as this session's id");
            MemorySegment tex = one.cell(io.gpusockets.protocol.structs.ResourceDesc.TEXTURE_DESC_SIZE).fill((byte) 0);
            Cuda.ok(d1.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "cuTexObjectCreate");
            long t = out.get(JAVA_LONG, 0);
            MemorySegment view = one.cell(io.gpusockets.protocol.structs.ResourceDesc.VIEW_DESC_SIZE).fill((byte) 1);
            Cuda.ok(d1.cuTexObjectGetResourceViewDesc(view, t), "cuTexObjectGetResourceViewDesc");
            assertArrayEquals(new byte[(int) view.byteSize()], view.toArray(JAVA_BYTE), "no view given: a zeroed one");

            int h = CuResult.CUDA_ERROR_INVALID_HANDLE;
            MemorySegment other = two.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE);
            expect(h, d2.cuSurfObjectGetResourceDesc(other, surf), "another session's surface");
            expect(h, d2.cuSurfObjectDestroy(surf), "another session's surface");
            expect(h, d2.cuTexObjectGetTextureDesc(two.cell(io.gpusockets.protocol.structs.ResourceDesc.TEXTURE_DESC_SIZE), t),
                    "another session's texture");
            MemorySegment res2 = two.cell(io.gpusockets.protocol.structs.ResourceDesc.SIZE).copyFrom(res);
            expect(h, d2.cuSurfObjectCreate(two.cell(), res2), "a surface on another session's array");
            res2.set(java.lang.foreign.ValueLayout.JAVA_INT, 0, io.gpusockets.protocol.structs.ResourceDesc.TYPE_LINEAR);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d2.cuSurfObjectCreate(two.cell(), res2), "a surface on linear memory");
            long plain = create3D(one, new Array3DDescriptor(16, 16, 0, FLOAT, 1, 0));
            res.set(JAVA_LONG, 8, plain);
            // the driver makes it (an H100, 580.159.04, GPU pass of 2026-12-05), and so does the emulated device
            Cuda.ok(d1.cuSurfObjectCreate(out, res), "a surface on an array without SURFACE_LDST");
            Cuda.ok(d1.cuSurfObjectDestroy(out.get(JAVA_LONG, 0)), "cuSurfObjectDestroy");

            Cuda.ok(d1.cuSurfObjectDestroy(surf), "cuSurfObjectDestroy");
            Cuda.ok(d1.cuTexObjectDestroy(t), "cuTexObjectDestroy");
            expect(h, d1.cuSurfObjectDestroy(surf), "destroyed twice");
            Cuda.ok(d1.cuArrayDestroy(a), "cuArrayDestroy");
            Cuda.ok(d1.cuArrayDestroy(plain), "cuArrayDestroy");
        }
    }

    /** Raw frames: descriptors of the wrong length are refused and their data drained; the lane goes on. */
    @Test
    void descriptorsOfTheWrongLengthAreRefusedOnTheWire() throws Exception {
        try (RawClient c = RawClient.session(backend.unix())) {
            for (String[] call : new String[][] {{"cuSurfObjectCreate", "100"}, {"cuArray3DCreate", "24"}, {"cuMipmappedArrayCreate", "39"}}) {
                int n = Integer.parseInt(call[1]);
                java.nio.ByteBuffer body = call[0].equals("cuMipmappedArrayCreate") ? RawClient.body(12).putLong(n).putInt(3)
                        : RawClient.body(8).putLong(n);
                c.channel.send(RawClient.opcode(call[0]), 0, 1, 7, body.flip());
                c.channel.send(io.gpusockets.protocol.wire.Opcodes.DATA, 0, 1, 7, java.nio.ByteBuffer.allocate(n));
                RawClient.Frame reply;
                do {
                    var h = c.channel.readHeader();
                    reply = new RawClient.Frame(h, c.channel.readBody(h.length()));
                } while (!reply.header().isReply());
                assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, reply.body().order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt(), call[0]);
            }
            RawClient.Frame count = c.call(RawClient.opcode("cuDeviceGetCount"), RawClient.body(0));
            assertEquals(CuResult.CUDA_SUCCESS, count.body().order(java.nio.ByteOrder.LITTLE_ENDIAN).getInt(), "the lane goes on");
        }
    }

    /** Array handles are per session: another session's id is no array here, for copies, descriptors and destroys. */
    @Test
    void anotherSessionsArrayIsNoArrayHere() throws Exception {
        try (RemoteCudaDriver d1 = connect("unix"); RemoteCudaDriver d2 = connect("unix")) {
            Cuda one = new Cuda(d1), two = new Cuda(d2);
            one.primaryContext();
            two.primaryContext();
            long a = create3D(one, new Array3DDescriptor(64, 4, 2, FLOAT, 1, 0));
            MemorySegment desc = two.cell(Array3DDescriptor.SIZE);
            int h = CuResult.CUDA_ERROR_INVALID_HANDLE;
            expect(h, d2.cuArray3DGetDescriptor(desc, a), "descriptor");
            expect(h, d2.cuMemcpyAtoH(two.cell(16), a, 0, 16), "AtoH");
            expect(h, d2.cuArrayDestroy(a), "destroy");
            Memcpy3D m = new Memcpy3D(array(a, 0, 0, 0), host(two.cell(256 * 8), 256, 4), 256, 4, 2);
            expect(h, d2.cuMemcpy3D(struct3D(two, m)), "3D copy");
            Cuda.ok(d1.cuArray3DGetDescriptor(one.cell(Array3DDescriptor.SIZE), a), "still the first session's");
            Cuda.ok(d1.cuArrayDestroy(a), "cuArrayDestroy");
        }
    }
}
