package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.structs.ResourceDesc;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Unified and pitched copies, 2D sets, arrays and texture objects on the emulated device, called directly. */
class PitchedMemoryTest {
    private static Side host(MemorySegment s, long x, long y, long pitch) {
        return new Side(Memcpy3D.HOST, x, y, 0, 0, s.address(), 0, 0, pitch, 0, 0);
    }

    private static Side device(long p, long x, long y, long pitch) {
        return new Side(Memcpy3D.DEVICE, x, y, 0, 0, 0, p, 0, pitch, 0, 0);
    }

    private static Side array(long a, long x, long y) {
        return new Side(Memcpy3D.ARRAY, x, y, 0, 0, 0, 0, a, 0, 0, 0);
    }

    private static MemorySegment struct2D(Emulated e, Side src, Side dst, long width, long height) {
        MemorySegment s = e.arena.allocate(Memcpy3D.SIZE_2D, 8);
        new Memcpy3D(src, dst, width, height, 1).write2D(s);
        return Emulated.asNative(s);
    }

    private static MemorySegment randomHost(Emulated e, int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return e.arena.allocate(n, 16).copyFrom(MemorySegment.ofArray(b));
    }

    private static long array(Emulated e, long width, long height, int format, int channels) {
        MemorySegment desc = e.arena.allocate(ArrayDescriptor.SIZE, 8);
        new ArrayDescriptor(width, height, format, channels).write(desc);
        MemorySegment out = e.arena.allocate(8);
        e.ok(e.device.cuArrayCreate(out, desc));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    @Test
    void unifiedCopiesTellDeviceFromHostByAddress() {
        try (Emulated e = new Emulated()) {
            MemorySegment src = randomHost(e, 1000, 1);
            MemorySegment dst = e.arena.allocate(1000), again = e.arena.allocate(1000);
            long a = e.alloc(1000), b = e.alloc(1000);
            e.ok(e.device.cuMemcpy(a, src.address(), 1000));
            e.ok(e.device.cuMemcpy(b, a, 1000));
            e.ok(e.device.cuMemcpy(dst.address(), b, 1000));
            e.ok(e.device.cuMemcpyAsync(again.address(), dst.address(), 1000, 0));
            e.ok(e.device.cuCtxSynchronize());
            assertArrayEquals(src.toArray(ValueLayout.JAVA_BYTE), again.toArray(ValueLayout.JAVA_BYTE));
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpy(a, b, 1001), "beyond both allocations");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpy(a, 0, 10), "NULL host source");
        }
    }

    @Test
    void copies2DWithPitchesAndOffsetsByteForByte() {
        try (Emulated e = new Emulated()) {
            int w = 37, h = 11, hostPitch = 50, devPitch = 64;
            MemorySegment src = randomHost(e, hostPitch * (h + 2), 2);
            long dev = e.alloc((long) devPitch * (h + 1));
            e.ok(e.device.cuMemsetD8(dev, (byte) 0x77, (long) devPitch * (h + 1)));
            e.ok(e.device.cuMemcpy2D(struct2D(e, host(src, 3, 2, hostPitch), device(dev, 5, 1, devPitch), w, h)));
            MemorySegment all = e.arena.allocate((long) devPitch * (h + 1));
            e.ok(e.device.cuMemcpyDtoH(all, dev, all.byteSize()));
            for (int i = 0; i < all.byteSize(); i++) {
                int row = i / devPitch - 1, col = i % devPitch - 5;
                byte want = row >= 0 && row < h && col >= 0 && col < w
                        ? src.get(ValueLayout.JAVA_BYTE, (long) (row + 2) * hostPitch + col + 3) : (byte) 0x77;
                assertEquals(want, all.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE,
                    e.device.cuMemcpy2D(struct2D(e, host(src, 0, 0, 20), device(dev, 0, 0, devPitch), w, h)), "pitch below width");
            assertEquals(CUDA_ERROR_INVALID_VALUE,
                    e.device.cuMemcpy2D(struct2D(e, host(src, 0, 0, hostPitch), device(dev, 0, 2, devPitch), w, h)), "rows past the allocation");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpy2D(struct2D(e,
                    new Side(9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), device(dev, 0, 0, devPitch), w, h)), "unknown memory type");
        }
    }

    @Test
    void asyncPitchedCopiesCaptureTheHostSourceAtTheCall() {
        try (Emulated e = new Emulated()) {
            MemorySegment src = randomHost(e, 64 * 8, 3);
            byte[] before = src.toArray(ValueLayout.JAVA_BYTE);
            long dev = e.alloc(64 * 8);
            long stream = e.stream(0);
            e.ok(e.launch(e.function(e.loadShippedModule(), "gpus_sleep"), 1, 1, 0, stream, 20_000_000L));
            e.ok(e.device.cuMemcpy2DAsync(struct2D(e, host(src, 0, 0, 64), device(dev, 0, 0, 64), 64, 8), stream));
            src.fill((byte) 0);
            e.ok(e.device.cuStreamSynchronize(stream));
            MemorySegment back = e.arena.allocate(64 * 8);
            e.ok(e.device.cuMemcpyDtoH(back, dev, back.byteSize()));
            assertArrayEquals(before, back.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void copies3DBetweenPaddedLayouts() {
        try (Emulated e = new Emulated()) {
            int w = 6, h = 3, d = 4;
            MemorySegment src = randomHost(e, 10 * 5 * 5, 4);
            long dev = e.alloc(8L * 4 * 4);
            MemorySegment s = e.arena.allocate(Memcpy3D.SIZE_3D, 8);
            Side hostSide = new Side(Memcpy3D.HOST, 1, 1, 1, 0, src.address(), 0, 0, 10, 5, 0);
            Side devSide = new Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, dev, 0, 8, 4, 0);
            new Memcpy3D(hostSide, devSide, w, h, d).write3D(s);
            e.ok(e.device.cuMemcpy3D(s));
            MemorySegment packed = e.arena.allocate((long) w * h * d);
            new Memcpy3D(devSide, new Side(Memcpy3D.HOST, 0, 0, 0, 0, packed.address(), 0, 0, w, h, 0), w, h, d).write3D(s);
            e.ok(e.device.cuMemcpy3DAsync(s, 0));
            e.ok(e.device.cuCtxSynchronize());
            for (int z = 0; z < d; z++) {
                for (int y = 0; y < h; y++) {
                    for (int x = 0; x < w; x++) {
                        assertEquals(src.get(ValueLayout.JAVA_BYTE, (z + 1) * 50 + (y + 1) * 10 + x + 1),
                                packed.get(ValueLayout.JAVA_BYTE, (long) z * w * h + (long) y * w + x));
                    }
                }
            }
            new Memcpy3D(hostSide, new Side(Memcpy3D.DEVICE, 0, 0, 0, 0, 0, dev, 0, 8, 2, 0), w, h, d).write3D(s);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemcpy3D(s), "slice height below the copy's height");
        }
    }

    @Test
    void sets2DBlocksRespectingPitchAndAlignment() {
        try (Emulated e = new Emulated()) {
            long dev = e.alloc(256 * 4);
            e.ok(e.device.cuMemsetD8(dev, (byte) 0, 256 * 4));
            e.ok(e.device.cuMemsetD2D32(dev + 4, 256, 0x01020304, 3, 4));
            e.ok(e.device.cuMemsetD2D16Async(dev + 64, 256, (short) 0x0506, 2, 3, 0));
            e.ok(e.device.cuCtxSynchronize());
            int[] words = e.downloadInts(dev, 256);
            for (int r = 0; r < 4; r++) {
                for (int i = 0; i < 64; i++) {
                    int want = i >= 1 && i <= 3 ? 0x01020304 : i == 16 && r < 3 ? 0x05060506 : 0;
                    assertEquals(want, words[r * 64 + i], "row " + r + " word " + i);
                }
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD2D32(dev + 2, 256, 1, 1, 1), "misaligned");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD2D8(dev, 8, (byte) 1, 16, 2), "pitch below width");
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuMemsetD2D8(dev, 256, (byte) 1, 16, 5), "rows past the allocation");
            e.ok(e.device.cuMemsetD2D8(dev, 256, (byte) 1, 0, 5));
        }
    }

    @Test
    void arraysHoldTheirDescriptorAndCheckBounds() {
        try (Emulated e = new Emulated()) {
            long arr = array(e, 10, 4, 0x02, 2); // UNSIGNED_INT16 x2: 4 bytes per element, 40-byte rows
            MemorySegment desc = e.arena.allocate(ArrayDescriptor.SIZE, 8);
            e.ok(e.device.cuArrayGetDescriptor(Emulated.asNative(desc), arr));
            assertEquals(new ArrayDescriptor(10, 4, 0x02, 2), ArrayDescriptor.read(desc));

            MemorySegment src = randomHost(e, 40 * 4, 6);
            e.ok(e.device.cuMemcpy2D(struct2D(e, host(src, 0, 0, 40), array(arr, 0, 0), 40, 4)));
            long dev = e.alloc(16 * 2);
            e.ok(e.device.cuMemcpy2D(struct2D(e, array(arr, 8, 1), device(dev, 0, 0, 16), 16, 2)));
            MemorySegment out = e.arena.allocate(32);
            e.ok(e.device.cuMemcpyDtoH(out, dev, 32));
            for (int y = 0; y < 2; y++) {
                assertArrayEquals(src.asSlice((y + 1) * 40L + 8, 16).toArray(ValueLayout.JAVA_BYTE),
                        out.asSlice(y * 16L, 16).toArray(ValueLayout.JAVA_BYTE));
            }
            assertEquals(CUDA_ERROR_INVALID_VALUE,
                    e.device.cuMemcpy2D(struct2D(e, array(arr, 2, 0), device(dev, 0, 0, 16), 16, 1)), "x not a whole element");
            assertEquals(CUDA_ERROR_INVALID_VALUE,
                    e.device.cuMemcpy2D(struct2D(e, array(arr, 28, 0), device(dev, 0, 0, 16), 16, 1)), "past the row");
            assertEquals(CUDA_ERROR_INVALID_VALUE,
                    e.device.cuMemcpy2D(struct2D(e, array(arr, 0, 3), device(dev, 0, 0, 16), 16, 2)), "past the last row");

            MemorySegment bad = e.arena.allocate(ArrayDescriptor.SIZE, 8), handle = e.arena.allocate(8);
            new ArrayDescriptor(10, 4, 0x02, 3).write(bad);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuArrayCreate(handle, bad), "three channels");
            new ArrayDescriptor(10, 4, 0x91, 4).write(bad);
            assertEquals(CUDA_ERROR_NOT_SUPPORTED, e.device.cuArrayCreate(handle, bad), "block-compressed");

            e.ok(e.device.cuArrayDestroy(arr));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuArrayDestroy(arr));
        }
    }

    @Test
    void textureObjectsCheckTheirResourceAndKeepIt() {
        try (Emulated e = new Emulated()) {
            long dev = e.alloc(64 * 16);
            MemorySegment res = e.arena.allocate(ResourceDesc.SIZE, 8);
            res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_PITCH2D);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, dev);
            res.set(ValueLayout.JAVA_INT, ResourceDesc.FORMAT, 0x20);
            res.set(ValueLayout.JAVA_INT, ResourceDesc.NUM_CHANNELS, 1);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.PITCH2D_WIDTH, 16);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.PITCH2D_HEIGHT, 16);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.PITCH2D_PITCH, 64);
            MemorySegment tex = e.arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8);
            MemorySegment out = e.arena.allocate(8);
            e.ok(e.device.cuTexObjectCreate(out, Emulated.asNative(res), Emulated.asNative(tex), MemorySegment.NULL));
            long t = out.get(ValueLayout.JAVA_LONG, 0);
            MemorySegment back = e.arena.allocate(ResourceDesc.SIZE, 8);
            e.ok(e.device.cuTexObjectGetResourceDesc(back, t));
            assertArrayEquals(res.toArray(ValueLayout.JAVA_BYTE), back.toArray(ValueLayout.JAVA_BYTE));

            res.set(ValueLayout.JAVA_LONG, ResourceDesc.PITCH2D_HEIGHT, 17);
            assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "a row too many");
            res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_MIPMAPPED_ARRAY);
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuTexObjectCreate(out, res, tex, MemorySegment.NULL),
                    "a device pointer is no mipmapped array");
            res.set(ValueLayout.JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, array(e, 4, 4, 0x20, 4));
            e.ok(e.device.cuTexObjectCreate(out, res, tex, e.arena.allocate(ResourceDesc.VIEW_DESC_SIZE)));
            res.set(ValueLayout.JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, dev);
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuTexObjectCreate(out, res, tex, MemorySegment.NULL),
                    "a device pointer is no array");

            e.ok(e.device.cuTexObjectDestroy(t));
            assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuTexObjectGetResourceDesc(back, t));
        }
    }
}
