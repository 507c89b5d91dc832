package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * CUDA 13's location-based pool calls (cuMemGetDefaultMemPool, cuMemGetMemPool, cuMemSetMemPool) through a
 * backend (issue 21): a device location names the session's pools of that device, as the per-device calls
 * do; host locations and managed pools are refused, and so are bad locations and devices. And the batch
 * calls of CUDA 12.8-13.0: copies (cuMemcpyBatchAsync, and cuMemcpy3DBatchAsync with pointer and array
 * operands), prefetches and discards.
 */
class PoolLocationsAndBatchesApiTest extends EmulatedBackendTest {
    private static final int PINNED = MemoryProps.ALLOCATION_TYPE_PINNED, MANAGED = 2, HOST = 2;

    private static MemorySegment location(Cuda cu, int type, int id) {
        MemorySegment l = cu.cell(8);
        l.set(JAVA_INT, 0, type);
        l.set(JAVA_INT, 4, id);
        return l;
    }

    private static long pool(Cuda cu, java.util.function.Function<MemorySegment, Integer> call, String what) {
        MemorySegment out = cu.cell();
        Cuda.ok(call.apply(out), what);
        return out.get(JAVA_LONG, 0);
    }

    @Test
    void deviceLocationsNameTheSessionsPoolsAndHostOrManagedPoolsAreRefused() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            MemorySegment dev0 = location(cu, MemoryProps.LOCATION_TYPE_DEVICE, 0);
            long byDevice = pool(cu, o -> d.cuDeviceGetDefaultMemPool(o, 0), "cuDeviceGetDefaultMemPool");
            assertEquals(byDevice, pool(cu, o -> d.cuMemGetDefaultMemPool(o, dev0, PINNED), "cuMemGetDefaultMemPool"),
                    "the device's default pool, by location");
            assertEquals(byDevice, pool(cu, o -> d.cuMemGetMemPool(o, dev0, PINNED), "cuMemGetMemPool"), "current: the default");

            MemorySegment props = cu.cell(MemoryProps.POOL_PROPS_SIZE).fill((byte) 0);
            props.set(JAVA_INT, 0, PINNED);
            props.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
            long own = pool(cu, o -> d.cuMemPoolCreate(o, props), "cuMemPoolCreate");
            Cuda.ok(d.cuMemSetMemPool(dev0, PINNED, own), "cuMemSetMemPool");
            assertEquals(own, pool(cu, o -> d.cuMemGetMemPool(o, dev0, PINNED), "cuMemGetMemPool"), "the pool set, by location");
            assertEquals(own, pool(cu, o -> d.cuDeviceGetMemPool(o, 0), "cuDeviceGetMemPool"), "the pool set, by device");
            MemorySegment p = cu.cell();
            Cuda.ok(d.cuMemAllocAsync(p, 4096, 0), "cuMemAllocAsync from the current pool");
            Cuda.ok(d.cuMemFreeAsync(p.get(JAVA_LONG, 0), 0), "cuMemFreeAsync");
            Cuda.ok(d.cuCtxSynchronize(), "sync");

