package io.gpusockets.examples;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A Java program using a remote GPU through the CUDA driver API: adds two vectors with the
 * gpus_vector_add kernel and checks the sum on the CPU.
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED -cp 'lib/*' io.gpusockets.examples.VectorAdd tcp://gpu-host:7070
 * </pre>
 * Without an argument it uses GPUSOCKETS_SERVER.
 */
public final class VectorAdd {
    public static void main(String[] args) throws Exception {
        int n = 1 << 20;
        try (RemoteCudaDriver cu = args.length > 0 ? RemoteCudaDriver.connect(args[0]) : RemoteCudaDriver.fromEnvironment();
             Arena arena = Arena.ofConfined()) {
            System.out.println("backend: " + cu.backendDescription());
            check(cu.cuInit(0), "cuInit");
            MemorySegment out = arena.allocate(8);
            check(cu.cuDevicePrimaryCtxRetain(out, 0), "cuDevicePrimaryCtxRetain");
            long ctx = out.get(JAVA_LONG, 0);
            check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");

            MemorySegment ptx;
            try (InputStream in = VectorAdd.class.getResourceAsStream("/io/gpusockets/kernels/gpusockets_kernels.ptx")) {
                byte[] text = in.readAllBytes();
                ptx = arena.allocate(text.length + 1L); // PTX images are NUL-terminated
                MemorySegment.copy(MemorySegment.ofArray(text), 0, ptx, 0, text.length);
            }
            check(cu.cuModuleLoadData(out, ptx), "cuModuleLoadData");
            long module = out.get(JAVA_LONG, 0);
            check(cu.cuModuleGetFunction(out, module, arena.allocateFrom("gpus_vector_add")), "cuModuleGetFunction");
            long vectorAdd = out.get(JAVA_LONG, 0);

            long bytes = 4L * n;
            MemorySegment a = arena.allocate(bytes), b = arena.allocate(bytes), c = arena.allocate(bytes);
            for (int i = 0; i < n; i++) {
                a.setAtIndex(JAVA_FLOAT, i, i);
                b.setAtIndex(JAVA_FLOAT, i, 2f * i);
            }
            long[] d = new long[3];
            for (int k = 0; k < 3; k++) {
                check(cu.cuMemAlloc(out, bytes), "cuMemAlloc");
                d[k] = out.get(JAVA_LONG, 0);
            }
            check(cu.cuMemcpyHtoD(d[0], a, bytes), "cuMemcpyHtoD");
            check(cu.cuMemcpyHtoD(d[1], b, bytes), "cuMemcpyHtoD");

            // kernelParams: an array of pointers, one to each argument's value
            MemorySegment values = arena.allocate(JAVA_LONG, 4);
            MemorySegment params = arena.allocate(ADDRESS, 4);
            for (int k = 0; k < 3; k++) {
                values.setAtIndex(JAVA_LONG, k, d[k]);
                params.setAtIndex(ADDRESS, k, values.asSlice(8L * k, 8));
            }
            values.set(JAVA_INT, 24, n);
            params.setAtIndex(ADDRESS, 3, values.asSlice(24, 4));
            check(cu.cuLaunchKernel(vectorAdd, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, params, MemorySegment.NULL),
                    "cuLaunchKernel");
            check(cu.cuMemcpyDtoH(c, d[2], bytes), "cuMemcpyDtoH");

            for (int i = 0; i < n; i++) {
                if (c.getAtIndex(JAVA_FLOAT, i) != 3f * i) {
                    throw new AssertionError("c[" + i + "] = " + c.getAtIndex(JAVA_FLOAT, i) + ", expected " + 3f * i);
                }
            }
            for (long p : d) {
                check(cu.cuMemFree(p), "cuMemFree");
            }
            check(cu.cuDevicePrimaryCtxRelease(0), "cuDevicePrimaryCtxRelease");
            System.out.println("vector add of " + n + " floats: correct");
        }
    }

    private static void check(int result, String call) {
        if (result != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException(call + " failed: " + CuResult.name(result));
        }
    }
}
