package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * Stream and kernel-node attributes through a backend (issue 21): values set are answered back and
 * copied; an access-policy window must lie in the session's memory, and events (launches only),
 * device-updatable kernel nodes and ids cuda.h 13.0 does not define are refused before the driver sees them.
 */
class LaunchAttributesApiTest extends EmulatedBackendTest {
    private static final int WINDOW = 1, COOPERATIVE = 2, PRIORITY = 8, PROGRAMMATIC_EVENT = 7, DEVICE_UPDATABLE = 13;
    private static final int N = 128;

    private static MemorySegment window(Cuda cu, long base, long bytes) {
        MemorySegment v = cu.cell(64);
        v.fill((byte) 0);
        v.set(JAVA_LONG, 0, base);
        v.set(JAVA_LONG, 8, bytes);
        v.set(JAVA_FLOAT, 16, 0.5f);   // hitRatio
        v.set(JAVA_INT, 20, 2);        // hitProp: CU_ACCESS_PROPERTY_PERSISTING
        v.set(JAVA_INT, 24, 1);        // missProp: CU_ACCESS_PROPERTY_STREAMING
        return v;
    }

    private static MemorySegment intValue(Cuda cu, int value) {
        MemorySegment v = cu.cell(64);
        v.fill((byte) 0);
        v.set(JAVA_INT, 0, value);
        return v;
    }

    private static byte[] bytes(MemorySegment v) {
        return v.asSlice(0, 64).toArray(JAVA_BYTE);
    }

