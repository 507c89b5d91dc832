package io.gpusockets.protocol.calls;

import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.ByteBuffer;

/**
 * The hand-written requests of the graph calls (codec {@code graph}), little-endian; handles are
 * session handle ids. Node arrays the program passes in travel as DATA (8 bytes per handle) after
 * the body; arrays the backend answers travel back as one DATA block.
 *
 * <pre>
 * kernel node (cuGraphAddKernelNode / cuGraphKernelNodeSetParams / cuGraphExecKernelNodeSetParams):
 *   [graph u64, numDependencies u64 | node u64 | exec u64, node u64]   the call's handles
 *   kind u32 (KIND_FUNCTION: func, KIND_KERNEL: kern), ctx u64 (0: the current context)
 *   a {@link LaunchRequest} body: header (function = func or kern, stream 0) and the parameter values
 *   then, for AddKernelNode, numDependencies*8 bytes of DATA; reply: the node id u64
 *
 * kernel node parameters (cuGraphKernelNodeGetParams): node u64
 *   reply: func id u64, kern id u64, ctx id u64, grid 3 x u32, block 3 x u32, sharedMemBytes u32, count u32, valueBytes u32;
 *   DATA: count sizes (u32 each), then the values back to back (valueBytes in all)
 *
 * node query (cuGraphGetNodes, cuGraphGetRootNodes, cuGraphNodeGet{Dependencies,DependentNodes}[_v1]):
 *   handle u64 (graph or node), room i64 (COUNT_ONLY: the program passed a NULL array), edges u32 (1: edge data wanted)
 *   reply: total u64, returned u64 (= min(room, total)); DATA: returned ids, then returned*8 bytes of edge data if wanted
 *
 * edges (cuGraphGetEdges[_v1]): graph u64, room i64, edges u32
 *   reply: total u64, returned u64; DATA: returned "from" ids, returned "to" ids, [returned*8 bytes of edge data]
 *
 * capture info (cuStreamGetCaptureInfo _v2/_v3): stream u64, want u32 (WANT_DEPENDENCIES | WANT_EDGE_DATA)
 *   reply: status u32, id u64, graph u64, count u64; DATA (when wanted and count > 0): count ids, [count*8 edge data]
 *
 * capture mode (cuThreadExchangeStreamCaptureMode): mode u32; reply: previous mode u32
 *
 * memory allocation node (cuGraphAddMemAllocNode): graph u64, numDependencies u64, accessDescCount u64, bytesize u64
 *   DATA: numDependencies*8 bytes of dependencies, the CUmemPoolProps (88 bytes), accessDescCount CUmemAccessDesc (12 bytes each)
 *   reply: node id u64, dptr u64 (the address the driver gave the allocation)
 *
 * memory allocation node parameters (cuGraphMemAllocNodeGetParams): node u64
 *   reply: accessDescCount u64, bytesize u64, dptr u64; DATA: the CUmemPoolProps, then the access descriptors
 *
 * conditional node (cuGraphAddNode, the only node type that travels as itself: GraphNodeParams):
 *   graph u64, numDependencies u64, handle u64, type u32, size u32, ctx u64; DATA: numDependencies*8 bytes of dependencies
 *   reply: node id u64; DATA: size ids of the body graphs (the node's)
 *
 * batch memory-operation node (cuGraphAddBatchMemOpNode / cuGraphBatchMemOpNodeSetParams / cuGraphExecBatchMemOpNodeSetParams):
 *   [graph u64, numDependencies u64 | node u64 | exec u64, node u64]   the call's handles
 *   ctx u64 (0: NULL), count u32, flags u32; DATA: [numDependencies*8 bytes of dependencies,] count CUstreamBatchMemOpParams
 *   (BatchMemOp, 48 bytes each); reply (AddBatchMemOpNode): node id u64
 *
 * batch memory-operation node parameters (cuGraphBatchMemOpNodeGetParams): node u64
 *   reply: ctx id u64, count u32, flags u32; DATA: count CUstreamBatchMemOpParams (alias fields zeroed)
 *
 * exec update (cuGraphExecUpdate_v2): exec u64, graph u64
 *   the reply's CUresult is CUDA_SUCCESS when the call reached the driver; the driver's result follows:
 *   result u32, then CUgraphExecUpdateResultInfo: result u32, errorNode id u64, errorFromNode id u64
 *   (a failed update's info is what the program needs, and a reply carries outputs only on success)
 * </pre>
 */
