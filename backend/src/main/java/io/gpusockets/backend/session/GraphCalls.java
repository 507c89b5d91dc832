package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.GraphRequest;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.structs.GraphNodeParams;
import io.gpusockets.protocol.structs.Memcpy3D;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code graphs}: stream capture and graphs. Node handles from the wire are this session's ids,
 * each checked to be a node of the graph the call names before the driver sees it; node handles the
 * driver answers become ids owned by their graph (dropped with it). Graphs and nodes belong to no
 * context; an exec graph belongs to the context it was instantiated in (see {@link SessionCleanup}).
 *
 * <p>Issue 21: host nodes and memcpy nodes with a host side carry the guest's work token, never its
 * pointers, and become gates ({@link HostCallbackGates}); a memory allocation node's address becomes a
 * range of the session and its size is charged for the session's life; a conditional node's body
 * graphs, and a child graph node's graph, are ids owned by their node; node parameters are checked as
 * when the node was made; a batch memory-operation node's operations are held to cuStreamBatchMemOp's
 * rule ({@link MemopsCalls#receiveChecked}), its waits remembered for the session's end.
 */
final class GraphCalls implements BackendHandlers.Graphs {
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    private final Session session;
    private final CudaDriver driver;

    GraphCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    private SessionHandles handles() {
        return session.handles();
    }

    /** The id of a graph given as its driver handle (the dispatcher translated it). */
    private long graphId(long real) {
        return handles().idOf(ParamType.GRAPH, real);
    }

    /**
     * {@code n} node ids, {@code bytes} of DATA, each a node of graph {@code graphId} (0: any graph of
     * the session), rewritten in place to the driver's handles; NULL when there are none.
     */
    private MemorySegment nodes(Call c, long bytes, long n, long graphId, String what)
            throws ProtocolException, InterruptedException, CallRejected {
        GraphRequest.count(n, what);
        if (bytes == 0) {
            if (n != 0) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, what + " is NULL with a count of " + n);
            }
            return MemorySegment.NULL;
        }
        if (bytes != 8 * n) {
            throw new ProtocolException(c.name() + ": " + what + " of " + bytes + " bytes for " + n + " nodes");
        }
        MemorySegment a = c.receiveBulk(bytes);
        for (long i = 0; i < n; i++) {
            a.setAtIndex(LONG, i, node(a.getAtIndex(LONG, i), graphId, what + "[" + i + "]"));
        }
        return a;
    }

    /** The driver handle of node {@code id}, which must belong to graph {@code graphId} (0: any). */
    private long node(long id, long graphId, String what) throws CallRejected {
        SessionHandles.Entry e = handles().get(id, ParamType.GNODE);
        if (e == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_HANDLE, what + ": not a graph node of this session: " + id);
        }
        if (graphId != 0 && e.owner() != graphId) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, what + ": a node of another graph");
        }
        return e.real();
    }

    private long internNode(long real, long graphId) {
        return handles().intern(ParamType.GNODE, real, graphId, 0);
    }

    /** Edge data travels as the driver reads it (CUgraphEdgeData, 8 bytes each); NULL when absent. */
    private static MemorySegment edgeData(Call c, long bytes, long n) throws ProtocolException, InterruptedException, CallRejected {
        if (bytes == 0) {
            return MemorySegment.NULL;
        }
        if (bytes != GraphRequest.EDGE_DATA_BYTES * n) {
            throw new ProtocolException(c.name() + ": edge data of " + bytes + " bytes for " + n + " edges");
        }
        return c.receiveBulk(bytes);
    }

    /** Writes the new node's id, owned by its graph. */
    private int added(Call c, int r, MemorySegment out, long graphId) {
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putLong(internNode(out.get(LONG, 0), graphId));
        }
        return r;
    }

    // ---- capture ------------------------------------------------------------------------------

    @Override
    public int cuStreamBeginCapture(Call c, long hStream, int mode) {
        session.captureGuard().captureBegins();
        return driver.cuStreamBeginCapture(hStream, mode);
    }

    @Override
    public int cuStreamBeginCapture_v1(Call c, long hStream) {
        session.captureGuard().captureBegins();
        return driver.cuStreamBeginCapture_v1(hStream);
    }

    /** A capture in which the backend refused work ends invalidated, its graph destroyed. */
    @Override
    public int cuStreamEndCapture(Call c, long hStream) {
        MemorySegment status = c.scratch(4), id = c.scratch(8), capturing = c.scratch(8), deps = c.scratch(8),
                count = c.scratch(8);
        capturing.set(LONG, 0, 0);
        boolean active = driver.cuStreamGetCaptureInfo_v2(hStream, status, id, capturing, deps, count) == CuResult.CUDA_SUCCESS
                && status.get(ValueLayout.JAVA_INT, 0) != 0;
        long captureId = active ? id.get(LONG, 0) : 0;
        MemorySegment out = c.scratch(8);
        out.set(LONG, 0, 0);
        int r = driver.cuStreamEndCapture(hStream, out);
        boolean refused = captureId != 0 && session.captureGuard().takeRefused(captureId);
        long graph = out.get(LONG, 0);
        if (refused && r == CuResult.CUDA_SUCCESS && graph != 0) {
            driver.cuGraphDestroy(graph);
        }
        if (refused || r != CuResult.CUDA_SUCCESS) {
            // The graph captured into is gone; an id cuStreamGetCaptureInfo issued for it goes too.
            long stale = active ? handles().idOf(ParamType.GRAPH, capturing.get(LONG, 0)) : 0;
            if (stale != 0) {
                session.dropHandle(stale);
            }
            return r == CuResult.CUDA_SUCCESS ? CuResult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : r;
        }
        c.outs.putLong(handles().intern(ParamType.GRAPH, graph, 0, 0));
        return r;
    }

    @Override
    public int cuStreamGetCaptureInfo(Call c) throws ProtocolException, CallRejected, IOException {
        return captureInfo(c, true);
    }

    @Override
    public int cuStreamGetCaptureInfo_v2(Call c) throws ProtocolException, CallRejected, IOException {
        return captureInfo(c, false);
    }

    private int captureInfo(Call c, boolean v3) throws ProtocolException, CallRejected, IOException {
        long stream = c.handle(ParamType.STREAM, c.readLong(), true);
        int want = c.body.getInt();
        c.expectEnd();
        MemorySegment status = c.scratch(4), id = c.scratch(8), graph = c.scratch(8), deps = c.scratch(8),
                edges = c.scratch(8), count = c.scratch(8);
        graph.set(LONG, 0, 0);
        count.set(LONG, 0, 0);
        boolean wantDeps = (want & GraphRequest.WANT_DEPENDENCIES) != 0;
        boolean wantEdges = v3 && (want & GraphRequest.WANT_EDGE_DATA) != 0;
        int r = v3 ? driver.cuStreamGetCaptureInfo(stream, status, id, graph, deps, wantEdges ? edges : MemorySegment.NULL, count)
                : driver.cuStreamGetCaptureInfo_v2(stream, status, id, graph, deps, count);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        int st = status.get(ValueLayout.JAVA_INT, 0);
        long realGraph = st == 0 ? 0 : graph.get(LONG, 0);
        // The graph being captured into is the session's from now on (it may be added to, or ends as EndCapture's).
        c.reserveHandles(realGraph != 0 && handles().idOf(ParamType.GRAPH, realGraph) == 0 ? 1 : 0, 0);
        long graphId = handles().intern(ParamType.GRAPH, realGraph, 0, 0);
        long n = st == 0 ? 0 : count.get(LONG, 0);
        if (n < 0 || n > GraphRequest.MAX_NODES) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        c.outs.putInt(st).putLong(id.get(LONG, 0)).putLong(graphId).putLong(n);
        if (wantDeps && n > 0) {
            MemorySegment real = deps.get(ValueLayout.ADDRESS, 0).reinterpret(8 * n);
            MemorySegment ids = c.scratch(8 * n);
            c.reserveUnknown(ParamType.GNODE, real, n);
            for (long i = 0; i < n; i++) {
                ids.setAtIndex(LONG, i, internNode(real.getAtIndex(LONG, i), graphId));
            }
            c.sendData(ids);
            if (wantEdges) {
                MemorySegment e = edges.get(ValueLayout.ADDRESS, 0);
                c.sendData(e.address() == 0 ? c.scratch(8 * n).fill((byte) 0) : e.reinterpret(8 * n));
            }
        }
        return r;
    }

    @Override
    public int cuStreamUpdateCaptureDependencies(Call c, long hStream, long dependencies, long dependencyData,
                                                 long numDependencies, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment deps = nodes(c, dependencies, numDependencies, 0, "dependencies");
        return driver.cuStreamUpdateCaptureDependencies(hStream, deps, edgeData(c, dependencyData, numDependencies),
                numDependencies, flags);
    }

    @Override
    public int cuStreamUpdateCaptureDependencies_v1(Call c, long hStream, long dependencies, long numDependencies, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment deps = nodes(c, dependencies, numDependencies, 0, "dependencies");
        return driver.cuStreamUpdateCaptureDependencies_v1(hStream, deps, numDependencies, flags);
    }

    @Override
    public int cuStreamBeginCaptureToGraph(Call c, long hStream, long hGraph, long dependencies, long dependencyData,
                                           long numDependencies, int mode)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment deps = nodes(c, dependencies, numDependencies, graphId(hGraph), "dependencies");
        session.captureGuard().captureBegins();
        return driver.cuStreamBeginCaptureToGraph(hStream, hGraph, deps, edgeData(c, dependencyData, numDependencies),
                numDependencies, mode);
    }

    /** The mode is the lane's thread's, as in CUDA (a lane is one thread of the program). */
    @Override
    public int cuThreadExchangeStreamCaptureMode(Call c) throws ProtocolException {
        int mode = c.body.getInt();
        c.expectEnd();
        MemorySegment m = c.scratch(4);
        m.set(ValueLayout.JAVA_INT, 0, mode);
        int r = driver.cuThreadExchangeStreamCaptureMode(m);
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putInt(m.get(ValueLayout.JAVA_INT, 0));
        }
        return r;
    }

    // ---- nodes --------------------------------------------------------------------------------

    @Override
    public int cuGraphAddEmptyNode(Call c, long hGraph, long dependencies, long numDependencies)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddEmptyNode(out, hGraph, deps, numDependencies), out, g);
    }

    @Override
    public int cuGraphAddEventRecordNode(Call c, long hGraph, long dependencies, long numDependencies, long event)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddEventRecordNode(out, hGraph, deps, numDependencies, event), out, g);
    }

    @Override
    public int cuGraphAddEventWaitNode(Call c, long hGraph, long dependencies, long numDependencies, long event)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddEventWaitNode(out, hGraph, deps, numDependencies, event), out, g);
    }

    @Override
    public int cuGraphAddChildGraphNode(Call c, long hGraph, long dependencies, long numDependencies, long childGraph)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddChildGraphNode(out, hGraph, deps, numDependencies, childGraph), out, g);
    }

    /** CUDA_MEMSET_NODE_PARAMS: the rows it sets, (height-1)*pitch + width*elementSize bytes from dst, lie in one allocation. */
    @Override
    public int cuGraphAddMemsetNode(Call c, long hGraph, long dependencies, long numDependencies, long memsetParams, long ctx)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment p = memsetParams(c, memsetParams);
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddMemsetNode(out, hGraph, deps, numDependencies, p, ctx), out, g);
    }

    @Override
    public int cuGraphMemsetNodeSetParams(Call c, long hNode, long nodeParams)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphMemsetNodeSetParams(hNode, memsetParams(c, nodeParams));
    }

    @Override
    public int cuGraphExecMemsetNodeSetParams(Call c, long hGraphExec, long hNode, long memsetParams, long ctx)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, memsetParams(c, memsetParams), ctx);
    }

    /** A CUDA_MEMSET_NODE_PARAMS off the wire, its rows checked to lie in one allocation of the session. */
    private static MemorySegment memsetParams(Call c, long bytes) throws ProtocolException, CallRejected, InterruptedException {
        if (bytes != 40) {
            throw new ProtocolException(c.name() + ": memsetParams of " + bytes + " bytes");
        }
        MemorySegment p = c.receiveBulk(40);
        long dst = p.get(LONG, 0), pitch = p.get(LONG, 8);
        int es = p.get(ValueLayout.JAVA_INT_UNALIGNED, 20);
        long width = p.get(LONG, 24), height = p.get(LONG, 32);
        if ((es != 1 && es != 2 && es != 4) || width <= 0 || height <= 0 || width > (Long.MAX_VALUE / es) / height
                || (height > 1 && (pitch < width * es || pitch > (Long.MAX_VALUE - width * es) / (height - 1)))) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "memset node of width=" + width + " height=" + height
                    + " pitch=" + pitch + " elementSize=" + es);
        }
        p.set(LONG, 0, c.deviceRange(dst, (height - 1) * pitch + width * es));
        return p;
    }

    /**
     * CUDA_MEMCPY3D: device (or unified device) and array sides are checked as a pitched copy's are.
     * A host side's Host field carries the guest's work token, not an address (the frontend keeps the
     * program's pointer and layout): such a node is made by {@link #hostCopyNode}.
     */
    @Override
    public int cuGraphAddMemcpyNode(Call c, long hGraph, long dependencies, long numDependencies, long copyParams, long ctx)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        if (copyParams != Memcpy3D.SIZE_3D) {
            throw new ProtocolException(c.name() + ": copyParams of " + copyParams + " bytes");
        }
        MemorySegment p = c.receiveBulk(Memcpy3D.SIZE_3D);
        Memcpy3D m = Memcpy3D.read3D(p);
        if (m.totalBytes() < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "copy extent out of range");
        }
        if (m.src().memoryType() == Memcpy3D.HOST || m.dst().memoryType() == Memcpy3D.HOST) {
            return hostCopyNode(c, hGraph, g, deps, numDependencies, p, m, ctx);
        }
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddMemcpyNode(out, hGraph, deps, numDependencies, deviceCopy(c, p, m), ctx), out, g);
    }

    /** A device-only CUDA_MEMCPY3D for the driver: each side checked as a pitched copy's, arrays translated. */
    private static MemorySegment deviceCopy(Call c, MemorySegment p, Memcpy3D m) throws CallRejected {
        Memcpy3D checked = m.with(PitchedCalls.checkSide(c, m, m.src()), PitchedCalls.checkSide(c, m, m.dst()));
        MemorySegment desc = c.scratch(Memcpy3D.SIZE_3D);
        desc.copyFrom(p);
        checked.write3D(desc);
        return desc;
    }

    /**
     * New parameters of a memcpy node: device and array sides only. A host side is refused (the
     * frontend answers CUDA_ERROR_NOT_SUPPORTED before sending one): the node's gate and staging are
     * made with the node, and exec graphs made earlier keep them.
     */
    private static MemorySegment newCopyParams(Call c, long bytes) throws ProtocolException, CallRejected, InterruptedException {
        if (bytes != Memcpy3D.SIZE_3D) {
            throw new ProtocolException(c.name() + ": copyParams of " + bytes + " bytes");
        }
        MemorySegment p = c.receiveBulk(Memcpy3D.SIZE_3D);
        Memcpy3D m = Memcpy3D.read3D(p);
        if (m.totalBytes() < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "copy extent out of range");
        }
        if (m.src().memoryType() == Memcpy3D.HOST || m.dst().memoryType() == Memcpy3D.HOST) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "new parameters with a host side: a memcpy node's"
                    + " host side (its gate and staging buffer) is made with the node");
        }
        return deviceCopy(c, p, m);
    }

    @Override
    public int cuGraphMemcpyNodeSetParams(Call c, long hNode, long nodeParams)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphMemcpyNodeSetParams(hNode, newCopyParams(c, nodeParams));
    }

    @Override
    public int cuGraphExecMemcpyNodeSetParams(Call c, long hGraphExec, long hNode, long copyParams, long ctx)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, newCopyParams(c, copyParams), ctx);
    }

    /** The driver's CUDA_MEMCPY3D with its array handles as this session's ids (a device-only node: no host side). */
    @Override
    public int cuGraphMemcpyNodeGetParams(Call c, long hNode) throws CallRejected, IOException {
        MemorySegment p = c.scratch(Memcpy3D.SIZE_3D).asSlice(0, Memcpy3D.SIZE_3D);
        p.fill((byte) 0);
        int r = driver.cuGraphMemcpyNodeGetParams(hNode, p);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        Memcpy3D m = Memcpy3D.read3D(p);
        if (m.src().memoryType() == Memcpy3D.HOST || m.dst().memoryType() == Memcpy3D.HOST) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a memcpy node with a host side the session did not make");
        }
        m.with(arrayId(m.src()), arrayId(m.dst())).write3D(p);
        c.sendData(p);
        return r;
    }

    private Memcpy3D.Side arrayId(Memcpy3D.Side s) {
        return s.memoryType() == Memcpy3D.ARRAY ? s.withArray(handles().idOf(ParamType.ARRAY, s.array())) : s;
    }

    // ---- host nodes and host-memory copy nodes (issue 21) ---------------------------------------

    /**
     * A memcpy node with a host side. The host side is the guest's, reached only through a gate
     * ({@link HostCallbackGates#graphWork}): in the driver's graph the node is a child graph node whose
     * graph holds the gate (a host node with a staging buffer in the backend's memory, {@code width *
     * height * depth} bytes packed) and a memcpy node between the staging buffer and the device side,
     * in the copy's order: host to device fills the staging buffer at the gate and then copies it;
     * device to host copies first and the guest reads the staging buffer at the gate. Host to host is
     * the guest's alone: one gate (a host node), both Host fields naming the same token. So the guest's
     * memory is read and written at the node's moment of every launch, in the graph's order.
     * (cuGraphNodeGetType answers CU_GRAPH_NODE_TYPE_GRAPH, or HOST for host to host, for such nodes.)
     */
    private int hostCopyNode(Call c, long hGraph, long g, MemorySegment deps, long n, MemorySegment p, Memcpy3D m, long ctx)
            throws CallRejected {
        boolean srcHost = m.src().memoryType() == Memcpy3D.HOST;
        boolean dstHost = m.dst().memoryType() == Memcpy3D.HOST;
        long total = m.totalBytes();
        if (total <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "an empty copy: width=" + m.width() + " height="
                    + m.height() + " depth=" + m.depth());
        }
        if (srcHost && dstHost) {
            long token = m.src().host();
            if (token == 0 || m.dst().host() != token) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "a host-to-host node names one work token on both sides");
            }
            MemorySegment out = c.scratch(8);
            return added(c, driver.cuGraphAddHostNode(out, hGraph, deps, n, hostParams(c, token, 0)), out, g);
        }
        Memcpy3D.Side hostSide = srcHost ? m.src() : m.dst();
        Memcpy3D.Side device = PitchedCalls.checkSide(c, m, srcHost ? m.dst() : m.src());
        if (hostSide.host() == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "a host side without a work token");
        }
        MemorySegment gateParams = hostParams(c, hostSide.host(), total);
        long staging = session.callbackGates().stagingAt(gateParams.get(LONG, 8));
        Memcpy3D.Side staged = hostSide.asHost(staging, m.width(), m.height());
        Memcpy3D inner = srcHost ? m.with(staged, device) : m.with(device, staged);
        MemorySegment desc = c.scratch(Memcpy3D.SIZE_3D);
        desc.copyFrom(p);
        inner.write3D(desc);
        MemorySegment child = c.scratch(8);
        int r = driver.cuGraphCreate(child, 0);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long cg = child.get(LONG, 0);
        try {
            MemorySegment gate = c.scratch(8), copy = c.scratch(8);
            if (srcHost) {
                r = driver.cuGraphAddHostNode(gate, cg, MemorySegment.NULL, 0, gateParams);
                if (r == CuResult.CUDA_SUCCESS) {
                    r = driver.cuGraphAddMemcpyNode(copy, cg, gate, 1, desc, ctx);
                }
            } else {
                r = driver.cuGraphAddMemcpyNode(copy, cg, MemorySegment.NULL, 0, desc, ctx);
                if (r == CuResult.CUDA_SUCCESS) {
                    r = driver.cuGraphAddHostNode(gate, cg, copy, 1, gateParams);
                }
            }
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            MemorySegment out = c.scratch(8);
            // The child node holds a copy of the child graph, as the driver specifies.
            return added(c, driver.cuGraphAddChildGraphNode(out, hGraph, deps, n, cg), out, g);
        } finally {
            driver.cuGraphDestroy(cg);
        }
    }

    /**
     * A CUDA_HOST_NODE_PARAMS for the driver: the gate's function and a new work key for the guest's
     * {@code token}, with {@code stagingBytes} of staging (0 for a host function).
     */
    private MemorySegment hostParams(Call c, long token, long stagingBytes) throws CallRejected {
        HostCallbackGates.GraphWork w = session.callbackGates().graphWork(token, stagingBytes, driver, session.quota());
        if (w == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "graph work of the session over its bounds ("
                    + HostCallbackGates.MAX_GRAPH_WORK + " nodes, " + HostCallbackGates.MAX_STAGING_BYTES
                    + " staging bytes), its tenant's pinned memory spent, the staging not page-locked, or the session ended");
        }
        MemorySegment hp = c.scratch(HOST_PARAMS);
        hp.set(LONG, 0, HostCallbackGates.GRAPH_REACHED.address());
        hp.set(LONG, 8, w.key());
        return hp;
    }

    /** CUDA_HOST_NODE_PARAMS: {fn, userData}, 16 bytes. */
    private static final long HOST_PARAMS = 16;

    /** The guest's work token from the CUDA_HOST_NODE_PARAMS it sent: fn carries the token, userData is 0. */
    private static long token(Call c, long bytes) throws ProtocolException, InterruptedException, CallRejected {
        if (bytes != HOST_PARAMS) {
            throw new ProtocolException(c.name() + ": nodeParams of " + bytes + " bytes");
        }
        MemorySegment p = c.receiveBulk(HOST_PARAMS);
        long token = p.get(LONG, 0);
        if (token == 0 || p.get(LONG, 8) != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "host node parameters without a work token");
        }
        return token;
    }

    /** The program's function and userData stay in the guest, which sends its work token instead ({@link #hostCopyNode}). */
    @Override
    public int cuGraphAddHostNode(Call c, long hGraph, long dependencies, long numDependencies, long nodeParams)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment hp = hostParams(c, token(c, nodeParams), 0);
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddHostNode(out, hGraph, deps, numDependencies, hp), out, g);
    }

    /** Answers the guest's work token (which the frontend turns back into the program's function and userData). */
    @Override
    public int cuGraphHostNodeGetParams(Call c, long hNode) throws CallRejected, IOException {
        MemorySegment hp = c.scratch(HOST_PARAMS);
        hp.fill((byte) 0);
        int r = driver.cuGraphHostNodeGetParams(hNode, hp);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long token = hp.get(LONG, 0) == HostCallbackGates.GRAPH_REACHED.address()
                ? session.callbackGates().tokenOf(hp.get(LONG, 8)) : 0;
        if (token == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a host node the session did not make");
        }
        MemorySegment out = c.scratch(HOST_PARAMS).asSlice(0, HOST_PARAMS);
        out.fill((byte) 0);
        out.set(LONG, 0, token);
        c.sendData(out);
        return r;
    }

    @Override
    public int cuGraphHostNodeSetParams(Call c, long hNode, long nodeParams)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphHostNodeSetParams(hNode, hostParams(c, token(c, nodeParams), 0));
    }

    @Override
    public int cuGraphExecHostNodeSetParams(Call c, long hGraphExec, long hNode, long nodeParams)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuGraphExecHostNodeSetParams(hGraphExec, hNode, hostParams(c, token(c, nodeParams), 0));
    }

    // ---- conditional nodes (issue 21) ----------------------------------------------------------

    /**
     * A conditional node, the only node type that travels as cuGraphAddNode (GraphRequest's layout; the
     * frontend makes the others with their own calls). The handle is the driver's value, checked by the
     * driver against the graph; type and size are checked here. The driver makes the body graphs: each
     * becomes a graph id owned by the node (dropped with it; the program may add to it but not destroy
     * it, and the session's cleanup leaves it to its node).
     */
    @Override
    public int cuGraphAddNode(Call c) throws ProtocolException, CallRejected, InterruptedException, IOException {
        long g = c.readLong();
        long n = GraphRequest.count(c.readLong(), "numDependencies");
        long handle = c.readLong();
        int type = c.body.getInt();
        int size = c.body.getInt();
        long ctxId = c.readLong();
        c.expectEnd();
        long graph = c.handle(ParamType.GRAPH, g, false);
        long ctx = c.handle(ParamType.CTX, ctxId, true);
        boolean sized = switch (type) {
            case 0 -> size == 1 || size == 2;                                   // IF (and ELSE)
            case 1 -> size == 1;                                                // WHILE
            case 2 -> size >= 1 && size <= GraphRequest.MAX_CONDITIONAL_BODIES; // SWITCH
            default -> false;
        };
        if (!sized) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "conditional node type=" + type + " size=" + size);
        }
        c.expectBulk(8 * n);
        MemorySegment deps = nodes(c, 8 * n, n, g, "dependencies");
        MemorySegment p = c.scratch(GraphNodeParams.SIZE);
        p.fill((byte) 0);
        p.set(ValueLayout.JAVA_INT_UNALIGNED, 0, GraphNodeParams.CONDITIONAL);
        p.set(LONG, GraphNodeParams.COND_HANDLE, handle);
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphNodeParams.COND_TYPE, type);
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphNodeParams.COND_SIZE, size);
        p.set(LONG, GraphNodeParams.COND_CTX, ctx);
        c.reserveHandles(1 + size, 0);   // the node and its bodies: ptr outputs of the codec, which the table does not count
        MemorySegment out = c.scratch(8);
        int r = driver.cuGraphAddNode(out, graph, deps, MemorySegment.NULL, n, p);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long nodeId = internNode(out.get(LONG, 0), g);
        // The driver's own array, in this process: its address comes from the driver, not the wire.
        MemorySegment bodies = MemorySegment.ofAddress(p.get(LONG, GraphNodeParams.COND_GRAPHS_OUT)).reinterpret(8L * size);
        MemorySegment ids = c.scratch(8L * size).asSlice(0, 8L * size);
        for (int i = 0; i < size; i++) {
            ids.setAtIndex(LONG, i, handles().intern(ParamType.GRAPH, bodies.getAtIndex(LONG, i), nodeId, 0));
        }
        c.outs.putLong(nodeId);
        c.sendData(ids);
        return r;
    }

    // ---- graph memory nodes (issue 21) ----------------------------------------------------------

    /**
     * A memory allocation node (GraphRequest's layout). The pool properties and access descriptors are
     * checked as cuMemPoolCreate's and cuMemPoolSetAccess's are. The driver gives the allocation's
     * address when it makes the node: from then on it is a range of the session (the graph's other
     * nodes naming it are checked as any other work), and its size is charged to the tenant for the
     * session's life, as the graph memory of a captured cuMemAllocAsync is ({@link SessionQuota#keepGraphMemory}).
     * With address-stable memory the session's driver is {@link StableGraphMemory}: the address lies in the
     * session's window, and memory and charge go back when the node's graph and its exec graph are destroyed.
     */
    @Override
    public int cuGraphAddMemAllocNode(Call c) throws ProtocolException, CallRejected, InterruptedException {
        long g = c.readLong();
        long n = GraphRequest.count(c.readLong(), "numDependencies");
        long count = c.readLong();
        long bytesize = c.readLong();
        c.expectEnd();
        long graph = c.handle(ParamType.GRAPH, g, false);
        if (count < 0 || count > PoolCalls.MAX_ACCESS_DESCS) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "accessDescCount=" + count);
        }
        c.expectBulk(8 * n + MemoryProps.POOL_PROPS_SIZE + count * MemoryProps.ACCESS_DESC_SIZE);
        MemorySegment deps = nodes(c, 8 * n, n, g, "dependencies");
        MemorySegment props = c.receiveBulk(MemoryProps.POOL_PROPS_SIZE);
        MemorySegment descs = count == 0 ? MemorySegment.NULL : c.receiveBulk(count * MemoryProps.ACCESS_DESC_SIZE);
        int devices = session.host().deviceCount();
        String refusal = MemoryProps.poolRefusal(props, devices);
        if (refusal != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "poolProps: " + refusal);
        }
        if (!MemoryProps.validDevice(props, devices)) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_DEVICE, "poolProps.location.id is no device");
        }
        PoolCalls.checkAccessDescs(descs, count, devices);
        if (bytesize <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "bytesize=" + bytesize);
        }
        MemorySegment p = c.scratch(GraphRequest.MEM_ALLOC_PARAMS);
        p.fill((byte) 0);
        MemorySegment.copy(props, 0, p, 0, MemoryProps.POOL_PROPS_SIZE);
        p.set(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS, descs.address());
        p.set(LONG, GraphRequest.MEM_ALLOC_ACCESS_COUNT, count);
        p.set(LONG, GraphRequest.MEM_ALLOC_BYTESIZE, bytesize);
        c.reserveHandles(1, 0);   // its node output is a ptr of the codec, which the table does not count
        session.quota().reserve(bytesize, c.name());
        MemorySegment out = c.scratch(8);
        int r = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            r = driver.cuGraphAddMemAllocNode(out, graph, deps, n, p);
        } finally {
            if (r != CuResult.CUDA_SUCCESS) {
                session.quota().unreserve(bytesize);
            }
        }
        if (r == CuResult.CUDA_SUCCESS) {
            long dptr = p.get(LONG, GraphRequest.MEM_ALLOC_DPTR);
            session.quota().keepGraphMemory(bytesize);
            // Owned by no context, as a stream-ordered allocation: graph memory outlives its graph until freed.
            session.memory().add(new SessionMemory.Range(dptr, bytesize, 0, true));
            c.outs.putLong(internNode(out.get(LONG, 0), g)).putLong(dptr);
        }
        return r;
    }

    /** The node's parameters: sizes and address, then (DATA) its pool properties and access descriptors. */
    @Override
    public int cuGraphMemAllocNodeGetParams(Call c) throws ProtocolException, CallRejected, IOException {
        long node = node(c.readLong(), 0, "hNode");
        c.expectEnd();
        MemorySegment p = c.scratch(GraphRequest.MEM_ALLOC_PARAMS);
        p.fill((byte) 0);
        int r = driver.cuGraphMemAllocNodeGetParams(node, p);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long count = p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_COUNT);
        long descs = p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS);
        if (count < 0 || count > PoolCalls.MAX_ACCESS_DESCS || (count > 0 && descs == 0)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a node with " + count + " access descriptors");
        }
        c.outs.putLong(count).putLong(p.get(LONG, GraphRequest.MEM_ALLOC_BYTESIZE)).putLong(p.get(LONG, GraphRequest.MEM_ALLOC_DPTR));
        c.sendData(p.asSlice(0, MemoryProps.POOL_PROPS_SIZE));
        if (count > 0) {
            // The driver's own array, in this process: its address comes from the driver, not the wire.
            c.sendData(MemorySegment.ofAddress(descs).reinterpret(count * MemoryProps.ACCESS_DESC_SIZE));
        }
        return r;
    }

    // ---- batch memory-operation nodes (issue 21) ------------------------------------------------

    /**
     * A batch memory-operation node: its operations are held to cuStreamBatchMemOp's rule
     * ({@link MemopsCalls#receiveChecked}) and its waits remembered for the session's end in the node's
     * context (the lane's when NULL), since each launch of the graph may wait on them.
     */
    @Override
    public int cuGraphAddBatchMemOpNode(Call c) throws ProtocolException, CallRejected, InterruptedException {
        long g = c.readLong();
        long n = GraphRequest.count(c.readLong(), "numDependencies");
        long graph = c.handle(ParamType.GRAPH, g, false);
        MemOpNode m = memOpHeader(c, 8 * n);
        MemorySegment deps = nodes(c, 8 * n, n, g, "dependencies");
        MemorySegment p = m.withOps(c).params(c);
        c.reserveHandles(1, 0);   // its node output is a ptr of the codec, which the table does not count
        MemorySegment out = c.scratch(8);
        int r = driver.cuGraphAddBatchMemOpNode(out, graph, deps, n, p);
        if (r == CuResult.CUDA_SUCCESS) {
            MemOpNode.rememberWaits(c, session, p);
            c.outs.putLong(internNode(out.get(LONG, 0), g));
        }
        return r;
    }

    @Override
    public int cuGraphBatchMemOpNodeSetParams(Call c) throws ProtocolException, CallRejected, InterruptedException {
        long node = node(c.readLong(), 0, "hNode");
        MemorySegment p = memOpHeader(c, 0).withOps(c).params(c);
        int r = driver.cuGraphBatchMemOpNodeSetParams(node, p);
        if (r == CuResult.CUDA_SUCCESS) {
            MemOpNode.rememberWaits(c, session, p);
        }
        return r;
    }

    @Override
    public int cuGraphExecBatchMemOpNodeSetParams(Call c) throws ProtocolException, CallRejected, InterruptedException {
        long exec = c.handle(ParamType.GEXEC, c.readLong(), false);
        long node = node(c.readLong(), 0, "hNode");
        MemorySegment p = memOpHeader(c, 0).withOps(c).params(c);
        int r = driver.cuGraphExecBatchMemOpNodeSetParams(exec, node, p);
        if (r == CuResult.CUDA_SUCCESS) {
            MemOpNode.rememberWaits(c, session, p);
        }
        return r;
    }

    /**
     * The node's parameters as the driver answers them: its context as the session's id, count and flags,
     * and (DATA) its operations, copied out of the driver's array with their alias fields zeroed.
     */
    @Override
    public int cuGraphBatchMemOpNodeGetParams(Call c) throws ProtocolException, CallRejected, IOException {
        long node = node(c.readLong(), 0, "hNode");
        c.expectEnd();
        MemorySegment p = c.scratch(GraphRequest.MEMOP_PARAMS);
        p.fill((byte) 0);
        int r = driver.cuGraphBatchMemOpNodeGetParams(node, p);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        int count = p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_COUNT);
        long array = p.get(LONG, GraphRequest.MEMOP_ARRAY);
        if (count < 0 || count > BatchMemOp.MAX_BATCH || (count > 0 && array == 0)) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a node with " + count + " operations");
        }
        long ctx = p.get(LONG, GraphRequest.MEMOP_CTX);
        MemorySegment ops = c.scratch((long) count * BatchMemOp.SIZE);
        // The driver's own array, in this process: its address comes from the driver, not the wire.
        ops.copyFrom(MemorySegment.ofAddress(array).reinterpret(ops.byteSize()));
        for (int i = 0; i < count; i++) {
            if (BatchMemOp.width(BatchMemOp.operation(ops, (long) i * BatchMemOp.SIZE)) > 0) {
                BatchMemOp.clearAlias(ops, (long) i * BatchMemOp.SIZE);
            }
        }
        c.outs.putLong(ctx == 0 ? 0 : handles().idOf(ParamType.CTX, ctx)).putInt(count)
                .putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_FLAGS));
        c.sendData(ops);
        return r;
    }

    /** A CUDA_BATCH_MEM_OP_NODE_PARAMS as it came: its context (real, 0 for NULL), count, flags, and its operations once received. */
    private record MemOpNode(long ctx, int count, int flags, MemorySegment ops) {
        /** The operations, next in the call's DATA, held to cuStreamBatchMemOp's rule. */
        MemOpNode withOps(Call c) throws ProtocolException, CallRejected, InterruptedException {
            // a node with no operations is made by the driver too (an H100, 580.159.04): no DATA, an empty array
            return new MemOpNode(ctx, count, flags, count == 0 ? c.scratch(BatchMemOp.SIZE).fill((byte) 0)
                    : MemopsCalls.receiveChecked(c, count, (long) count * BatchMemOp.SIZE));
        }

        /** The parameters as the driver reads them, the operations in backend memory. */
        MemorySegment params(Call c) {
            MemorySegment p = c.scratch(GraphRequest.MEMOP_PARAMS);
            p.fill((byte) 0);
            p.set(LONG, GraphRequest.MEMOP_CTX, ctx);
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_COUNT, count);
            p.set(LONG, GraphRequest.MEMOP_ARRAY, ops.address());
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_FLAGS, flags);
            return p;
        }

        /**
         * The node's waits, remembered for the session's end (each launch may wait on them) in the node's
         * context, else the lane's.
         */
        static void rememberWaits(Call c, Session session, MemorySegment params) {
            long ctx = params.get(LONG, GraphRequest.MEMOP_CTX);
            int count = params.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.MEMOP_COUNT);
            MemorySegment ops = MemorySegment.ofAddress(params.get(LONG, GraphRequest.MEMOP_ARRAY)).reinterpret((long) count * BatchMemOp.SIZE);
            MemopsCalls.rememberWaits(session, ctx != 0 ? ctx : c.lane.topContext(), ops, count);
        }
    }

    /**
     * Reads ctx, count and flags of a batch memory-operation node and announces its DATA: {@code before}
     * bytes of other arrays, then the operations (received by {@link MemOpNode#withOps}).
     */
    private static MemOpNode memOpHeader(Call c, long before) throws ProtocolException, CallRejected {
        long ctx = c.handle(ParamType.CTX, c.readLong(), true);
        int count = c.body.getInt();
        int flags = c.body.getInt();
        c.expectEnd();
        if (count < 0 || count > BatchMemOp.MAX_BATCH) { // 0: a node that does nothing
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count);
        }
        c.expectBulk(before + (long) count * BatchMemOp.SIZE);
        return new MemOpNode(ctx, count, flags, null);
    }

    /** The freed address must lie in the session's memory (an allocation node's, or a stream-ordered one). */
    @Override
    public int cuGraphAddMemFreeNode(Call c, long hGraph, long dependencies, long numDependencies, long dptr)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment deps = nodes(c, dependencies, numDependencies, g, "dependencies");
        MemorySegment out = c.scratch(8);
        return added(c, driver.cuGraphAddMemFreeNode(out, hGraph, deps, numDependencies, dptr), out, g);
    }

    /**
     * The tenant's view, as cuMemGetInfo answers it: the graph memory charged to this session, current
     * and high-water, for USED and RESERVED alike (the driver's figures count every session of the device).
     */
    @Override
    public int cuDeviceGetGraphMemAttribute(Call c, int device, int attr) {
        long[] mem = session.quota().graphMemoryMarks();
        long v = switch (attr) {
            case 0, 2 -> mem[0];   // USED_MEM_CURRENT, RESERVED_MEM_CURRENT
            case 1, 3 -> mem[1];   // USED_MEM_HIGH, RESERVED_MEM_HIGH
            default -> -1;
        };
        if (v < 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        c.outs.putLong(v);
        return CuResult.CUDA_SUCCESS;
    }

    /** Only the high-water marks may be set, and only to 0 (a reset to the current figure), as the driver allows. */
    @Override
    public int cuDeviceSetGraphMemAttribute(Call c, int device, int attr, long value)
            throws ProtocolException, CallRejected, InterruptedException {
        if (value != 8) {
            throw new ProtocolException(c.name() + ": value of " + value + " bytes");
        }
        long v = c.receiveBulk(8).get(LONG, 0);
        if ((attr != 1 && attr != 3) || v != 0) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        session.quota().resetGraphMemoryHigh();
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuGraphAddKernelNode(Call c) throws ProtocolException, CallRejected, InterruptedException {
        long g = c.readLong();
        long n = GraphRequest.count(c.readLong(), "numDependencies");
        long graph = c.handle(ParamType.GRAPH, g, false);
        MemorySegment params = kernelNodeParams(c);
        c.expectEnd();
        c.expectBulk(8 * n);
        MemorySegment deps = nodes(c, 8 * n, n, g, "dependencies");
        MemorySegment out = c.scratch(8);
        c.reserveHandles(1, 0);   // its node output is a ptr of the codec, which the table does not count
        return added(c, driver.cuGraphAddKernelNode(out, graph, deps, n, params), out, g);
    }

    /**
     * The node's parameters with its handles as this session's ids and the parameter values copied
     * out of the driver's arrays by the function's parameter sizes (GraphRequest). A node made with
     * {@code extra} is not answered (CUDA_ERROR_NOT_SUPPORTED).
     */
    @Override
    public int cuGraphKernelNodeGetParams(Call c) throws ProtocolException, CallRejected, IOException {
        long node = node(c.readLong(), 0, "hNode");
        c.expectEnd();
        MemorySegment p = c.scratch(GraphRequest.KNP_SIZE);
        p.fill((byte) 0);
        int r = driver.cuGraphKernelNodeGetParams(node, p);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long func = p.get(LONG, GraphRequest.KNP_FUNC), kern = p.get(LONG, GraphRequest.KNP_KERN);
        long params = p.get(LONG, GraphRequest.KNP_PARAMS), extra = p.get(LONG, GraphRequest.KNP_EXTRA);
        if (params == 0 && extra != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "a kernel node made with extra: its parameters are not answered");
        }
        long sized = func;
        if (sized == 0 && kern != 0) {
            MemorySegment f = c.scratch(8);
            int k = driver.cuKernelGetFunction(f, kern);
            if (k != CuResult.CUDA_SUCCESS) {
                return k;
            }
            sized = f.get(LONG, 0);
        }
        MemorySegment offset = c.scratch(8), size = c.scratch(8);
        long[] sizes = new long[LaunchRequest.MAX_PARAMS];
        int count = 0;
        long total = 0;
        while (count < LaunchRequest.MAX_PARAMS && params != 0
                && driver.cuFuncGetParamInfo(sized, count, offset, size) == CuResult.CUDA_SUCCESS) {
            sizes[count] = size.get(LONG, 0);
            total += sizes[count];
            count++;
        }
        if (total > LaunchRequest.MAX_PARAM_BYTES) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "kernel parameters of " + total + " bytes");
        }
        MemorySegment block = c.scratch(4L * count + total);
        long at = 4L * count;
        MemorySegment pointers = MemorySegment.ofAddress(params).reinterpret(8L * count);
        for (int i = 0; i < count; i++) {
            block.set(ValueLayout.JAVA_INT_UNALIGNED, 4L * i, (int) sizes[i]);
            // The driver's own copy of the value, in this process: its address comes from the driver, not the wire.
            MemorySegment.copy(MemorySegment.ofAddress(pointers.getAtIndex(LONG, i)).reinterpret(sizes[i]), 0, block, at, sizes[i]);
            at += sizes[i];
        }
        long context = session.currentContextId(c.lane);
        long funcId = func == 0 ? 0 : handles().idOf(ParamType.FUNC, func);
        if (func != 0 && funcId == 0) {
            c.reserveHandles(1, 0);
            funcId = handles().intern(ParamType.FUNC, func, 0, context);   // a function the capture named, not the program
        }
        c.outs.putLong(funcId).putLong(kern == 0 ? 0 : handles().idOf(ParamType.KERNEL, kern))
                .putLong(handles().idOf(ParamType.CTX, p.get(LONG, GraphRequest.KNP_CTX)));
        for (int i = 0; i < 3; i++) {
            c.outs.putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_GRID + 4L * i));
        }
        for (int i = 0; i < 3; i++) {
            c.outs.putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_BLOCK + 4L * i));
        }
        c.outs.putInt(p.get(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_SHARED)).putInt(count).putInt((int) total);
        if (block.byteSize() > 0) {
            c.sendData(block);
        }
        return r;
    }

    @Override
    public int cuGraphKernelNodeSetParams(Call c) throws ProtocolException, CallRejected {
        long node = node(c.readLong(), 0, "hNode");
        MemorySegment params = kernelNodeParams(c);
        c.expectEnd();
        return driver.cuGraphKernelNodeSetParams(node, params);
    }

    @Override
    public int cuGraphExecKernelNodeSetParams(Call c) throws ProtocolException, CallRejected {
        long exec = c.handle(ParamType.GEXEC, c.readLong(), false);
        long node = node(c.readLong(), 0, "hNode");
        MemorySegment params = kernelNodeParams(c);
        c.expectEnd();
        return driver.cuGraphExecKernelNodeSetParams(exec, node, params);
    }

    /**
     * A CUDA_KERNEL_NODE_PARAMS rebuilt here: the function or kernel translated, the parameter values in backend memory
     * (a restored module global's address among them translated as a launch's, {@link LaunchCalls#translate}). The
     * stack the kernel will make the driver grow is charged here, as a launch's is ({@link LaunchStack}).
     */
    private MemorySegment kernelNodeParams(Call c) throws ProtocolException, CallRejected {
        SegmentAllocator scratch = (bytes, alignment) -> c.scratch(bytes);
        int start = c.body.position();
        GraphRequest.KernelNode k = GraphRequest.readKernelNode(c.body, scratch);
        LaunchRequest.Header h = k.header();
        if (session.translation() != null) {
            java.nio.ByteBuffer b = c.body.duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN).position(start + 4 + 8);
            LaunchRequest.readHeader(b); // the kind and context, then the header: the parameters follow
            LaunchCalls.translate(session, c.body, b.position(), k.kernelParams(), k.extra());
        }
        MemorySegment p = c.scratch(GraphRequest.KNP_SIZE);
        p.fill((byte) 0);
        SessionHandles.Entry fe = c.entry(k.kind() == GraphRequest.KIND_KERNEL ? ParamType.KERNEL : ParamType.FUNC, h.function());
        LaunchStack.charge(session, c, fe);   // when the kernel enters the graph: before any launch of it can grow the stack
        long f = fe.real();
        p.set(LONG, k.kind() == GraphRequest.KIND_KERNEL ? GraphRequest.KNP_KERN : GraphRequest.KNP_FUNC, f);
        int[] dims = {h.gridX(), h.gridY(), h.gridZ(), h.blockX(), h.blockY(), h.blockZ()};
        for (int i = 0; i < 3; i++) {
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_GRID + 4L * i, dims[i]);
            p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_BLOCK + 4L * i, dims[3 + i]);
        }
        p.set(ValueLayout.JAVA_INT_UNALIGNED, GraphRequest.KNP_SHARED, h.sharedMemBytes());
        p.set(LONG, GraphRequest.KNP_PARAMS, k.kernelParams().address());
        p.set(LONG, GraphRequest.KNP_EXTRA, k.extra().address());
        p.set(LONG, GraphRequest.KNP_CTX, c.handle(ParamType.CTX, k.ctx(), true));
        return p;
    }

    @Override
    public int cuGraphAddDependencies(Call c, long hGraph, long from, long to, long edgeData, long numDependencies)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment a = nodes(c, from, numDependencies, g, "from");
        MemorySegment b = nodes(c, to, numDependencies, g, "to");
        return driver.cuGraphAddDependencies(hGraph, a, b, edgeData(c, edgeData, numDependencies), numDependencies);
    }

    @Override
    public int cuGraphAddDependencies_v1(Call c, long hGraph, long from, long to, long numDependencies)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment a = nodes(c, from, numDependencies, g, "from");
        MemorySegment b = nodes(c, to, numDependencies, g, "to");
        return driver.cuGraphAddDependencies_v1(hGraph, a, b, numDependencies);
    }

    @Override
    public int cuGraphRemoveDependencies(Call c, long hGraph, long from, long to, long edgeData, long numDependencies)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment a = nodes(c, from, numDependencies, g, "from");
        MemorySegment b = nodes(c, to, numDependencies, g, "to");
        return driver.cuGraphRemoveDependencies(hGraph, a, b, edgeData(c, edgeData, numDependencies), numDependencies);
    }

    @Override
    public int cuGraphRemoveDependencies_v1(Call c, long hGraph, long from, long to, long numDependencies)
            throws ProtocolException, CallRejected, InterruptedException {
        long g = graphId(hGraph);
        MemorySegment a = nodes(c, from, numDependencies, g, "from");
        MemorySegment b = nodes(c, to, numDependencies, g, "to");
        return driver.cuGraphRemoveDependencies_v1(hGraph, a, b, numDependencies);
    }

    // ---- queries ------------------------------------------------------------------------------

    /** One of the array queries: {@code query} fills (array or NULL, edge data or NULL, count). */
    private interface Query {
        int run(MemorySegment array, MemorySegment edges, MemorySegment count);
    }

    /** The node-query layout (GraphRequest): the graph the answered nodes belong to is {@code graphId}. */
    private int nodeQuery(Call c, long room, boolean edges, long graphId, Query q) throws IOException, CallRejected {
        MemorySegment count = c.scratch(8);
        if (room == GraphRequest.COUNT_ONLY) {
            count.set(LONG, 0, 0);
            int r = q.run(MemorySegment.NULL, MemorySegment.NULL, count);
            if (r == CuResult.CUDA_SUCCESS) {
                c.outs.putLong(count.get(LONG, 0)).putLong(0);
            }
            return r;
        }
        MemorySegment array = c.scratch(8 * Math.max(1, room));
        MemorySegment data = edges ? c.scratch(8 * Math.max(1, room)).fill((byte) 0) : MemorySegment.NULL;
        count.set(LONG, 0, room);
        int r = q.run(room == 0 ? MemorySegment.NULL : array, room == 0 ? MemorySegment.NULL : data, count);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        // The driver leaves *count at the total when the room is smaller; it wrote min(room, total).
        long total = count.get(LONG, 0);
        long k = Math.min(room, total);
        c.reserveUnknown(ParamType.GNODE, array, k);
        for (long i = 0; i < k; i++) {
            array.setAtIndex(LONG, i, internNode(array.getAtIndex(LONG, i), graphId));
        }
        c.outs.putLong(total).putLong(k);
        if (k > 0) {
            c.sendData(array.asSlice(0, 8 * k));
            if (edges) {
                c.sendData(data.asSlice(0, 8 * k));
            }
        }
        return r;
    }

    @Override
    public int cuGraphGetNodes(Call c) throws ProtocolException, CallRejected, IOException {
        long g = c.readLong();
        long graph = c.handle(ParamType.GRAPH, g, false);
        long room = GraphRequest.room(c.readLong());
        c.body.getInt();
        c.expectEnd();
        return nodeQuery(c, room, false, g, (a, e, n) -> driver.cuGraphGetNodes(graph, a, n));
    }

    @Override
    public int cuGraphGetRootNodes(Call c) throws ProtocolException, CallRejected, IOException {
        long g = c.readLong();
        long graph = c.handle(ParamType.GRAPH, g, false);
        long room = GraphRequest.room(c.readLong());
        c.body.getInt();
        c.expectEnd();
        return nodeQuery(c, room, false, g, (a, e, n) -> driver.cuGraphGetRootNodes(graph, a, n));
    }

    private interface NodeQuery {
        int run(long node, MemorySegment array, MemorySegment edges, MemorySegment count);
    }

    private int neighbours(Call c, NodeQuery q) throws ProtocolException, CallRejected, IOException {
        long id = c.readLong();
        long room = GraphRequest.room(c.readLong());
        boolean edges = c.body.getInt() != 0;
        c.expectEnd();
        long node = node(id, 0, "hNode");
        long graphId = handles().get(id, ParamType.GNODE).owner();
        return nodeQuery(c, room, edges, graphId, (a, e, n) -> q.run(node, a, e, n));
    }

    @Override
    public int cuGraphNodeGetDependencies(Call c) throws ProtocolException, CallRejected, IOException {
        return neighbours(c, driver::cuGraphNodeGetDependencies);
    }

    @Override
    public int cuGraphNodeGetDependencies_v1(Call c) throws ProtocolException, CallRejected, IOException {
        return neighbours(c, (node, a, e, n) -> driver.cuGraphNodeGetDependencies_v1(node, a, n));
    }

    @Override
    public int cuGraphNodeGetDependentNodes(Call c) throws ProtocolException, CallRejected, IOException {
        return neighbours(c, driver::cuGraphNodeGetDependentNodes);
    }

    @Override
    public int cuGraphNodeGetDependentNodes_v1(Call c) throws ProtocolException, CallRejected, IOException {
        return neighbours(c, (node, a, e, n) -> driver.cuGraphNodeGetDependentNodes_v1(node, a, n));
    }

    @Override
    public int cuGraphGetEdges(Call c) throws ProtocolException, CallRejected, IOException {
        return edges(c, true);
    }

    @Override
    public int cuGraphGetEdges_v1(Call c) throws ProtocolException, CallRejected, IOException {
        return edges(c, false);
    }

    private int edges(Call c, boolean v2) throws ProtocolException, CallRejected, IOException {
        long g = c.readLong();
        long graph = c.handle(ParamType.GRAPH, g, false);
        long room = GraphRequest.room(c.readLong());
        boolean edges = v2 && c.body.getInt() != 0;
        if (!v2) {
            c.body.getInt();
        }
        c.expectEnd();
        MemorySegment count = c.scratch(8);
        if (room == GraphRequest.COUNT_ONLY || room == 0) {
            count.set(LONG, 0, 0);
            int r = v2 ? driver.cuGraphGetEdges(graph, MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, count)
                    : driver.cuGraphGetEdges_v1(graph, MemorySegment.NULL, MemorySegment.NULL, count);
            if (r == CuResult.CUDA_SUCCESS) {
                c.outs.putLong(count.get(LONG, 0)).putLong(0);
            }
            return r;
        }
        MemorySegment from = c.scratch(8 * room), to = c.scratch(8 * room);
        MemorySegment data = edges ? c.scratch(8 * room).fill((byte) 0) : MemorySegment.NULL;
        count.set(LONG, 0, room);
        int r = v2 ? driver.cuGraphGetEdges(graph, from, to, data, count) : driver.cuGraphGetEdges_v1(graph, from, to, count);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long total = count.get(LONG, 0);
        long k = Math.min(room, total);
        c.reserveUnknown(ParamType.GNODE, from, k);
        c.reserveUnknown(ParamType.GNODE, to, k);
        for (long i = 0; i < k; i++) {
            from.setAtIndex(LONG, i, internNode(from.getAtIndex(LONG, i), g));
            to.setAtIndex(LONG, i, internNode(to.getAtIndex(LONG, i), g));
        }
        c.outs.putLong(total).putLong(k);
        if (k > 0) {
            c.sendData(from.asSlice(0, 8 * k));
            c.sendData(to.asSlice(0, 8 * k));
            if (edges) {
                c.sendData(data.asSlice(0, 8 * k));
            }
        }
        return r;
    }

    /** The driver's result travels in the outputs, so that a failed update's info reaches the program (GraphRequest). */
    @Override
    public int cuGraphExecUpdate(Call c) throws ProtocolException, CallRejected {
        long exec = c.handle(ParamType.GEXEC, c.readLong(), false);
        long g = c.readLong();
        long graph = c.handle(ParamType.GRAPH, g, false);
        c.expectEnd();
        MemorySegment info = c.scratch(GraphRequest.UPDATE_INFO_BYTES);
        info.fill((byte) 0);
        int r = driver.cuGraphExecUpdate(exec, graph, info);
        if (r != CuResult.CUDA_SUCCESS && c.lane.replay) {
            return r; // a restore replays only updates that succeeded: one that fails now fails the restore, named
        }
        c.reserveUnknown(ParamType.GNODE, info.asSlice(8, 16), 2);
        c.outs.putInt(r).putInt(info.get(ValueLayout.JAVA_INT_UNALIGNED, 0))
                .putLong(nodeId(info.get(LONG, 8), g)).putLong(nodeId(info.get(LONG, 16), g));
        return CuResult.CUDA_SUCCESS;
    }

    /** A node the driver names (0 stays 0), as an id of the session, owned by graph {@code graphId}. */
    private long nodeId(long real, long graphId) {
        if (real == 0) {
            return 0;
        }
        long id = handles().idOf(ParamType.GNODE, real);
        return id != 0 ? id : internNode(real, graphId);
    }
}
