package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.GraphRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.structs.GraphNodeParams;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Area {@code graphs}: the graph calls whose requests the table cannot describe (GraphRequest).
 * Kernel node parameters are copied at the call by the function's parameter sizes, as a launch's
 * are; node arrays the backend answers are written into the program's arrays by the driver's
 * convention (a NULL array asks for the count; otherwise up to *count entries, the rest NULL, and
 * *count becomes the number written). The dependency arrays cuStreamGetCaptureInfo hands out live
 * in this thread's memory until its next such call, as the driver's live until the stream's next call.
 * User objects are answered here ({@link UserObjects}); a batch memory-operation node's operations travel
 * as DATA, and those cuGraphBatchMemOpNodeGetParams answers are kept here for the node.
 */
final class GraphCalls implements FrontendHandlers.Graphs {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /** CUDA_HOST_NODE_PARAMS: {fn, userData}. */
    private static final long HOST_PARAMS = 16;

    private final CallChannel channel;
    private final LaunchCalls launches;
    private final RemoteCudaDriver driver;
    private final StreamCallbacks callbacks;
    private final DeviceRanges ranges;
    private final UserObjects userObjects;
    private final ThreadLocal<Arena> captureArrays = new ThreadLocal<>();
    /**
     * Memcpy nodes with a host side this connection made, with the CUDA_MEMCPY3D the program gave: the
     * backend's node for each is a child graph or host node.
     */
    private final java.util.Map<Long, byte[]> hostCopyNodes = new java.util.concurrent.ConcurrentHashMap<>();

    GraphCalls(CallChannel channel, LaunchCalls launches, RemoteCudaDriver driver, StreamCallbacks callbacks, DeviceRanges ranges,
               UserObjects userObjects) {
        this.channel = channel;
        this.userObjects = userObjects;
        this.launches = launches;
        this.driver = driver;
        this.callbacks = callbacks;
        this.ranges = ranges;
    }

    // ---- user objects (issue 21): answered in the guest, UserObjects --------------------------------

    @Override
    public int cuUserObjectCreate(MemorySegment object_out, MemorySegment userPtr, MemorySegment destroy, int initialRefcount,
                                  int flags) {
        return userObjects.create(object_out, userPtr, destroy, initialRefcount, flags);
    }

    @Override
    public int cuUserObjectRetain(long object, int count) {
        return UserObjects.retain(object, count);
    }

    @Override
    public int cuUserObjectRelease(long object, int count) {
        return UserObjects.release(object, count);
    }

    @Override
    public int cuGraphRetainUserObject(long graph, long object, int count, int flags) {
        return userObjects.graphRetain(graph, object, count, flags);
    }

    @Override
    public int cuGraphReleaseUserObject(long graph, long object, int count) {
        return userObjects.graphRelease(graph, object, count);
    }

    // ---- host nodes and host-memory copy nodes (issue 21) --------------------------------------

