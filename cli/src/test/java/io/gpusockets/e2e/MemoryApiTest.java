package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.Memcpy3D.Side;
import io.gpusockets.protocol.structs.ResourceDesc;
import io.gpusockets.protocol.wire.Opcodes;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The memory section of the API table (unified and pitched copies, 2D sets, host registration,
 * arrays, texture objects) through the Java frontend against a backend process on the emulated device.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MemoryApiTest extends EmulatedBackendTest {
    private static final byte UNTOUCHED = (byte) 0x5A;

    private static void expect(int expected, int actual, String what) {
        assertEquals(CuResult.name(expected), CuResult.name(actual), what);
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    private static MemorySegment hostFilled(Cuda cu, long bytes, byte value) {
        return cu.arena.allocate(bytes, 16).fill(value);
    }

    private static Side host(MemorySegment s, long x, long y, long pitch) {
        return new Side(Memcpy3D.HOST, x, y, 0, 0, s.address(), 0, 0, pitch, 0, 0);
    }

    private static Side device(long p, long x, long y, long pitch) {
        return new Side(Memcpy3D.DEVICE, x, y, 0, 0, 0, p, 0, pitch, 0, 0);
    }

    private static Side unified(long address, long pitch) {
        return new Side(Memcpy3D.UNIFIED, 0, 0, 0, 0, 0, address, 0, pitch, 0, 0);
    }

    private static Side array(long a, long x, long y) {
        return new Side(Memcpy3D.ARRAY, x, y, 0, 0, 0, 0, a, 0, 0, 0);
    }

    private static MemorySegment struct2D(Cuda cu, Side src, Side dst, long width, long height) {
        MemorySegment s = cu.arena.allocate(Memcpy3D.SIZE_2D, 8);
        new Memcpy3D(src, dst, width, height, 1).write2D(s);
        return s;
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void unifiedCopiesGoInAllFourDirections(String scheme) throws Exception {
        try (RemoteCudaDriver d = connect(scheme)) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int n = 100_003;
            byte[] data = random(n, 7);
            MemorySegment h1 = cu.arena.allocate(n), h2 = hostFilled(cu, n, (byte) 0), h3 = hostFilled(cu, n, (byte) 0);
            MemorySegment.copy(data, 0, h1, JAVA_BYTE, 0, n);
            long a = cu.alloc(n), b = cu.alloc(n + 64);
            Cuda.ok(d.cuMemcpy(a, h1.address(), n), "cuMemcpy HtoD");
            Cuda.ok(d.cuMemcpy(b + 64, a, n), "cuMemcpy DtoD (interior pointer)");
            Cuda.ok(d.cuMemcpy(h2.address(), b + 64, n), "cuMemcpy DtoH");
            assertArrayEquals(data, h2.toArray(JAVA_BYTE));
            Cuda.ok(d.cuMemcpy(h3.address(), h2.address(), n), "cuMemcpy HtoH");
            assertArrayEquals(data, h3.toArray(JAVA_BYTE));

            long stream = cu.stream();
            byte[] more = random(n, 8);
            MemorySegment.copy(more, 0, h1, JAVA_BYTE, 0, n);
            h2.fill((byte) 0);
            h3.fill((byte) 0);
            Cuda.ok(d.cuMemcpyAsync(a, h1.address(), n, stream), "cuMemcpyAsync HtoD");
            Cuda.ok(d.cuMemcpyAsync(b, a, n, stream), "cuMemcpyAsync DtoD");
            Cuda.ok(d.cuMemcpyAsync(h2.address(), b, n, stream), "cuMemcpyAsync DtoH");
            Cuda.ok(d.cuMemcpyAsync(h3.address(), h2.address(), n, stream), "cuMemcpyAsync HtoH");
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            assertArrayEquals(more, h2.toArray(JAVA_BYTE));
            assertArrayEquals(more, h3.toArray(JAVA_BYTE));
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy(a, b, n + 1), "a device span beyond its allocation");
        }
    }

    @Test
    void unifiedCopiesRefuseFreedPointersAndThoseOfDestroyedContexts() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment host = cu.arena.allocate(256);
            long kept = cu.alloc(256), freed = cu.alloc(256);
            Cuda.ok(d.cuMemFree(freed), "cuMemFree");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy(host.address(), freed, 16), "a freed pointer");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemFree(freed), "freeing it again");
            // cudart's cudaFree(0) reaches the driver as cuMemFree(0): a no-op that succeeds
            Cuda.ok(d.cuMemFree(0), "cuMemFree(0)");

            MemorySegment ctx = cu.cell();
            Cuda.ok(d.cuCtxCreate(ctx, MemorySegment.NULL, 0, 0), "cuCtxCreate");
            long lost = cu.alloc(256);
            Cuda.ok(d.cuCtxDestroy(ctx.get(JAVA_LONG, 0)), "cuCtxDestroy");
            cu.primaryContext();
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy(lost, kept, 16), "memory of a destroyed context");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy(host.address(), lost, 16), "memory of a destroyed context");
            host.fill((byte) 4);
            Cuda.ok(d.cuMemcpy(kept, host.address(), 256), "memory of the context that lives on");
            assertEquals(4, cu.get(kept, 1)[0]);
        }
    }

    /**
     * A host block with odd pitch and offsets goes to device memory with another odd pitch and comes
     * back into a third layout; every byte outside the copied block stays as it was. The larger
     * shapes are cut into pieces by the backend (rows, or parts of a row beyond its 1 MiB staging).
     */
    @ParameterizedTest
    @CsvSource({"301, 17, 777, 1037, 409", "3000, 1000, 3011, 3333, 3100", "1048581, 2, 1048600, 1048600, 1048595"})
    void pitchedCopiesBetweenHostAndDeviceAreByteExact(int width, int height, int hostPitch, int devPitch, int backPitch)
            throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int srcX = 5, srcY = 3, dstX = 11, dstY = 2, backX = 7, backY = 1;
            long hostBytes = (long) (srcY + height) * hostPitch;
            MemorySegment src = cu.arena.allocate(hostBytes);
            MemorySegment.copy(random((int) hostBytes, width), 0, src, JAVA_BYTE, 0, (int) hostBytes);
            long devBytes = (long) (dstY + height) * devPitch;
            long dev = cu.alloc(devBytes);
            Cuda.ok(d.cuMemsetD8(dev, UNTOUCHED, devBytes), "cuMemsetD8");
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, host(src, srcX, srcY, hostPitch), device(dev, dstX, dstY, devPitch), width, height)),
                    "cuMemcpy2D HtoD");

            byte[] onDevice = cu.get(dev, (int) devBytes);
            for (long i = 0; i < devBytes; i++) {
                long row = i / devPitch - dstY, col = i % devPitch - dstX;
                byte want = row >= 0 && row < height && col >= 0 && col < width
                        ? src.get(JAVA_BYTE, (srcY + row) * hostPitch + srcX + col) : UNTOUCHED;
                if (onDevice[(int) i] != want) {
                    assertEquals(want, onDevice[(int) i], "device byte " + i);
                }
            }

            long backBytes = (long) (backY + height) * backPitch;
            MemorySegment back = hostFilled(cu, backBytes, UNTOUCHED);
            long stream = cu.stream();
            Cuda.ok(d.cuMemcpy2DAsync(struct2D(cu, device(dev, dstX, dstY, devPitch), host(back, backX, backY, backPitch),
                    width, height), stream), "cuMemcpy2DAsync DtoH");
            Cuda.ok(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
            for (long i = 0; i < backBytes; i++) {
                long row = i / backPitch - backY, col = i % backPitch - backX;
                byte want = row >= 0 && row < height && col >= 0 && col < width
                        ? src.get(JAVA_BYTE, (srcY + row) * hostPitch + srcX + col) : UNTOUCHED;
                if (back.get(JAVA_BYTE, i) != want) {
                    assertEquals(want, back.get(JAVA_BYTE, i), "host byte " + i);
                }
            }
        }
    }

    @Test
    void pitchedCopiesResolveUnifiedSidesAndCopyDeviceToDevice() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int width = 40, height = 9, pitch = 64;
            MemorySegment src = cu.arena.allocate((long) width * height);
            byte[] data = random(width * height, 3);
            MemorySegment.copy(data, 0, src, JAVA_BYTE, 0, data.length);
            long a = cu.alloc((long) pitch * height), b = cu.alloc((long) width * height);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, unified(src.address(), width), unified(a, pitch), width, height)), "UNIFIED HtoD");
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, device(a, 0, 0, pitch), device(b, 0, 0, width), width, height)), "DtoD");
            assertArrayEquals(data, cu.get(b, data.length));
            MemorySegment back = hostFilled(cu, data.length, (byte) 0);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, unified(b, width), unified(back.address(), width), width, height)), "UNIFIED DtoH");
            assertArrayEquals(data, back.toArray(JAVA_BYTE));
        }
    }

    @Test
    void threeDimensionalCopiesRoundTrip() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int w = 23, h = 7, depth = 5;
            int hostPitch = 31, hostHeight = 9, devPitch = 48, devHeight = 8;
            long hostBytes = (long) hostPitch * hostHeight * (depth + 1);
            MemorySegment src = cu.arena.allocate(hostBytes);
            MemorySegment.copy(random((int) hostBytes, 11), 0, src, JAVA_BYTE, 0, (int) hostBytes);
            long devBytes = (long) devPitch * devHeight * (depth + 2);
            long dev = cu.alloc(devBytes);
            Side hostSide = new Side(Memcpy3D.HOST, 2, 1, 1, 0, src.address(), 0, 0, hostPitch, hostHeight, 0);
            Side devSide = new Side(Memcpy3D.DEVICE, 3, 0, 2, 0, 0, dev, 0, devPitch, devHeight, 0);
            MemorySegment s = cu.arena.allocate(Memcpy3D.SIZE_3D, 8);
            new Memcpy3D(hostSide, devSide, w, h, depth).write3D(s);
            Cuda.ok(d.cuMemcpy3D(s), "cuMemcpy3D HtoD");

            MemorySegment back = hostFilled(cu, (long) w * h * depth, (byte) 0);
            Side packed = new Side(Memcpy3D.HOST, 0, 0, 0, 0, back.address(), 0, 0, w, h, 0);
            new Memcpy3D(devSide, packed, w, h, depth).write3D(s);
            long stream = cu.stream();
            Cuda.ok(d.cuMemcpy3DAsync(s, stream), "cuMemcpy3DAsync DtoH");
            Cuda.ok(d.cuStreamSynchronize(stream), "sync");
            for (int z = 0; z < depth; z++) {
                for (int y = 0; y < h; y++) {
                    for (int x = 0; x < w; x++) {
                        long from = (long) (z + 1) * hostPitch * hostHeight + (long) (y + 1) * hostPitch + x + 2;
                        long to = (long) z * w * h + (long) y * w + x;
                        assertEquals(src.get(JAVA_BYTE, from), back.get(JAVA_BYTE, to), "z=" + z + " y=" + y + " x=" + x);
                    }
                }
            }
        }
    }

    @Test
    void memset2DFillsOnlyTheBlock() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment dptr = cu.cell(), pitchOut = cu.cell();
            Cuda.ok(d.cuMemAllocPitch(dptr, pitchOut, 100, 6, 4), "cuMemAllocPitch");
            long p = dptr.get(JAVA_LONG, 0), pitch = pitchOut.get(JAVA_LONG, 0);
            int total = (int) (pitch * 6);
            Cuda.ok(d.cuMemsetD8(p, (byte) 0, total), "clear");
            Cuda.ok(d.cuMemsetD2D8(p + 3, pitch, (byte) 0x11, 5, 2), "cuMemsetD2D8");
            Cuda.ok(d.cuMemsetD2D16(p + 2 * pitch + 8, pitch, (short) 0x2233, 3, 2), "cuMemsetD2D16");
            long stream = cu.stream();
            Cuda.ok(d.cuMemsetD2D32Async(p + 4 * pitch + 16, pitch, 0x44556677, 4, 2, stream), "cuMemsetD2D32Async");
            Cuda.ok(d.cuStreamSynchronize(stream), "sync");
            MemorySegment got = cu.arena.allocate(total, 16);
            MemorySegment.copy(cu.get(p, total), 0, got, JAVA_BYTE, 0, total);
            MemorySegment want = cu.arena.allocate(total, 16);
            for (int r = 0; r < 2; r++) {
                want.asSlice(r * pitch + 3, 5).fill((byte) 0x11);
                for (int i = 0; i < 3; i++) {
                    want.set(JAVA_SHORT, (2 + r) * pitch + 8 + 2L * i, (short) 0x2233);
                }
                for (int i = 0; i < 4; i++) {
                    want.set(JAVA_INT, (4 + r) * pitch + 16 + 4L * i, 0x44556677);
                }
            }
            assertArrayEquals(want.toArray(JAVA_BYTE), got.toArray(JAVA_BYTE));
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemsetD2D8(p, pitch, (byte) 1, 5, 7), "one row beyond the allocation");
        }
    }

    @Test
    void arraysTakeAndGive2DCopies() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            int w = 64, h = 32;
            MemorySegment desc = cu.arena.allocate(ArrayDescriptor.SIZE, 8);
            new ArrayDescriptor(w, h, 0x20, 1).write(desc); // FLOAT, one channel
            MemorySegment out = cu.cell();
            Cuda.ok(d.cuArrayCreate(out, desc), "cuArrayCreate");
            long arr = out.get(JAVA_LONG, 0);
            MemorySegment got = cu.arena.allocate(ArrayDescriptor.SIZE, 8);
            Cuda.ok(d.cuArrayGetDescriptor(got, arr), "cuArrayGetDescriptor");
            assertEquals(new ArrayDescriptor(w, h, 0x20, 1), ArrayDescriptor.read(got));

            float[] values = new float[w * h];
            for (int i = 0; i < values.length; i++) {
                values[i] = i * 0.25f;
            }
            MemorySegment host = cu.arena.allocate(4L * values.length);
            MemorySegment.copy(values, 0, host, JAVA_FLOAT, 0, values.length);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, host(host, 0, 0, 4L * w), array(arr, 0, 0), 4L * w, h)), "HtoA");
            // array -> device, a 16x8 block from (x=8, y=4), then device -> host
            long dev = cu.alloc(16 * 4 * 8);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, array(arr, 8 * 4, 4), device(dev, 0, 0, 16 * 4), 16 * 4, 8)), "AtoD");
            MemorySegment block = cu.arena.allocate(16 * 4 * 8);
            Cuda.ok(d.cuMemcpyDtoH(block, dev, block.byteSize()), "DtoH");
            for (int y = 0; y < 8; y++) {
                for (int x = 0; x < 16; x++) {
                    assertEquals(values[(y + 4) * w + x + 8], block.getAtIndex(JAVA_FLOAT, y * 16 + x), "x=" + x + " y=" + y);
                }
            }
            MemorySegment whole = hostFilled(cu, 4L * values.length, (byte) 0);
            Cuda.ok(d.cuMemcpy2D(struct2D(cu, array(arr, 0, 0), host(whole, 0, 0, 4L * w), 4L * w, h)), "AtoH");
            assertArrayEquals(values, whole.toArray(JAVA_FLOAT));
            expect(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuMemcpy2D(struct2D(cu, array(arr, 4, 0), host(whole, 0, 0, 4L * w), 4L * w, h)), "a block beyond the array");

            Cuda.ok(d.cuArrayDestroy(arr), "cuArrayDestroy");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuArrayGetDescriptor(got, arr), "destroyed array");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE,
                    d.cuMemcpy2D(struct2D(cu, array(arr, 0, 0), host(whole, 0, 0, 4L * w), 4L * w, h)), "destroyed array in a copy");
        }
    }

    @Test
    void textureObjectsCheckTheirResource() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long dev = cu.alloc(4096);
            MemorySegment res = cu.arena.allocate(ResourceDesc.SIZE, 8);
            res.set(JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_LINEAR);
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, dev);
            res.set(JAVA_INT, ResourceDesc.FORMAT, 0x20);
            res.set(JAVA_INT, ResourceDesc.NUM_CHANNELS, 1);
            res.set(JAVA_LONG, ResourceDesc.LINEAR_SIZE, 4096);
            MemorySegment tex = cu.arena.allocate(ResourceDesc.TEXTURE_DESC_SIZE, 8);
            MemorySegment out = cu.cell();
            Cuda.ok(d.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "cuTexObjectCreate linear");
            long linear = out.get(JAVA_LONG, 0);
            assertNotEquals(0, linear);
            MemorySegment back = cu.arena.allocate(ResourceDesc.SIZE, 8);
            Cuda.ok(d.cuTexObjectGetResourceDesc(back, linear), "cuTexObjectGetResourceDesc");
            assertArrayEquals(res.toArray(JAVA_BYTE), back.toArray(JAVA_BYTE));

            res.set(JAVA_LONG, ResourceDesc.LINEAR_SIZE, 4097);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "beyond the allocation");
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, 0x1234_0000L);
            res.set(JAVA_LONG, ResourceDesc.LINEAR_SIZE, 16);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuTexObjectCreate(out, res, tex, MemorySegment.NULL), "a bad device pointer");

            MemorySegment desc = cu.arena.allocate(ArrayDescriptor.SIZE, 8);
            new ArrayDescriptor(16, 16, 0x01, 4).write(desc);
            Cuda.ok(d.cuArrayCreate(out, desc), "cuArrayCreate");
            long arr = out.get(JAVA_LONG, 0);
            res.fill((byte) 0);
            res.set(JAVA_INT, ResourceDesc.RES_TYPE, ResourceDesc.TYPE_ARRAY);
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, arr);
            MemorySegment view = cu.arena.allocate(ResourceDesc.VIEW_DESC_SIZE, 8);
            Cuda.ok(d.cuTexObjectCreate(out, res, tex, view), "cuTexObjectCreate array with a view");
            long onArray = out.get(JAVA_LONG, 0);
            Cuda.ok(d.cuTexObjectGetResourceDesc(back, onArray), "cuTexObjectGetResourceDesc array");
            assertEquals(arr, back.get(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER), "the array as this session's handle");
            res.set(JAVA_LONG, ResourceDesc.HANDLE_OR_POINTER, 0x7777_0000L);
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuTexObjectCreate(out, res, tex, view), "an array never issued");

            Cuda.ok(d.cuTexObjectDestroy(linear), "cuTexObjectDestroy");
            Cuda.ok(d.cuTexObjectDestroy(onArray), "cuTexObjectDestroy");
            expect(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuTexObjectDestroy(linear), "destroyed twice");
        }
    }

    @Test
    void hostRegistrationIsRecordedByTheFrontend() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            MemorySegment buf = cu.arena.allocate(8192, 4096);
            MemorySegment flags = cu.cell();
            Cuda.ok(d.cuMemHostRegister(buf, 8192, 0x01), "cuMemHostRegister PORTABLE");
            Cuda.ok(d.cuMemHostGetFlags(flags, buf.asSlice(100)), "cuMemHostGetFlags inside the range");
            assertEquals(0x01, flags.get(JAVA_INT, 0));
            expect(CuResult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, d.cuMemHostRegister(buf.asSlice(4096), 100, 0), "overlap");
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemHostRegister(cu.arena.allocate(4096, 4096), 4096, 0x02), "DEVICEMAP");
            MemorySegment dptr = cu.cell();
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemHostGetDevicePointer(dptr, buf, 0), "cuMemHostGetDevicePointer");

            // registered memory copies like any other
            long dev = cu.alloc(8192);
            buf.fill((byte) 9);
            Cuda.ok(d.cuMemcpyHtoD(dev, buf, 8192), "HtoD from registered memory");
            assertEquals(9, cu.get(dev, 1)[0]);

            Cuda.ok(d.cuMemHostUnregister(buf), "cuMemHostUnregister");
            expect(CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, d.cuMemHostUnregister(buf), "twice");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemHostGetFlags(flags, buf), "no longer registered");

            MemorySegment pp = cu.cell();
            Cuda.ok(d.cuMemHostAlloc(pp, 4096, 0x01 | 0x04), "cuMemHostAlloc PORTABLE|WRITECOMBINED");
            MemorySegment pinned = pp.get(ADDRESS, 0);
            Cuda.ok(d.cuMemHostGetFlags(flags, pinned), "flags of cuMemHostAlloc memory");
            assertEquals(0x05, flags.get(JAVA_INT, 0));
            expect(CuResult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, d.cuMemHostUnregister(pinned), "allocated, not registered");
            Cuda.ok(d.cuMemFreeHost(pinned), "cuMemFreeHost");
            Cuda.ok(d.cuMemAllocHost(pp, 64), "cuMemAllocHost");
            Cuda.ok(d.cuMemHostGetFlags(flags, pp.get(ADDRESS, 0)), "flags of cuMemAllocHost memory");
            assertEquals(0, flags.get(JAVA_INT, 0));
        }
    }

    @Test
    void refusesAnotherSessionsPointerInA2DCopy() throws Exception {
        try (RemoteCudaDriver mine = connect("tcp"); RemoteCudaDriver theirs = connect("unix")) {
            Cuda a = new Cuda(mine), b = new Cuda(theirs);
            a.primaryContext();
            b.primaryContext();
            long their = b.alloc(4096);
            long own = a.alloc(4096);
            MemorySegment host = a.arena.allocate(4096);
            expect(CuResult.CUDA_ERROR_INVALID_VALUE,
                    mine.cuMemcpy2D(struct2D(a, host(host, 0, 0, 64), device(their, 0, 0, 64), 64, 64)), "their pointer as destination");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE,
                    mine.cuMemcpy2D(struct2D(a, device(their, 0, 0, 64), host(host, 0, 0, 64), 64, 64)), "their pointer as source");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE,
                    mine.cuMemcpy2D(struct2D(a, device(own, 0, 0, 64), device(their, 0, 0, 64), 64, 64)), "device to their device");
            expect(CuResult.CUDA_ERROR_INVALID_VALUE,
                    mine.cuMemcpy2D(struct2D(a, host(host, 0, 0, 64), device(own, 0, 1, 64), 64, 64)), "one row past my allocation");
            Cuda.ok(mine.cuMemcpy2D(struct2D(a, host(host, 0, 0, 64), device(own, 0, 0, 64), 64, 64)), "my own allocation");
        }
    }

    @Test
    void aPitchedCopyWhoseDataDoesNotMatchItsExtentEndsOnlyThatSession() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            ByteBuffer body = RawClient.body(Memcpy3D.WIRE_BYTES + 8);
            new Memcpy3D(new Side(Memcpy3D.HOST, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0), device(0x1000, 0, 0, 16), 16, 2, 1).encode(body);
            body.putLong(31);
            c.channel.send(RawClient.opcode("cuMemcpy2D"), 0, 1, 1, body.flip());
            c.channel.send(Opcodes.DATA, 0, 1, 1, ByteBuffer.allocate(31));
            assertTrue(c.closedByPeerWithin(5000));
        }
        backend.awaitLog("does not match the copy", 5000);
        assertTrue(backend.alive());
    }

    @Test
    void a2DCopyCarrying3DFieldsEndsOnlyThatSession() throws Exception {
        try (RawClient c = RawClient.session(backend.unix())) {
            ByteBuffer body = RawClient.body(Memcpy3D.WIRE_BYTES + 8);
            Side shifted = new Side(Memcpy3D.DEVICE, 0, 0, 5, 0, 0, 0x1000, 0, 16, 4, 0);
            new Memcpy3D(shifted, device(0x1000, 0, 0, 16), 16, 2, 1).encode(body);
            body.putLong(0);
            c.channel.send(RawClient.opcode("cuMemcpy2D"), 0, 1, 1, body.flip());
            assertTrue(c.closedByPeerWithin(5000));
        }
        backend.awaitLog("a 2D copy with 3D fields", 5000);
    }

    @Test
    void descriptorsOfTheWrongSizeAreRefusedAndTheirDataDrained() throws Exception {
        try (RawClient c = RawClient.session(backend.tcp())) {
            int op = RawClient.opcode("cuTexObjectCreate");
            c.channel.send(op, 0, 1, 7, RawClient.body(24).putLong(100).putLong(104).putLong(0).flip());
            c.channel.send(Opcodes.DATA, 0, 1, 7, ByteBuffer.allocate(100));
            c.channel.send(Opcodes.DATA, 0, 1, 7, ByteBuffer.allocate(104));
            RawClient.Frame reply;
            do {
                var h = c.channel.readHeader();
                reply = new RawClient.Frame(h, c.channel.readBody(h.length()));
            } while (!reply.header().isReply());
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, reply.body().order(ByteOrder.LITTLE_ENDIAN).getInt());
            RawClient.Frame count = c.call(RawClient.opcode("cuDeviceGetCount"), RawClient.body(0));
            assertEquals(CuResult.CUDA_SUCCESS, count.body().order(ByteOrder.LITTLE_ENDIAN).getInt(), "the lane goes on");
        }
    }
}