public final class GraphRequest {
    /** Most handles in one array from the wire (dependencies, edges, answers). */
    public static final int MAX_NODES = 1 << 20;
    public static final long COUNT_ONLY = -1;
    public static final int KIND_FUNCTION = 0;
    public static final int KIND_KERNEL = 1;
    public static final int WANT_DEPENDENCIES = 1;
    public static final int WANT_EDGE_DATA = 2;
    /** sizeof(CUgraphEdgeData). */
    public static final int EDGE_DATA_BYTES = 8;
    /** CUDA_KERNEL_NODE_PARAMS (v2): layout (cuda.h 13.0). */
    public static final long KNP_SIZE = 72, KNP_FUNC = 0, KNP_GRID = 8, KNP_BLOCK = 20, KNP_SHARED = 32,
            KNP_PARAMS = 40, KNP_EXTRA = 48, KNP_KERN = 56, KNP_CTX = 64;
    /** Most bytes of cuGraphKernelNodeGetParams' DATA: the sizes and the values. */
    public static final int MAX_KERNEL_PARAM_DATA = 4 * LaunchRequest.MAX_PARAMS + LaunchRequest.MAX_PARAM_BYTES;
    /**
     * CUDA_MEM_ALLOC_NODE_PARAMS (cuda.h 13.0): poolProps (CUmemPoolProps, 88 bytes) at 0, accessDescs
     * (pointer) at 88, accessDescCount at 96, bytesize at 104, dptr (out) at 112; 120 bytes.
     */
    public static final long MEM_ALLOC_PARAMS = 120, MEM_ALLOC_ACCESS_DESCS = 88, MEM_ALLOC_ACCESS_COUNT = 96,
            MEM_ALLOC_BYTESIZE = 104, MEM_ALLOC_DPTR = 112;
    /**
     * CUDA_BATCH_MEM_OP_NODE_PARAMS (v1 and v2 alike, cuda.h 13.0): ctx at 0, count (u32) at 8, paramArray
     * (pointer) at 16, flags (u32) at 24; 32 bytes.
     */
    public static final long MEMOP_PARAMS = 32, MEMOP_CTX = 0, MEMOP_COUNT = 8, MEMOP_ARRAY = 16, MEMOP_FLAGS = 24;
    /** Most body graphs of one conditional node (a SWITCH's). */
    public static final int MAX_CONDITIONAL_BODIES = 1024;
    /** sizeof(CUgraphExecUpdateResultInfo). */
    public static final int UPDATE_INFO_BYTES = 24;

    private GraphRequest() {
    }

    /** A count from the wire, bounded. */
    public static long count(long n, String what) throws ProtocolException {
        if (n < 0 || n > MAX_NODES) {
            throw new ProtocolException(what + "=" + n + " out of range 0.." + MAX_NODES);
        }
        return n;
    }

    /** A room from the wire: COUNT_ONLY or a bounded count. */
    public static long room(long n) throws ProtocolException {
        return n == COUNT_ONLY ? n : count(n, "room");
    }

    /** The kernel-node block after the call's handles: kind, ctx, and the launch header (with the function) and parameters. */
    public record KernelNode(int kind, long ctx, LaunchRequest.Header header, MemorySegment kernelParams, MemorySegment extra) {
    }

    public static KernelNode readKernelNode(ByteBuffer b, SegmentAllocator scratch) throws ProtocolException {
        int kind = b.getInt();
        if (kind != KIND_FUNCTION && kind != KIND_KERNEL) {
            throw new ProtocolException("kind=" + kind);
        }
        long ctx = b.getLong();
        LaunchRequest.Header h = LaunchRequest.readHeader(b);
        MemorySegment params = MemorySegment.NULL, extra = MemorySegment.NULL;
        if (h.mode() == LaunchRequest.MODE_KERNEL_PARAMS) {
            params = LaunchRequest.readKernelParams(b, scratch);
        } else {
            extra = LaunchRequest.readExtra(b, scratch);
        }
        return new KernelNode(kind, ctx, h, params, extra);
    }
}
