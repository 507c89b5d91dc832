package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.testing.CallbackProbe;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Stream capture and graphs (issue 11) through the Java frontend against a backend process on the
 * emulated device: capture then replay, explicit graphs with kernel nodes (parameters copied at the
 * call), host work refused in a capture, stream-ordered allocation captured into graph memory nodes, another session's graphs refused, and a session's end
 * releasing its graphs and exec graphs; issue 21: host nodes and memcpy nodes with a host side run in
 * the guest at each launch, memory allocation/free nodes, conditional nodes and node parameters are
 * checked before the driver, batch memory-operation nodes are held to cuStreamBatchMemOp's rule and run
 * at each launch, and user objects are answered in the guest, destroyed once after their last reference.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GraphsApiTest extends EmulatedBackendTest {
    private static final int N = 128;

    /** A session with a context, the kernels, x = 1.0 and y = 0 (N floats each). */
    private static final class Rig {
        final RemoteCudaDriver d;
        final Cuda cu;
        final long saxpy;
        final long x;
        final long y;

        Rig(RemoteCudaDriver d) throws Exception {
            this.d = d;
            this.cu = new Cuda(d);
            Cuda.ok(d.cuInit(0), "cuInit");
            cu.primaryContext();
            saxpy = cu.function(cu.loadKernels(), "gpus_saxpy");
            x = cu.alloc(4 * N);
            y = cu.alloc(4 * N);
            Cuda.ok(d.cuMemsetD32(x, Float.floatToIntBits(1f), N), "fill x");
            Cuda.ok(d.cuMemsetD32(y, 0, N), "clear y");
        }

        int saxpy(long stream, float a) {
            MemorySegment params = cu.params(cu.f32(a), cu.u64(x), cu.u64(y), cu.u32(N));
            return d.cuLaunchKernel(saxpy, 1, 1, 1, N, 1, 1, 0, stream, params, MemorySegment.NULL);
        }

        float[] ys() {
            MemorySegment s = cu.arena.allocate(4L * N);
            Cuda.ok(d.cuMemcpyDtoH(s, y, 4L * N), "read y");
            return s.toArray(JAVA_FLOAT);
        }

        long out(java.util.function.Function<MemorySegment, Integer> call, String what) {
            MemorySegment c = cu.cell();
            Cuda.ok(call.apply(c), what);
            return c.get(JAVA_LONG, 0);
        }

        long[] nodes(long graph) {
            MemorySegment count = cu.cell();
            Cuda.ok(d.cuGraphGetNodes(graph, MemorySegment.NULL, count), "count nodes");
            long n = count.get(JAVA_LONG, 0);
            MemorySegment a = cu.cell(8 * (n + 2));
            count.set(JAVA_LONG, 0, n + 2);
            Cuda.ok(d.cuGraphGetNodes(graph, a, count), "cuGraphGetNodes");
            assertEquals(n, count.get(JAVA_LONG, 0));
            assertEquals(0, a.getAtIndex(JAVA_LONG, n), "entries past the nodes are NULL");
            return a.asSlice(0, 8 * n).toArray(JAVA_LONG);
        }

        MemorySegment kernelParams(float a) {
            MemorySegment p = cu.cell(72);
            p.fill((byte) 0);
            p.set(JAVA_LONG, 0, saxpy);
            p.set(JAVA_INT, 8, 1);
            p.set(JAVA_INT, 12, 1);
            p.set(JAVA_INT, 16, 1);
            p.set(JAVA_INT, 20, N);
            p.set(JAVA_INT, 24, 1);
            p.set(JAVA_INT, 28, 1);
            // The values live in memory the program reuses at once: the node must have its own copy.
            p.set(JAVA_LONG, 40, cu.params(cu.f32(a), cu.u64(x), cu.u64(y), cu.u32(N)).address());
            return p;
        }
    }

    private static float[] all(float v) {
        float[] f = new float[N];
        Arrays.fill(f, v);
        return f;
    }

    @Test
    void aCapturedStreamReplaysAsItsGraphAndCaptureInfoNamesTheNodes() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            long s = r.cu.stream();
            Cuda.ok(d.cuStreamBeginCapture(s, 0), "cuStreamBeginCapture");
            Cuda.ok(d.cuMemsetD32Async(r.y, Float.floatToIntBits(1f), N, s), "memset");
            Cuda.ok(r.saxpy(s, 2f), "saxpy");
            MemorySegment status = r.cu.cell(), id = r.cu.cell(), graph = r.cu.cell(), deps = r.cu.cell(),
                    edges = r.cu.cell(), count = r.cu.cell();
            Cuda.ok(d.cuStreamGetCaptureInfo(s, status, id, graph, deps, edges, count), "cuStreamGetCaptureInfo");
            assertEquals(1, status.get(JAVA_INT, 0));
            assertEquals(1, count.get(JAVA_LONG, 0), "the next node depends on the launch");
            long last = MemorySegment.ofAddress(deps.get(JAVA_LONG, 0)).reinterpret(8).get(JAVA_LONG, 0);
            Cuda.ok(r.saxpy(s, 2f), "saxpy");
            long g = r.out(o -> d.cuStreamEndCapture(s, o), "cuStreamEndCapture");
            assertEquals(graph.get(JAVA_LONG, 0), g, "the graph captured into is the one EndCapture returns");
            assertArrayEquals(all(0f), r.ys(), "captured work does not run");

            long[] nodes = r.nodes(g);
            assertEquals(3, nodes.length);
            assertEquals(last, nodes[1]);
            MemorySegment type = r.cu.cell();
            Cuda.ok(d.cuGraphNodeGetType(nodes[0], type), "type");
            assertEquals(2, type.get(JAVA_INT, 0), "CU_GRAPH_NODE_TYPE_MEMSET");
            MemorySegment dep = r.cu.cell(16);
            count.set(JAVA_LONG, 0, 2);
            Cuda.ok(d.cuGraphNodeGetDependencies(nodes[2], dep, MemorySegment.NULL, count), "dependencies");
            assertEquals(1, count.get(JAVA_LONG, 0));
            assertEquals(nodes[1], dep.get(JAVA_LONG, 0));

            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate");
            for (int i = 0; i < 2; i++) {
                Cuda.ok(d.cuMemsetD32(r.y, Float.floatToIntBits(-7f), N), "scribble");
                Cuda.ok(d.cuGraphLaunch(exec, s), "cuGraphLaunch");
                Cuda.ok(d.cuStreamSynchronize(s), "sync");
                assertArrayEquals(all(5f), r.ys(), "launch " + i);
            }
            Cuda.ok(d.cuGraphExecDestroy(exec), "cuGraphExecDestroy");
            Cuda.ok(d.cuGraphDestroy(g), "cuGraphDestroy");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuGraphNodeGetType(nodes[0], type), "nodes go with their graph");
        }
    }

    /**
     * Issue 21: async copies with a host side on a capturing stream are captured as the driver captures
     * them, as memcpy nodes whose host memory is read and written at each launch (CopyCalls), not
     * refused: host to device, a kernel, device to host, launched with new host input each time.
     */
    @Test
    void hostCopiesInACaptureBecomeCopyNodesThatReadAndWriteHostMemoryAtEachLaunch() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            long s = r.cu.stream();
            MemorySegment in = r.cu.arena.allocate(4L * N), out = r.cu.arena.allocate(4L * N);
            Cuda.ok(d.cuStreamBeginCapture(s, 2), "begin (relaxed)");
            Cuda.ok(d.cuMemcpyHtoDAsync(r.y, in, 4L * N, s), "host to device in the capture");
            Cuda.ok(r.saxpy(s, 2f), "saxpy");
            Cuda.ok(d.cuMemcpyDtoHAsync(out, r.y, 4L * N, s), "device to host in the capture");
            long graph = r.out(o -> d.cuStreamEndCapture(s, o), "end capture");
            assertArrayEquals(all(0f), r.ys(), "captured work does not run");
            assertArrayEquals(new float[N], out.toArray(JAVA_FLOAT), "nor do captured copies");
            assertEquals(3, r.nodes(graph).length);
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, graph, 0), "instantiate");
            for (int launch = 0; launch < 3; launch++) {
                float[] want = new float[N];
                for (int i = 0; i < N; i++) {
                    in.setAtIndex(JAVA_FLOAT, i, i * 0.5f - launch);
                    want[i] = i * 0.5f - launch + 2f;
                }
                Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
                Cuda.ok(d.cuStreamSynchronize(s), "sync");
                assertArrayEquals(want, out.toArray(JAVA_FLOAT), "launch " + launch + " read the new input");
            }
            Cuda.ok(d.cuGraphExecDestroy(exec), "exec destroy");
            Cuda.ok(d.cuGraphDestroy(graph), "graph destroy");
        }
    }

    @Test
    void hostFunctionsInACaptureBecomeHostNodesThatRunAtEachLaunch() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            long s = r.cu.stream();
            Cuda.ok(d.cuStreamBeginCapture(s, 2), "begin again");
            long userData = 0x6a9f0000L + System.nanoTime() % 0xffff;
            Cuda.ok(r.saxpy(s, 1f), "saxpy in the capture");
            Cuda.ok(d.cuLaunchHostFunc(s, CallbackProbe.HOST_FN, MemorySegment.ofAddress(userData)), "a host function in a capture");
            assertTrue(CallbackProbe.callsWith(userData).isEmpty(), "captured: it does not run now");
            long graph = r.out(o -> d.cuStreamEndCapture(s, o), "end capture");
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, graph, 0), "instantiate");
            for (int i = 1; i <= 2; i++) {
                Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
                Cuda.ok(d.cuStreamSynchronize(s), "sync");
                assertEquals(i, CallbackProbe.callsWith(userData).size(), "the host node ran at each launch");
            }
            assertArrayEquals(all(2f), r.ys(), "the captured saxpy ran twice");
            Cuda.ok(r.saxpy(s, 2f), "not capturing: runs");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertArrayEquals(all(4f), r.ys());
        }
    }

    /**
     * Stream-ordered allocation and free in a capture become graph memory nodes (as cudaMallocAsync in a
     * captured region does): the captured work may use the allocation, and the graph runs.
     */
    @Test
    void streamOrderedAllocationInACaptureBecomesAGraphMemoryNodeThatRuns() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            long s = r.cu.stream();
            MemorySegment p = r.cu.cell();
            Cuda.ok(d.cuStreamBeginCapture(s, 2), "begin (relaxed)");
            Cuda.ok(d.cuMemAllocAsync(p, 4 * N, s), "cuMemAllocAsync in the capture");
            long scratch = p.get(JAVA_LONG, 0);
            Cuda.ok(d.cuMemsetD32Async(scratch, Float.floatToIntBits(3f), N, s), "fill the graph's allocation");
            Cuda.ok(d.cuMemcpyDtoDAsync(r.y, scratch, 4L * N, s), "copy it out");
            Cuda.ok(d.cuMemFreeAsync(scratch, s), "cuMemFreeAsync in the capture");
            long g = r.out(o -> d.cuStreamEndCapture(s, o), "cuStreamEndCapture");
            assertArrayEquals(all(0f), r.ys(), "captured work does not run");
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate");
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertArrayEquals(all(3f), r.ys(), "the graph allocated, filled, copied and freed");
            Cuda.ok(d.cuGraphExecDestroy(exec), "exec destroy");
            Cuda.ok(d.cuGraphDestroy(g), "graph destroy");
        }
    }

    @Test
    void explicitGraphsCopyKernelParametersAtTheCallAndRunInDependencyOrder() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Rig r = new Rig(d);
            long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            MemorySegment kp = r.kernelParams(10f);
            long k2 = r.out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, kp), "kernel node");
            kp.fill((byte) 0);   // the program reuses its struct: the node keeps what it was given
            MemorySegment back = r.cu.cell(72);
            Cuda.ok(d.cuGraphKernelNodeGetParams(k2, back), "cuGraphKernelNodeGetParams");
            assertEquals(r.saxpy, back.get(JAVA_LONG, 0));
            assertEquals(N, back.get(JAVA_INT, 20));
            MemorySegment values = MemorySegment.ofAddress(back.get(JAVA_LONG, 40)).reinterpret(32);
            assertEquals(10f, MemorySegment.ofAddress(values.getAtIndex(JAVA_LONG, 0)).reinterpret(4).get(JAVA_FLOAT, 0));
            assertEquals(r.y, MemorySegment.ofAddress(values.getAtIndex(JAVA_LONG, 2)).reinterpret(8).get(JAVA_LONG, 0));
            assertEquals(N, MemorySegment.ofAddress(values.getAtIndex(JAVA_LONG, 3)).reinterpret(4).get(JAVA_INT, 0));
            MemorySegment set = r.cu.cell(40);
            set.fill((byte) 0);
            set.set(JAVA_LONG, 0, r.y);
            set.set(JAVA_INT, 16, Float.floatToIntBits(1f));
            set.set(JAVA_INT, 20, 4);
            set.set(JAVA_LONG, 24, N);
            set.set(JAVA_LONG, 32, 1);
            long m = r.out(o -> d.cuGraphAddMemsetNode(o, g, MemorySegment.NULL, 0, set, 0), "memset node");
            MemorySegment deps = r.cu.cell(8);
            deps.set(JAVA_LONG, 0, m);
            long k1 = r.out(o -> d.cuGraphAddKernelNode(o, g, deps, 1, r.kernelParams(2f)), "kernel node after memset");
            MemorySegment from = r.cu.cell(8), to = r.cu.cell(8);
            from.set(JAVA_LONG, 0, k1);
            to.set(JAVA_LONG, 0, k2);
            Cuda.ok(d.cuGraphAddDependencies(g, from, to, MemorySegment.NULL, 1), "k1 -> k2");
            MemorySegment count = r.cu.cell();
            Cuda.ok(d.cuGraphGetEdges(g, MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, count), "count edges");
            assertEquals(2, count.get(JAVA_LONG, 0));
            MemorySegment ef = r.cu.cell(16), et = r.cu.cell(16), data = r.cu.cell(16);
            Cuda.ok(d.cuGraphGetEdges(g, ef, et, data, count), "edges");
            assertEquals(2, count.get(JAVA_LONG, 0));
            java.util.Set<String> pairs = new java.util.HashSet<>();
            for (int i = 0; i < 2; i++) {
                pairs.add(ef.getAtIndex(JAVA_LONG, i) + "->" + et.getAtIndex(JAVA_LONG, i));
            }
            assertEquals(java.util.Set.of(m + "->" + k1, k1 + "->" + k2), pairs);
            MemorySegment roots = r.cu.cell(8);
            count.set(JAVA_LONG, 0, 1);
            Cuda.ok(d.cuGraphGetRootNodes(g, roots, count), "roots");
            assertEquals(m, roots.get(JAVA_LONG, 0));

            long s = r.cu.stream();
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate");
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertArrayEquals(all(13f), r.ys(), "memset, then 2*x + y, then 10*x + y");

            Cuda.ok(d.cuGraphExecKernelNodeSetParams(exec, k2, r.kernelParams(100f)), "exec node params");
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertArrayEquals(all(103f), r.ys());

            MemorySegment info = r.cu.cell(24);
            long clone = r.out(o -> d.cuGraphClone(o, g), "clone");
            Cuda.ok(d.cuGraphExecUpdate(exec, clone, info), "update from a clone of the same shape");
            assertEquals(0, info.get(JAVA_INT, 0));
            Cuda.ok(d.cuGraphDestroyNode(k2), "destroy k2");
            assertEquals(CuResult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, d.cuGraphExecUpdate(exec, g, info));
            assertEquals(2, info.get(JAVA_INT, 0), "the result info comes back with the failure: TOPOLOGY_CHANGED");

            MemorySegment copy = r.cu.cell(200);
            copy.fill((byte) 0);
            copy.set(JAVA_INT, 32, 1);                        // host source
            copy.set(JAVA_LONG, 40, 0);                       // NULL: refused in the guest
            copy.set(JAVA_INT, 88 + 32, 2);
            copy.set(JAVA_LONG, 88 + 48, r.y);
            copy.set(JAVA_LONG, 176, 16);
            copy.set(JAVA_LONG, 184, 1);
            copy.set(JAVA_LONG, 192, 1);
            MemorySegment out = r.cu.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddMemcpyNode(out, g, MemorySegment.NULL, 0, copy, 0));
            copy.set(JAVA_INT, 32, 2);                        // device to device: fine
            copy.set(JAVA_LONG, 48, r.x);
            Cuda.ok(d.cuGraphAddMemcpyNode(out, g, MemorySegment.NULL, 0, copy, 0), "device memcpy node");
            copy.set(JAVA_LONG, 88 + 48, r.y + 4L * N - 8);   // runs past the allocation
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddMemcpyNode(out, g, MemorySegment.NULL, 0, copy, 0));
        }
    }

    /** A CUDA_MEMCPY3D of {@code bytes} between two pitched sides, each (memory type, address). */
    private static MemorySegment copy3D(Cuda cu, int srcType, long src, int dstType, long dst, long bytes) {
        MemorySegment c = cu.cell(200);
        c.fill((byte) 0);
        c.set(JAVA_INT, 32, srcType);
        c.set(JAVA_LONG, srcType == 1 ? 40 : 48, src);
        c.set(JAVA_INT, 88 + 32, dstType);
        c.set(JAVA_LONG, dstType == 1 ? 88 + 40 : 88 + 48, dst);
        c.set(JAVA_LONG, 176, bytes);
        c.set(JAVA_LONG, 184, 1);
        c.set(JAVA_LONG, 192, 1);
        return c;
    }

    @Test
    void hostNodesAndHostMemoryCopyNodesRunInTheGuestAtEachLaunchInGraphOrder() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
            Rig r = new Rig(d);
            long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            MemorySegment src = r.cu.cell(4L * N), dst = r.cu.cell(4L * N), mirror = r.cu.cell(4L * N);
            long up = r.out(o -> d.cuGraphAddMemcpyNode(o, g, MemorySegment.NULL, 0,
                    copy3D(r.cu, 1, src.address(), 2, r.y, 4L * N), 0), "host to device node");
            MemorySegment deps = r.cu.cell(8);
            deps.set(JAVA_LONG, 0, up);
            long k = r.out(o -> d.cuGraphAddKernelNode(o, g, deps, 1, r.kernelParams(2f)), "kernel node");
            deps.set(JAVA_LONG, 0, k);
            long down = r.out(o -> d.cuGraphAddMemcpyNode(o, g, deps, 1, copy3D(r.cu, 2, r.y, 1, dst.address(), 4L * N), 0),
                    "device to host node");
            long userData = 0x6a110000L + System.nanoTime() % 0xffff;
            MemorySegment hp = r.cu.cell(16);
            hp.set(JAVA_LONG, 0, CallbackProbe.HOST_FN.address());
            hp.set(JAVA_LONG, 8, userData);
            deps.set(JAVA_LONG, 0, down);
            long host = r.out(o -> d.cuGraphAddHostNode(o, g, deps, 1, hp), "host node");
            deps.set(JAVA_LONG, 0, host);
            r.out(o -> d.cuGraphAddMemcpyNode(o, g, deps, 1, copy3D(r.cu, 1, dst.address(), 1, mirror.address(), 4L * N), 0),
                    "host to host node");
            MemorySegment type = r.cu.cell();
            Cuda.ok(d.cuGraphNodeGetType(up, type), "type");
            assertEquals(1, type.get(JAVA_INT, 0), "a memcpy node, whatever the backend made of it");
            Cuda.ok(d.cuGraphNodeGetType(host, type), "type");
            assertEquals(3, type.get(JAVA_INT, 0));
            MemorySegment back = r.cu.cell(16);
            Cuda.ok(d.cuGraphHostNodeGetParams(host, back), "cuGraphHostNodeGetParams");
            assertEquals(CallbackProbe.HOST_FN.address(), back.get(JAVA_LONG, 0));
            assertEquals(userData, back.get(JAVA_LONG, 8));

            long s = r.cu.stream();
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, g, 0), "instantiate");
            for (int round = 0; round < 3; round++) {
                for (int i = 0; i < N; i++) {
                    src.setAtIndex(JAVA_FLOAT, i, i * 0.5f + round);
                    dst.setAtIndex(JAVA_FLOAT, i, -1f);
                    mirror.setAtIndex(JAVA_FLOAT, i, -1f);
                }
                Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
                Cuda.ok(d.cuStreamSynchronize(s), "sync");
                for (int i = 0; i < N; i++) {
                    float want = i * 0.5f + round + 2f;   // y = src, then y = 2x + y with x = 1
                    assertEquals(want, dst.getAtIndex(JAVA_FLOAT, i), "round " + round + " dst[" + i + "]");
                    assertEquals(want, mirror.getAtIndex(JAVA_FLOAT, i), "round " + round + " mirror[" + i + "]");
                }
                assertEquals(round + 1, CallbackProbe.callsWith(userData).size(), "the host node ran once per launch");
            }
            hp.set(JAVA_LONG, 8, userData + 1);
            Cuda.ok(d.cuGraphExecHostNodeSetParams(exec, host, hp), "exec host node params");
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertEquals(3, CallbackProbe.callsWith(userData).size());
            assertEquals(1, CallbackProbe.callsWith(userData + 1).size(), "the exec graph's node calls the new userData");
            Cuda.ok(d.cuGraphHostNodeGetParams(host, back), "the graph's node is unchanged");
            assertEquals(userData, back.get(JAVA_LONG, 8));
            hp.set(JAVA_LONG, 0, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphHostNodeSetParams(host, hp), "a NULL function");
        }
    }

    @Test
    void memoryNodesConditionalNodesAndNodeParametersAreCheckedBeforeTheDriver() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            MemorySegment out = r.cu.cell();
            // memory allocation nodes: pool properties and access descriptors as cuMemPoolCreate checks them
            MemorySegment ap = r.cu.cell(120).fill((byte) 0);
            ap.set(JAVA_INT, 0, 1);              // pinned
            ap.set(JAVA_INT, 8, 1);              // on device 0
            ap.set(JAVA_LONG, 104, 4096);
            ap.set(JAVA_INT, 4, 2);              // an IPC handle type
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphAddMemAllocNode(out, g, MemorySegment.NULL, 0, ap));
            ap.set(JAVA_INT, 4, 0);
            MemorySegment desc = r.cu.cell(12).fill((byte) 0);
            desc.set(JAVA_INT, 0, 1);
            desc.set(JAVA_INT, 4, 7);            // device 7: none
            desc.set(JAVA_INT, 8, 3);
            ap.set(JAVA_LONG, 88, desc.address());
            ap.set(JAVA_LONG, 96, 1);
            assertEquals(CuResult.CUDA_ERROR_INVALID_DEVICE, d.cuGraphAddMemAllocNode(out, g, MemorySegment.NULL, 0, ap));
            desc.set(JAVA_INT, 4, 0);
            long alloc = r.out(o -> d.cuGraphAddMemAllocNode(o, g, MemorySegment.NULL, 0, ap), "allocation node");
            long dptr = ap.get(JAVA_LONG, 112);
            assertTrue(dptr != 0);
            MemorySegment back = r.cu.cell(120);
            Cuda.ok(d.cuGraphMemAllocNodeGetParams(alloc, back), "cuGraphMemAllocNodeGetParams");
            assertEquals(4096, back.get(JAVA_LONG, 104));
            assertEquals(dptr, back.get(JAVA_LONG, 112));
            assertEquals(1, back.get(JAVA_LONG, 96));
            MemorySegment deps = r.cu.cell(8);
            deps.set(JAVA_LONG, 0, alloc);
            // the allocation is the session's: a memset node may use it; a free node of an address outside is refused
            MemorySegment set = r.cu.cell(40).fill((byte) 0);
            set.set(JAVA_LONG, 0, dptr);
            set.set(JAVA_INT, 20, 4);
            set.set(JAVA_LONG, 24, 1024);
            set.set(JAVA_LONG, 32, 1);
            long memset = r.out(o -> d.cuGraphAddMemsetNode(o, g, deps, 1, set, 0), "memset node on graph memory");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddMemFreeNode(out, g, deps, 1, 0x7f0000001000L),
                    "a free node of memory that is not the session's");
            long free = r.out(o -> d.cuGraphAddMemFreeNode(o, g, deps, 1, dptr), "free node");
            MemorySegment freed = r.cu.cell();
            Cuda.ok(d.cuGraphMemFreeNodeGetParams(free, freed), "cuGraphMemFreeNodeGetParams");
            assertEquals(dptr, freed.get(JAVA_LONG, 0));
            // node parameters: checked as when the node was made
            set.set(JAVA_LONG, 24, 1025);        // one element past the allocation
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphMemsetNodeSetParams(memset, set));
            MemorySegment copy = copy3D(r.cu, 1, r.cu.cell(16).address(), 2, r.y, 16);
            long dd = r.out(o -> d.cuGraphAddMemcpyNode(o, g, MemorySegment.NULL, 0, copy3D(r.cu, 2, r.x, 2, r.y, 16), 0), "d2d");
            assertEquals(CuResult.CUDA_ERROR_NOT_SUPPORTED, d.cuGraphMemcpyNodeSetParams(dd, copy), "new parameters with a host side");
            MemorySegment got = r.cu.cell(200);
            Cuda.ok(d.cuGraphMemcpyNodeGetParams(dd, got), "cuGraphMemcpyNodeGetParams");
            assertEquals(r.x, got.get(JAVA_LONG, 48));
            assertEquals(r.y, got.get(JAVA_LONG, 88 + 48));
            // conditional nodes: type and size checked; their body graphs belong to the node
            long handle = r.out(o -> d.cuGraphConditionalHandleCreate(o, g, 0, 0, 0), "conditional handle");
            MemorySegment np = r.cu.cell(256).fill((byte) 0);
            np.set(JAVA_INT, 0, 13);
            np.set(JAVA_LONG, 16, handle);
            np.set(JAVA_INT, 24, 1);             // WHILE
            np.set(JAVA_INT, 28, 2);             // with two bodies: refused
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddNode(out, g, MemorySegment.NULL, MemorySegment.NULL, 0, np));
            np.set(JAVA_INT, 28, 1);
            long cond = r.out(o -> d.cuGraphAddNode(o, g, MemorySegment.NULL, MemorySegment.NULL, 0, np), "while node");
            long body = MemorySegment.ofAddress(np.get(JAVA_LONG, 32)).reinterpret(8).get(JAVA_LONG, 0);
            r.out(o -> d.cuGraphAddEmptyNode(o, body, MemorySegment.NULL, 0), "a node in the body");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphDestroy(body), "the body is the node's");
            MemorySegment type = r.cu.cell();
            Cuda.ok(d.cuGraphNodeGetType(cond, type), "type");
            assertEquals(13, type.get(JAVA_INT, 0));
            Cuda.ok(d.cuGraphDestroy(g), "the graph goes, with its nodes and the body");
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, d.cuGraphAddEmptyNode(out, body, MemorySegment.NULL, 0),
                    "the body went with its node");
        }
    }

    /** What the user objects' destructor (an upcall, as a C program's function would be) was called with, summed. */
    private static final java.util.concurrent.atomic.AtomicLong DESTROYED = new java.util.concurrent.atomic.AtomicLong();

    /** The driver a destructor tries to call, and what the call answered. */
    private static volatile RemoteCudaDriver caller;
    private static final java.util.concurrent.atomic.AtomicInteger CALLED = new java.util.concurrent.atomic.AtomicInteger(-1);

    static void destroyed(MemorySegment ptr) {
        if (caller != null) {
            CALLED.set(caller.cuCtxSynchronize());
        }
        DESTROYED.addAndGet(ptr.address());
    }

    @Test
    void userObjectsAreAnsweredInTheGuestAndDestroyedOnceAfterTheLastReference() throws Throwable {
        MemorySegment fn = java.lang.foreign.Linker.nativeLinker().upcallStub(
                java.lang.invoke.MethodHandles.lookup().findStatic(GraphsApiTest.class, "destroyed",
                        java.lang.invoke.MethodType.methodType(void.class, MemorySegment.class)),
                java.lang.foreign.FunctionDescriptor.ofVoid(java.lang.foreign.ValueLayout.ADDRESS), java.lang.foreign.Arena.global());
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            DESTROYED.set(0);
            caller = d;
            MemorySegment out = r.cu.cell();
            MemorySegment ptr = MemorySegment.ofAddress(1000);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuUserObjectCreate(out, ptr, MemorySegment.NULL, 1, 1), "no destructor");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuUserObjectCreate(out, ptr, fn, 1, 0), "no flag");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuUserObjectCreate(out, ptr, fn, 0, 1), "no reference");
            long obj = r.out(o -> d.cuUserObjectCreate(o, ptr, fn, 1, 1), "cuUserObjectCreate");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuUserObjectRelease(obj + 1, 1), "an object never made");
            long g = r.out(o -> d.cuGraphCreate(o, 0), "cuGraphCreate");
            r.out(o -> d.cuGraphAddKernelNode(o, g, MemorySegment.NULL, 0, r.kernelParams(2f)), "kernel node");
            assertTrue(d.cuGraphRetainUserObject(0x5e0000001040L, obj, 1, 0) != CuResult.CUDA_SUCCESS, "a graph never made");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphRetainUserObject(g, obj, 1, 2), "an unknown flag");
            Cuda.ok(d.cuGraphRetainUserObject(g, obj, 1, 1), "moved into the graph");
            long clone = r.out(o -> d.cuGraphClone(o, g), "clone");
            long exec = r.out(o -> d.cuGraphInstantiateWithFlags(o, clone, 0), "instantiate the clone");
            Cuda.ok(d.cuGraphDestroy(g), "graph destroy");
            Cuda.ok(d.cuGraphDestroy(clone), "clone destroy");
            long s = r.cu.stream();
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            Thread.sleep(100);
            assertEquals(0, DESTROYED.get(), "the exec graph holds a reference");
            Cuda.ok(d.cuGraphExecDestroy(exec), "exec destroy");
            for (int i = 0; i < 500 && DESTROYED.get() == 0; i++) {
                Thread.sleep(10);
            }
            Thread.sleep(50);
            assertEquals(1000, DESTROYED.get(), "the destructor ran once, with its pointer");
            assertEquals(CuResult.CUDA_ERROR_NOT_PERMITTED, CALLED.get(), "a CUDA call from a destructor");
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuUserObjectRetain(obj, 1), "a destroyed object");
            assertArrayEquals(all(2f), r.ys(), 0f);
        }
    }

    /** One CUstreamBatchMemOpParams: operation, address, value, flags (BatchMemOp's layout). */
    private static MemorySegment memOp(Cuda cu, int operation, long address, long value, int flags) {
        MemorySegment op = cu.cell(48).fill((byte) 0);
        op.set(JAVA_INT, 0, operation);
        op.set(JAVA_LONG, 8, address);
        op.set(JAVA_LONG, 16, value);
        op.set(JAVA_INT, 24, flags);
        return op;
    }

    /** CUDA_BATCH_MEM_OP_NODE_PARAMS: ctx, count, paramArray, flags. */
    private static MemorySegment memOpParams(Cuda cu, int count, MemorySegment ops) {
        MemorySegment p = cu.cell(32).fill((byte) 0);
        p.set(JAVA_INT, 8, count);
        p.set(JAVA_LONG, 16, ops.address());
        return p;
    }

    @Test
    void batchMemOpNodesAreCheckedAsStreamBatchesAndRunAtEachLaunch() throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.unix());
             RemoteCudaDriver other = RemoteCudaDriver.connect(backend.unix())) {
            Rig r = new Rig(d);
            Rig o = new Rig(other);
            long g = r.out(c -> d.cuGraphCreate(c, 0), "cuGraphCreate");
            MemorySegment out = r.cu.cell();
            // the rule of cuStreamBatchMemOp: known operations, addresses in the session's memory, a bounded count
            MemorySegment outside = memOp(r.cu, 2, 0x7f0000001000L, 1, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddBatchMemOpNode(out, g, MemorySegment.NULL, 0,
                    memOpParams(r.cu, 1, outside)), "an address outside the session's memory");
            MemorySegment others = memOp(r.cu, 2, o.y, 1, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddBatchMemOpNode(out, g, MemorySegment.NULL, 0,
                    memOpParams(r.cu, 1, others)), "another session's memory");
            MemorySegment unknown = memOp(r.cu, 99, r.y, 1, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddBatchMemOpNode(out, g, MemorySegment.NULL, 0,
                    memOpParams(r.cu, 1, unknown)), "an unknown operation");
            MemorySegment write = memOp(r.cu, 2, r.y, 42, 0);   // WRITE_VALUE_32
            // no operations: the driver makes such a node (an H100, 580.159.04); it does nothing and answers count 0
            long empty = r.out(c -> d.cuGraphAddBatchMemOpNode(c, g, MemorySegment.NULL, 0, memOpParams(r.cu, 0, write)),
                    "a node with no operations");
            MemorySegment none = r.cu.cell(32);
            Cuda.ok(d.cuGraphBatchMemOpNodeGetParams(empty, none), "cuGraphBatchMemOpNodeGetParams of the empty node");
            assertEquals(0, none.get(java.lang.foreign.ValueLayout.JAVA_INT, 8), "its count");
            Cuda.ok(d.cuGraphDestroyNode(empty), "cuGraphDestroyNode");
            long node = r.out(c -> d.cuGraphAddBatchMemOpNode(c, g, MemorySegment.NULL, 0, memOpParams(r.cu, 1, write)), "write node");
            write.set(JAVA_LONG, 16, 7);   // the node holds a copy
            // the node's parameters: the operations in a copy the node owns
            MemorySegment got = r.cu.cell(32);
            Cuda.ok(d.cuGraphBatchMemOpNodeGetParams(node, got), "cuGraphBatchMemOpNodeGetParams");
            assertEquals(1, got.get(JAVA_INT, 8));
            long array = got.get(JAVA_LONG, 16);
            assertTrue(array != 0 && array != write.address());
            MemorySegment ops = MemorySegment.ofAddress(array).reinterpret(48);
            assertEquals(2, ops.get(JAVA_INT, 0));
            assertEquals(r.y, ops.get(JAVA_LONG, 8));
            assertEquals(42, ops.get(JAVA_LONG, 16));
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphBatchMemOpNodeSetParams(node, memOpParams(r.cu, 1, outside)),
                    "new parameters are checked as the node's were");
            long exec = r.out(c -> d.cuGraphInstantiateWithFlags(c, g, 0), "instantiate");
            long s = r.cu.stream();
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertEquals(42, Float.floatToRawIntBits(r.ys()[0]));
            MemorySegment write43 = memOp(r.cu, 2, r.y, 43, 0);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphExecBatchMemOpNodeSetParams(exec, node,
                    memOpParams(r.cu, 1, others)), "exec parameters are checked too");
            Cuda.ok(d.cuGraphExecBatchMemOpNodeSetParams(exec, node, memOpParams(r.cu, 1, write43)), "exec set params");
            Cuda.ok(d.cuGraphLaunch(exec, s), "launch");
            Cuda.ok(d.cuStreamSynchronize(s), "sync");
            assertEquals(43, Float.floatToRawIntBits(r.ys()[0]));
            // the generic call makes the same node, by the same checks
            MemorySegment np = r.cu.cell(256).fill((byte) 0);
            np.set(JAVA_INT, 0, 12);
            MemorySegment.copy(memOpParams(r.cu, 1, outside), 0, np, 16, 32);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, d.cuGraphAddNode(out, g, MemorySegment.NULL, MemorySegment.NULL, 0, np));
            MemorySegment.copy(memOpParams(r.cu, 1, write43), 0, np, 16, 32);
            long generic = r.out(c -> d.cuGraphAddNode(c, g, MemorySegment.NULL, MemorySegment.NULL, 0, np), "generic batch node");
            MemorySegment type = r.cu.cell();
            Cuda.ok(d.cuGraphNodeGetType(generic, type), "type");
            assertEquals(12, type.get(JAVA_INT, 0));
            Cuda.ok(d.cuGraphExecDestroy(exec), "exec destroy");
            Cuda.ok(d.cuGraphDestroy(g), "graph destroy");
        }
    }

    @Test
    void anotherSessionsGraphsAndNodesAreRefusedAndASessionsEndReleasesItsGraphs() throws Exception {
        RemoteCudaDriver a = RemoteCudaDriver.connect(backend.unix());
        long sessionA = a.sessionId();
        long graphA, nodeA;
        try (RemoteCudaDriver b = RemoteCudaDriver.connect(backend.unix())) {
            Rig ra = new Rig(a);
            Rig rb = new Rig(b);
            graphA = ra.out(o -> a.cuGraphCreate(o, 0), "graph A");
            long g = graphA;
            nodeA = ra.out(o -> a.cuGraphAddEmptyNode(o, g, MemorySegment.NULL, 0), "node A");
            long execA = ra.out(o -> a.cuGraphInstantiateWithFlags(o, g, 0), "exec A");
            long s = ra.cu.stream();
            Cuda.ok(a.cuStreamBeginCapture(s, 0), "capture A");
            Cuda.ok(ra.saxpy(s, 1f), "saxpy A");
            ra.out(o -> a.cuStreamEndCapture(s, o), "end capture A");

            MemorySegment out = rb.cu.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphAddEmptyNode(out, graphA, MemorySegment.NULL, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphInstantiateWithFlags(out, graphA, 0));
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphLaunch(execA, 0) == CuResult.CUDA_SUCCESS
                    ? b.cuCtxSynchronize() : CuResult.CUDA_ERROR_INVALID_HANDLE, "an exec graph of A, latched if pipelined");
            MemorySegment type = rb.cu.cell();
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphNodeGetType(nodeA, type));
            long graphB = rb.out(o -> b.cuGraphCreate(o, 0), "graph B");
            MemorySegment deps = rb.cu.cell(8);
            deps.set(JAVA_LONG, 0, nodeA);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphAddEmptyNode(out, graphB, deps, 1), "A's node");
            long otherB = rb.out(o -> b.cuGraphCreate(o, 0), "another graph B");
            long nodeB = rb.out(o -> b.cuGraphAddEmptyNode(o, otherB, MemorySegment.NULL, 0), "node of the other graph");
            deps.set(JAVA_LONG, 0, nodeB);
            assertEquals(CuResult.CUDA_ERROR_INVALID_VALUE, b.cuGraphAddEmptyNode(out, graphB, deps, 1), "a node of another graph");
            deps.set(JAVA_LONG, 0, 0x5e0000001040L);
            assertEquals(CuResult.CUDA_ERROR_INVALID_HANDLE, b.cuGraphAddEmptyNode(out, graphB, deps, 1), "a made-up node");
        } finally {
            a.close();
        }
        String line = backend.awaitLog("session " + sessionA + " ended", 10_000);
        assertTrue(line.contains("2 graph(s), 1 exec graph(s)") && !line.contains("failed"), line);
    }
}