            MemorySegment out = cu.cell();
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemGetDefaultMemPool(out, location(cu, HOST, 0), PINNED), "a host location");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemGetMemPool(out, dev0, MANAGED), "a managed pool");
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuMemGetDefaultMemPool(out,
                    location(cu, MemoryProps.LOCATION_TYPE_DEVICE, 7), PINNED), "a device the session does not have");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemGetDefaultMemPool(out, location(cu, 0, 0), PINNED), "an invalid location");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemGetDefaultMemPool(out, MemorySegment.NULL, PINNED), "a NULL location");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuMemSetMemPool(dev0, PINNED, 0x7777_0000L), "a pool not issued to the session");
            Cuda.ok(d.cuMemSetMemPool(dev0, PINNED, byDevice), "back to the default pool");
            Cuda.ok(d.cuMemPoolDestroy(own), "cuMemPoolDestroy");
        }
    }

    private static MemorySegment longs(Cuda cu, long... values) {
        MemorySegment a = cu.cell(8L * values.length);
        for (int i = 0; i < values.length; i++) {
            a.setAtIndex(JAVA_LONG, i, values[i]);
        }
        return a;
    }

    /** Writes a CUmemcpy3DOperand of type POINTER (1) or ARRAY (2) at {@code base} of a CUDA_MEMCPY3D_BATCH_OP. */
    private static void operand(MemorySegment op, long base, int type, long a, long b, long c, long e) {
        op.set(JAVA_INT, base, type);
        op.set(JAVA_LONG, base + 8, a);
        op.set(JAVA_LONG, base + 16, b);
        op.set(JAVA_LONG, base + 24, c);
        op.set(JAVA_LONG, base + 32, e);
    }

    private static void extent(MemorySegment op, long w, long h, long dd) {
        op.set(JAVA_LONG, 80, w);
        op.set(JAVA_LONG, 88, h);
        op.set(JAVA_LONG, 96, dd);
        op.set(JAVA_INT, 104, 1);   // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
        op.set(JAVA_INT, 108, 0);
    }

    /**
     * cuMemcpy3DBatchAsync: a pitched host box goes into a float array at an offset, from the array to
     * pitched device memory, and from there back to the host, in one batch of three operations; every
     * element equals the CPU's copy of the box. Bad streams, flags, operand types, extents, row lengths and
     * arrays are CUDA_ERROR_INVALID_VALUE, and the CUDA 12.8 form names the operation that failed.
     */
    @Test
    void batch3DCopiesMoveBoxesBetweenHostArraysAndDeviceMemory() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            long s = cu.stream();
            int aw = 16, ah = 8, ad = 4;   // the array: 16 x 8 x 4 floats
            MemorySegment desc = cu.cell(Array3DDescriptor.SIZE);
            new Array3DDescriptor(aw, ah, ad, 0x20, 1, 0).write(desc);   // CU_AD_FORMAT_FLOAT
            MemorySegment out = cu.cell();
            Cuda.ok(d.cuArray3DCreate(out, desc), "cuArray3DCreate");
            long array = out.get(JAVA_LONG, 0);
            int w = 8, h = 4, dd = 2;          // the box copied
            int hostRow = 20, hostLayer = 10;  // the host source's row length and layer height, in floats
            MemorySegment host = cu.cell(4L * hostRow * hostLayer * dd);
            for (int i = 0; i < hostRow * hostLayer * dd; i++) {
                host.setAtIndex(JAVA_FLOAT, i, i * 0.5f + 3);
            }
            long dev = cu.alloc(4L * w * h * dd);
            MemorySegment back = cu.cell(4L * 12 * h * dd).fill((byte) 0);   // rows of 12 floats, packed layers

            MemorySegment ops = cu.cell(3 * 112L).fill((byte) 0);
            MemorySegment up = ops.asSlice(0, 112), across = ops.asSlice(112, 112), down = ops.asSlice(224, 112);
            operand(up, 0, 1, host.address(), hostRow, hostLayer, 0);
            operand(up, 40, 2, array, 3, 2, 1);          // array offset (3, 2, 1) in elements
            extent(up, w, h, dd);
            operand(across, 0, 2, array, 3, 2, 1);
            operand(across, 40, 1, dev, 0, 0, 0);         // packed
            extent(across, w, h, dd);
            operand(down, 0, 1, dev, 0, 0, 0);
            operand(down, 40, 1, back.address(), 12 * 4, 0, 0);   // pointer to pointer: elements are bytes
            extent(down, 4L * w, h, dd);
            Cuda.ok(d.cuMemcpy3DBatchAsync(3, ops, 0, s), "cuMemcpy3DBatchAsync");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            for (int z = 0; z < dd; z++) {
                for (int y = 0; y < h; y++) {
                    for (int x = 0; x < 12; x++) {
                        float want = x < w ? host.getAtIndex(JAVA_FLOAT, (long) z * hostRow * hostLayer + (long) y * hostRow + x) : 0;
                        assertEquals(want, back.getAtIndex(JAVA_FLOAT, (long) z * 12 * h + (long) y * 12 + x), "element " + x + "," + y + "," + z);
                    }
                }
            }

            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(1, ops, 0, 0), "the NULL stream");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(1, ops, 1, s), "flags other than 0");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(0, ops, 0, s), "no operations");
            MemorySegment failIdx = longs(cu, 12345);
            across.set(JAVA_INT, 40, 3);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync_v1(3, ops, failIdx, 0, s), "an unknown operand type");
            assertEquals(1, failIdx.get(JAVA_LONG, 0), "the failing operation's index");
            across.set(JAVA_INT, 40, 1);
            up.set(JAVA_LONG, 16, 4);   // a row length shorter than the copy
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync_v1(3, ops, failIdx, 0, s), "a short row length");
            assertEquals(0, failIdx.get(JAVA_LONG, 0), "the failing operation's index");
            up.set(JAVA_LONG, 16, hostRow);
            extent(down, 4L * w, h, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(3, ops, 0, s), "a zero depth");
            extent(down, 4L * w, h, dd);
            down.set(JAVA_INT, 104, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(3, ops, 0, s), "an invalid source access order");
            down.set(JAVA_INT, 104, 1);
            operand(across, 0, 2, 0x7777_0000L, 3, 2, 1);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpy3DBatchAsync(3, ops, 0, s), "an array not of the session");
            operand(across, 0, 2, array, 14, 2, 1);   // 14 + 8 columns: past the array's width
            int r = d.cuMemcpy3DBatchAsync(3, ops, 0, s);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, r == CuResult.CUDA_SUCCESS ? d.cuStreamSynchronize(s) : r,
                    "a box past the array's edge");
            Cuda.ok(d.cuArrayDestroy(array), "cuArrayDestroy");
        }
    }

    /** cuMemcpyBatchAsync's copies run as unified copies; prefetch and discard batches answer as for unmanaged memory. */
    @Test
    void batchCopiesRunAndBatchPrefetchesAnswerAsForUnmanagedMemory() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            long a = cu.alloc(4096), b = cu.alloc(4096);
            long s = cu.stream();
            MemorySegment src = cu.cell(4096), dst = cu.cell(4096);
            for (int i = 0; i < 1024; i++) {
                src.setAtIndex(JAVA_INT, i, i * 7 + 1);
            }
            MemorySegment attrs = cu.cell(24).fill((byte) 0);
            attrs.set(JAVA_INT, 0, 1);   // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
            MemorySegment idx = longs(cu, 0);
            Cuda.ok(d.cuMemcpyBatchAsync(longs(cu, a), longs(cu, src.address()), longs(cu, 4096), 1, attrs, idx, 1, s), "upload");
            Cuda.ok(d.cuMemcpyBatchAsync(longs(cu, b + 8), longs(cu, a), longs(cu, 4088), 1, attrs, idx, 1, s), "device to device");
            Cuda.ok(d.cuMemcpyBatchAsync(longs(cu, dst.address()), longs(cu, b + 8), longs(cu, 4088), 1, attrs, idx, 1, s), "download");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            for (int i = 0; i < 1022; i++) {
                assertEquals(i * 7 + 1, dst.getAtIndex(JAVA_INT, i), "element " + i);
            }
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync(longs(cu, b), longs(cu, a), longs(cu, 64), 1, attrs, idx,
                    1, 0), "the legacy stream");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync(longs(cu, b), longs(cu, a), longs(cu, 64), 1, attrs, idx,
                    2, s), "more attribute groups than copies");
            attrs.set(JAVA_INT, 0, 0);   // CU_MEMCPY_SRC_ACCESS_ORDER_INVALID
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync(longs(cu, b), longs(cu, a), longs(cu, 64), 1, attrs, idx,
                    1, s), "an invalid source access order");
            attrs.set(JAVA_INT, 0, 1);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync(longs(cu, b), longs(cu, a), longs(cu, 8192), 1, attrs, idx,
                    1, s) == CuResult.CUDA_SUCCESS ? d.cuStreamSynchronize(s) : CuResult.CUDA_ERROR_INVALID_VALUE,
                    "a copy past an allocation's end");

            // the CUDA 12.8 form names the copy that failed: here the second, whose source is freed memory
            long freed = cu.alloc(64);
            Cuda.ok(d.cuMemFree(freed), "free");
            MemorySegment failIdx = longs(cu, 12345);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync_v1(longs(cu, b, b + 64), longs(cu, a, freed),
                    longs(cu, 64, 64), 2, attrs, idx, 1, failIdx, s), "a copy from freed memory");
            assertEquals(1, failIdx.get(JAVA_LONG, 0), "the failing copy's index");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemcpyBatchAsync_v1(longs(cu, b), longs(cu, a), longs(cu, 64), 1, attrs,
                    idx, 1, failIdx, 0), "the legacy stream");
            assertEquals(-1L, failIdx.get(JAVA_LONG, 0), "SIZE_MAX: no copy in particular");
            Cuda.ok(d.cuMemcpyBatchAsync_v1(longs(cu, dst.address()), longs(cu, a), longs(cu, 64), 1, attrs, idx, 1, failIdx, s),
                    "the CUDA 12.8 form");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertEquals(7 * 3 + 1, dst.getAtIndex(JAVA_INT, 3));

            MemorySegment loc = location(cu, MemoryProps.LOCATION_TYPE_DEVICE, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemPrefetchBatchAsync(longs(cu, a), longs(cu, 4096), 1, loc,
                    longs(cu, 0), 1, 0, s), "prefetching memory that is not managed");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemDiscardBatchAsync(longs(cu, a), longs(cu, 4096), 1, 0, s),
                    "discarding memory that is not managed");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuMemDiscardAndPrefetchBatchAsync(longs(cu, a), longs(cu, 4096), 1, loc,
                    longs(cu, 0), 1, 0, s), "discarding and prefetching memory that is not managed");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuMemDiscardBatchAsync(longs(cu, a), longs(cu, 4096), 1, 0, 0x6666_0000L),
                    "a stream not issued to the session");
            Cuda.ok(d.cuStreamDestroy(s), "destroy");
        }
    }
}
