package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_STATE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
import static io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Stream capture and graphs on the emulated device: capture then replay, explicit graphs, dependency order, errors. */
class GraphCaptureTest {
    private static final int N = 256;
    private static final int GLOBAL = 0, THREAD_LOCAL = 1, RELAXED = 2;

    private Emulated e;
    private long saxpy;
    private long x;
    private long y;

    @BeforeEach
    void load() {
        e = new Emulated();
        saxpy = e.function(e.loadShippedModule(), "gpus_saxpy");
        x = e.alloc(4 * N);
        y = e.alloc(4 * N);
        float[] ones = new float[N];
        Arrays.fill(ones, 1f);
        e.upload(x, ones);
        e.ok(e.device.cuMemsetD32(y, 0, N));
    }

    @AfterEach
    void close() {
        e.close();
    }

    private long out8(java.util.function.Function<MemorySegment, Integer> call) {
        MemorySegment out = e.arena.allocate(8);
        e.ok(call.apply(out));
        return out.get(ValueLayout.JAVA_LONG, 0);
    }

    private void fillY(long stream, float v) {
        e.ok(e.device.cuMemsetD32Async(y, Float.floatToIntBits(v), N, stream));
    }

    private int saxpy(long stream, float a) {
        return e.launch(saxpy, 1, N, 0, stream, a, x, y, N);
    }

    private float[] ys() {
        return e.downloadFloats(y, N);
    }

    private static float[] all(float v) {
        float[] f = new float[N];
        Arrays.fill(f, v);
        return f;
    }

    private long endCapture(long stream) {
        return out8(o -> e.device.cuStreamEndCapture(stream, o));
    }

    private long instantiate(long graph) {
        return out8(o -> e.device.cuGraphInstantiateWithFlags(o, graph, 0));
    }

    private long[] nodes(long graph) {
        MemorySegment count = e.arena.allocate(8);
        e.ok(e.device.cuGraphGetNodes(graph, MemorySegment.NULL, count));
        long n = count.get(ValueLayout.JAVA_LONG, 0);
        MemorySegment arr = e.arena.allocate(8 * Math.max(1, n));
        e.ok(e.device.cuGraphGetNodes(graph, arr, count));
        return arr.asSlice(0, 8 * n).toArray(ValueLayout.JAVA_LONG);
    }

    private int type(long node) {
        MemorySegment t = e.arena.allocate(4);
        e.ok(e.device.cuGraphNodeGetType(node, t));
        return t.get(ValueLayout.JAVA_INT, 0);
    }

    private MemorySegment handles(long... hs) {
        return hs.length == 0 ? MemorySegment.NULL : e.arena.allocateFrom(ValueLayout.JAVA_LONG, hs);
    }

