package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.emulated.EmulatedDevice;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Test fixture for the interpreter: an emulated device with a current context, driven only through
 * its CudaDriver methods, as the backend does.
 */
final class Rig implements AutoCloseable {
    static final String HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n";

    final EmulatedDevice device = new EmulatedDevice();
    final Arena arena = Arena.ofShared();

    Rig() {
        ok(device.cuInit(0));
        MemorySegment out = arena.allocate(8);
        ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
    }

    void ok(int rc) {
        assertEquals(CUDA_SUCCESS, rc, () -> "CUresult " + rc + ": " + device.lastErrorDetail());
    }

    long module(String ptx) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuModuleLoadData(out, MemorySegment.ofAddress(arena.allocateFrom(ptx).address())));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long function(long module, String name) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuModuleGetFunction(out, module, MemorySegment.ofAddress(arena.allocateFrom(name).address())));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long alloc(long bytes) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuMemAlloc(out, bytes));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long upload(MemorySegment host) {
        long d = alloc(host.byteSize());
        ok(device.cuMemcpyHtoD(d, host, host.byteSize()));
        return d;
    }

    long upload(float[] v) {
        return upload(arena.allocateFrom(ValueLayout.JAVA_FLOAT, v));
    }

    long upload(int[] v) {
        return upload(arena.allocateFrom(ValueLayout.JAVA_INT, v));
    }

    long upload(long[] v) {
        return upload(arena.allocateFrom(ValueLayout.JAVA_LONG, v));
    }

    MemorySegment download(long d, long bytes) {
        MemorySegment host = arena.allocate(bytes, 16);
        ok(device.cuMemcpyDtoH(host, d, bytes));
        return host;
    }

    float[] floats(long d, int n) {
        return download(d, 4L * n).toArray(ValueLayout.JAVA_FLOAT);
    }

    int[] ints(long d, int n) {
        return download(d, 4L * n).toArray(ValueLayout.JAVA_INT);
    }

    long[] longs(long d, int n) {
        return download(d, 8L * n).toArray(ValueLayout.JAVA_LONG);
    }

    /** cuLaunchKernel with each argument in its own buffer (Long, Integer, Float, Double; a MemorySegment: its bytes). */
    int launch(long f, int[] grid, int[] block, int shared, Object... args) {
        MemorySegment pointers = arena.allocate(8L * Math.max(1, args.length), 8);
        for (int i = 0; i < args.length; i++) {
            MemorySegment value = switch (args[i]) {
                case Long v -> arena.allocateFrom(ValueLayout.JAVA_LONG, v);
                case Integer v -> arena.allocateFrom(ValueLayout.JAVA_INT, v);
                case Float v -> arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
                case Double v -> arena.allocateFrom(ValueLayout.JAVA_DOUBLE, v);
                case MemorySegment v -> v;   // a parameter's bytes as they are (a struct, a CUtensorMap)
                default -> throw new IllegalArgumentException(String.valueOf(args[i]));
            };
            pointers.setAtIndex(ValueLayout.ADDRESS, i, value);
        }
        return device.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, 0,
                MemorySegment.ofAddress(pointers.address()), MemorySegment.NULL);
    }

    void run(long f, int grid, int block, Object... args) {
        ok(launch(f, new int[] {grid, 1, 1}, new int[] {block, 1, 1}, 0, args));
        ok(device.cuCtxSynchronize());
    }

    @Override
    public void close() {
        device.close();
        arena.close();
    }
}
