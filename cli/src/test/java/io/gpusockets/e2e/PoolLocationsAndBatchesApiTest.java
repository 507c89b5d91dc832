package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * CUDA 13's location-based pool calls (cuMemGetDefaultMemPool, cuMemGetMemPool, cuMemSetMemPool) through a
 * backend (issue 21): a device location names the session's pools of that device, as the per-device calls
 * do; host locations and managed pools are refused, and so are bad locations and devices. And the batch
 * calls of CUDA 12.8-13.0: copies, prefetches and discards.
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
