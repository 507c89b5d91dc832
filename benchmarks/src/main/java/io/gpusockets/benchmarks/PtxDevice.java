package io.gpusockets.benchmarks;

import io.gpusockets.emulated.EmulatedDevice;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;

/**
 * The emulated device in this process with a context of its own and one PTX module, driven only
 * through its CudaDriver methods, as the backend drives it (cf. emulated-device's test Rig).
 */
final class PtxDevice implements AutoCloseable {
    private final EmulatedDevice device = new EmulatedDevice();
    private final Arena arena = Arena.ofShared();
    private final long module;
    private final Map<String, Long> functions = new HashMap<>();

    PtxDevice(String ptx) {
        ok(device.cuInit(0), "cuInit");
        MemorySegment out = arena.allocate(8);
        ok(device.cuCtxCreate(out, MemorySegment.NULL, 0, 0), "cuCtxCreate");
        ok(device.cuModuleLoadData(out, MemorySegment.ofAddress(arena.allocateFrom(ptx).address())), "cuModuleLoadData");
        module = out.get(ValueLayout.JAVA_LONG, 0);
    }

    String description() {
        return device.description();
    }

    private void ok(int rc, String what) {
        if (rc != 0) {
            throw new IllegalStateException(what + ": CUresult " + rc + " (" + device.lastErrorDetail() + ")");
        }
    }

    long function(String name) {
        return functions.computeIfAbsent(name, n -> {
            MemorySegment out = arena.allocate(8);
            ok(device.cuModuleGetFunction(out, module, MemorySegment.ofAddress(arena.allocateFrom(n).address())),
                    "cuModuleGetFunction(" + n + ")");
            return out.get(ValueLayout.JAVA_LONG, 0);
        });
    }

    long alloc(long bytes) {
        MemorySegment out = arena.allocate(8);
        ok(device.cuMemAlloc(out, bytes), "cuMemAlloc(" + bytes + ")");
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private long upload(MemorySegment host) {
        long d = alloc(host.byteSize());
        ok(device.cuMemcpyHtoD(d, host, host.byteSize()), "cuMemcpyHtoD");
        return d;
    }

    long upload(float[] v) {
        try (Arena a = Arena.ofConfined()) {
            return upload(a.allocateFrom(ValueLayout.JAVA_FLOAT, v));
        }
    }

    long upload(byte[] v) {
        try (Arena a = Arena.ofConfined()) {
            return upload(a.allocateFrom(ValueLayout.JAVA_BYTE, v));
        }
    }

    void zero(long d, long bytes) {
        ok(device.cuMemsetD8(d, (byte) 0, bytes), "cuMemsetD8");
    }

    private MemorySegment download(Arena a, long d, long bytes) {
        MemorySegment host = a.allocate(bytes, 16);
        ok(device.cuMemcpyDtoH(host, d, bytes), "cuMemcpyDtoH");
        return host;
    }

    float[] floats(long d, int n) {
        try (Arena a = Arena.ofConfined()) {
            return download(a, d, 4L * n).toArray(ValueLayout.JAVA_FLOAT);
        }
    }

    int[] ints(long d, int n) {
        try (Arena a = Arena.ofConfined()) {
            return download(a, d, 4L * n).toArray(ValueLayout.JAVA_INT);
        }
    }

    void free(long... pointers) {
        for (long p : pointers) {
            ok(device.cuMemFree(p), "cuMemFree");
        }
    }

    /** Kernel parameters of a launch: a pointer per argument, each to its own buffer; kept for every launch of it. */
    MemorySegment parameters(PtxWorkloads.Launch launch) {
        Object[] args = launch.args();
        MemorySegment pointers = arena.allocate(8L * Math.max(1, args.length), 8);
        for (int i = 0; i < args.length; i++) {
            MemorySegment value = switch (args[i]) {
                case Long v -> arena.allocateFrom(ValueLayout.JAVA_LONG, v);
                case Integer v -> arena.allocateFrom(ValueLayout.JAVA_INT, v);
                case Float v -> arena.allocateFrom(ValueLayout.JAVA_FLOAT, v);
                default -> throw new IllegalArgumentException(String.valueOf(args[i]));
            };
            pointers.setAtIndex(ValueLayout.ADDRESS, i, value);
        }
        return MemorySegment.ofAddress(pointers.address());
    }

    /** One cuLaunchKernel on the default stream and a cuCtxSynchronize; returns the nanoseconds both took. */
    long launchAndSynchronize(long function, PtxWorkloads.Launch launch, MemorySegment parameters) {
        int[] g = launch.grid();
        int[] b = launch.block();
        long t0 = System.nanoTime();
        int rc = device.cuLaunchKernel(function, g[0], g[1], g[2], b[0], b[1], b[2], 0, 0, parameters, MemorySegment.NULL);
        int sync = rc == 0 ? device.cuCtxSynchronize() : rc;
        long t = System.nanoTime() - t0;
        ok(rc, "cuLaunchKernel(" + launch.kernel() + ")");
        ok(sync, "cuCtxSynchronize after " + launch.kernel());
        return t;
    }

    @Override
    public void close() {
        device.close();
        arena.close();
    }
}
