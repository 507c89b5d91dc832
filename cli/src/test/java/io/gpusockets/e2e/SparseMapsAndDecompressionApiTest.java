package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayMapInfo;
import io.gpusockets.protocol.structs.DecompressParams;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * cuMemMapArrayAsync and cuMemBatchDecompressAsync through the Java frontend against a backend process on the
 * emulated device, a device with neither sparse arrays nor a decompression engine: what it says of itself
 * (the attributes read 0, sparse, deferred-mapping, tile-pool and decompression memory are refused with
 * CUDA_ERROR_NOT_SUPPORTED) agrees with what the calls answer, and lists the backend must refuse (handles not
 * the session's, unknown enums, non-zero flags and reserved fields, offsets outside the allocation, ranges
 * outside the session's memory) get INVALID_HANDLE or INVALID_VALUE before any driver sees them, while a
 * well-formed list reaches the device's NOT_SUPPORTED.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SparseMapsAndDecompressionApiTest extends EmulatedBackendTest {
    private static final int FLOAT = 0x20;
    private static final long MIB2 = 2L << 20;
    private static final int SPARSE_CUDA_ARRAY_SUPPORTED = 112, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED = 121,
            MEM_DECOMPRESS_ALGORITHM_MASK = 136;

    private static void expect(int expected, int actual, String what) {
        assertEquals(CuResult.name(expected), CuResult.name(actual), what);
    }

    private static int attribute(Cuda cu, int attribute) {
        MemorySegment v = cu.cell();
        Cuda.ok(cu.d.cuDeviceGetAttribute(v, attribute, 0), "cuDeviceGetAttribute " + attribute);
        return v.get(JAVA_INT, 0);
    }

    private static MemorySegment allocationProp(Cuda cu, int usage) {
        MemorySegment p = cu.cell(MemoryProps.ALLOCATION_PROP_SIZE).fill((byte) 0);
        p.set(JAVA_INT, 0, MemoryProps.ALLOCATION_TYPE_PINNED);
        p.set(JAVA_INT, 8, MemoryProps.LOCATION_TYPE_DEVICE);
        p.set(java.lang.foreign.ValueLayout.JAVA_SHORT, MemoryProps.ALLOC_USAGE, (short) usage);
        return p;
    }

    private static long array(Cuda cu, int flags) {
        MemorySegment desc = cu.cell(Array3DDescriptor.SIZE);
        new Array3DDescriptor(256, 256, 0, FLOAT, 1, flags).write(desc);
        MemorySegment out = cu.cell();
        int r = cu.d.cuArray3DCreate(out, desc);
        return r == CuResult.CUDA_SUCCESS ? out.get(JAVA_LONG, 0) : -r;
    }

    /** A well-formed map of the mip tail's first 64 KiB of {@code array} onto {@code handle} at offset 0, device 0. */
    private static void wellFormedMap(MemorySegment e, long array, long handle) {
        e.fill((byte) 0);
        ArrayMapInfo.setU32(e, ArrayMapInfo.RESOURCE_TYPE, ArrayMapInfo.RESOURCE_ARRAY);
        ArrayMapInfo.setU64(e, ArrayMapInfo.RESOURCE, array);
        ArrayMapInfo.setU32(e, ArrayMapInfo.SUBRESOURCE_TYPE, ArrayMapInfo.SUBRESOURCE_MIPTAIL);
        ArrayMapInfo.setU64(e, ArrayMapInfo.MIPTAIL_SIZE, 65536);
        ArrayMapInfo.setU32(e, ArrayMapInfo.OPERATION, ArrayMapInfo.OPERATION_MAP);
        ArrayMapInfo.setU32(e, ArrayMapInfo.HANDLE_TYPE, ArrayMapInfo.HANDLE_GENERIC);
        ArrayMapInfo.setU64(e, ArrayMapInfo.HANDLE, handle);
        ArrayMapInfo.setU32(e, ArrayMapInfo.DEVICE_BIT_MASK, 1);
    }

    /** cuMemMapArrayAsync of two entries: a well-formed map, then a well-formed map changed by {@code change}. */
    private static int mapSecondChanged(Cuda cu, long array, long handle, Consumer<MemorySegment> change) {
        MemorySegment list = cu.cell(2L * ArrayMapInfo.SIZE);
        wellFormedMap(list.asSlice(0, ArrayMapInfo.SIZE), array, handle);
        MemorySegment second = list.asSlice(ArrayMapInfo.SIZE, ArrayMapInfo.SIZE);
        wellFormedMap(second, array, handle);
        change.accept(second);
        return cu.d.cuMemMapArrayAsync(list, 2, 0);
    }

    @Test
    void theEmulatedDeviceHasNoSparseArraysAndSaysSoEverywhere() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            assertEquals(0, attribute(cu, SPARSE_CUDA_ARRAY_SUPPORTED));
            assertEquals(0, attribute(cu, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED));
            int ns = CuResult.CUDA_ERROR_NOT_SUPPORTED;
            expect(-ns, (int) array(cu, Array3DDescriptor.SPARSE), "a sparse array");
            expect(-ns, (int) array(cu, Array3DDescriptor.DEFERRED_MAPPING), "a deferred-mapping array");
            expect(ns, d.cuMemCreate(cu.cell(), MIB2, allocationProp(cu, MemoryProps.USAGE_TILE_POOL), 0), "a tile pool");

            long a = array(cu, 0);
            MemorySegment c = cu.cell();
            Cuda.ok(d.cuMemCreate(c, MIB2, allocationProp(cu, 0), 0), "cuMemCreate");
            long h = c.get(JAVA_LONG, 0);
            // well-formed lists reach the device's answer: there is nothing to map, or unmap
            expect(ns, mapSecondChanged(cu, a, h, e -> { }), "a well-formed map");
            expect(ns, mapSecondChanged(cu, a, h, e -> {
                ArrayMapInfo.setU32(e, ArrayMapInfo.OPERATION, ArrayMapInfo.OPERATION_UNMAP);
                ArrayMapInfo.setU64(e, ArrayMapInfo.HANDLE, 0);
            }), "a well-formed unmap");
            expect(ns, d.cuMemMapArrayAsync(MemorySegment.NULL, 0, 0), "an empty list");
            Cuda.ok(d.cuMemRelease(h), "cuMemRelease");
            Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
        }
    }

    /** Each entry the backend must refuse is refused with its error before a driver sees the list (the device would say NOT_SUPPORTED). */
    @Test
    void mapListsTheBackendMustRefuseAreRefusedBeforeTheDevice() throws Exception {
        long foreignArray, foreignHandle;
        try (RemoteCudaDriver other = connect("tcp")) {
            Cuda cu = new Cuda(other);
            cu.primaryContext();
            foreignArray = array(cu, 0);
            MemorySegment c = cu.cell();
            Cuda.ok(other.cuMemCreate(c, MIB2, allocationProp(cu, 0), 0), "cuMemCreate");
            foreignHandle = c.get(JAVA_LONG, 0);
            try (RemoteCudaDriver d = connect("unix")) {
                Cuda me = new Cuda(d);
                me.primaryContext();
                long a = array(me, 0);
                Cuda.ok(d.cuMemCreate(c, MIB2, allocationProp(me, 0), 0), "cuMemCreate");
                long h = c.get(JAVA_LONG, 0);
                int inv = CuResult.CUDA_ERROR_INVALID_VALUE, handle = CuResult.CUDA_ERROR_INVALID_HANDLE;
                expect(handle, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU64(e, ArrayMapInfo.RESOURCE, foreignArray)),
                        "another session's array");
                expect(handle, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU64(e, ArrayMapInfo.RESOURCE, 0x1234)), "a guessed array");
                expect(handle, mapSecondChanged(me, a, h, e -> {
                    ArrayMapInfo.setU32(e, ArrayMapInfo.RESOURCE_TYPE, ArrayMapInfo.RESOURCE_MIPMAPPED_ARRAY);
                }), "an array named as a mipmapped array");
                expect(handle, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU64(e, ArrayMapInfo.HANDLE, foreignHandle)),
                        "another session's allocation");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.RESOURCE_TYPE, 2)), "a linear resource");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.SUBRESOURCE_TYPE, 2)), "subresourceType 2");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.OPERATION, 3)), "memOperationType 3");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.HANDLE_TYPE, 1)), "memHandleType 1");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.FLAGS, 1)), "flags");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.RESERVED + 4, 1)), "reserved[1]");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.DEVICE_BIT_MASK, 0)), "no device");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.DEVICE_BIT_MASK, 3)), "two devices");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.DEVICE_BIT_MASK, 2)), "a device not there");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU64(e, ArrayMapInfo.OFFSET, MIB2)), "offset at the end");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU64(e, ArrayMapInfo.OFFSET, -65536)), "offset 2^64-64Ki");
                expect(inv, mapSecondChanged(me, a, h, e -> ArrayMapInfo.setU32(e, ArrayMapInfo.OPERATION, ArrayMapInfo.OPERATION_UNMAP)),
                        "an unmap naming an allocation");
                expect(inv, me.d.cuMemMapArrayAsync(me.cell((ArrayMapInfo.MAX_COUNT + 1L) * ArrayMapInfo.SIZE), ArrayMapInfo.MAX_COUNT + 1, 0),
                        "more entries than the backend takes");
                // a released handle names nothing; a destroyed array neither
                Cuda.ok(d.cuMemRelease(h), "cuMemRelease");
                expect(handle, mapSecondChanged(me, a, h, e -> { }), "a released allocation");
                Cuda.ok(d.cuArrayDestroy(a), "cuArrayDestroy");
                Cuda.ok(d.cuMemCreate(c, MIB2, allocationProp(me, 0), 0), "cuMemCreate");
                expect(handle, mapSecondChanged(me, a, c.get(JAVA_LONG, 0), e -> { }), "a destroyed array");
            }
        }
    }

    private static MemorySegment decompressOp(Cuda cu, long src, long srcBytes, long dst, long dstBytes, long act, int algo) {
        MemorySegment p = cu.cell(DecompressParams.SIZE).fill((byte) 0);
        p.set(JAVA_LONG, DecompressParams.SRC_BYTES, srcBytes);
        p.set(JAVA_LONG, DecompressParams.DST_BYTES, dstBytes);
        p.set(JAVA_LONG, DecompressParams.DST_ACT_BYTES, act);
        p.set(JAVA_LONG, DecompressParams.SRC, src);
        p.set(JAVA_LONG, DecompressParams.DST, dst);
        p.set(JAVA_INT, DecompressParams.ALGO, algo);
        return p;
    }

    private static MemorySegment batch(Cuda cu, MemorySegment... ops) {
        MemorySegment all = cu.cell((long) ops.length * DecompressParams.SIZE);
        for (int i = 0; i < ops.length; i++) {
            MemorySegment.copy(ops[i], 0, all, (long) i * DecompressParams.SIZE, DecompressParams.SIZE);
        }
        return all;
    }

    @Test
    void decompressionIsNotSupportedAsTheAttributesSayAndBadBatchesNameTheirOperation() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            assertEquals(0, attribute(cu, MEM_DECOMPRESS_ALGORITHM_MASK));
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemCreate(cu.cell(), MIB2, allocationProp(cu, MemoryProps.USAGE_HW_DECOMPRESS), 0),
                    "memory for the decompression engine");
            long src = cu.alloc(4096), dst = cu.alloc(8192), act = cu.alloc(4);
            MemorySegment good = decompressOp(cu, src, 4096, dst, 8192, act, DecompressParams.DEFLATE);
            MemorySegment index = cu.cell();
            index.set(JAVA_LONG, 0, 77);
            expect(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuMemBatchDecompressAsync(batch(cu, good, good), 2, 0, index, 0),
                    "a well-formed batch reaches the device, which has no engine");
            assertEquals(-1L, index.get(JAVA_LONG, 0), "an error of no operation in particular: SIZE_MAX");

            int inv = CuResult.CUDA_ERROR_INVALID_VALUE;
            Object[][] bad = {
                {decompressOp(cu, src, 4096, dst, 8192, act, 3), "algo 3"},
                {decompressOp(cu, src, 4096, dst, 8192, act, 0), "algo 0 (unsupported)"},
                {decompressOp(cu, src, 0, dst, 8192, act, DecompressParams.SNAPPY), "no source bytes"},
                {decompressOp(cu, src, 4096, dst, 0, act, DecompressParams.LZ4), "no dstNumBytes"},
                {decompressOp(cu, 0x1000, 4096, dst, 8192, act, DecompressParams.DEFLATE), "a source that is no device memory"},
                {decompressOp(cu, src, 4096, dst, 8192, 0, DecompressParams.DEFLATE), "a NULL dstActBytes"},
            };
            for (Object[] b : bad) {
                index.set(JAVA_LONG, 0, 77);
                expect(inv, d.cuMemBatchDecompressAsync(batch(cu, good, (MemorySegment) b[0]), 2, 0, index, 0), (String) b[1]);
                assertEquals(1L, index.get(JAVA_LONG, 0), (String) b[1] + ": errorIndex");
            }
            MemorySegment padded = decompressOp(cu, src, 4096, dst, 8192, act, DecompressParams.DEFLATE);
            padded.set(java.lang.foreign.ValueLayout.JAVA_BYTE, DecompressParams.PADDING + 19, (byte) 1);
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, padded), 1, 0, index, 0), "padding not zero");
            assertEquals(0L, index.get(JAVA_LONG, 0));
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, good), 1, 1, index, 0), "flags");
            assertEquals(-1L, index.get(JAVA_LONG, 0));
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, good), 0, 0, MemorySegment.NULL, 0), "no operation");
            // ranges that start in device memory but run past it: only the backend sees that (errorIndex SIZE_MAX)
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, decompressOp(cu, src, 4097, dst, 8192, act, 1)), 1, 0, index, 0),
                    "a source past its allocation");
            assertEquals(-1L, index.get(JAVA_LONG, 0));
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, decompressOp(cu, src, 4096, dst, 8193, act, 1)), 1, 0, index, 0),
                    "a destination past its allocation");
            expect(inv, d.cuMemBatchDecompressAsync(batch(cu, decompressOp(cu, src, 4096, dst, 8192, act + 1, 1)), 1, 0, index, 0),
                    "dstActBytes past its allocation");
        }
    }
}