    @Test
    void streamAttributesAreCheckedStoredAndCopied() throws Exception {
        try (RemoteCudaDriver d = connect("tcp")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            long p = cu.alloc(4096);
            long s = cu.stream(), s2 = cu.stream();
            MemorySegment w = window(cu, p + 256, 2048);
            Cuda.ok(d.cuStreamSetAttribute(s, WINDOW, w), "set a window inside the allocation");
            Cuda.ok(d.cuStreamSetAttribute(s, PRIORITY, intValue(cu, -1)), "set a priority");
            MemorySegment back = cu.cell(64);
            Cuda.ok(d.cuStreamGetAttribute(s, WINDOW, back), "get the window");
            assertArrayEquals(bytes(w), bytes(back), "the window as set");
            Cuda.ok(d.cuStreamGetAttribute(s, PRIORITY, back), "get the priority");
            assertEquals(-1, back.get(JAVA_INT, 0));

            Cuda.ok(d.cuStreamCopyAttributes(s2, s), "cuStreamCopyAttributes");
            Cuda.ok(d.cuStreamGetAttribute(s2, WINDOW, back), "get the copied window");
            assertArrayEquals(bytes(w), bytes(back), "the copy's window");

            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamSetAttribute(s, WINDOW, window(cu, 0x1000, 4096)),
                    "a window outside the session's memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamSetAttribute(s, WINDOW, window(cu, p + 2048, 4096)),
                    "a window past the allocation's end");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamSetAttribute(s, 99, intValue(cu, 1)), "an unknown id");
            MemorySegment event = cu.cell(64);
            event.fill((byte) 0);
            event.set(JAVA_LONG, 0, cu.event());
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamSetAttribute(s, PROGRAMMATIC_EVENT, event),
                    "an event: valid for launches only");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuStreamSetAttribute(s, WINDOW, MemorySegment.NULL), "a NULL value");
            Cuda.ok(d.cuStreamGetAttribute(s, WINDOW, back), "get the window after the refusals");
            assertArrayEquals(bytes(w), bytes(back), "refused values changed nothing");

            // work on the stream runs as before
            Cuda.ok(d.cuMemsetD32Async(p, 0x5151, 1024, s), "memset on the stream");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertEquals(0x5151, MemorySegment.ofArray(cu.get(p + 4092, 4)).get(JAVA_INT_UNALIGNED, 0));
            Cuda.ok(d.cuStreamDestroy(s), "destroy");
            Cuda.ok(d.cuStreamDestroy(s2), "destroy");
        }
    }

    @Test
    void kernelNodeAttributesAreCheckedStoredAndCopied() throws Exception {
        try (RemoteCudaDriver d = connect("unix")) {
            Cuda cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            long fill = cu.function(cu.loadKernels(), "gpus_fill_u32");
            long p = cu.alloc(4 * N), q = cu.alloc(4 * N);
            MemorySegment out = cu.cell();
            Cuda.ok(d.cuGraphCreate(out, 0), "cuGraphCreate");
            long g = out.get(JAVA_LONG, 0);
            Cuda.ok(d.cuGraphAddKernelNode(out, g, MemorySegment.NULL, 0, fillNode(cu, fill, p, 0x77)), "node 1");
            long n1 = out.get(JAVA_LONG, 0);
            Cuda.ok(d.cuGraphAddKernelNode(out, g, MemorySegment.NULL, 0, fillNode(cu, fill, q, 0x99)), "node 2");
            long n2 = out.get(JAVA_LONG, 0);

            MemorySegment w = window(cu, p, 4 * N);
            Cuda.ok(d.cuGraphKernelNodeSetAttribute(n1, WINDOW, w), "set a window");
            Cuda.ok(d.cuGraphKernelNodeSetAttribute(n1, PRIORITY, intValue(cu, 3)), "set a priority");
            Cuda.ok(d.cuGraphKernelNodeSetAttribute(n1, COOPERATIVE, intValue(cu, 1)), "set cooperative");
            MemorySegment back = cu.cell(64);
            Cuda.ok(d.cuGraphKernelNodeGetAttribute(n1, WINDOW, back), "get the window");
            assertArrayEquals(bytes(w), bytes(back));
            Cuda.ok(d.cuGraphKernelNodeCopyAttributes(n2, n1), "cuGraphKernelNodeCopyAttributes");
            Cuda.ok(d.cuGraphKernelNodeGetAttribute(n2, PRIORITY, back), "the copy's priority");
            assertEquals(3, back.get(JAVA_INT, 0));
            Cuda.ok(d.cuGraphKernelNodeGetAttribute(n2, COOPERATIVE, back), "the copy's cooperative flag");
            assertEquals(1, back.get(JAVA_INT, 0));

            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphKernelNodeSetAttribute(n1, WINDOW, window(cu, q + 4, 4 * N)),
                    "a window past the allocation's end");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphKernelNodeSetAttribute(n1, DEVICE_UPDATABLE, intValue(cu, 1)),
                    "a device-updatable node");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphKernelNodeSetAttribute(n1, 42, intValue(cu, 1)), "an unknown id");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuGraphKernelNodeSetAttribute(0x4242_4242L, PRIORITY, intValue(cu, 1)),
                    "a node not issued to the session");

            Cuda.ok(d.cuGraphInstantiateWithFlags(out, g, 0), "instantiate");
            long exec = out.get(JAVA_LONG, 0);
            Cuda.ok(d.cuGraphLaunch(exec, 0), "launch");
            Cuda.ok(d.cuCtxSynchronize(), "sync");
            assertEquals(0x77, MemorySegment.ofArray(cu.get(p + 4 * (N - 1), 4)).get(JAVA_INT_UNALIGNED, 0));
            assertEquals(0x99, MemorySegment.ofArray(cu.get(q, 4)).get(JAVA_INT_UNALIGNED, 0));
            Cuda.ok(d.cuGraphExecDestroy(exec), "exec destroy");
            Cuda.ok(d.cuGraphDestroy(g), "graph destroy");
        }
    }

    /** CUDA_KERNEL_NODE_PARAMS (v2, 72 bytes) of gpus_fill_u32(p, value, N) in one block of N threads. */
    private static MemorySegment fillNode(Cuda cu, long fill, long p, int value) {
        MemorySegment k = cu.cell(72);
        k.fill((byte) 0);
        k.set(JAVA_LONG, 0, fill);
        k.set(JAVA_INT, 8, 1);
        k.set(JAVA_INT, 12, 1);
        k.set(JAVA_INT, 16, 1);
        k.set(JAVA_INT, 20, N);
        k.set(JAVA_INT, 24, 1);
        k.set(JAVA_INT, 28, 1);
        k.set(JAVA_LONG, 40, cu.params(cu.u64(p), cu.u32(value), cu.u32(N)).address());
        return k;
    }
}
