package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.calls.GraphRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
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
 */
final class GraphCalls implements FrontendHandlers.Graphs {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private final CallChannel channel;
    private final LaunchCalls launches;
    private final ThreadLocal<Arena> captureArrays = new ThreadLocal<>();

    GraphCalls(CallChannel channel, LaunchCalls launches) {
        this.channel = channel;
        this.launches = launches;
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
        return result;
    }
}
