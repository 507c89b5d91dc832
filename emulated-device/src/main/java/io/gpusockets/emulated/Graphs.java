package io.gpusockets.emulated;

import static io.gpusockets.emulated.HostSegments.isNull;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.structs.Memcpy3D;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

/**
 * The stream-capture and graph calls of the emulated device: handles, argument checks and the C
 * struct layouts (cuda.h 13.0), over {@link Captures}, {@link EmulatedGraph} and {@link EmulatedGraphExec}.
 * Graphs are no context's (cuCtxDestroy leaves them); exec graphs are their context's. Node kinds:
 * kernel, memcpy (device or host sides), memset, host, child graph, empty, event, memory allocation and
 * free, batch memory-operation nodes (checked and run as cuStreamBatchMemOp's, {@link StreamMemOps#batchOp}),
 * and conditional nodes, whose handles kernels set through {@link #setConditional}.
 */
final class Graphs {
    /** Bound on node arrays passed in (dependencies, edges). */
    static final long MAX_NODES = 1 << 20;
    /** CUgraphInstantiate_flags the emulated device accepts: AUTO_FREE_ON_LAUNCH, UPLOAD, USE_NODE_PRIORITY. */
    private static final long INSTANTIATE_FLAGS = 0x1 | 0x2 | 0x8;

    // CUDA_KERNEL_NODE_PARAMS (v2), 72 bytes
    static final long KNP_SIZE = 72;
    private static final long KNP_FUNC = 0, KNP_GRID = 8, KNP_BLOCK = 20, KNP_SHARED = 32, KNP_PARAMS = 40,
            KNP_EXTRA = 48, KNP_KERN = 56, KNP_CTX = 64;
    // CUDA_MEMSET_NODE_PARAMS, 40 bytes
    static final long MEMSET_SIZE = 40;
    // CUDA_HOST_NODE_PARAMS: {fn, userData}, 16 bytes
    static final long HOST_SIZE = 16;
    /** void (*CUhostFn)(void *userData), target first. */
    private static final java.lang.invoke.MethodHandle HOST_FN = java.lang.foreign.Linker.nativeLinker()
            .downcallHandle(java.lang.foreign.FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

    /** What cuGraphHostNodeGetParams answers. */
    record HostParams(long fn, long userData) {
    }

    /** What cuGraphKernelNodeGetParams answers: the parameters as given, the values in a copy the node owns. */
    record KernelParams(long func, long kern, long ctx, int[] dims, int shared, MemorySegment pointers) {
    }

    private final Handles handles;
    private final Contexts contexts;
    private final Streams streams;
    private final Launcher launcher;
    private final EmulatedMemory memory;
    final Captures captures;

    private final MemoryPools pools;
    /** Bytes of graph memory nodes made, and their high-water mark since the last reset; guarded by this. */
    private long graphMemory;
    private long graphMemoryHigh;

    private final StreamMemOps memOps;

    Graphs(Handles handles, Contexts contexts, Streams streams, Launcher launcher, EmulatedMemory memory, MemoryPools pools,
           StreamMemOps memOps) {
        this.memOps = memOps;
        this.pools = pools;
        this.handles = handles;
        this.contexts = contexts;
        this.streams = streams;
        this.launcher = launcher;
        this.memory = memory;
        this.captures = contexts.captures;
    }

    // ---- capture ------------------------------------------------------------------------------

    void beginCapture(long hStream, int mode) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = streams.resolve(hStream, c);
        long h = handles.issue();
        EmulatedGraph g = handles.register(h, new EmulatedGraph(h, handles));
        g.madeByCapture = true;
        try {
            captures.begin(s, mode, g);
        } catch (CudaError e) {
            handles.remove(h, g);
            throw e;
        }
    }

    long endCapture(long hStream) {
        EmulatedContext c = contexts.current();
        EmulatedStream s = streams.resolve(hStream, c);
        EmulatedGraph g = captures.graphOf(s);
        try {
            return captures.end(s).handle;
        } catch (CudaError e) {
            if (g != null && g.madeByCapture && captures.graphOf(s) == null) {   // the stream left the capture: its graph goes
                g.destroy();
                handles.remove(g.handle, g);
            }
            throw e;
        }
    }