    /**
     * A host node: the program's function and userData are filed here ({@link StreamCallbacks#file})
     * and the backend gets their token in place of fn (userData 0); the worker calls the function each
     * time a launch reaches the node.
     */
    @Override
    public int cuGraphAddHostNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                  MemorySegment nodeParams) {
        long token = fileHost(nodeParams);
        if (token == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return unfileUnless(token, driver.call(ApiEntries.cuGraphAddHostNode, phGraphNode, hGraph, dependencies,
                numDependencies, tokenParams(token)));
    }

    /** The program's function and userData, found by the token the backend answers. */
    @Override
    public int cuGraphHostNodeGetParams(long hNode, MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment got = Arena.ofAuto().allocate(HOST_PARAMS, 8);
        int r = driver.call(ApiEntries.cuGraphHostNodeGetParams, hNode, got);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        if (!(callbacks.filed(got.get(LONG, 0)) instanceof StreamCallbacks.HostFunction h)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment out = WireValues.sized(nodeParams, HOST_PARAMS);
        out.set(LONG, 0, h.fn());
        out.set(LONG, 8, h.userData());
        return r;
    }

    @Override
    public int cuGraphHostNodeSetParams(long hNode, MemorySegment nodeParams) {
        long token = fileHost(nodeParams);
        if (token == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return unfileUnless(token, driver.call(ApiEntries.cuGraphHostNodeSetParams, hNode, tokenParams(token)));
    }

    @Override
    public int cuGraphExecHostNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        long token = fileHost(nodeParams);
        if (token == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return unfileUnless(token, driver.call(ApiEntries.cuGraphExecHostNodeSetParams, hGraphExec, hNode, tokenParams(token)));
    }

    /**
     * A memcpy node. Device-only copies go as they are. A host side (HOST, or UNIFIED pointing outside
     * the session's device memory) is filed here with the program's pointer and layout, and its Host
     * field carries the token to the backend, which makes the node a gate and a staging buffer: the
     * worker reads or writes the program's rows at each launch, when the graph reaches the node.
     */
    @Override
    public int cuGraphAddMemcpyNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                    MemorySegment copyParams, long ctx) {
        if (isNull(copyParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D m = Memcpy3D.read3D(WireValues.sized(copyParams, Memcpy3D.SIZE_3D));
        Memcpy3D.Side src = resolve(m.src()), dst = resolve(m.dst());
        if (src == null || dst == null || m.totalBytes() <= 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        boolean srcHost = src.memoryType() == Memcpy3D.HOST, dstHost = dst.memoryType() == Memcpy3D.HOST;
        if (!srcHost && !dstHost) {
            return driver.call(ApiEntries.cuGraphAddMemcpyNode, phGraphNode, hGraph, dependencies, numDependencies, copyParams, ctx);
        }
        m = m.with(src, dst);
        if ((srcHost && !hostLayout(m, src)) || (dstHost && !hostLayout(m, dst))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        long token = callbacks.file(new StreamCallbacks.HostCopy(m));
        MemorySegment sent = Arena.ofAuto().allocate(Memcpy3D.SIZE_3D, 8);
        sent.copyFrom(WireValues.sized(copyParams, Memcpy3D.SIZE_3D));
        m.with(srcHost ? tokenSide(src, token) : src, dstHost ? tokenSide(dst, token) : dst).write3D(sent);
        int r = unfileUnless(token, driver.call(ApiEntries.cuGraphAddMemcpyNode, phGraphNode, hGraph, dependencies,
                numDependencies, sent, ctx));
        if (r == CuResult.CUDA_SUCCESS) {
            hostCopyNodes.put(WireValues.sized(phGraphNode, 8).get(LONG, 0),
                    WireValues.sized(copyParams, Memcpy3D.SIZE_3D).toArray(ValueLayout.JAVA_BYTE));
        }
        return r;
    }

    /** A memcpy node made with a host side is a child graph node only in the backend: to the program it is none. */
    @Override
    public int cuGraphChildGraphNodeGetGraph(long hNode, MemorySegment phGraph) {
        if (hostCopyNodes.containsKey(hNode)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return driver.call(ApiEntries.cuGraphChildGraphNodeGetGraph, hNode, phGraph);
    }

    /** A memcpy node with a host side answers the parameters it was made with; the backend answers the others. */
    @Override
    public int cuGraphMemcpyNodeGetParams(long hNode, MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        byte[] made = hostCopyNodes.get(hNode);
        if (made != null) {
            WireValues.sized(nodeParams, Memcpy3D.SIZE_3D).copyFrom(MemorySegment.ofArray(made));
            return CuResult.CUDA_SUCCESS;
        }
        return driver.call(ApiEntries.cuGraphMemcpyNodeGetParams, hNode, nodeParams);
    }

    /**
     * Device and array sides only: a memcpy node's host side (its gate and staging buffer in the
     * backend, its token here) is made with the node, so new parameters that touch host memory, or new
     * parameters for a node made with a host side, answer CUDA_ERROR_NOT_SUPPORTED (make a new node).
     */
    @Override
    public int cuGraphMemcpyNodeSetParams(long hNode, MemorySegment nodeParams) {
        int refused = deviceOnly(hNode, nodeParams);
        return refused != CuResult.CUDA_SUCCESS ? refused : driver.call(ApiEntries.cuGraphMemcpyNodeSetParams, hNode, nodeParams);
    }

    @Override
    public int cuGraphExecMemcpyNodeSetParams(long hGraphExec, long hNode, MemorySegment copyParams, long ctx) {
        int refused = deviceOnly(hNode, copyParams);
        return refused != CuResult.CUDA_SUCCESS ? refused
                : driver.call(ApiEntries.cuGraphExecMemcpyNodeSetParams, hGraphExec, hNode, copyParams, ctx);
    }

    private int deviceOnly(long hNode, MemorySegment params) {
        if (isNull(params)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Memcpy3D m = Memcpy3D.read3D(WireValues.sized(params, Memcpy3D.SIZE_3D));
        Memcpy3D.Side src = resolve(m.src()), dst = resolve(m.dst());
        if (src == null || dst == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        if (hostCopyNodes.containsKey(hNode) || src.memoryType() == Memcpy3D.HOST || dst.memoryType() == Memcpy3D.HOST) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * CUDA_GRAPH_INSTANTIATE_PARAMS {flags u64, hUploadStream, hErrNode_out, result_out u32}: answered
     * here through cuGraphInstantiateWithFlags and, with CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, cuGraphUpload
     * on the upload stream, as the driver documents the call. The result goes to result_out
     * (CUDA_GRAPH_INSTANTIATE_ERROR for a failed instantiation); hErrNode_out stays NULL (the
     * driver's error node does not cross: cuGraphInstantiateWithFlags does not name one).
     */
    @Override
    public int cuGraphInstantiateWithParams(MemorySegment phGraphExec, long hGraph, MemorySegment instantiateParams) {
        if (isNull(phGraphExec) || isNull(instantiateParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = WireValues.sized(instantiateParams, INSTANTIATE_PARAMS);
        long flags = p.get(LONG, 0);
        long stream = p.get(LONG, 8);
        p.set(LONG, 16, 0);
        int r = driver.call(ApiEntries.cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags & ~INSTANTIATE_FLAG_UPLOAD);
        if (r == CuResult.CUDA_SUCCESS && (flags & INSTANTIATE_FLAG_UPLOAD) != 0) {
            long exec = WireValues.sized(phGraphExec, 8).get(LONG, 0);
            r = driver.call(ApiEntries.cuGraphUpload, exec, stream);
            if (r != CuResult.CUDA_SUCCESS) {
                driver.call(ApiEntries.cuGraphExecDestroy, exec);
            }
        }
        p.set(ValueLayout.JAVA_INT_UNALIGNED, 24, r == CuResult.CUDA_SUCCESS ? 0 : INSTANTIATE_ERROR);
        return r;
    }

    /** sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS), its upload flag and CUDA_GRAPH_INSTANTIATE_ERROR. */
    private static final long INSTANTIATE_PARAMS = 32;
    private static final long INSTANTIATE_FLAG_UPLOAD = 2;
    private static final int INSTANTIATE_ERROR = 1;

    /**
     * CU_GRAPH_NODE_TYPE_MEMCPY for the memcpy nodes with a host side made here (the backend's node is
     * a child graph or a host node); the backend answers the others. (A clone's copy of such a node
     * answers the backend's type.)
     */
    @Override
    public int cuGraphNodeGetType(long hNode, MemorySegment type) {
        if (hostCopyNodes.containsKey(hNode) && !isNull(type)) {
            WireValues.sized(type, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, CU_GRAPH_NODE_TYPE_MEMCPY);
            return CuResult.CUDA_SUCCESS;
        }
        return driver.call(ApiEntries.cuGraphNodeGetType, hNode, type);
    }

    private static final int CU_GRAPH_NODE_TYPE_MEMCPY = 1;

    /** The generic node calls, through the per-type calls of this driver (GraphNodeParams), whose checks they share. */
    @Override
    public int cuGraphAddNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, MemorySegment dependencyData,
                              long numDependencies, MemorySegment nodeParams) {
        return GraphNodeParams.add(driver, this::addConditional, phGraphNode, hGraph, dependencies, dependencyData,
                numDependencies, nodeParams);
    }

    @Override
    public int cuGraphAddNode_v1(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                 MemorySegment nodeParams) {
        return GraphNodeParams.add(driver, this::addConditional, phGraphNode, hGraph, dependencies, MemorySegment.NULL,
                numDependencies, nodeParams);
    }

    /** The body graphs' ids cuGraphAddNode points a conditional node's phGraph_out at, per node, for the node's life. */
    private final java.util.Map<Long, Arena> conditionalBodies = new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * A conditional node, the only node type that travels as cuGraphAddNode (GraphRequest's layout): the
     * backend answers the node and its body graphs, whose ids the program's phGraph_out then points at.
     */
    private int addConditional(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                               MemorySegment p) {
        int size = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphNodeParams.COND_SIZE);
        if (size <= 0 || size > GraphRequest.MAX_CONDITIONAL_BODIES) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraph).putLong(numDependencies)
                .putLong(p.get(LONG, GraphNodeParams.COND_HANDLE)).putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphNodeParams.COND_TYPE))
                .putInt(size).putLong(p.get(LONG, GraphNodeParams.COND_CTX));
        List<MemorySegment> bulk = numDependencies == 0 ? List.of()
                : List.of(WireValues.sized(dependencies, 8 * numDependencies).asSlice(0, 8 * numDependencies));
        Arena arena = Arena.ofShared();
        MemorySegment bodies = arena.allocate(8L * size, 8);
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphAddNode, req.flip(), bulk, List.of(bodies), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            arena.close();
            return r.result();
        }
        long node = r.body().getLong();
        WireValues.sized(phGraphNode, 8).set(LONG, 0, node);
        p.set(LONG, GraphNodeParams.COND_GRAPHS_OUT, bodies.address());
        Arena old = conditionalBodies.put(node, arena);
        if (old != null) {
            old.close();
        }
        return r.result();
    }

    @Override
    public int cuGraphNodeSetParams(long hNode, MemorySegment nodeParams) {
        return GraphNodeParams.set(driver, hNode, nodeParams);
    }

    @Override
    public int cuGraphExecNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        return GraphNodeParams.execSet(driver, hGraphExec, hNode, nodeParams);
    }

    /** A side with UNIFIED resolved to HOST or DEVICE by where its pointer lies (as PitchedCalls does); null if unusable. */
    private Memcpy3D.Side resolve(Memcpy3D.Side s) {
        return switch (s.memoryType()) {
            case Memcpy3D.HOST -> s.resolved(Memcpy3D.HOST);
            case Memcpy3D.DEVICE, Memcpy3D.ARRAY -> s;
            case Memcpy3D.UNIFIED -> switch (ranges.classify(s.device())) {
                case DEVICE -> s.resolved(Memcpy3D.DEVICE);
                case HOST -> s.resolved(Memcpy3D.HOST);
                case FREED -> null;
            };
            default -> null;
        };
    }

    /** Whether a host side's pointer and layout are usable: not NULL, rows at least as wide as the copy, no overflow. */
    private static boolean hostLayout(Memcpy3D m, Memcpy3D.Side s) {
        return s.host() != 0 && s.reserved() == 0 && Memcpy3D.startOffset(s) >= 0 && m.extent(s) > 0
                && (m.height() <= 1 || s.pitch() >= m.width()) && (m.depth() <= 1 || s.height() >= m.height());
    }

    /** A host side as the backend gets it: its Host field is the work token, nothing else of it travels. */
    private static Memcpy3D.Side tokenSide(Memcpy3D.Side s, long token) {
        return new Memcpy3D.Side(Memcpy3D.HOST, 0, 0, 0, 0, token, 0, 0, 0, 0, 0);
    }

    /** Files the program's {fn, userData}; 0 when the parameters or fn are NULL. */
    private long fileHost(MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return 0;
        }
        MemorySegment p = WireValues.sized(nodeParams, HOST_PARAMS);
        long fn = p.get(LONG, 0);
        return fn == 0 ? 0 : callbacks.file(new StreamCallbacks.HostFunction(fn, p.get(LONG, 8)));
    }

    private static MemorySegment tokenParams(long token) {
        MemorySegment p = Arena.ofAuto().allocate(HOST_PARAMS, 8);
        p.set(LONG, 0, token);
        return p;
    }

    private int unfileUnless(long token, int r) {
        if (r != CuResult.CUDA_SUCCESS) {
            callbacks.unfile(token);
        }
        return r;
    }

    private static boolean isNull(MemorySegment s) {
        return s == null || (s.isNative() && s.address() == 0);
    }

    // ---- capture ------------------------------------------------------------------------------

    @Override
    public int cuStreamGetCaptureInfo(long hStream, MemorySegment captureStatus, MemorySegment id, MemorySegment graph,
                                      MemorySegment dependencies, MemorySegment edgeData, MemorySegment numDependencies) {
        return captureInfo(ApiEntries.cuStreamGetCaptureInfo, hStream, captureStatus, id, graph, dependencies, edgeData,
                numDependencies);
    }

    @Override
    public int cuStreamGetCaptureInfo_v2(long hStream, MemorySegment captureStatus, MemorySegment id, MemorySegment graph,
                                         MemorySegment dependencies, MemorySegment numDependencies) {
        return captureInfo(ApiEntries.cuStreamGetCaptureInfo_v2, hStream, captureStatus, id, graph, dependencies,
                MemorySegment.NULL, numDependencies);
    }

    private int captureInfo(ApiFunction f, long hStream, MemorySegment captureStatus, MemorySegment id, MemorySegment graph,
                            MemorySegment dependencies, MemorySegment edgeData, MemorySegment numDependencies) {
        boolean wantDeps = !isNull(dependencies);
        boolean wantEdges = wantDeps && !isNull(edgeData);
        if (!isNull(edgeData) && !wantDeps) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;   // edge data comes with the dependencies it describes
        }
        if (wantDeps && isNull(numDependencies)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        // The room for the answer is not known before it: ask for the count first when the arrays are wanted.
        long n = 0;
        if (wantDeps) {
            ByteBuffer probe = CallChannel.request().putLong(hStream).putInt(0);
            CallChannel.Reply r = channel.exchange(f, probe.flip(), List.of(), List.of(), false);
            if (r.result() != CuResult.CUDA_SUCCESS) {
                return r.result();
            }
            r.body().getInt();
            r.body().getLong();
            r.body().getLong();
            n = r.body().getLong();
        }
        Arena arena = Arena.ofAuto();
        MemorySegment ids = wantDeps && n > 0 ? arena.allocate(8 * n, 8) : MemorySegment.NULL;
        MemorySegment data = wantEdges && n > 0 ? arena.allocate(8 * n, 8) : MemorySegment.NULL;
        List<MemorySegment> outs = ids.address() == 0 ? List.of() : data.address() == 0 ? List.of(ids) : List.of(ids, data);
        int want = (wantDeps ? GraphRequest.WANT_DEPENDENCIES : 0) | (wantEdges ? GraphRequest.WANT_EDGE_DATA : 0);
        ByteBuffer req = CallChannel.request().putLong(hStream).putInt(n > 0 ? want : 0);
        CallChannel.Reply r = channel.exchange(f, req.flip(), List.of(), outs, false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            return r.result();
        }
        int status = r.body().getInt();
        long captureId = r.body().getLong();
        long graphId = r.body().getLong();
        long count = r.body().getLong();
        if (count != n && n > 0) {
            return CuResult.CUDA_ERROR_UNKNOWN;   // the set changed between the two calls: another thread captures into it
        }
        if (!isNull(captureStatus)) {
            WireValues.sized(captureStatus, 4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, status);
        }
        if (!isNull(id)) {
            WireValues.sized(id, 8).set(LONG, 0, captureId);
        }
        if (!isNull(graph)) {
            WireValues.sized(graph, 8).set(LONG, 0, graphId);
        }
        if (wantDeps) {
            captureArrays.set(arena);   // the previous call's arrays may go now
            WireValues.sized(dependencies, 8).set(LONG, 0, ids.address());
            if (wantEdges) {
                WireValues.sized(edgeData, 8).set(LONG, 0, data.address());
            }
        }
        if (!isNull(numDependencies)) {
            WireValues.sized(numDependencies, 8).set(LONG, 0, count);
        }
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuThreadExchangeStreamCaptureMode(MemorySegment mode) {
        if (isNull(mode)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment m = WireValues.sized(mode, 4);
        ByteBuffer req = CallChannel.request().putInt(m.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
        CallChannel.Reply r = channel.exchange(ApiEntries.cuThreadExchangeStreamCaptureMode, req.flip(), List.of(), List.of(), false);
        if (r.result() == CuResult.CUDA_SUCCESS) {
            m.set(ValueLayout.JAVA_INT_UNALIGNED, 0, r.body().getInt());
        }
        return r.result();
    }

    // ---- kernel nodes -------------------------------------------------------------------------

    /**
     * Asks for the function's parameter sizes before the request buffer is filled: the query is a call
     * of its own and uses that buffer too. Returns CUDA_SUCCESS or the error to answer.
     */
    private int knowSizes(MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = WireValues.sized(nodeParams, GraphRequest.KNP_SIZE);
        long func = p.get(LONG, GraphRequest.KNP_FUNC);
        long kern = p.get(LONG, GraphRequest.KNP_KERN);
        if (func == 0 && kern == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;   // func, or kern when func is NULL (cudart sets both)
        }
        if (p.get(LONG, GraphRequest.KNP_EXTRA) == 0 && launches.paramSizesOf(func != 0 ? func : kern) == null) {
            return CuResult.CUDA_ERROR_INVALID_HANDLE;
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Appends the kernel-node block of a CUDA_KERNEL_NODE_PARAMS (v2): kind, ctx, the launch header and
     * the parameter values, copied now. Returns CUDA_SUCCESS or the error to answer.
     */
    private int putKernelNode(ByteBuffer req, MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = WireValues.sized(nodeParams, GraphRequest.KNP_SIZE);
        long func = p.get(LONG, GraphRequest.KNP_FUNC);
        long kern = p.get(LONG, GraphRequest.KNP_KERN);
        if (func == 0 && kern == 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;   // func, or kern when func is NULL (cudart sets both)
        }
        long f = func != 0 ? func : kern;
        MemorySegment kernelParams = MemorySegment.ofAddress(p.get(LONG, GraphRequest.KNP_PARAMS));
        MemorySegment extra = MemorySegment.ofAddress(p.get(LONG, GraphRequest.KNP_EXTRA));
        boolean hasParams = kernelParams.address() != 0, hasExtra = extra.address() != 0;
        if (hasParams && hasExtra) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        long[] sizes = null;
        if (!hasExtra) {
            sizes = launches.paramSizesOf(f);   // cached by knowSizes: no call here
            if (sizes == null) {
                return CuResult.CUDA_ERROR_INVALID_HANDLE;
            }
            if (sizes.length > 0 && !hasParams) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
        }
        req.putInt(func != 0 ? GraphRequest.KIND_FUNCTION : GraphRequest.KIND_KERNEL).putLong(p.get(LONG, GraphRequest.KNP_CTX));
        int[] d = new int[7];
        for (int i = 0; i < 3; i++) {
            d[i] = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_GRID + 4L * i);
            d[3 + i] = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_BLOCK + 4L * i);
        }
        d[6] = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_SHARED);
        LaunchRequest.putHeader(req, f, d[0], d[1], d[2], d[3], d[4], d[5], d[6], 0);
        if (hasExtra) {
            return LaunchRequest.putExtra(req, extra);
        }
        LaunchRequest.putKernelParams(req, sizes, kernelParams);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuGraphAddKernelNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                    MemorySegment nodeParams) {
        if (isNull(phGraphNode) || numDependencies < 0 || numDependencies > GraphRequest.MAX_NODES
                || (numDependencies > 0 && isNull(dependencies))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int bad = knowSizes(nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraph).putLong(numDependencies);
        bad = putKernelNode(req, nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        List<MemorySegment> bulk = numDependencies == 0 ? List.of()
                : List.of(WireValues.sized(dependencies, 8 * numDependencies).asSlice(0, 8 * numDependencies));
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphAddKernelNode, req.flip(), bulk, List.of(), false);
        if (r.result() == CuResult.CUDA_SUCCESS) {
            WireValues.sized(phGraphNode, 8).set(LONG, 0, r.body().getLong());
        }
        return r.result();
    }

    // ---- batch memory-operation nodes (issue 21) ------------------------------------------------

    /**
     * A batch memory-operation node (GraphRequest's layout): the context, count and flags in the body, the
     * dependencies and the operations (copied now, as the driver copies them) as DATA; the backend checks
     * them as cuStreamBatchMemOp's.
     */
    @Override
    public int cuGraphAddBatchMemOpNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                        MemorySegment nodeParams) {
        if (isNull(phGraphNode) || numDependencies < 0 || numDependencies > GraphRequest.MAX_NODES
                || (numDependencies > 0 && isNull(dependencies))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraph).putLong(numDependencies);
        List<MemorySegment> bulk = new java.util.ArrayList<>(2);
        if (numDependencies > 0) {
            bulk.add(WireValues.sized(dependencies, 8 * numDependencies).asSlice(0, 8 * numDependencies));
        }
        int bad = putMemOps(req, bulk, nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphAddBatchMemOpNode, req.flip(), bulk, List.of(), false);
        if (r.result() == CuResult.CUDA_SUCCESS) {
            WireValues.sized(phGraphNode, 8).set(LONG, 0, r.body().getLong());
        }
        return r.result();
    }

    @Override
    public int cuGraphBatchMemOpNodeSetParams(long hNode, MemorySegment nodeParams) {
        ByteBuffer req = CallChannel.request().putLong(hNode);
        List<MemorySegment> bulk = new java.util.ArrayList<>(1);
        int bad = putMemOps(req, bulk, nodeParams);
        return bad != CuResult.CUDA_SUCCESS ? bad
                : channel.exchange(ApiEntries.cuGraphBatchMemOpNodeSetParams, req.flip(), bulk, List.of(), false).result();
    }

    @Override
    public int cuGraphExecBatchMemOpNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        ByteBuffer req = CallChannel.request().putLong(hGraphExec).putLong(hNode);
        List<MemorySegment> bulk = new java.util.ArrayList<>(1);
        int bad = putMemOps(req, bulk, nodeParams);
        return bad != CuResult.CUDA_SUCCESS ? bad
                : channel.exchange(ApiEntries.cuGraphExecBatchMemOpNodeSetParams, req.flip(), bulk, List.of(), false).result();
    }

    /** Appends ctx, count and flags of a CUDA_BATCH_MEM_OP_NODE_PARAMS, and its operations to {@code bulk}. */
    private static int putMemOps(ByteBuffer req, List<MemorySegment> bulk, MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = WireValues.sized(nodeParams, GraphRequest.MEMOP_PARAMS);
        int count = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_COUNT);
        long array = p.get(LONG, GraphRequest.MEMOP_ARRAY);
        // no operations: a node that does nothing, which the driver makes too (an H100, 580.159.04); no DATA then
        if (count < 0 || count > BatchMemOp.MAX_BATCH || (count > 0 && array == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        req.putLong(p.get(LONG, GraphRequest.MEMOP_CTX)).putInt(count).putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_FLAGS));
        if (count > 0) {
            bulk.add(MemorySegment.ofAddress(array).reinterpret((long) count * BatchMemOp.SIZE));
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * The operations of each node as cuGraphBatchMemOpNodeGetParams last answered them, in memory of this
     * process that the answer's paramArray points at: the driver's array belongs to the node, valid until
     * the node's parameters change, so an unchanged answer keeps its array (and address) and a changed
     * one replaces it. Kept per node for the connection's life (one array each).
     */
    private final java.util.Map<Long, MemorySegment> memOpArrays = new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public int cuGraphBatchMemOpNodeGetParams(long hNode, MemorySegment nodeParams_out) {
        if (isNull(nodeParams_out)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment ops = Arena.ofAuto().allocate((long) BatchMemOp.MAX_BATCH * BatchMemOp.SIZE, 8);
        ByteBuffer req = CallChannel.request().putLong(hNode);
        // The count comes in the reply: room for the most the backend answers.
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphBatchMemOpNodeGetParams, req.flip(), List.of(), List.of(ops), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            return r.result();
        }
        long ctx = r.body().getLong();
        int count = r.body().getInt();
        int flags = r.body().getInt();
        if (count < 0 || count > BatchMemOp.MAX_BATCH) {
            return CuResult.CUDA_ERROR_UNKNOWN;
        }
        MemorySegment answer = ops.asSlice(0, (long) Math.max(count, 1) * BatchMemOp.SIZE); // an empty node: a zeroed array
        MemorySegment kept = memOpArrays.compute(hNode, (node, old) -> old != null && old.mismatch(answer) == -1 ? old
                : Arena.ofAuto().allocate(answer.byteSize(), 8).copyFrom(answer));
        MemorySegment p = WireValues.sized(nodeParams_out, GraphRequest.MEMOP_PARAMS);
        p.asSlice(0, GraphRequest.MEMOP_PARAMS).fill((byte) 0);
        p.set(LONG, GraphRequest.MEMOP_CTX, ctx);
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_COUNT, count);
        p.set(LONG, GraphRequest.MEMOP_ARRAY, kept.address());
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_FLAGS, flags);
        return CuResult.CUDA_SUCCESS;
    }

    // ---- graph memory nodes (issue 21) ----------------------------------------------------------

    /**
     * A memory allocation node (GraphRequest's layout): the pool properties and access descriptors
     * travel as DATA; the address the driver gives the allocation comes back into the program's
     * CUDA_MEM_ALLOC_NODE_PARAMS (dptr), as the driver writes it.
     */
    @Override
    public int cuGraphAddMemAllocNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies,
                                      MemorySegment nodeParams) {
        if (isNull(phGraphNode) || isNull(nodeParams) || numDependencies < 0 || numDependencies > GraphRequest.MAX_NODES
                || (numDependencies > 0 && isNull(dependencies))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = WireValues.sized(nodeParams, GraphRequest.MEM_ALLOC_PARAMS);
        long count = p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_COUNT);
        long descs = p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS);
        if (count < 0 || count > MAX_ACCESS_DESCS || (count > 0 && descs == 0)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraph).putLong(numDependencies).putLong(count)
                .putLong(p.get(LONG, GraphRequest.MEM_ALLOC_BYTESIZE));
        List<MemorySegment> bulk = new java.util.ArrayList<>(3);
        if (numDependencies > 0) {
            bulk.add(WireValues.sized(dependencies, 8 * numDependencies).asSlice(0, 8 * numDependencies));
        }
        bulk.add(p.asSlice(0, POOL_PROPS));
        if (count > 0) {
            bulk.add(MemorySegment.ofAddress(descs).reinterpret(count * ACCESS_DESC));
        }
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphAddMemAllocNode, req.flip(), bulk, List.of(), false);
        if (r.result() == CuResult.CUDA_SUCCESS) {
            WireValues.sized(phGraphNode, 8).set(LONG, 0, r.body().getLong());
            long dptr = r.body().getLong();
            p.set(LONG, GraphRequest.MEM_ALLOC_DPTR, dptr);
            // device memory of the session from now on: cudaMemcpyDefault and UNIFIED sides must see it as such
            ranges.add(dptr, p.get(LONG, GraphRequest.MEM_ALLOC_BYTESIZE));
        }
        return r.result();
    }

    /** The access descriptors cuGraphMemAllocNodeGetParams points the program at, per node, until its next such call on the node. */
    private final java.util.Map<Long, Arena> allocNodeDescs = new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public int cuGraphMemAllocNodeGetParams(long hNode, MemorySegment params) {
        if (isNull(params)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        Arena arena = Arena.ofShared();
        MemorySegment props = arena.allocate(POOL_PROPS, 8);
        MemorySegment descs = arena.allocate(MAX_ACCESS_DESCS * ACCESS_DESC, 8);
        ByteBuffer req = CallChannel.request().putLong(hNode);
        // The descriptors' count comes in the reply: room for the most the backend answers, the unused part stays.
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphMemAllocNodeGetParams, req.flip(), List.of(),
                List.of(props, descs), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            arena.close();
            return r.result();
        }
        long count = r.body().getLong();
        MemorySegment p = WireValues.sized(params, GraphRequest.MEM_ALLOC_PARAMS);
        p.asSlice(0, POOL_PROPS).copyFrom(props);
        p.set(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS, count == 0 ? 0 : descs.address());
        p.set(LONG, GraphRequest.MEM_ALLOC_ACCESS_COUNT, count);
        p.set(LONG, GraphRequest.MEM_ALLOC_BYTESIZE, r.body().getLong());
        p.set(LONG, GraphRequest.MEM_ALLOC_DPTR, r.body().getLong());
        Arena old = allocNodeDescs.put(hNode, arena);
        if (old != null) {
            old.close();
        }
        return r.result();
    }

    /** sizeof(CUmemPoolProps), sizeof(CUmemAccessDesc), and the most descriptors a node carries (as the backend bounds them). */
    private static final long POOL_PROPS = 88, ACCESS_DESC = 12, MAX_ACCESS_DESCS = 64;

    /** The values cuGraphKernelNodeGetParams points the program at, per node, until its next such call on the node. */
    private final java.util.Map<Long, Arena> nodeValues = new java.util.concurrent.ConcurrentHashMap<>();

    @Override
    public int cuGraphKernelNodeGetParams(long hNode, MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment block = Arena.ofAuto().allocate(GraphRequest.MAX_KERNEL_PARAM_DATA, 16);
        ByteBuffer req = CallChannel.request().putLong(hNode);
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphKernelNodeGetParams, req.flip(), List.of(), List.of(block), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            return r.result();
        }
        ByteBuffer b = r.body();
        long func = b.getLong(), kern = b.getLong(), ctx = b.getLong();
        int[] dims = new int[7];
        for (int i = 0; i < 7; i++) {
            dims[i] = b.getInt();
        }
        int count = b.getInt();
        int valueBytes = b.getInt();
        if (count < 0 || count > LaunchRequest.MAX_PARAMS || valueBytes < 0 || 4L * count + valueBytes > block.byteSize()) {
            return CuResult.CUDA_ERROR_UNKNOWN;
        }
        Arena arena = Arena.ofAuto();
        MemorySegment pointers = arena.allocate(8L * Math.max(1, count), 8);
        long at = 4L * count;
        for (int i = 0; i < count; i++) {
            int size = block.get(ValueLayout.JAVA_INT_UNALIGNED, 4L * i);
            if (size < 0 || at + size > 4L * count + valueBytes) {
                return CuResult.CUDA_ERROR_UNKNOWN;
            }
            MemorySegment value = arena.allocate(Math.max(1, size), 16);
            MemorySegment.copy(block, at, value, 0, size);
            pointers.setAtIndex(LONG, i, value.address());
            at += size;
        }
        nodeValues.put(hNode, arena);
        MemorySegment p = WireValues.sized(nodeParams, GraphRequest.KNP_SIZE);
        p.asSlice(0, GraphRequest.KNP_SIZE).fill((byte) 0);
        p.set(LONG, GraphRequest.KNP_FUNC, func);
        for (int i = 0; i < 3; i++) {
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_GRID + 4L * i, dims[i]);
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_BLOCK + 4L * i, dims[3 + i]);
        }
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_SHARED, dims[6]);
        p.set(LONG, GraphRequest.KNP_PARAMS, count == 0 ? 0 : pointers.address());
        p.set(LONG, GraphRequest.KNP_KERN, kern);
        p.set(LONG, GraphRequest.KNP_CTX, ctx);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuGraphKernelNodeSetParams(long hNode, MemorySegment nodeParams) {
        int bad = knowSizes(nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        ByteBuffer req = CallChannel.request().putLong(hNode);
        bad = putKernelNode(req, nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        return channel.exchange(ApiEntries.cuGraphKernelNodeSetParams, req.flip(), List.of(), List.of(), false).result();
    }

    @Override
    public int cuGraphExecKernelNodeSetParams(long hGraphExec, long hNode, MemorySegment nodeParams) {
        int bad = knowSizes(nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraphExec).putLong(hNode);
        bad = putKernelNode(req, nodeParams);
        if (bad != CuResult.CUDA_SUCCESS) {
            return bad;
        }
        return channel.exchange(ApiEntries.cuGraphExecKernelNodeSetParams, req.flip(), List.of(), List.of(), false).result();
    }

    // ---- queries ------------------------------------------------------------------------------

    /** The node-query layout: the node ids (and edge data behind them, if asked for). */
    private int nodeQuery(ApiFunction f, long handle, MemorySegment array, MemorySegment edgeData, MemorySegment count) {
        return arrayQuery(f, handle, new MemorySegment[] {array}, edgeData, count);
    }

    /**
     * A query filling {@code arrays.length} parallel arrays of node ids (a graph's nodes, or its edges'
     * from and to nodes) and, if asked for, their edge data: the reply's DATA holds each array's k
     * entries in turn, then the edge data; entries past k are zeroed, as the driver does.
     */
    private int arrayQuery(ApiFunction f, long handle, MemorySegment[] arrays, MemorySegment edgeData, MemorySegment count) {
        if (isNull(count)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment cnt = WireValues.sized(count, 8);
        boolean countOnly = isNull(arrays[0]);
        boolean edges = !countOnly && !isNull(edgeData);
        long room = countOnly ? GraphRequest.COUNT_ONLY : cnt.get(LONG, 0);
        if (!countOnly && (room < 0 || room > GraphRequest.MAX_NODES)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        int columns = arrays.length + (edges ? 1 : 0);
        MemorySegment block = countOnly || room == 0 ? MemorySegment.NULL : Arena.ofAuto().allocate(8 * room * columns, 8);
        ByteBuffer req = CallChannel.request().putLong(handle).putLong(room).putInt(edges ? 1 : 0);
        CallChannel.Reply r = channel.exchange(f, req.flip(), List.of(), block.address() == 0 ? List.of() : List.of(block), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            return r.result();
        }
        long total = r.body().getLong();
        long k = r.body().getLong();
        if (countOnly) {
            cnt.set(LONG, 0, total);
            return CuResult.CUDA_SUCCESS;
        }
        if (k < 0 || k > room) {
            return CuResult.CUDA_ERROR_UNKNOWN;
        }
        for (int c = 0; c < arrays.length; c++) {
            MemorySegment out = WireValues.sized(arrays[c], 8 * room);
            for (long i = 0; i < room; i++) {
                out.setAtIndex(LONG, i, i < k ? block.getAtIndex(LONG, c * k + i) : 0);
            }
        }
        if (edges) {
            MemorySegment e = WireValues.sized(edgeData, 8 * room);
            e.fill((byte) 0);
            if (k > 0) {
                MemorySegment.copy(block, 8 * k * arrays.length, e, 0, 8 * k);
            }
        }
        cnt.set(LONG, 0, k);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuGraphGetNodes(long hGraph, MemorySegment nodes, MemorySegment numNodes) {
        return nodeQuery(ApiEntries.cuGraphGetNodes, hGraph, nodes, MemorySegment.NULL, numNodes);
    }

    @Override
    public int cuGraphGetRootNodes(long hGraph, MemorySegment rootNodes, MemorySegment numRootNodes) {
        return nodeQuery(ApiEntries.cuGraphGetRootNodes, hGraph, rootNodes, MemorySegment.NULL, numRootNodes);
    }

    @Override
    public int cuGraphNodeGetDependencies(long hNode, MemorySegment dependencies, MemorySegment edgeData,
                                          MemorySegment numDependencies) {
        return nodeQuery(ApiEntries.cuGraphNodeGetDependencies, hNode, dependencies, edgeData, numDependencies);
    }

    @Override
    public int cuGraphNodeGetDependencies_v1(long hNode, MemorySegment dependencies, MemorySegment numDependencies) {
        return nodeQuery(ApiEntries.cuGraphNodeGetDependencies_v1, hNode, dependencies, MemorySegment.NULL, numDependencies);
    }

    @Override
    public int cuGraphNodeGetDependentNodes(long hNode, MemorySegment dependentNodes, MemorySegment edgeData,
                                            MemorySegment numDependentNodes) {
        return nodeQuery(ApiEntries.cuGraphNodeGetDependentNodes, hNode, dependentNodes, edgeData, numDependentNodes);
    }

    @Override
    public int cuGraphNodeGetDependentNodes_v1(long hNode, MemorySegment dependentNodes, MemorySegment numDependentNodes) {
        return nodeQuery(ApiEntries.cuGraphNodeGetDependentNodes_v1, hNode, dependentNodes, MemorySegment.NULL,
                numDependentNodes);
    }

    @Override
    public int cuGraphGetEdges(long hGraph, MemorySegment from, MemorySegment to, MemorySegment edgeData, MemorySegment numEdges) {
        return edges(ApiEntries.cuGraphGetEdges, hGraph, from, to, edgeData, numEdges);
    }

    @Override
    public int cuGraphGetEdges_v1(long hGraph, MemorySegment from, MemorySegment to, MemorySegment numEdges) {
        return edges(ApiEntries.cuGraphGetEdges_v1, hGraph, from, to, MemorySegment.NULL, numEdges);
    }

    private int edges(ApiFunction f, long hGraph, MemorySegment from, MemorySegment to, MemorySegment edgeData,
                      MemorySegment numEdges) {
        if (isNull(from) != isNull(to)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return arrayQuery(f, hGraph, new MemorySegment[] {from, to}, edgeData, numEdges);
    }

    @Override
    public int cuGraphExecUpdate(long hGraphExec, long hGraph, MemorySegment resultInfo) {
        if (isNull(resultInfo)) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        ByteBuffer req = CallChannel.request().putLong(hGraphExec).putLong(hGraph);
        CallChannel.Reply r = channel.exchange(ApiEntries.cuGraphExecUpdate, req.flip(), List.of(), List.of(), false);
        if (r.result() != CuResult.CUDA_SUCCESS) {
            return r.result();
        }
        int result = r.body().getInt();
        MemorySegment info = WireValues.sized(resultInfo, GraphRequest.UPDATE_INFO_BYTES);
        info.set(ValueLayout.JAVA_INT_UNALIGNED, 0, r.body().getInt());
        info.set(ValueLayout.JAVA_INT_UNALIGNED, 4, 0);
        info.set(LONG, 8, r.body().getLong());
        info.set(LONG, 16, r.body().getLong());
        if (result == CuResult.CUDA_SUCCESS) {
            userObjects.execUpdated(hGraphExec, hGraph);
        }
        return result;
    }
}
