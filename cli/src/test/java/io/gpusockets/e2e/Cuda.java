package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/** Terse calls for tests: each checks its CUresult and returns the output. */
final class Cuda {
    final CudaDriver d;
    final Arena arena = Arena.ofAuto();

    Cuda(CudaDriver d) {
        this.d = d;
    }

    static void ok(int r, String what) {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new AssertionError(what + " failed: " + CuResult.name(r));
        }
    }

    MemorySegment cell() {
        return arena.allocate(16);
    }

    MemorySegment cell(long bytes) {
        return arena.allocate(bytes, 16);
    }

    int deviceCount() {
        MemorySegment c = cell();
        ok(d.cuDeviceGetCount(c), "cuDeviceGetCount");
        return c.get(JAVA_INT, 0);
    }

    String deviceName() {
        MemorySegment n = arena.allocate(256);
        ok(d.cuDeviceGetName(n, 256, 0), "cuDeviceGetName");
        return n.getString(0);
    }

    long primaryContext() {
        MemorySegment c = cell();
        ok(d.cuDevicePrimaryCtxRetain(c, 0), "cuDevicePrimaryCtxRetain");
        long ctx = c.get(JAVA_LONG, 0);
        ok(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
        return ctx;
    }

    long alloc(long bytes) {
        MemorySegment c = cell();
        ok(d.cuMemAlloc(c, bytes), "cuMemAlloc");
        return c.get(JAVA_LONG, 0);
    }

    void put(long dptr, byte[] data) {
        MemorySegment s = arena.allocate(Math.max(1, data.length));
        MemorySegment.copy(data, 0, s, JAVA_BYTE, 0, data.length);
        ok(d.cuMemcpyHtoD(dptr, s, data.length), "cuMemcpyHtoD");
    }

    byte[] get(long dptr, int n) {
        MemorySegment s = arena.allocate(Math.max(1, n));
        ok(d.cuMemcpyDtoH(s, dptr, n), "cuMemcpyDtoH");
        return s.asSlice(0, n).toArray(JAVA_BYTE);
    }

    static byte[] kernelsPtx() throws IOException {
        try (InputStream in = Cuda.class.getResourceAsStream("/io/gpusockets/kernels/gpusockets_kernels.ptx")) {
            byte[] text = in.readAllBytes();
            byte[] z = new byte[text.length + 1];
            System.arraycopy(text, 0, z, 0, text.length);
            return z;
        }
    }

    long loadKernels() throws IOException {
        byte[] ptx = kernelsPtx();
        MemorySegment image = arena.allocate(ptx.length);
        MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
        MemorySegment c = cell();
        ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
        return c.get(JAVA_LONG, 0);
    }

    long function(long module, String name) {
        MemorySegment c = cell();
        ok(d.cuModuleGetFunction(c, module, arena.allocateFrom(name)), "cuModuleGetFunction " + name);
        return c.get(JAVA_LONG, 0);
    }

    long stream() {
        MemorySegment c = cell();
        ok(d.cuStreamCreate(c, 0), "cuStreamCreate");
        return c.get(JAVA_LONG, 0);
    }

    long event() {
        MemorySegment c = cell();
        ok(d.cuEventCreate(c, 0), "cuEventCreate");
        return c.get(JAVA_LONG, 0);
    }

    /** A void** kernelParams array over values given as segments. */
    MemorySegment params(MemorySegment... values) {
        MemorySegment a = arena.allocate(ADDRESS, Math.max(1, values.length));
        for (int i = 0; i < values.length; i++) {
            a.setAtIndex(ADDRESS, i, values[i]);
        }
        return a;
    }

    MemorySegment u64(long v) {
        MemorySegment s = arena.allocate(JAVA_LONG);
        s.set(JAVA_LONG, 0, v);
        return s;
    }

    MemorySegment u32(int v) {
        MemorySegment s = arena.allocate(JAVA_INT);
        s.set(JAVA_INT, 0, v);
        return s;
    }

    MemorySegment f32(float v) {
        MemorySegment s = arena.allocate(java.lang.foreign.ValueLayout.JAVA_FLOAT);
        s.set(java.lang.foreign.ValueLayout.JAVA_FLOAT, 0, v);
        return s;
    }
}