    /** {status, id, graph handle} of the stream's capture. */
    void beginCaptureToGraph(long hStream, long hGraph, MemorySegment dependencies, long count, int mode) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = streams.resolve(hStream, c);
        EmulatedGraph g = graph(hGraph, "hGraph");
        captures.begin(s, mode, g, nodes(dependencies, count, "dependencies"));
    }

    /** The graph a capture into an existing graph ends with is that graph: it stays the caller's. */
    long[] captureInfo(long hStream) {
        EmulatedContext c = contexts.current();
        EmulatedStream s = streams.resolve(hStream, c);
        long[] info = captures.info(s);
        EmulatedGraph g = captures.graphOf(s);
        return new long[] {info[0], info[1], g == null ? 0 : g.handle};
    }

    List<EmulatedGraph.Node> captureDependencies(long hStream) {
        return captures.dependencies(streams.resolve(hStream, contexts.current()));
    }

    void updateCaptureDependencies(long hStream, MemorySegment dependencies, long count, int flags) {
        EmulatedStream s = streams.resolve(hStream, contexts.current());
        captures.updateDependencies(s, nodes(dependencies, count, "dependencies"), flags);
    }

    // ---- graphs and nodes ---------------------------------------------------------------------

    long create(int flags) {
        contexts.requireInit();
        if (flags != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " must be 0");
        }
        long h = handles.issue();
        handles.register(h, new EmulatedGraph(h, handles));
        return h;
    }

    EmulatedGraph graph(long h, String what) {
        return contexts.lookup(h, EmulatedGraph.class, what);
    }

    EmulatedGraph.Node node(long h, String what) {
        return contexts.lookup(h, EmulatedGraph.Node.class, what);
    }

    EmulatedGraphExec exec(long h) {
        return contexts.lookup(h, EmulatedGraphExec.class, "hGraphExec");
    }

    void destroy(long hGraph) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        if (captures.capturingInto(g)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the graph is being captured into");
        }
        if (handles.remove(hGraph, g)) {
            g.destroy();
        }
    }

    /** A node array of the caller: {@code count} handles (bounded), each a live node. */
    List<EmulatedGraph.Node> nodes(MemorySegment array, long count, String what) {
        if (count < 0 || count > MAX_NODES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": count " + count + " is out of range");
        }
        List<EmulatedGraph.Node> out = new ArrayList<>((int) count);
        if (count == 0) {
            return out;
        }
        MemorySegment a = HostSegments.sized(array, 8 * count, what);
        for (long i = 0; i < count; i++) {
            out.add(node(a.getAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i), what + "[" + i + "]"));
        }
        return out;
    }

    long addEmpty(long hGraph, MemorySegment deps, long n) {
        return graph(hGraph, "hGraph").add(EmulatedGraph.EMPTY, nodes(deps, n, "dependencies")).handle;
    }

    long addKernel(long hGraph, MemorySegment deps, long n, MemorySegment nodeParams) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        Object[] k = kernel(nodeParams);
        EmulatedGraph.Node node = g.add(EmulatedGraph.KERNEL, d);
        setKernel(node, k);
        return node.handle;
    }

    /** {Prepared, KernelParams, context} from a CUDA_KERNEL_NODE_PARAMS. */
    private Object[] kernel(MemorySegment nodeParams) {
        MemorySegment p = HostSegments.sized(nodeParams, KNP_SIZE, "nodeParams");
        long func = p.get(ValueLayout.JAVA_LONG_UNALIGNED, KNP_FUNC);
        long kern = p.get(ValueLayout.JAVA_LONG_UNALIGNED, KNP_KERN);
        long ctx = p.get(ValueLayout.JAVA_LONG_UNALIGNED, KNP_CTX);
        int[] dims = new int[6];
        for (int i = 0; i < 3; i++) {
            dims[i] = p.get(ValueLayout.JAVA_INT_UNALIGNED, KNP_GRID + 4L * i);
            dims[3 + i] = p.get(ValueLayout.JAVA_INT_UNALIGNED, KNP_BLOCK + 4L * i);
        }
        int shared = p.get(ValueLayout.JAVA_INT_UNALIGNED, KNP_SHARED);
        MemorySegment params = MemorySegment.ofAddress(p.get(ValueLayout.JAVA_LONG_UNALIGNED, KNP_PARAMS));
        MemorySegment extra = MemorySegment.ofAddress(p.get(ValueLayout.JAVA_LONG_UNALIGNED, KNP_EXTRA));
        if (func != 0 && kern != 0) {
            kern = 0; // the driver takes kern only when func is NULL; cudart sets both
        }
        EmulatedContext c = ctx == 0 ? contexts.current() : contexts.find(ctx);
        if (c != contexts.current()) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "nodeParams.ctx other than the current context");
        }
        Launcher.Prepared prep = launcher.prepare(c, func != 0 ? func : kern, dims[0], dims[1], dims[2], dims[3], dims[4],
                dims[5], shared, params, extra);
        return new Object[] {prep, paramsOf(prep, func, kern, ctx, dims, shared), c};
    }

    /** The node's own copy of the values, behind an array of pointers, for cuGraphKernelNodeGetParams. */
    static KernelParams paramsOf(Launcher.Prepared prep, long func, long kern, long ctx, int[] dims, int shared) {
        List<PtxModule.Param> ps = prep.function().entry.params();
        Arena arena = Arena.ofAuto();
        MemorySegment buffer = arena.allocate(Math.max(1, prep.launch().paramBuffer().byteSize()), 16);
        buffer.asSlice(0, prep.launch().paramBuffer().byteSize()).copyFrom(prep.launch().paramBuffer());
        MemorySegment pointers = arena.allocate(8L * Math.max(1, ps.size()), 8);
        for (int i = 0; i < ps.size(); i++) {
            pointers.setAtIndex(ValueLayout.JAVA_LONG, i, buffer.address() + ps.get(i).offset());
        }
        return new KernelParams(func, kern, ctx, dims, shared, pointers);
    }

    private static void setKernel(EmulatedGraph.Node node, Object[] k) {
        Launcher.Prepared prep = (Launcher.Prepared) k[0];
        node.context = (EmulatedContext) k[2];
        node.what = prep.what();
        node.params = k[1];
        node.op = prep.op();
    }

    EmulatedGraph.Node eventNode(long hNode, int type) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != type) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not an event " + (type == EmulatedGraph.EVENT_RECORD
                    ? "record" : "wait") + " node");
        }
        return n;
    }

    void setEvent(long hNode, int type, long hEvent) {
        eventNode(hNode, type).event = contexts.lookup(hEvent, EmulatedEvent.class, "event");
    }

    void execSetEvent(long hExec, long hNode, int type, long hEvent) {
        EmulatedGraphExec.Step s = exec(hExec).step(eventNode(hNode, type));
        if (s == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a node of the graph hGraphExec was made from");
        }
        s.event = contexts.lookup(hEvent, EmulatedEvent.class, "event");
    }

    long findInClone(long hOriginal, long hClone) {
        return graph(hClone, "hClonedGraph").copyOf(node(hOriginal, "hOriginalNode")).handle;
    }

    /** Kernel, memcpy and memset nodes may be disabled in an exec graph, as the driver allows. */
    EmulatedGraphExec.Step enabledStep(long hExec, long hNode) {
        EmulatedGraphExec.Step s = exec(hExec).step(node(hNode, "hNode"));
        if (s == null || (s.type != EmulatedGraph.KERNEL && s.type != EmulatedGraph.MEMCPY && s.type != EmulatedGraph.MEMSET)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no kernel, memcpy or memset node of hGraphExec's graph");
        }
        return s;
    }

    void memsetGetParams(long hNode, MemorySegment out) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEMSET || !(n.params instanceof byte[] b)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memset node made with cuGraphAddMemsetNode");
        }
        HostSegments.sized(out, MEMSET_SIZE, "nodeParams").copyFrom(MemorySegment.ofArray(b));
    }

    void kernelGetParams(long hNode, MemorySegment out) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.KERNEL || !(n.params instanceof KernelParams k)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a kernel node made with cuGraphAddKernelNode");
        }
        writeKernel(HostSegments.sized(out, KNP_SIZE, "nodeParams"), k);
    }

    private static void writeKernel(MemorySegment p, KernelParams k) {
        p.fill((byte) 0);
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, KNP_FUNC, k.func());
        for (int i = 0; i < 3; i++) {
            p.set(ValueLayout.JAVA_INT_UNALIGNED, KNP_GRID + 4L * i, k.dims()[i]);
            p.set(ValueLayout.JAVA_INT_UNALIGNED, KNP_BLOCK + 4L * i, k.dims()[3 + i]);
        }
        p.set(ValueLayout.JAVA_INT_UNALIGNED, KNP_SHARED, k.shared());
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, KNP_PARAMS, k.pointers().address());
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, KNP_KERN, k.kern());
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, KNP_CTX, k.ctx());
    }

    void kernelSetParams(long hNode, MemorySegment nodeParams) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.KERNEL) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a kernel node");
        }
        setKernel(n, kernel(nodeParams));
    }

    /** cuGraphExecKernelNodeSetParams: the exec's copy of the node changes, the graph's does not. */
    void execKernelSetParams(long hExec, long hNode, MemorySegment nodeParams) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraph.Node n = node(hNode, "hNode");
        EmulatedGraphExec.Step s = x.step(n);
        if (s == null || s.type != EmulatedGraph.KERNEL) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no kernel node of the graph hGraphExec was made from");
        }
        Object[] k = kernel(nodeParams);
        Launcher.Prepared prep = (Launcher.Prepared) k[0];
        s.params = k[1];
        s.op = prep.op();
    }

    /**
     * A host node: the caller's function runs on the stream's thread when a launch reaches the node
     * (through an FFM downcall, as a host function of cuLaunchHostFunc does), and later nodes wait for it.
     */
    long addHost(long hGraph, MemorySegment deps, long n, MemorySegment nodeParams) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        HostParams h = hostParams(nodeParams);
        EmulatedGraph.Node node = g.add(EmulatedGraph.HOST, d);
        node.what = "host node";
        node.params = h;
        node.op = hostOp(h);
        return node.handle;
    }

    private static HostParams hostParams(MemorySegment nodeParams) {
        MemorySegment p = HostSegments.sized(nodeParams, HOST_SIZE, "nodeParams");
        long fn = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        if (fn == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams.fn is NULL");
        }
        return new HostParams(fn, p.get(ValueLayout.JAVA_LONG_UNALIGNED, 8));
    }

    private static Runnable hostOp(HostParams h) {
        MemorySegment fn = MemorySegment.ofAddress(h.fn());
        MemorySegment data = MemorySegment.ofAddress(h.userData());
        return () -> {
            try {
                HOST_FN.invokeExact(fn, data);
            } catch (Throwable t) {
                throw new IllegalStateException("graph host node function failed: " + t, t);
            }
        };
    }

    private EmulatedGraph.Node hostNode(long hNode) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.HOST) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a host node");
        }
        return n;
    }

    void hostGetParams(long hNode, MemorySegment out) {
        if (!(hostNode(hNode).params instanceof HostParams h)) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "a host node made by a capture: its parameters are not kept here");
        }
        MemorySegment p = HostSegments.sized(out, HOST_SIZE, "nodeParams");
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, h.fn());
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 8, h.userData());
    }

    void hostSetParams(long hNode, MemorySegment nodeParams) {
        EmulatedGraph.Node n = hostNode(hNode);
        HostParams h = hostParams(nodeParams);
        n.params = h;
        n.op = hostOp(h);
    }

    /** cuGraphExecHostNodeSetParams: the exec's copy of the node changes, the graph's does not. */
    void execHostSetParams(long hExec, long hNode, MemorySegment nodeParams) {
        EmulatedGraphExec.Step s = exec(hExec).step(node(hNode, "hNode"));
        if (s == null || s.type != EmulatedGraph.HOST) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no host node of the graph hGraphExec was made from");
        }
        HostParams h = hostParams(nodeParams);
        s.params = h;
        s.op = hostOp(h);
    }

    // ---- conditional nodes ---------------------------------------------------------------------

    static final int COND_IF = 0, COND_WHILE = 1, COND_SWITCH = 2;
    /** CU_GRAPH_COND_ASSIGN_DEFAULT: the default value is set at the start of each launch. */
    static final int COND_ASSIGN_DEFAULT = 1;
    /** Most bodies of a SWITCH node. */
    static final int MAX_BODIES = 1024;

    /** A CUgraphConditionalHandle: its value, which cudaGraphSetConditional sets from a kernel of its context. */
    static final class Conditional {
        final long handle;
        final EmulatedGraph graph;
        final EmulatedContext context;
        final int defaultValue;
        final int flags;
        volatile int value;

        Conditional(long handle, EmulatedGraph graph, EmulatedContext context, int defaultValue, int flags) {
            this.handle = handle;
            this.graph = graph;
            this.context = context;
            this.defaultValue = defaultValue;
            this.flags = flags;
            this.value = defaultValue;
        }
    }

    /** A conditional node's parameters: its handle, type (IF, WHILE, SWITCH) and its body graphs' handles (the node's). */
    record CondParams(Conditional handle, int type, int size, MemorySegment bodies) {
    }

    long conditionalHandleCreate(long hGraph, long ctx, int defaultLaunchValue, int flags) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        EmulatedContext c = ctx == 0 ? contexts.current() : contexts.find(ctx);
        if ((flags & ~COND_ASSIGN_DEFAULT) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        long h = handles.issue();
        Conditional cond = handles.register(h, new Conditional(h, g, c, defaultLaunchValue, flags));
        c.conditionals.put(h, cond);
        return h;
    }

    /**
     * A conditional node from a CUgraphNodeParams (GraphNodeParams' layout; CUDA_CONDITIONAL_NODE_PARAMS
     * at 16: handle, type u32, size u32, phGraph_out, ctx). Its body graphs are made here, empty, and
     * belong to the node; phGraph_out is pointed at their handles.
     */
    long addConditional(long hGraph, MemorySegment deps, long n, MemorySegment nodeParams) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        MemorySegment p = HostSegments.sized(nodeParams, 256, "nodeParams");
        Conditional c = contexts.lookup(p.get(ValueLayout.JAVA_LONG_UNALIGNED, 16), Conditional.class, "conditional.handle");
        int type = p.get(ValueLayout.JAVA_INT_UNALIGNED, 24);
        int size = p.get(ValueLayout.JAVA_INT_UNALIGNED, 28);
        long ctx = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 40);
        if (c.graph != g) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "conditional.handle was made for another graph");
        }
        boolean sized = switch (type) {
            case COND_IF -> size == 1 || size == 2;
            case COND_WHILE -> size == 1;
            case COND_SWITCH -> size >= 1 && size <= MAX_BODIES;
            default -> false;
        };
        if (!sized) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "conditional type=" + type + " size=" + size);
        }
        if (ctx != 0 && contexts.find(ctx) != c.context) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "conditional.ctx is not the handle's context");
        }
        EmulatedGraph.Node node = g.add(EmulatedGraph.CONDITIONAL, d);
        node.context = c.context;
        node.what = "conditional node";
        EmulatedGraph[] bodies = new EmulatedGraph[size];
        MemorySegment out = Arena.ofAuto().allocate(8L * size, 8);
        for (int i = 0; i < size; i++) {
            long h = handles.issue();
            bodies[i] = handles.register(h, new EmulatedGraph(h, handles));
            out.setAtIndex(ValueLayout.JAVA_LONG, i, h);
        }
        node.bodies = bodies;
        node.params = new CondParams(c, type, size, out);
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 32, out.address());
        return node.handle;
    }

    /** cudaGraphSetConditional from a kernel of {@code c}: false when the handle is none of the context's. */
    static boolean setConditional(EmulatedContext c, long handle, int value) {
        Conditional cond = c.conditionals.get(handle);
        if (cond == null) {
            return false;
        }
        cond.value = value;
        return true;
    }

    // CUDA_MEM_ALLOC_NODE_PARAMS: poolProps (88) at 0, accessDescs at 88, accessDescCount at 96, bytesize at 104, dptr at 112
    static final long MEM_ALLOC_SIZE = 120;

    /** What cuGraphMemAllocNodeGetParams answers: the parameters as given (the descriptors copied), with the address. */
    record MemAllocParams(byte[] params, MemorySegment descs) {
    }

    /**
     * A memory allocation node. The address is given when the node is made, as the driver does; the
     * emulated device backs it with memory of the current context at once and keeps it until the
     * context goes: the node and a free node of it (or a cuMemFreeAsync) change nothing a correct
     * program can see, and relaunches find the memory where the node said it is.
     */
    long addMemAlloc(long hGraph, MemorySegment deps, long n, MemorySegment nodeParams, int deviceCount) {
        EmulatedContext c = contexts.active();
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        MemorySegment p = HostSegments.sized(nodeParams, MEM_ALLOC_SIZE, "nodeParams");
        String refusal = io.gpusockets.protocol.structs.MemoryProps.poolRefusal(p, deviceCount);
        if (refusal != null) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "poolProps: " + refusal);
        }
        if (io.gpusockets.protocol.structs.MemoryProps.Location.read(p, io.gpusockets.protocol.structs.MemoryProps.LOCATION).id()
                != c.device) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "poolProps.location: another device than the current context's");
        }
        long count = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 96);
        long bytesize = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 104);
        if (count < 0 || count > 64 || bytesize <= 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "accessDescCount=" + count + " bytesize=" + bytesize);
        }
        MemorySegment descs = MemorySegment.NULL;
        if (count > 0) {
            MemorySegment given = HostSegments.sized(MemorySegment.ofAddress(p.get(ValueLayout.JAVA_LONG_UNALIGNED, 88)),
                    12 * count, "accessDescs");
            descs = Arena.ofAuto().allocate(12 * count, 8);
            descs.copyFrom(given);
        }
        Allocation a = memory.allocate(c, bytesize, Allocation.Kind.ALLOCATED);
        pools.keepAsGraphMemory(a.base());
        EmulatedGraph.Node node = g.add(EmulatedGraph.MEM_ALLOC, d);
        node.context = c;
        node.what = "memory allocation node";
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 112, a.base());
        byte[] kept = p.toArray(ValueLayout.JAVA_BYTE);
        node.params = new MemAllocParams(kept, descs);
        synchronized (this) {
            graphMemory += bytesize;
            graphMemoryHigh = Math.max(graphMemoryHigh, graphMemory);
        }
        return node.handle;
    }

    void memAllocGetParams(long hNode, MemorySegment out) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEM_ALLOC || !(n.params instanceof MemAllocParams m)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memory allocation node");
        }
        MemorySegment p = HostSegments.sized(out, MEM_ALLOC_SIZE, "params_out");
        p.copyFrom(MemorySegment.ofArray(m.params()));
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 88, m.descs().address());
    }

    /** A free node of graph memory (or of a stream-ordered allocation) of the current context. */
    long addMemFree(long hGraph, MemorySegment deps, long n, long dptr) {
        EmulatedContext c = contexts.active();
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        Allocation a = memory.find(dptr);
        if (a == null || a.base() != dptr || a.owner() != c || !pools.isGraphMemory(dptr)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(dptr)
                    + " is not the address of a graph memory allocation of the current context");
        }
        EmulatedGraph.Node node = g.add(EmulatedGraph.MEM_FREE, d);
        node.context = c;
        node.what = "memory free node";
        node.params = dptr;
        return node.handle;
    }

    long memFreeGetParams(long hNode) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEM_FREE || !(n.params instanceof Long dptr)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memory free node");
        }
        return dptr;
    }

    // ---- batch memory-operation nodes ----------------------------------------------------------

    /** CUDA_BATCH_MEM_OP_NODE_PARAMS (v1 and v2 alike): ctx, count u32 at 8, paramArray at 16, flags u32 at 24. */
    static final long MEMOP_SIZE = 32;

    /** A batch node's parameters: its context, and a copy of the operations the node owns (what GetParams points at). */
    record MemOpParams(EmulatedContext context, int count, int flags, MemorySegment ops) {
    }

    /** Checked parameters and the work they make. */
    private record MemOp(MemOpParams params, Runnable op) {
    }

    /** The checked parameters of a CUDA_BATCH_MEM_OP_NODE_PARAMS and their work; {@code fallback}: the context of a NULL ctx. */
    private MemOp memOp(MemorySegment nodeParams, EmulatedContext fallback) {
        MemorySegment p = HostSegments.sized(nodeParams, MEMOP_SIZE, "nodeParams");
        long ctx = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        int count = p.get(ValueLayout.JAVA_INT_UNALIGNED, 8);
        long array = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 16);
        int flags = p.get(ValueLayout.JAVA_INT_UNALIGNED, 24);
        EmulatedContext c = ctx == 0 ? fallback : contexts.find(ctx);
        if (count == 0 && flags == 0) {
            // a node with no operations, which the driver makes too (an H100, 580.159.04): it does nothing
            return new MemOp(new MemOpParams(c, 0, 0, Arena.ofAuto().allocate(BatchMemOp.SIZE, 8)), () -> { });
        }
        if (array == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "nodeParams.paramArray is NULL");
        }
        Runnable op = memOps.batchOp(c, count, MemorySegment.ofAddress(array), flags);
        // The node's own copy, as the driver copies the array: the caller may free its own.
        MemorySegment ops = Arena.ofAuto().allocate((long) count * BatchMemOp.SIZE, 8);
        ops.copyFrom(MemorySegment.ofAddress(array).reinterpret(ops.byteSize()));
        return new MemOp(new MemOpParams(c, count, flags, ops), op);
    }

    long addBatchMemOp(long hGraph, MemorySegment deps, long n, MemorySegment nodeParams) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        MemOp m = memOp(nodeParams, contexts.active());
        EmulatedGraph.Node node = g.add(EmulatedGraph.BATCH_MEM_OP, d);
        node.context = m.params().context();
        node.what = "batch memory-operation node";
        node.params = m.params();
        node.op = m.op();
        return node.handle;
    }

    /** The node's parameters; paramArray points at the node's copy, valid until its parameters change. */
    void batchMemOpGetParams(long hNode, MemorySegment out) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.BATCH_MEM_OP || !(n.params instanceof MemOpParams m)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a batch memory-operation node");
        }
        MemorySegment p = HostSegments.sized(out, MEMOP_SIZE, "nodeParams_out");
        p.fill((byte) 0);
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, m.context().handle);
        p.set(ValueLayout.JAVA_INT_UNALIGNED, 8, m.count());
        p.set(ValueLayout.JAVA_LONG_UNALIGNED, 16, m.ops().address());
        p.set(ValueLayout.JAVA_INT_UNALIGNED, 24, m.flags());
    }

    void batchMemOpSetParams(long hNode, MemorySegment nodeParams) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.BATCH_MEM_OP) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a batch memory-operation node");
        }
        MemOp m = memOp(nodeParams, n.context);
        n.context = m.params().context();
        n.params = m.params();
        n.op = m.op();
    }

    /**
     * cuGraphExecBatchMemOpNodeSetParams: the exec's copy of the node changes (the graph's does not); as
     * the driver documents, only the waits' and writes' addresses, values and flags may change, not the
     * context, the count or the operations' types.
     */
    void execBatchMemOpSetParams(long hExec, long hNode, MemorySegment nodeParams) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraphExec.Step s = x.step(node(hNode, "hNode"));
        if (s == null || s.type != EmulatedGraph.BATCH_MEM_OP || !(s.params instanceof MemOpParams before)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no batch memory-operation node of the graph hGraphExec was made from");
        }
        MemOp m = memOp(nodeParams, before.context());
        MemOpParams now = m.params();
        boolean same = now.context() == before.context() && now.count() == before.count();
        for (int i = 0; same && i < now.count(); i++) {
            long at = (long) i * BatchMemOp.SIZE;
            same = BatchMemOp.operation(now.ops(), at)
                    == BatchMemOp.operation(before.ops(), at);
        }
        if (!same) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "an exec graph's batch node keeps its context, count and operation types");
        }
        s.params = now;
        s.op = m.op();
    }

    /** CU_GRAPH_MEM_ATTR_{USED,RESERVED}_MEM_{CURRENT,HIGH}: the graph memory nodes made (the emulated device reserves what it uses). */
    synchronized long graphMemAttribute(int attr) {
        return switch (attr) {
            case 0, 2 -> graphMemory;
            case 1, 3 -> graphMemoryHigh;
            default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr);
        };
    }

    /** Only the high-water marks may be reset, with the value 0. */
    synchronized void resetGraphMemHigh(int attr, long value) {
        if ((attr != 1 && attr != 3) || value != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr + " value=" + value + ": only a high mark is reset, to 0");
        }
        graphMemoryHigh = graphMemory;
    }

    long addMemset(long hGraph, MemorySegment deps, long n, MemorySegment memsetParams, long ctx) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        EmulatedContext c = ctx == 0 ? contexts.current() : contexts.find(ctx);
        Runnable op = memsetOp(c, memsetParams);
        EmulatedGraph.Node node = g.add(EmulatedGraph.MEMSET, d);
        node.context = c;
        node.what = "memset node";
        node.params = HostSegments.sized(memsetParams, MEMSET_SIZE, "memsetParams").toArray(ValueLayout.JAVA_BYTE);
        node.op = op;
        return node.handle;
    }

    void memsetSetParams(long hNode, MemorySegment nodeParams) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEMSET) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memset node");
        }
        Runnable op = memsetOp(n.context == null ? contexts.current() : n.context, nodeParams);
        n.params = HostSegments.sized(nodeParams, MEMSET_SIZE, "nodeParams").toArray(ValueLayout.JAVA_BYTE);
        n.op = op;
    }

    /** cuGraphExecMemsetNodeSetParams: the exec's copy of the node changes, the graph's does not. */
    void execMemsetSetParams(long hExec, long hNode, MemorySegment memsetParams, long ctx) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraphExec.Step s = x.step(node(hNode, "hNode"));
        if (s == null || s.type != EmulatedGraph.MEMSET) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no memset node of the graph hGraphExec was made from");
        }
        EmulatedContext c = ctx == 0 ? x.context : contexts.find(ctx);
        Runnable op = memsetOp(c, memsetParams);
        s.params = HostSegments.sized(memsetParams, MEMSET_SIZE, "memsetParams").toArray(ValueLayout.JAVA_BYTE);
        s.op = op;
    }

    /** The work of a CUDA_MEMSET_NODE_PARAMS, checked: its rows lie in one allocation of {@code c}. */
    private Runnable memsetOp(EmulatedContext c, MemorySegment memsetParams) {
        MemorySegment p = HostSegments.sized(memsetParams, MEMSET_SIZE, "memsetParams");
        long dst = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        long pitch = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 8);
        int value = p.get(ValueLayout.JAVA_INT_UNALIGNED, 16);
        int es = p.get(ValueLayout.JAVA_INT_UNALIGNED, 20);
        long width = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 24);
        long height = p.get(ValueLayout.JAVA_LONG_UNALIGNED, 32);
        if (es != 1 && es != 2 && es != 4) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "elementSize=" + es + " must be 1, 2 or 4");
        }
        if (width <= 0 || height <= 0 || width > Long.MAX_VALUE / es / height || dst % es != 0
                || (height > 1 && (pitch < width * es))) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "memset node of width=" + width + " height=" + height
                    + " pitch=" + pitch + " elementSize=" + es + " at 0x" + Long.toHexString(dst));
        }
        long rowBytes = width * es;
        long span = (height - 1) * pitch + rowBytes;
        if (memory.resolve(c, dst, span) == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dst=0x" + Long.toHexString(dst) + " bytes=" + span
                    + " is not inside one allocation of the context");
        }
        long v = es == 4 ? Integer.toUnsignedLong(value) : es == 2 ? value & 0xFFFF : value & 0xFF;
        return () -> {
            for (long r = 0; r < height; r++) {
                MemorySegment row = memory.resolve(c, dst + r * pitch, rowBytes);
                if (row == null) {
                    throw KernelFault.illegalAddress(dst + r * pitch, rowBytes);
                }
                Transfers.fill(row, v, es);
            }
        };
    }

    /**
     * A memcpy node between device memory (DEVICE sides, or UNIFIED ones inside device allocations) and
     * device or host memory (HOST sides: the caller's pointer, read and written when a launch reaches
     * the node, as the driver does; behind the backend that is its staging buffer, never a guest
     * address). Arrays are not supported in nodes here.
     */
    long addMemcpy(long hGraph, MemorySegment deps, long n, MemorySegment copyParams, long ctx) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        EmulatedContext c = ctx == 0 ? contexts.current() : contexts.find(ctx);
        Runnable op = memcpyOp(c, copyParams);
        EmulatedGraph.Node node = g.add(EmulatedGraph.MEMCPY, d);
        node.context = c;
        node.what = "memcpy node";
        node.params = HostSegments.sized(copyParams, Memcpy3D.SIZE_3D, "copyParams").toArray(ValueLayout.JAVA_BYTE);
        node.op = op;
        return node.handle;
    }

    void memcpyGetParams(long hNode, MemorySegment out) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEMCPY || !(n.params instanceof byte[] b)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memcpy node made with cuGraphAddMemcpyNode");
        }
        HostSegments.sized(out, Memcpy3D.SIZE_3D, "nodeParams").copyFrom(MemorySegment.ofArray(b));
    }

    void memcpySetParams(long hNode, MemorySegment nodeParams) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.MEMCPY) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a memcpy node");
        }
        Runnable op = memcpyOp(n.context == null ? contexts.current() : n.context, nodeParams);
        n.params = HostSegments.sized(nodeParams, Memcpy3D.SIZE_3D, "nodeParams").toArray(ValueLayout.JAVA_BYTE);
        n.op = op;
    }

    /** cuGraphExecMemcpyNodeSetParams: the exec's copy of the node changes, the graph's does not. */
    void execMemcpySetParams(long hExec, long hNode, MemorySegment copyParams, long ctx) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraphExec.Step s = x.step(node(hNode, "hNode"));
        if (s == null || s.type != EmulatedGraph.MEMCPY) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no memcpy node of the graph hGraphExec was made from");
        }
        EmulatedContext c = ctx == 0 ? x.context : contexts.find(ctx);
        Runnable op = memcpyOp(c, copyParams);
        s.params = HostSegments.sized(copyParams, Memcpy3D.SIZE_3D, "copyParams").toArray(ValueLayout.JAVA_BYTE);
        s.op = op;
    }

    /**
     * The work of a CUDA_MEMCPY3D between device memory (DEVICE sides, or UNIFIED ones inside device
     * allocations) and device or host memory (HOST sides, or UNIFIED ones outside device memory: the
     * caller's pointer, read and written when a launch reaches the node, as the driver does; behind
     * the backend that is its staging buffer, never a guest address). Arrays are not supported in
     * nodes here.
     */
    private Runnable memcpyOp(EmulatedContext c, MemorySegment copyParams) {
        Memcpy3D m = Memcpy3D.read3D(HostSegments.sized(copyParams, Memcpy3D.SIZE_3D, "copyParams"));
        Memcpy3D.Side src = side(c, m, m.src(), "src");
        Memcpy3D.Side dst = side(c, m, m.dst(), "dst");
        long rows = m.rows();
        long width = m.width();
        long srcStart = src.base() + Memcpy3D.startOffset(src);
        long dstStart = dst.base() + Memcpy3D.startOffset(dst);
        boolean srcHost = src.memoryType() == Memcpy3D.HOST, dstHost = dst.memoryType() == Memcpy3D.HOST;
        return () -> {
            for (long r = 0; r < rows; r++) {
                long from = srcStart + m.rowOffset(src, r), to = dstStart + m.rowOffset(dst, r);
                MemorySegment a = srcHost ? MemorySegment.ofAddress(from).reinterpret(width) : memory.resolve(c, from, width);
                MemorySegment b = dstHost ? MemorySegment.ofAddress(to).reinterpret(width) : memory.resolve(c, to, width);
                if (a == null || b == null) {
                    throw KernelFault.illegalAddress(a == null ? from : to, width);
                }
                MemorySegment.copy(a, 0, b, 0, width);
            }
        };
    }

    private Memcpy3D.Side side(EmulatedContext c, Memcpy3D m, Memcpy3D.Side s, String what) {
        long start = Memcpy3D.startOffset(s), extent = m.extent(s);
        if (start < 0 || extent < 0 || m.totalBytes() <= 0 || (m.depth() > 1 && s.height() < m.height())
                || (m.height() > 1 && s.pitch() < m.width())) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": extent or layout out of range");
        }
        if (s.memoryType() == Memcpy3D.HOST) {
            if (s.host() == 0) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + ": host pointer is NULL");
            }
            return s;
        }
        if (s.memoryType() == Memcpy3D.UNIFIED && memory.resolve(c, s.device() + start, extent) == null) {
            return s.resolved(Memcpy3D.HOST);   // a unified address outside device memory is the caller's host memory
        }
        if (s.memoryType() != Memcpy3D.DEVICE && s.memoryType() != Memcpy3D.UNIFIED) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, what + ": memory type " + s.memoryType() + " in a memcpy node");
        }
        if (memory.resolve(c, s.device() + start, extent) == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "=0x" + Long.toHexString(s.device()) + " bytes=" + extent
                    + " is not inside one allocation of the context");
        }
        return s.resolved(Memcpy3D.DEVICE);
    }

    long addEvent(long hGraph, MemorySegment deps, long n, long hEvent, boolean record) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        EmulatedEvent e = contexts.lookup(hEvent, EmulatedEvent.class, "event");
        EmulatedGraph.Node node = g.add(record ? EmulatedGraph.EVENT_RECORD : EmulatedGraph.WAIT_EVENT, d);
        node.event = e;
        node.context = e.context;
        return node.handle;
    }

    /** The child graph is copied, as the driver does: later changes to it do not reach the node. */
    long addChild(long hGraph, MemorySegment deps, long n, long hChild) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        List<EmulatedGraph.Node> d = nodes(deps, n, "dependencies");
        EmulatedGraph child = graph(hChild, "childGraph");
        if (child == g) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "a graph cannot be its own child");
        }
        EmulatedGraph copy = child.copy(handles.issue(), new HashMap<>());
        EmulatedGraph.Node node = g.add(EmulatedGraph.GRAPH, d);
        node.child = copy;
        return node.handle;
    }

    /** The node's own copy of its child graph (changes to it reach the node, as the driver's do). */
    long childGraph(long hNode) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        if (n.type != EmulatedGraph.GRAPH || n.child == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is not a child graph node");
        }
        EmulatedGraph child = n.child;
        if (handles.find(child.handle, EmulatedGraph.class) == null) {
            handles.register(child.handle, child);
        }
        return child.handle;
    }

    /** cuGraphExecChildGraphNodeSetParams: the exec's copy of the node runs a copy of {@code hChild} from now on. */
    void execChildSetParams(long hExec, long hNode, long hChild) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraphExec.Step s = x.step(node(hNode, "hNode"));
        if (s == null || s.type != EmulatedGraph.GRAPH) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "hNode is no child graph node of the graph hGraphExec was made from");
        }
        x.replaceChild(s, graph(hChild, "childGraph").copy(handles.issue(), new HashMap<>()));
    }

    long clone(long hGraph) {
        EmulatedGraph g = graph(hGraph, "originalGraph");
        long h = handles.issue();
        return handles.register(h, g.copy(h, new HashMap<>())).handle;
    }

    int nodeType(long hNode) {
        return node(hNode, "hNode").type;
    }

    void addDependencies(long hGraph, MemorySegment from, MemorySegment to, long n) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        g.addEdges(nodes(from, n, "from"), nodes(to, n, "to"));
    }

    void removeDependencies(long hGraph, MemorySegment from, MemorySegment to, long n) {
        EmulatedGraph g = graph(hGraph, "hGraph");
        g.removeEdges(nodes(from, n, "from"), nodes(to, n, "to"));
    }

    void destroyNode(long hNode) {
        EmulatedGraph.Node n = node(hNode, "hNode");
        n.graph.remove(n);
    }

    /**
     * The array-query convention of cuGraphGetNodes and its kin: with a NULL array only the count is
     * written; else up to *count handles, and *count becomes the number written (the rest of the
     * array, if the caller's is longer, zeroed).
     */
    static void answer(List<Long> handlesOut, MemorySegment array, MemorySegment count) {
        MemorySegment cnt = HostSegments.sized(count, 8, "count");
        if (isNull(array)) {
            cnt.set(ValueLayout.JAVA_LONG, 0, handlesOut.size());
            return;
        }
        long room = cnt.get(ValueLayout.JAVA_LONG, 0);
        if (room < 0 || room > MAX_NODES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "count " + room + " is out of range");
        }
        MemorySegment a = HostSegments.sized(array, 8 * room, "array");
        for (long i = 0; i < room; i++) {
            a.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, i < handlesOut.size() ? handlesOut.get((int) i) : 0);
        }
        cnt.set(ValueLayout.JAVA_LONG, 0, Math.min(room, handlesOut.size()));
    }

    static List<Long> handlesOf(List<EmulatedGraph.Node> nodes) {
        List<Long> out = new ArrayList<>(nodes.size());
        for (EmulatedGraph.Node n : nodes) {
            out.add(n.handle);
        }
        return out;
    }

    /** cuGraphGetEdges: with NULL arrays only the count; edge data, if asked for, is all zero (default edges). */
    static void answerEdges(List<EmulatedGraph.Node[]> edges, MemorySegment from, MemorySegment to, MemorySegment edgeData,
                            MemorySegment count) {
        MemorySegment cnt = HostSegments.sized(count, 8, "numEdges");
        if (isNull(from) && isNull(to)) {
            cnt.set(ValueLayout.JAVA_LONG, 0, edges.size());
            return;
        }
        if (isNull(from) || isNull(to)) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "from and to must both be NULL or both be given");
        }
        long room = cnt.get(ValueLayout.JAVA_LONG, 0);
        if (room < 0 || room > MAX_NODES) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "numEdges " + room + " is out of range");
        }
        MemorySegment f = HostSegments.sized(from, 8 * room, "from");
        MemorySegment t = HostSegments.sized(to, 8 * room, "to");
        MemorySegment e = isNull(edgeData) ? null : HostSegments.sized(edgeData, 8 * room, "edgeData");
        for (long i = 0; i < room; i++) {
            boolean have = i < edges.size();
            f.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, have ? edges.get((int) i)[0].handle : 0);
            t.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, have ? edges.get((int) i)[1].handle : 0);
            if (e != null) {
                e.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, 0);
            }
        }
        cnt.set(ValueLayout.JAVA_LONG, 0, Math.min(room, edges.size()));
    }

    // ---- exec graphs --------------------------------------------------------------------------

    long instantiate(long hGraph, long flags) {
        EmulatedContext c = contexts.active();
        EmulatedGraph g = graph(hGraph, "hGraph");
        if ((flags & ~INSTANTIATE_FLAGS) != 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "flags=0x" + Long.toHexString(flags)
                    + (flags == 0x4 ? " (device launch is not supported by the emulated device)" : ""));
        }
        List<EmulatedGraph.Node> order = g.order();
        if (order == null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the graph has a cycle");
        }
        for (EmulatedGraph.Node n : order) {
            if (n.context != null && n.context != c && n.type != EmulatedGraph.WAIT_EVENT && n.type != EmulatedGraph.EVENT_RECORD) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "a node's work belongs to another context than the current one");
            }
        }
        long h = handles.issue();
        handles.own(c, h, new EmulatedGraphExec(h, c, flags, g, order));
        return h;
    }

    void launch(long hExec, long hStream) {
        EmulatedContext c = contexts.active();
        EmulatedGraphExec x = exec(hExec);
        if (x.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "hGraphExec belongs to another context than the current one");
        }
        EmulatedStream s = streams.resolve(hStream, c);
        c.enqueue(s, null, x::run, "cuGraphLaunch");
    }

    /** Nothing to upload on the emulated device; the arguments are checked as for a launch. */
    void upload(long hExec, long hStream) {
        EmulatedContext c = contexts.active();
        EmulatedGraphExec x = exec(hExec);
        if (x.context != c) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "hGraphExec belongs to another context than the current one");
        }
        streams.resolve(hStream, c);
    }

    void execDestroy(long hExec) {
        EmulatedGraphExec x = exec(hExec);
        if (handles.remove(hExec, x)) {
            x.context.owned.remove(hExec);
        }
    }

    /**
     * cuGraphExecUpdate: the new graph must have the same nodes (types, in creation order) and
     * edges; then each step takes the new node's work. Writes the CUgraphExecUpdateResultInfo
     * (result u32, errorNode, errorFromNode; 24 bytes).
     */
    void execUpdate(long hExec, long hGraph, MemorySegment resultInfo) {
        EmulatedGraphExec x = exec(hExec);
        EmulatedGraph g = graph(hGraph, "hGraph");
        MemorySegment info = HostSegments.sized(resultInfo, 24, "resultInfo");
        info.fill((byte) 0);
        List<EmulatedGraph.Node> now = x.source == g ? null : g.nodes();
        List<EmulatedGraph.Node> before = x.source.nodes();
        List<EmulatedGraph.Node> mine = new ArrayList<>(x.steps().keySet());
        mine.sort((a, b) -> Integer.compare(before.indexOf(a), before.indexOf(b)));
        List<EmulatedGraph.Node> fresh = now == null ? before : now;
        int result = 0;
        EmulatedGraph.Node bad = null;
        if (fresh.size() != mine.size()) {
            result = 2;    // TOPOLOGY_CHANGED
        } else {
            for (int i = 0; i < fresh.size() && result == 0; i++) {
                EmulatedGraph.Node a = mine.get(i), b = fresh.get(i);
                if (a.type != b.type) {
                    result = 3;    // NODE_TYPE_CHANGED
                    bad = b;
                } else if (a.type == EmulatedGraph.GRAPH) {
                    result = 6;    // NOT_SUPPORTED
                    bad = b;
                } else if (!sameEdges(a, b, mine, fresh)) {
                    result = 2;
                    bad = b;
                }
            }
        }
        if (result != 0) {
            info.set(ValueLayout.JAVA_INT, 0, result);
            info.set(ValueLayout.JAVA_LONG, 8, bad == null ? 0 : bad.handle);
            throw new CudaError(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph's topology or node types differ");
        }
        for (int i = 0; i < fresh.size(); i++) {
            EmulatedGraphExec.Step s = x.step(mine.get(i));
            EmulatedGraph.Node b = fresh.get(i);
            s.op = b.op;
            s.event = b.event;
            s.params = b.params;
        }
    }

    private static boolean sameEdges(EmulatedGraph.Node a, EmulatedGraph.Node b, List<EmulatedGraph.Node> mine,
                                     List<EmulatedGraph.Node> fresh) {
        List<Integer> da = new ArrayList<>(), db = new ArrayList<>();
        for (EmulatedGraph.Node d : a.graph.dependencies(a)) {
            da.add(mine.indexOf(d));
        }
        for (EmulatedGraph.Node d : b.graph.dependencies(b)) {
            db.add(fresh.indexOf(d));
        }
        da.sort(null);
        db.sort(null);
        return da.equals(db);
    }
}