    @Test
    void captureRecordsInsteadOfRunningAndReplayEqualsRunningDirectly() {
        long s = e.stream(0);
        fillY(s, 1f);
        e.ok(saxpy(s, 2f));
        e.ok(saxpy(s, 2f));
        e.ok(e.device.cuStreamSynchronize(s));
        float[] direct = ys();
        assertArrayEquals(all(5f), direct);

        e.ok(e.device.cuMemsetD32(y, 0, N));
        e.ok(e.device.cuStreamBeginCapture(s, GLOBAL));
        MemorySegment status = e.arena.allocate(4);
        e.ok(e.device.cuStreamIsCapturing(s, status));
        assertEquals(1, status.get(ValueLayout.JAVA_INT, 0));
        fillY(s, 1f);
        e.ok(saxpy(s, 2f));
        e.ok(saxpy(s, 2f));
        long graph = endCapture(s);
        e.ok(e.device.cuStreamIsCapturing(s, status));
        assertEquals(0, status.get(ValueLayout.JAVA_INT, 0));
        assertArrayEquals(all(0f), ys(), "captured work does not run");

        long[] ns = nodes(graph);
        assertEquals(3, ns.length);
        assertEquals(EmulatedGraph.MEMSET, type(ns[0]));
        assertEquals(EmulatedGraph.KERNEL, type(ns[1]));
        assertEquals(EmulatedGraph.KERNEL, type(ns[2]));

        MemorySegment kp = e.arena.allocate(Graphs.KNP_SIZE);
        e.ok(e.device.cuGraphKernelNodeGetParams(ns[1], kp));
        assertEquals(saxpy, kp.get(ValueLayout.JAVA_LONG, 0), "a captured launch answers its parameters too");
        assertEquals(N, kp.get(ValueLayout.JAVA_INT, 20));

        long exec = instantiate(graph);
        for (int i = 0; i < 3; i++) {
            e.ok(e.device.cuMemsetD32(y, Float.floatToIntBits(-9f), N));
            e.ok(e.device.cuGraphLaunch(exec, s));
            e.ok(e.device.cuStreamSynchronize(s));
            assertArrayEquals(direct, ys(), "launch " + i);
        }
        e.ok(e.device.cuGraphExecDestroy(exec));
        e.ok(e.device.cuGraphDestroy(graph));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuGraphNodeGetType(ns[0], status));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuGraphLaunch(exec, s));
    }

    @Test
    void forkAndJoinThroughEventsMakeEdgesAcrossStreams() {
        long s1 = e.stream(0), s2 = e.stream(0);
        long fork = e.event(0), join = e.event(0);
        e.ok(e.device.cuStreamBeginCapture(s1, GLOBAL));
        fillY(s1, 1f);
        e.ok(e.device.cuEventRecord(fork, s1));
        e.ok(e.device.cuStreamWaitEvent(s2, fork, 0));     // s2 joins the capture
        MemorySegment id1 = e.arena.allocate(8), id2 = e.arena.allocate(8), st = e.arena.allocate(4);
        e.ok(e.device.cuStreamGetCaptureInfo_v1(s1, st, id1));
        e.ok(e.device.cuStreamGetCaptureInfo_v1(s2, st, id2));
        assertEquals(1, st.get(ValueLayout.JAVA_INT, 0));
        assertEquals(id1.get(ValueLayout.JAVA_LONG, 0), id2.get(ValueLayout.JAVA_LONG, 0));
        e.ok(saxpy(s2, 2f));
        e.ok(e.device.cuEventRecord(join, s2));
        e.ok(e.device.cuStreamWaitEvent(s1, join, 0));
        e.ok(saxpy(s1, 10f));
        long graph = endCapture(s1);

        long[] ns = nodes(graph);
        assertEquals(3, ns.length);
        MemorySegment count = e.arena.allocate(8);
        e.ok(e.device.cuGraphGetEdges(graph, MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, count));
        assertEquals(3, count.get(ValueLayout.JAVA_LONG, 0), "fill->side, side->last and fill->last (the joined set)");
        MemorySegment from = e.arena.allocate(24), to = e.arena.allocate(24);
        e.ok(e.device.cuGraphGetEdges(graph, from, to, MemorySegment.NULL, count));
        assertArrayEquals(new long[] {ns[0], ns[0], ns[1]}, from.toArray(ValueLayout.JAVA_LONG));
        assertArrayEquals(new long[] {ns[1], ns[2], ns[2]}, to.toArray(ValueLayout.JAVA_LONG));

        long exec = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec, s2));
        e.ok(e.device.cuStreamSynchronize(s2));
        assertArrayEquals(all(13f), ys());
    }

    @Test
    void aForkNotJoinedBackFailsAtEndCapture() {
        long s1 = e.stream(0), s2 = e.stream(0);
        long fork = e.event(0);
        e.ok(e.device.cuStreamBeginCapture(s1, GLOBAL));
        e.ok(e.device.cuEventRecord(fork, s1));
        e.ok(e.device.cuStreamWaitEvent(s2, fork, 0));
        e.ok(saxpy(s2, 2f));
        MemorySegment g = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, e.device.cuStreamEndCapture(s1, g));
        MemorySegment st = e.arena.allocate(4);
        e.ok(e.device.cuStreamIsCapturing(s2, st));
        assertEquals(0, st.get(ValueLayout.JAVA_INT, 0), "every stream left the capture");
    }

    @Test
    void unsafeCallsInGlobalCaptureFailAndInvalidateIt() {
        long s = e.stream(0);
        e.ok(e.device.cuStreamBeginCapture(s, GLOBAL));
        e.ok(saxpy(s, 2f));
        MemorySegment host = e.arena.allocate(4L * N);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, e.device.cuMemcpyHtoD(y, host, 4L * N));
        MemorySegment st = e.arena.allocate(4);
        e.ok(e.device.cuStreamIsCapturing(s, st));
        assertEquals(2, st.get(ValueLayout.JAVA_INT, 0), "CU_STREAM_CAPTURE_STATUS_INVALIDATED");
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, saxpy(s, 2f));
        MemorySegment g = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, e.device.cuStreamEndCapture(s, g));
        assertEquals(0, g.get(ValueLayout.JAVA_LONG, 0));
        e.ok(saxpy(s, 2f));   // no longer capturing: runs
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(2f), ys(), "the captured launch never ran; the last one did");
    }

    @Test
    void hostMemoryAndSynchronizationAreRefusedOnACapturingStream() {
        long s = e.stream(0);
        e.ok(e.device.cuStreamBeginCapture(s, RELAXED));
        MemorySegment host = e.arena.allocate(4L * N);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, e.device.cuMemcpyHtoDAsync(y, host, 4L * N, s));
        MemorySegment g = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, e.device.cuStreamEndCapture(s, g));

        e.ok(e.device.cuStreamBeginCapture(s, RELAXED));
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, e.device.cuStreamSynchronize(s));
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, e.device.cuStreamEndCapture(s, g));

        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, e.device.cuStreamBeginCapture(0, GLOBAL), "the legacy stream");
        assertEquals(CUDA_ERROR_ILLEGAL_STATE, e.device.cuStreamEndCapture(s, g), "not capturing");
    }

    @Test
    void externalEventFlagsInACaptureBecomeEventNodes() {
        long s = e.stream(0);
        long ev = e.event(0);
        e.ok(e.device.cuStreamBeginCapture(s, GLOBAL));
        e.ok(saxpy(s, 1f));
        e.ok(e.device.cuEventRecordWithFlags(ev, s, 1));     // CU_EVENT_RECORD_EXTERNAL
        e.ok(e.device.cuStreamWaitEvent(s, ev, 1));          // CU_EVENT_WAIT_EXTERNAL
        long graph = endCapture(s);
        long[] ns = nodes(graph);
        assertEquals(3, ns.length);
        assertEquals(EmulatedGraph.EVENT_RECORD, type(ns[1]));
        assertEquals(EmulatedGraph.WAIT_EVENT, type(ns[2]));
        long exec = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        e.ok(e.device.cuEventQuery(ev));
        assertArrayEquals(all(1f), ys());
    }

    @Test
    void legacyStreamWorkWouldDependOnACapturingBlockingStream() {
        long s = e.stream(0);
        e.ok(e.device.cuStreamBeginCapture(s, RELAXED));
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, saxpy(0, 1f));
        MemorySegment g = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, e.device.cuStreamEndCapture(s, g));
        long nonBlocking = e.stream(EmulatedStream.NON_BLOCKING);
        e.ok(e.device.cuStreamBeginCapture(nonBlocking, RELAXED));
        e.ok(saxpy(0, 1f));   // a NON_BLOCKING stream is no dependency of the legacy stream
        e.ok(e.device.cuStreamEndCapture(nonBlocking, g));
    }

    @Test
    void threadModesDecideWhoMayMakeUnsafeCalls() throws Exception {
        long s = e.stream(EmulatedStream.NON_BLOCKING);   // the legacy stream's sync calls do not wait for it
        e.ok(e.device.cuStreamBeginCapture(s, THREAD_LOCAL));
        AtomicInteger other = new AtomicInteger(-1);
        Thread t = new Thread(() -> {
            e.device.cuCtxSetCurrent(e.context);
            other.set(e.device.cuMemsetD32(y, 0, N));
        });
        t.start();
        t.join();
        assertEquals(CUDA_SUCCESS, other.get(), "another thread is free of a thread-local capture");
        MemorySegment mode = e.arena.allocateFrom(ValueLayout.JAVA_INT, RELAXED);
        e.ok(e.device.cuThreadExchangeStreamCaptureMode(mode));
        assertEquals(GLOBAL, mode.get(ValueLayout.JAVA_INT, 0));
        e.ok(e.device.cuMemsetD32(x, Float.floatToIntBits(1f), N));   // relaxed: allowed
        mode.set(ValueLayout.JAVA_INT, 0, GLOBAL);
        e.ok(e.device.cuThreadExchangeStreamCaptureMode(mode));
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, e.device.cuMemsetD32(x, 0, N));
        MemorySegment g = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, e.device.cuStreamEndCapture(s, g));
    }

    private MemorySegment kernelParams(float a) {
        MemorySegment p = e.arena.allocate(Graphs.KNP_SIZE, 8);
        p.set(ValueLayout.JAVA_LONG, 0, saxpy);
        p.set(ValueLayout.JAVA_INT, 8, 1);
        p.set(ValueLayout.JAVA_INT, 12, 1);
        p.set(ValueLayout.JAVA_INT, 16, 1);
        p.set(ValueLayout.JAVA_INT, 20, N);
        p.set(ValueLayout.JAVA_INT, 24, 1);
        p.set(ValueLayout.JAVA_INT, 28, 1);
        p.set(ValueLayout.JAVA_LONG, 40, e.params(a, x, y, N).address());
        return p;
    }

    private MemorySegment memsetParams(float v) {
        MemorySegment p = e.arena.allocate(Graphs.MEMSET_SIZE, 8);
        p.set(ValueLayout.JAVA_LONG, 0, y);
        p.set(ValueLayout.JAVA_INT, 16, Float.floatToIntBits(v));
        p.set(ValueLayout.JAVA_INT, 20, 4);
        p.set(ValueLayout.JAVA_LONG, 24, N);
        p.set(ValueLayout.JAVA_LONG, 32, 1);
        return p;
    }

    @Test
    void explicitGraphRunsInDependencyOrderNotCreationOrder() {
        long graph = out8(o -> e.device.cuGraphCreate(o, 0));
        long k2 = out8(o -> e.device.cuGraphAddKernelNode(o, graph, MemorySegment.NULL, 0, kernelParams(10f)));
        long k1 = out8(o -> e.device.cuGraphAddKernelNode(o, graph, MemorySegment.NULL, 0, kernelParams(2f)));
        MemorySegment back = e.arena.allocate(Graphs.KNP_SIZE);
        e.ok(e.device.cuGraphKernelNodeGetParams(k2, back));
        assertEquals(saxpy, back.get(ValueLayout.JAVA_LONG, 0));
        MemorySegment values = MemorySegment.ofAddress(back.get(ValueLayout.JAVA_LONG, 40)).reinterpret(32);
        assertEquals(10f, MemorySegment.ofAddress(values.getAtIndex(ValueLayout.JAVA_LONG, 0)).reinterpret(4)
                .get(ValueLayout.JAVA_FLOAT, 0), "the node's own copy of the value");
        long set = out8(o -> e.device.cuGraphAddMemsetNode(o, graph, MemorySegment.NULL, 0, memsetParams(1f), 0));
        long empty = out8(o -> e.device.cuGraphAddEmptyNode(o, graph, handles(set), 1));
        // set -> empty -> k1 -> k2: y = (1 + 2) + 10 = 13 only in that order
        e.ok(e.device.cuGraphAddDependencies_v1(graph, handles(empty, k1), handles(k1, k2), 2));
        MemorySegment count = e.arena.allocate(8);
        MemorySegment roots = e.arena.allocate(32);
        count.set(ValueLayout.JAVA_LONG, 0, 4);
        e.ok(e.device.cuGraphGetRootNodes(graph, roots, count));
        assertEquals(1, count.get(ValueLayout.JAVA_LONG, 0));
        assertEquals(set, roots.get(ValueLayout.JAVA_LONG, 0));
        count.set(ValueLayout.JAVA_LONG, 0, 4);
        e.ok(e.device.cuGraphNodeGetDependencies_v1(k2, roots, count));
        assertEquals(1, count.get(ValueLayout.JAVA_LONG, 0));
        assertEquals(k1, roots.get(ValueLayout.JAVA_LONG, 0));

        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddDependencies_v1(graph, handles(k2), handles(set), 1), "a cycle");

        long s = e.stream(0);
        long exec = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(13f), ys());

        // The exec graph's copy of k2 changes; the graph's does not.
        e.ok(e.device.cuGraphExecKernelNodeSetParams(exec, k2, kernelParams(100f)));
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(103f), ys());
        long exec2 = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec2, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(13f), ys());

        // cuGraphExecUpdate takes a graph of the same shape: the clone's work.
        long clone = out8(o -> e.device.cuGraphClone(o, graph));
        long[] cn = nodes(clone);
        assertEquals(4, cn.length);
        e.ok(e.device.cuGraphKernelNodeSetParams(cn[0], kernelParams(1000f)));
        MemorySegment info = e.arena.allocate(24);
        e.ok(e.device.cuGraphExecUpdate(exec, clone, info));
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(1003f), ys());

        e.ok(e.device.cuGraphDestroyNode(empty));
        MemorySegment info2 = e.arena.allocate(24);
        assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                e.device.cuGraphExecUpdate(exec, graph, info2));
        assertEquals(2, info2.get(ValueLayout.JAVA_INT, 0), "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED");
    }

    @Test
    void nodesOfAnotherGraphAndBadParametersAreRefused() {
        long g1 = out8(o -> e.device.cuGraphCreate(o, 0));
        long g2 = out8(o -> e.device.cuGraphCreate(o, 0));
        long n1 = out8(o -> e.device.cuGraphAddEmptyNode(o, g1, MemorySegment.NULL, 0));
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddEmptyNode(out, g2, handles(n1), 1));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuGraphAddEmptyNode(out, g2, handles(0x1234), 1));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddEmptyNode(out, g2, handles(n1), -1));
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphCreate(out, 1));
        MemorySegment bad = memsetParams(1f);
        bad.set(ValueLayout.JAVA_LONG, 24, 1L << 40);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddMemsetNode(out, g1, MemorySegment.NULL, 0, bad, 0));
        MemorySegment copy = e.arena.allocate(200, 8);
        copy.set(ValueLayout.JAVA_INT, 32, 1);            // srcMemoryType HOST
        copy.set(ValueLayout.JAVA_LONG, 40, e.arena.allocate(16).address());
        copy.set(ValueLayout.JAVA_INT, 88 + 32, 2);       // dstMemoryType DEVICE
        copy.set(ValueLayout.JAVA_LONG, 88 + 48, y);
        copy.set(ValueLayout.JAVA_LONG, 176, 16);
        copy.set(ValueLayout.JAVA_LONG, 184, 1);
        copy.set(ValueLayout.JAVA_LONG, 192, 1);
        e.ok(e.device.cuGraphAddMemcpyNode(out, g1, MemorySegment.NULL, 0, copy, 0));   // host memory in a node: the caller's (issue 21)
        copy.set(ValueLayout.JAVA_LONG, 40, 0);           // a NULL host side
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddMemcpyNode(out, g1, MemorySegment.NULL, 0, copy, 0));
        e.ok(e.device.cuGraphDestroy(g1));
        assertEquals(CUDA_ERROR_INVALID_HANDLE, e.device.cuGraphAddEmptyNode(out, g2, handles(n1), 1), "destroyed with its graph");
    }

    @Test
    void deviceCopyChildGraphAndEventNodesReplay() {
        long z = e.alloc(4 * N);
        long child = out8(o -> e.device.cuGraphCreate(o, 0));
        long set = out8(o -> e.device.cuGraphAddMemsetNode(o, child, MemorySegment.NULL, 0, memsetParams(1f), 0));
        out8(o -> e.device.cuGraphAddKernelNode(o, child, handles(set), 1, kernelParams(2f)));
        long graph = out8(o -> e.device.cuGraphCreate(o, 0));
        long c = out8(o -> e.device.cuGraphAddChildGraphNode(o, graph, MemorySegment.NULL, 0, child));
        MemorySegment copy = e.arena.allocate(200, 8);
        copy.set(ValueLayout.JAVA_INT, 32, 2);
        copy.set(ValueLayout.JAVA_LONG, 48, y);
        copy.set(ValueLayout.JAVA_INT, 88 + 32, 2);
        copy.set(ValueLayout.JAVA_LONG, 88 + 48, z);
        copy.set(ValueLayout.JAVA_LONG, 176, 4L * N);
        copy.set(ValueLayout.JAVA_LONG, 184, 1);
        copy.set(ValueLayout.JAVA_LONG, 192, 1);
        long cp = out8(o -> e.device.cuGraphAddMemcpyNode(o, graph, handles(c), 1, copy, 0));
        long ev = e.event(0);
        out8(o -> e.device.cuGraphAddEventRecordNode(o, graph, handles(cp), 1, ev));
        assertEquals(EmulatedGraph.GRAPH, type(c));
        // a change to the child after adding it does not reach the node (it holds a copy)
        out8(o -> e.device.cuGraphAddKernelNode(o, child, MemorySegment.NULL, 0, kernelParams(50f)));
        long s = e.stream(0);
        long exec = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuEventSynchronize(ev));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(3f), e.downloadFloats(z, N));
    }

    @Test
    void streamMemoryOperationsCaptureAsBatchNodesAndBatchNodesRunAtEachLaunch() {
        long s = e.stream(0);
        // captured: a write becomes a batch memory-operation node (type 12) whose parameters it answers
        e.ok(e.device.cuStreamBeginCapture(s, GLOBAL));
        e.ok(e.device.cuStreamWriteValue32(s, y, 7, 0));
        long graph = endCapture(s);
        long[] ns = nodes(graph);
        assertEquals(1, ns.length);
        MemorySegment type = e.arena.allocate(4);
        e.ok(e.device.cuGraphNodeGetType(ns[0], type));
        assertEquals(12, type.get(ValueLayout.JAVA_INT, 0));
        MemorySegment got = e.arena.allocate(32);
        e.ok(e.device.cuGraphBatchMemOpNodeGetParams(ns[0], got));
        assertEquals(1, got.get(ValueLayout.JAVA_INT, 8));
        MemorySegment op = MemorySegment.ofAddress(got.get(ValueLayout.JAVA_LONG, 16)).reinterpret(48);
        assertEquals(2, op.get(ValueLayout.JAVA_INT, 0));   // WRITE_VALUE_32
        assertEquals(y, op.get(ValueLayout.JAVA_LONG, 8));
        assertEquals(7, op.get(ValueLayout.JAVA_LONG, 16));
        long exec = instantiate(graph);
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertEquals(7, Float.floatToRawIntBits(ys()[0]));

        // explicit: a wait node holds the graph's later nodes until another stream writes the value
        long g = out8(o -> e.device.cuGraphCreate(o, 0));
        MemorySegment ops = e.arena.allocate(48).fill((byte) 0);
        ops.set(ValueLayout.JAVA_INT, 0, 1);                // WAIT_VALUE_32
        ops.set(ValueLayout.JAVA_LONG, 8, x);
        ops.set(ValueLayout.JAVA_LONG, 16, 5);
        ops.set(ValueLayout.JAVA_INT, 24, 1);               // EQ
        MemorySegment p = e.arena.allocate(32).fill((byte) 0);
        p.set(ValueLayout.JAVA_INT, 8, 1);
        p.set(ValueLayout.JAVA_LONG, 16, ops.address());
        long wait = out8(o -> e.device.cuGraphAddBatchMemOpNode(o, g, MemorySegment.NULL, 0, p));
        MemorySegment dep = e.arena.allocate(8);
        dep.set(ValueLayout.JAVA_LONG, 0, wait);
        MemorySegment set = e.arena.allocate(40).fill((byte) 0);
        set.set(ValueLayout.JAVA_LONG, 0, y);
        set.set(ValueLayout.JAVA_INT, 16, 9);
        set.set(ValueLayout.JAVA_INT, 20, 4);
        set.set(ValueLayout.JAVA_LONG, 24, 1);
        set.set(ValueLayout.JAVA_LONG, 32, 1);
        out8(o -> e.device.cuGraphAddMemsetNode(o, g, dep, 1, set, 0));
        long waiting = instantiate(g);
        e.ok(e.device.cuGraphLaunch(waiting, s));
        long other = e.stream(0);
        e.ok(e.device.cuStreamWriteValue32(other, x, 5, 0));
        e.ok(e.device.cuStreamSynchronize(other));
        e.ok(e.device.cuStreamSynchronize(s));
        assertEquals(9, Float.floatToRawIntBits(ys()[0]), "the memset ran after the wait was released");
        // an exec graph's node keeps its operation types; an address outside the context's memory is refused
        ops.set(ValueLayout.JAVA_INT, 0, 2);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphExecBatchMemOpNodeSetParams(waiting, wait, p));
        ops.set(ValueLayout.JAVA_LONG, 8, 0x10);
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphAddBatchMemOpNode(out, g, MemorySegment.NULL, 0, p));
    }

    @Test
    void captureIntoAnExistingGraphAfterItsNodesAndExecGraphNodeSwitches() {
        long graph = out8(o -> e.device.cuGraphCreate(o, 0));
        long set = out8(o -> e.device.cuGraphAddMemsetNode(o, graph, MemorySegment.NULL, 0, memsetParams(1f), 0));
        MemorySegment back = e.arena.allocate(Graphs.MEMSET_SIZE);
        e.ok(e.device.cuGraphMemsetNodeGetParams(set, back));
        assertEquals(Float.floatToIntBits(1f), back.get(ValueLayout.JAVA_INT, 16));
        long s = e.stream(0);
        e.ok(e.device.cuStreamBeginCaptureToGraph(s, graph, handles(set), MemorySegment.NULL, 1, GLOBAL));
        e.ok(saxpy(s, 2f));
        assertEquals(graph, endCapture(s), "the same graph");
        long[] ns = nodes(graph);
        assertEquals(2, ns.length);
        MemorySegment count = e.arena.allocate(8), dep = e.arena.allocate(8);
        count.set(ValueLayout.JAVA_LONG, 0, 1);
        e.ok(e.device.cuGraphNodeGetDependencies_v1(ns[1], dep, count));
        assertEquals(set, dep.get(ValueLayout.JAVA_LONG, 0));

        long exec = instantiate(graph);
        MemorySegment flags = e.arena.allocate(8);
        e.ok(e.device.cuGraphExecGetFlags(exec, flags));
        assertEquals(0, flags.get(ValueLayout.JAVA_LONG, 0));
        e.ok(e.device.cuGraphNodeSetEnabled(exec, ns[1], 0));
        MemorySegment on = e.arena.allocate(4);
        e.ok(e.device.cuGraphNodeGetEnabled(exec, ns[1], on));
        assertEquals(0, on.get(ValueLayout.JAVA_INT, 0));
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(1f), ys(), "the disabled kernel did not run");
        e.ok(e.device.cuGraphNodeSetEnabled(exec, ns[1], 1));
        e.ok(e.device.cuGraphLaunch(exec, s));
        e.ok(e.device.cuStreamSynchronize(s));
        assertArrayEquals(all(3f), ys());

        long clone = out8(o -> e.device.cuGraphClone(o, graph));
        long copy = out8(o -> e.device.cuGraphNodeFindInClone(o, ns[1], clone));
        assertEquals(EmulatedGraph.KERNEL, type(copy));
        MemorySegment out = e.arena.allocate(8);
        assertEquals(CUDA_ERROR_INVALID_VALUE, e.device.cuGraphNodeFindInClone(out, ns[1], graph), "graph is no clone");
    }
}
