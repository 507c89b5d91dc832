package io.gpusockets.protocol.structs;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The generic node calls (cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams) answered
 * through the per-type calls of a {@link CudaDriver}, whose checks they then share: the frontend
 * answers them this way in the guest (nothing of the union travels as such) and so does the emulated
 * device. A CUgraphNodeParams (cuda.h 13.0, 256 bytes):
 *
 * <pre>
 *   0  CUgraphNodeType type (u32), 4  int reserved0[3] (must be 0)
 *  16  the union (232 bytes), by type:
 *        KERNEL        CUDA_KERNEL_NODE_PARAMS_v3 (the v2 layout, 72 bytes)
 *        MEMCPY        int flags (0), int reserved (0), CUcontext copyCtx at 8, CUDA_MEMCPY3D at 16
 *        MEMSET        CUDA_MEMSET_NODE_PARAMS_v2: the v1 layout (40 bytes), CUcontext ctx at 40
 *        HOST          CUDA_HOST_NODE_PARAMS_v2 {fn, userData}
 *        GRAPH         CUgraph graph, CUgraphChildGraphNodeOwnership ownership (u32) at 8
 *        WAIT_EVENT / EVENT_RECORD   CUevent event
 *        MEM_ALLOC     CUDA_MEM_ALLOC_NODE_PARAMS_v2 (the v1 layout, 120 bytes; dptr written back in place)
 *        MEM_FREE      CUdeviceptr dptr
 *        BATCH_MEM_OP  CUDA_BATCH_MEM_OP_NODE_PARAMS_v2 {ctx, count u32 at 8, paramArray at 16, flags u32 at 24} (32 bytes)
 * 248  long long reserved2 (must be 0)
 * </pre>
 *
 *        CONDITIONAL   CUDA_CONDITIONAL_NODE_PARAMS: handle, type u32 at 8, size u32 at 12, phGraph_out at 16, ctx at 24
 *                      (made by the caller's {@link ConditionalNodes}: it has no call of its own)
 *
 * Types without a per-type call here (external semaphores) and a child graph
 * whose ownership moves to the parent answer CUDA_ERROR_NOT_SUPPORTED.
 * Edge data that is not all default is applied after the node is made, with cuGraphAddDependencies.
 */
public final class GraphNodeParams {
    public static final long SIZE = 256;
    public static final long UNION = 16;
    private static final long RESERVED2 = 248;
    public static final int KERNEL = 0, MEMCPY = 1, MEMSET = 2, HOST = 3, GRAPH = 4, EMPTY = 5, WAIT_EVENT = 6,
            EVENT_RECORD = 7, MEM_ALLOC = 10, MEM_FREE = 11, BATCH_MEM_OP = 12, CONDITIONAL = 13;
    /** CUDA_CONDITIONAL_NODE_PARAMS in the union: handle u64, type u32, size u32, phGraph_out (pointer), ctx. */
    public static final long COND_HANDLE = UNION, COND_TYPE = UNION + 8, COND_SIZE = UNION + 12, COND_GRAPHS_OUT = UNION + 16,
            COND_CTX = UNION + 24;

    /** How a conditional node is made (it has no call of its own): the frontend's request, the emulated device's graphs. */
    public interface ConditionalNodes {
        int add(MemorySegment phGraphNode, long hGraph, MemorySegment dependencies, long numDependencies, MemorySegment nodeParams);
    }
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED;

    private GraphNodeParams() {
    }

    private static boolean isNull(MemorySegment s) {
        return s == null || (s.isNative() && s.address() == 0);
    }

    /** The program's CUgraphNodeParams, or null when NULL or its reserved fields are not zero. */
    private static MemorySegment params(MemorySegment nodeParams) {
        if (isNull(nodeParams)) {
            return null;
        }
        MemorySegment p = nodeParams.byteSize() >= SIZE ? nodeParams : nodeParams.reinterpret(SIZE);
        if (p.get(INT, 4) != 0 || p.get(INT, 8) != 0 || p.get(INT, 12) != 0 || p.get(LONG, RESERVED2) != 0) {
            return null;
        }
        return p;
    }

    /**
     * cuGraphAddNode: the node made by the call of its type. {@code edgeData} may be NULL; when it
     * names other than default edges they are added after the node (and the node goes if that fails).
     */
    public static int add(CudaDriver d, ConditionalNodes conditional, MemorySegment phGraphNode, long hGraph,
                          MemorySegment dependencies, MemorySegment edgeData, long numDependencies, MemorySegment nodeParams) {
        MemorySegment p = params(nodeParams);
        if (p == null || isNull(phGraphNode) || numDependencies < 0 || (numDependencies > 0 && isNull(dependencies))) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        boolean edges = false;
        if (!isNull(edgeData) && numDependencies > 0) {
            MemorySegment e = edgeData.reinterpret(8 * numDependencies);
            for (long i = 0; i < numDependencies && !edges; i++) {
                edges = e.getAtIndex(LONG, i) != 0;
            }
        }
        MemorySegment deps = edges ? MemorySegment.NULL : dependencies;
        long n = edges ? 0 : numDependencies;
        int r = p.get(INT, 0) == CONDITIONAL ? conditional.add(phGraphNode, hGraph, deps, n, p)
                : addOfType(d, p, phGraphNode, hGraph, deps, n);
        if (r != CuResult.CUDA_SUCCESS || !edges) {
            return r;
        }
        long node = phGraphNode.reinterpret(8).get(LONG, 0);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment to = arena.allocate(8 * numDependencies, 8);
            for (long i = 0; i < numDependencies; i++) {
                to.setAtIndex(LONG, i, node);
            }
            r = d.cuGraphAddDependencies(hGraph, dependencies, to, edgeData, numDependencies);
        }
        if (r != CuResult.CUDA_SUCCESS) {
            d.cuGraphDestroyNode(node);
        }
        return r;
    }

    private static int addOfType(CudaDriver d, MemorySegment p, MemorySegment out, long graph, MemorySegment deps, long n) {
        int type = p.get(INT, 0);
        return switch (type) {
            case KERNEL -> d.cuGraphAddKernelNode(out, graph, deps, n, p.asSlice(UNION, 72));
            case MEMCPY -> p.get(INT, UNION) != 0 || p.get(INT, UNION + 4) != 0 ? CuResult.CUDA_ERROR_INVALID_VALUE
                    : d.cuGraphAddMemcpyNode(out, graph, deps, n, p.asSlice(UNION + 16, Memcpy3D.SIZE_3D), p.get(LONG, UNION + 8));
            case MEMSET -> d.cuGraphAddMemsetNode(out, graph, deps, n, p.asSlice(UNION, 40), p.get(LONG, UNION + 40));
            case HOST -> d.cuGraphAddHostNode(out, graph, deps, n, p.asSlice(UNION, 16));
            case GRAPH -> p.get(INT, UNION + 8) != 0 ? CuResult.CUDA_ERROR_NOT_SUPPORTED
                    : d.cuGraphAddChildGraphNode(out, graph, deps, n, p.get(LONG, UNION));
            case EMPTY -> d.cuGraphAddEmptyNode(out, graph, deps, n);
            case WAIT_EVENT -> d.cuGraphAddEventWaitNode(out, graph, deps, n, p.get(LONG, UNION));
            case EVENT_RECORD -> d.cuGraphAddEventRecordNode(out, graph, deps, n, p.get(LONG, UNION));
            case MEM_ALLOC -> d.cuGraphAddMemAllocNode(out, graph, deps, n, p.asSlice(UNION, 120));
            case MEM_FREE -> d.cuGraphAddMemFreeNode(out, graph, deps, n, p.get(LONG, UNION));
            case BATCH_MEM_OP -> d.cuGraphAddBatchMemOpNode(out, graph, deps, n, p.asSlice(UNION, 32));
            default -> CuResult.CUDA_ERROR_NOT_SUPPORTED;
        };
    }

    /** cuGraphNodeSetParams: kernel, memcpy, memset, host, event and batch memory-operation nodes, by the call of their type. */
    public static int set(CudaDriver d, long hNode, MemorySegment nodeParams) {
        MemorySegment p = params(nodeParams);
        if (p == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return switch (p.get(INT, 0)) {
            case KERNEL -> d.cuGraphKernelNodeSetParams(hNode, p.asSlice(UNION, 72));
            case MEMCPY -> d.cuGraphMemcpyNodeSetParams(hNode, p.asSlice(UNION + 16, Memcpy3D.SIZE_3D));
            case MEMSET -> d.cuGraphMemsetNodeSetParams(hNode, p.asSlice(UNION, 40));
            case HOST -> d.cuGraphHostNodeSetParams(hNode, p.asSlice(UNION, 16));
            case WAIT_EVENT -> d.cuGraphEventWaitNodeSetEvent(hNode, p.get(LONG, UNION));
            case EVENT_RECORD -> d.cuGraphEventRecordNodeSetEvent(hNode, p.get(LONG, UNION));
            case BATCH_MEM_OP -> d.cuGraphBatchMemOpNodeSetParams(hNode, p.asSlice(UNION, 32));
            default -> CuResult.CUDA_ERROR_NOT_SUPPORTED;
        };
    }

    /** cuGraphExecNodeSetParams: kernel, memcpy, memset, host, event and batch memory-operation nodes of an exec graph. */
    public static int execSet(CudaDriver d, long hGraphExec, long hNode, MemorySegment nodeParams) {
        MemorySegment p = params(nodeParams);
        if (p == null) {
            return CuResult.CUDA_ERROR_INVALID_VALUE;
        }
        return switch (p.get(INT, 0)) {
            case KERNEL -> d.cuGraphExecKernelNodeSetParams(hGraphExec, hNode, p.asSlice(UNION, 72));
            case MEMCPY -> d.cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, p.asSlice(UNION + 16, Memcpy3D.SIZE_3D),
                    p.get(LONG, UNION + 8));
            case MEMSET -> d.cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, p.asSlice(UNION, 40), p.get(LONG, UNION + 40));
            case HOST -> d.cuGraphExecHostNodeSetParams(hGraphExec, hNode, p.asSlice(UNION, 16));
            case WAIT_EVENT -> d.cuGraphExecEventWaitNodeSetEvent(hGraphExec, hNode, p.get(LONG, UNION));
            case EVENT_RECORD -> d.cuGraphExecEventRecordNodeSetEvent(hGraphExec, hNode, p.get(LONG, UNION));
            case BATCH_MEM_OP -> d.cuGraphExecBatchMemOpNodeSetParams(hGraphExec, hNode, p.asSlice(UNION, 32));
            default -> CuResult.CUDA_ERROR_NOT_SUPPORTED;
        };
    }
}
