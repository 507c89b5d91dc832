package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import io.gpusockets.protocol.calls.GraphRequest;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Graph memory nodes inside the session's address window (issue 22, item 2), for sessions with address-stable
 * memory: the session's driver over its {@link StableAddresses}. The driver never sees a memory node:
 *
 * <ul>
 * <li>{@code cuGraphAddMemAllocNode} allocates the node's range in the window of the current context's device
 *     ({@link StableAddresses#allocateGraphMemory}; the node's pool location must be that device) when the node is
 *     added, and gives the driver an empty node in its place with the same dependencies; the address is written to
 *     the parameters' {@code dptr} as the driver would. A restore's {@link StableAddresses#placeNext} places it at
 *     its recorded address.</li>
 * <li>{@code cuGraphAddMemFreeNode} of such an address gives the driver an empty node too; an address no stand-in
 *     allocated, or one freed twice in the same graph, is CUDA_ERROR_INVALID_VALUE, as the driver answers.</li>
 * <li>{@code cuGraphNodeGetType} answers CU_GRAPH_NODE_TYPE_MEM_ALLOC / MEM_FREE for the stand-ins,
 *     {@code cuGraphMemAllocNodeGetParams} the parameters as given (the access descriptors copied, the address),
 *     {@code cuGraphMemFreeNodeGetParams} the freed address.</li>
 * <li>The driver's restrictions on graphs with memory nodes hold (CUDA_ERROR_NOT_SUPPORTED): such a graph is not
 *     cloned, not made a child graph, has at most one exec graph at a time, and its stand-in nodes are not
 *     destroyed.</li>
 * <li>The memory lives while its graph or the graph's exec graph lives, and goes back (unmapped, its charge to the
 *     tenant and its range in the session with it: {@link Released}) when the last of them is destroyed. A free node
 *     or a {@code cuMemFree}/{@code cuMemFreeAsync} of it frees nothing before that (a free of it outside the graph
 *     succeeds and keeps it), so more memory is held between launches than under the driver, and a relaunch whose
 *     previous allocation was never freed succeeds where the driver refuses it; nothing a correct program sees.</li>
 * </ul>
 *
 * <p>A checkpoint records each allocation node as an allocation with the node's id ({@link CheckpointRecorder}), so
 * its contents are saved and its replay places it at its address with its id pinned. Not here: graph memory of a
 * stream capture ({@code cuMemAllocAsync} on a capturing stream keeps the driver's address, and a checkpoint of it
 * is refused), a node's pool location on another device than the current context's.
 *
 * <p>Thread-safety: every method takes this object's monitor (the session's lanes call at once).
 */
final class StableGraphMemory extends DelegatingCudaDriver {
    /** CU_GRAPH_NODE_TYPE_MEM_ALLOC and MEM_FREE. */
    static final int TYPE_MEM_ALLOC = 10;
    static final int TYPE_MEM_FREE = 11;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;

    /** Told when a stand-in allocation's memory went back: its base and size. */
    interface Released {
        void released(long base, long size);
    }

    /** A stand-in node: an allocation ({@code params} as the driver would answer them, its copy of the descriptors) or a free. */
    private record StandIn(long graph, boolean alloc, long base, byte[] params, MemorySegment descs) {
    }

    /** A graph with stand-ins: their allocations (base to size), the bases its free nodes free, its exec graph, whether it is destroyed. */
    private static final class GraphMemory {
        final Map<Long, Long> allocations = new HashMap<>();
        final List<Long> freed = new ArrayList<>();
        final List<Long> nodes = new ArrayList<>();
        long exec;
        boolean destroyed;
    }

    private final StableAddresses stable;
    private final Released released;
    /** Stand-in nodes by the driver's handle of their empty node. */
    private final Map<Long, StandIn> nodes = new HashMap<>();
    /** Graphs with stand-ins, by real handle (kept past their destruction while their exec graph lives). */
    private final Map<Long, GraphMemory> graphs = new HashMap<>();
    /** Exec graphs made from a graph with stand-ins, by real handle. */
    private final Map<Long, GraphMemory> execs = new HashMap<>();
    /** Every stand-in allocation's graph, by base. */
    private final Map<Long, GraphMemory> byBase = new HashMap<>();

    StableGraphMemory(StableAddresses stable, Released released) {
        super(stable);
        this.stable = stable;
        this.released = released;
    }

    /** Whether {@code base} is a stand-in allocation's (its memory is graph memory in the window). */
    synchronized boolean holds(long base) {
        return byBase.containsKey(base);
    }

    @Override
    public synchronized int cuGraphAddMemAllocNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                                   long numDependencies, MemorySegment nodeParams) {
        GraphMemory g = graphs.get(hGraph);
        if (g != null && g.destroyed) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        MemorySegment p = nodeParams.reinterpret(GraphRequest.MEM_ALLOC_PARAMS);
        long bytesize = p.get(LONG, GraphRequest.MEM_ALLOC_BYTESIZE);
        long count = p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_COUNT);
        int device = MemoryProps.Location.read(p, MemoryProps.LOCATION).id();
        MemorySegment descs = MemorySegment.NULL;
        if (count > 0) {
            // the caller's checked array, copied: the node answers it for its life
            descs = Arena.ofAuto().allocate(count * MemoryProps.ACCESS_DESC_SIZE, 8);
            descs.copyFrom(MemorySegment.ofAddress(p.get(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS))
                    .reinterpret(count * MemoryProps.ACCESS_DESC_SIZE));
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dptr = arena.allocate(8);
            int r = stable.allocateGraphMemory(dptr, bytesize, device);
            if (r != CuResult.CUDA_SUCCESS) {
                return r;
            }
            long base = dptr.get(ValueLayout.JAVA_LONG, 0);
            r = delegate.cuGraphAddEmptyNode(phGraphNode, hGraph, dependencies, numDependencies);
            if (r != CuResult.CUDA_SUCCESS) {
                stable.releaseGraphMemory(base);
                return r;
            }
            p.set(LONG, GraphRequest.MEM_ALLOC_DPTR, base);
            byte[] params = p.toArray(ValueLayout.JAVA_BYTE);
            long node = phGraphNode.get(LONG, 0);
            GraphMemory gm = graphs.computeIfAbsent(hGraph, k -> new GraphMemory());
            gm.allocations.put(base, bytesize);
            gm.nodes.add(node);
            byBase.put(base, gm);
            nodes.put(node, new StandIn(hGraph, true, base, params, descs));
            return CuResult.CUDA_SUCCESS;
        }
    }

    @Override
    public synchronized int cuGraphAddMemFreeNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                                  long numDependencies, long dptr) {
        if (!byBase.containsKey(dptr)) {
            return delegate.cuGraphAddMemFreeNode(phGraphNode, hGraph, dependencies, numDependencies, dptr);
        }
        GraphMemory g = graphs.get(hGraph);
        if (g != null && (g.destroyed || g.freed.contains(dptr))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE; // an allocation freed twice in the same graph
        }
        int r = delegate.cuGraphAddEmptyNode(phGraphNode, hGraph, dependencies, numDependencies);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long node = phGraphNode.get(LONG, 0);
        GraphMemory gm = graphs.computeIfAbsent(hGraph, k -> new GraphMemory());
        gm.freed.add(dptr);
        gm.nodes.add(node);
        nodes.put(node, new StandIn(hGraph, false, dptr, null, null));
        return r;
    }

    @Override
    public synchronized int cuGraphNodeGetType(long hNode, MemorySegment type) {
        StandIn s = nodes.get(hNode);
        if (s == null) {
            return delegate.cuGraphNodeGetType(hNode, type);
        }
        type.reinterpret(4).set(ValueLayout.JAVA_INT_UNALIGNED, 0, s.alloc() ? TYPE_MEM_ALLOC : TYPE_MEM_FREE);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuGraphMemAllocNodeGetParams(long hNode, MemorySegment paramsOut) {
        StandIn s = nodes.get(hNode);
        if (s == null) {
            return delegate.cuGraphMemAllocNodeGetParams(hNode, paramsOut);
        }
        if (!s.alloc()) {
            return CuResult.CUDA_ERROR_INVALID_VALUE; // a free node
        }
        MemorySegment p = paramsOut.reinterpret(GraphRequest.MEM_ALLOC_PARAMS);
        p.copyFrom(MemorySegment.ofArray(s.params()));
        p.set(LONG, GraphRequest.MEM_ALLOC_ACCESS_DESCS, s.descs().address());
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public synchronized int cuGraphMemFreeNodeGetParams(long hNode, MemorySegment dptrOut) {
        StandIn s = nodes.get(hNode);
        if (s == null) {
            return delegate.cuGraphMemFreeNodeGetParams(hNode, dptrOut);
        }
        if (s.alloc()) {
            return CuResult.CUDA_ERROR_INVALID_VALUE; // an allocation node
        }
        dptrOut.reinterpret(8).set(LONG, 0, s.base());
        return CuResult.CUDA_SUCCESS;
    }

    /** Whether {@code hGraph} is a live graph with memory nodes. */
    private boolean hasMemoryNodes(long hGraph) {
        GraphMemory g = graphs.get(hGraph);
        return g != null && !g.destroyed && !g.nodes.isEmpty();
    }

    @Override
    public synchronized int cuGraphClone(MemorySegment phGraphClone, long originalGraph) {
        return hasMemoryNodes(originalGraph) ? CuResult.CUDA_ERROR_NOT_SUPPORTED : delegate.cuGraphClone(phGraphClone, originalGraph);
    }

    @Override
    public synchronized int cuGraphAddChildGraphNode(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies,
                                                     long numDependencies, long childGraph) {
        return hasMemoryNodes(childGraph) ? CuResult.CUDA_ERROR_NOT_SUPPORTED
                : delegate.cuGraphAddChildGraphNode(phGraphNode, hGraph, dependencies, numDependencies, childGraph);
    }

    @Override
    public synchronized int cuGraphDestroyNode(long hNode) {
        return nodes.containsKey(hNode) ? CuResult.CUDA_ERROR_NOT_SUPPORTED : delegate.cuGraphDestroyNode(hNode);
    }

    /** Only one exec graph of a graph with memory nodes at a time, as the driver allows; it holds the memory too. */
    @Override
    public synchronized int cuGraphInstantiateWithFlags(MemorySegment phGraphExec, long hGraph, long flags) {
        GraphMemory g = hasMemoryNodes(hGraph) ? graphs.get(hGraph) : null;
        if (g != null && g.exec != 0) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        int r = delegate.cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags);
        if (r == CuResult.CUDA_SUCCESS && g != null) {
            g.exec = phGraphExec.get(LONG, 0);
            execs.put(g.exec, g);
        }
        return r;
    }

    @Override
    public synchronized int cuGraphExecDestroy(long hGraphExec) {
        int r = delegate.cuGraphExecDestroy(hGraphExec);
        GraphMemory g = r == CuResult.CUDA_SUCCESS ? execs.remove(hGraphExec) : null;
        if (g != null) {
            g.exec = 0;
            releaseIfUnheld(g);
        }
        return r;
    }

    @Override
    public synchronized int cuGraphDestroy(long hGraph) {
        int r = delegate.cuGraphDestroy(hGraph);
        GraphMemory g = r == CuResult.CUDA_SUCCESS ? graphs.remove(hGraph) : null;
        if (g != null) {
            g.destroyed = true;
            for (long node : g.nodes) {
                nodes.remove(node); // the driver may hand out the handle again
            }
            releaseIfUnheld(g);
        }
        return r;
    }

    /** Frees a graph's stand-in memory once neither the graph nor its exec graph lives. */
    private void releaseIfUnheld(GraphMemory g) {
        if (!g.destroyed || g.exec != 0) {
            return;
        }
        for (Map.Entry<Long, Long> a : g.allocations.entrySet()) {
            byBase.remove(a.getKey());
            stable.releaseGraphMemory(a.getKey());
            released.released(a.getKey(), a.getValue());
        }
        g.allocations.clear();
    }

    /** A free of stand-in memory outside its graph succeeds and keeps it until the graph goes (see the class comment). */
    @Override
    public int cuMemFree(long dptr) {
        return holds(dptr) ? CuResult.CUDA_SUCCESS : delegate.cuMemFree(dptr);
    }

    @Override
    public int cuMemFreeAsync(long dptr, long hStream) {
        return holds(dptr) ? CuResult.CUDA_SUCCESS : delegate.cuMemFreeAsync(dptr, hStream);
    }
}
