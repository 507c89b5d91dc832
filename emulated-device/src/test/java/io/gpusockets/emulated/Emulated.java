package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

/**
 * Test fixture: an initialised emulated device with a context current to the creating thread, and
 * shorthands that go through the CudaDriver methods exactly as the backend's dispatcher does.
 */
final class Emulated implements AutoCloseable {
    static final String KERNELS_PTX = "/io/gpusockets/kernels/gpusockets_kernels.ptx";

    final EmulatedDevice device;
    final Arena arena = Arena.ofShared();
    final long context;

    Emulated() {
        this(new EmulatedDevice());
    }

    Emulated(EmulatedDevice device) {
        this.device = device;
        ok(device.cuInit(0));
        MemorySegment out = arena.allocate(8);
        ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
        context = out.get(ValueLayout.JAVA_LONG, 0);
    }

    void ok(int rc) {
        assertEquals(CUDA_SUCCESS, rc, () -> "CUresult " + rc + ": " + device.lastErrorDetail());
    }

    static String shippedPtx() {
        try (InputStream in = Emulated.class.getResourceAsStream(KERNELS_PTX)) {
            if (in == null) {
                throw new IllegalStateException(KERNELS_PTX + " not on the test classpath");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A NUL-terminated copy seen the way native code hands it over: a zero-length segment. */
    MemorySegment nativeString(String s) {
        return MemorySegment.ofAddress(arena.allocateFrom(s).address());
    }

    /** A zero-length view of {@code segment}, as an upcall from C would receive it. */
    static MemorySegment asNative(MemorySegment segment) {
        return MemorySegment.ofAddress(segment.address());
    }

    /** Device memory a module of this PTX text takes for its code in the footprint model (its bytes). */
    static long codeBytes(String ptx) {
        return ptx.getBytes(StandardCharsets.UTF_8).length;
    }

    long loadShippedModule() {
        MemorySegment out = arena.allocate(8);
        ok(device.cuModuleLoadData(out, nativeString(shippedPtx())));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long function(long module, String name) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuModuleGetFunction(out, module, nativeString(name)));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long alloc(long bytes) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuMemAlloc(out, bytes));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long freeBytes() {
        MemorySegment free = arena.allocate(8);
        MemorySegment total = arena.allocate(8);
        ok(device.cuMemGetInfo(free, total));
        return free.get(ValueLayout.JAVA_LONG, 0);
    }

    long stream(int flags) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuStreamCreate(out, flags));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    long event(int flags) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuEventCreate(out, flags));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    void upload(long dptr, float[] values) {
        ok(device.cuMemcpyHtoD(dptr, arena.allocateFrom(ValueLayout.JAVA_FLOAT, values), 4L * values.length));
    }

    float[] downloadFloats(long dptr, int count) {
        MemorySegment host = arena.allocate(4L * count);
        ok(device.cuMemcpyDtoH(host, dptr, 4L * count));
        return host.toArray(ValueLayout.JAVA_FLOAT);
    }

    int[] downloadInts(long dptr, int count) {
        MemorySegment host = arena.allocate(4L * count);
        ok(device.cuMemcpyDtoH(host, dptr, 4L * count));
        return host.toArray(ValueLayout.JAVA_INT);
    }

    /**
     * A native {@code void*[]} for cuLaunchKernel: each argument in its own buffer of its C size
     * (Long and Double: 8, Integer and Float: 4, Short: 2, Byte: 1, byte[]: its length, 16-aligned).
     */
    MemorySegment params(Object... args) {
        MemorySegment pointers = arena.allocate(8L * Math.max(1, args.length), 8);
        for (int i = 0; i < args.length; i++) {
            MemorySegment value = switch (args[i]) {
                case Long v -> arena.allocateFrom(ValueLayout.JAVA_LONG, v);
                case Integer v -> arena.allocateFrom(ValueLayout.JAVA_INT, v);
                case Float v -> arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
                case Double v -> arena.allocateFrom(ValueLayout.JAVA_DOUBLE, v);
                case Short v -> arena.allocateFrom(ValueLayout.JAVA_SHORT, v);
                case Byte v -> arena.allocateFrom(ValueLayout.JAVA_BYTE, v);
                case byte[] v -> arena.allocate(v.length, 16).copyFrom(MemorySegment.ofArray(v));
                default -> throw new IllegalArgumentException(String.valueOf(args[i]));
            };
            pointers.setAtIndex(ValueLayout.ADDRESS, i, value);
        }
        return pointers;
    }

    int launch(long function, int grid, int block, int shared, long stream, Object... args) {
        return device.cuLaunchKernel(function, grid, 1, 1, block, 1, 1, shared, stream, asNative(params(args)), MemorySegment.NULL);
    }

    @Override
    public void close() {
        device.close();
        arena.close();
    }
}
