package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.emulated.ptx.TensorMapLayout;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The tensor-map encoders across the wire (the Java frontend against a backend process on the emulated device): the
 * arrays hold exactly the rank's entries (the strides one fewer, none at rank 1), as the driver reads them, the map
 * comes back in the device's layout, cuTensorMapReplaceAddress sends the map and returns it changed, and what the
 * driver refuses is refused.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TensorMapApiTest extends EmulatedBackendTest {
    private static final int FLOAT32 = 7;

    /** {@code values} in native memory of exactly their size. */
    private static MemorySegment exactLongs(Arena arena, long... values) {
        return arena.allocate(8L * values.length, 8).copyFrom(MemorySegment.ofArray(values));
    }

    private static MemorySegment exactInts(Arena arena, int... values) {
        return arena.allocate(4L * values.length, 4).copyFrom(MemorySegment.ofArray(values));
    }

    @Test
    void encodesReplacesAndRefusesAcrossTheWire() throws Exception {
        try (RemoteCudaDriver d = connect("unix"); Arena arena = Arena.ofConfined()) {
            Cuda cu = new Cuda(d);
            cu.primaryContext();
            long buffer = cu.alloc(1 << 20), other = cu.alloc(1 << 20);
            MemorySegment map = arena.allocate(128, 64);
            MemorySegment dims = exactLongs(arena, 100, 40, 3), strides = exactLongs(arena, 400, 16000);
            MemorySegment box = exactInts(arena, 32, 8, 2), es = exactInts(arena, 1, 2, 1);
            Cuda.ok(d.cuTensorMapEncodeTiled(map, FLOAT32, 3, buffer, dims, strides, box, es, 0, 3, 1, 1), "cuTensorMapEncodeTiled");
            TensorMapLayout.Map m = TensorMapLayout.read(map);
            assertEquals(3, m.rank());
            assertEquals(buffer, m.address());
            assertArrayEquals(new long[] {100, 40, 3}, m.dims());
            assertArrayEquals(new long[] {4, 400, 16000}, m.strides());
            assertArrayEquals(new int[] {32, 8, 2}, m.box());
            assertArrayEquals(new int[] {1, 2, 1}, m.elementStrides());
            assertEquals(3, m.swizzle());

            Cuda.ok(d.cuTensorMapReplaceAddress(map, other), "cuTensorMapReplaceAddress");
            assertEquals(other, TensorMapLayout.read(map).address());
            assertArrayEquals(new long[] {100, 40, 3}, TensorMapLayout.read(map).dims(), "the rest kept");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuTensorMapReplaceAddress(map, other + 8), "not 16-aligned");
            assertEquals(other, TensorMapLayout.read(map).address(), "a refused replacement leaves the map");

            MemorySegment rank1 = arena.allocate(128, 64);
            Cuda.ok(d.cuTensorMapEncodeTiled(rank1, FLOAT32, 1, buffer, exactLongs(arena, 64), MemorySegment.NULL,
                    exactInts(arena, 16), exactInts(arena, 1), 0, 0, 0, 0), "a rank-1 map without strides");
            assertEquals(1, TensorMapLayout.read(rank1).rank());

            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(map, FLOAT32, 6, buffer, dims, strides, box, es, 0, 0, 0, 0), "rank 6");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(map, FLOAT32, 0, buffer, dims, strides, box, es, 0, 0, 0, 0), "rank 0");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(map, 99, 3, buffer, dims, strides, box, es, 0, 0, 0, 0), "no such data type");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(map, FLOAT32, 3, buffer, dims, strides, box, es, 0, 9, 0, 0), "no such swizzle");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(arena.allocate(192, 64).asSlice(32, 128), FLOAT32, 3, buffer, dims, strides, box, es,
                            0, 0, 0, 0), "a map not 64-aligned");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeTiled(map, FLOAT32, 3, buffer, MemorySegment.NULL, strides, box, es, 0, 0, 0, 0),
                    "NULL dimensions");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE,
                    d.cuTensorMapEncodeIm2col(map, FLOAT32, 2, buffer, dims, strides, exactInts(arena, 0), exactInts(arena, 0),
                            8, 8, es, 0, 0, 0, 0), "im2col of rank 2");
            MemorySegment im2col = arena.allocate(128, 64);
            Cuda.ok(d.cuTensorMapEncodeIm2col(im2col, FLOAT32, 3, buffer, exactLongs(arena, 8, 16, 2), exactLongs(arena, 32, 512),
                    exactInts(arena, -1), exactInts(arena, 1), 8, 16, exactInts(arena, 1, 1, 1), 0, 0, 0, 0), "cuTensorMapEncodeIm2col");
            assertEquals(TensorMapLayout.KIND_IM2COL, TensorMapLayout.read(im2col).kind());
            assertEquals(-1, TensorMapLayout.read(im2col).lower()[0]);
        }
    }
}
