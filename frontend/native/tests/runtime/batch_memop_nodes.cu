// Batch memory-operation graph nodes, from a runtime-API program through the driver entry points
// (cudaGetDriverEntryPointByVersion), as libraries reach them: a reader graph whose first node waits for
// a flag (cuGraphAddBatchMemOpNode, WAIT_VALUE_32 EQ) before a kernel consumes a buffer, and a writer
// graph whose kernel fills the buffer before a batch node writes the flag (and a 64-bit value, through
// cuGraphAddNode). The reader is launched first on a stream of its own and must wait for the writer on
// another stream. The nodes' parameters are read back (the driver's own copy of the operations), changed
// in the graphs (cuGraphBatchMemOpNodeSetParams) and in the exec graphs
// (cuGraphExecBatchMemOpNodeSetParams); invalid parameters are refused. Results compared with the CPU.
#include "common.cuh"
#include <cuda.h>
#include <unistd.h>

typedef CUresult (*add_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*get_fn)(CUgraphNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*set_fn)(CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*exec_set_fn)(CUgraphExec, CUgraphNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *);
typedef CUresult (*add_node_fn)(CUgraphNode *, CUgraph, const CUgraphNode *, const CUgraphEdgeData *, size_t, CUgraphNodeParams *);
typedef CUresult (*ctx_fn)(CUcontext *);
typedef CUresult (*type_fn)(CUgraphNode, CUgraphNodeType *);

static void *entry(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, &fn, 13000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || fn == NULL) {
        FAIL("%s: not found", name);
    }
    return fn;
}

#define CU(call)                                                        \
    do {                                                                \
        CUresult r_ = (call);                                           \
        if (r_ != CUDA_SUCCESS) {                                       \
            FAIL("%s:%d: %s failed: %d", __FILE__, __LINE__, #call, r_); \
        }                                                               \
    } while (0)

__global__ void produce(int *data, int n, int round) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = i * 7 + round;
    }
}

__global__ void consume(const int *data, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = data[i] * 3 + 1;
    }
}

static void add_kernel(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps, void *func,
                       void **args, int n) {
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = func;
    kp.gridDim = dim3((n + 127) / 128);
    kp.blockDim = dim3(128);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(node, g, deps, ndeps, &kp));
}

static CUstreamBatchMemOpParams wait32(CUdeviceptr addr, unsigned value) {
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    op.waitValue.address = addr;
    op.waitValue.value = value;
    op.waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    return op;
}

static CUstreamBatchMemOpParams write32(CUdeviceptr addr, unsigned value) {
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = addr;
    op.writeValue.value = value;
    return op;
}

// Launches the reader first, lets it wait, then the writer; checks the consumer's output and the flag.
static void run_round(const char *what, cudaGraphExec_t reader, cudaGraphExec_t writer, cudaStream_t s1, cudaStream_t s2,
                      int *data, int *out, unsigned *flag, int n, int round, unsigned want) {
    CK(cudaMemset(data, 0, n * sizeof(int)));
    CK(cudaMemset(out, 0, n * sizeof(int)));
    CK(cudaMemset(flag, 0, sizeof(unsigned)));
    CK(cudaDeviceSynchronize());
    CK(cudaGraphLaunch(reader, s1));
    usleep(50 * 1000);
    CK(cudaGraphLaunch(writer, s2));
    CK(cudaStreamSynchronize(s2));
    CK(cudaStreamSynchronize(s1));
    int *host = (int *) malloc(n * sizeof(int));
    CK(cudaMemcpy(host, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int want_i = (i * 7 + round) * 3 + 1;
        if (host[i] != want_i) {
            FAIL("%s: out[%d] = %d, CPU says %d (the reader did not wait for the writer)", what, i, host[i], want_i);
        }
    }
    free(host);
    unsigned f;
    CK(cudaMemcpy(&f, flag, sizeof f, cudaMemcpyDeviceToHost));
    if (f != want) {
        FAIL("%s: flag %u, expected %u", what, f, want);
    }
    printf("%s: the reader waited for flag %u, %d outputs equal the CPU's\n", what, f, n);
}

int main() {
    const int n = 4096;
    CK(cudaFree(0));
    add_fn addNode = (add_fn) entry("cuGraphAddBatchMemOpNode");
    get_fn getParams = (get_fn) entry("cuGraphBatchMemOpNodeGetParams");
    set_fn setParams = (set_fn) entry("cuGraphBatchMemOpNodeSetParams");
    exec_set_fn execSetParams = (exec_set_fn) entry("cuGraphExecBatchMemOpNodeSetParams");
    add_node_fn addGeneric = (add_node_fn) entry("cuGraphAddNode");
    ctx_fn getCurrent = (ctx_fn) entry("cuCtxGetCurrent");
    // the runtime has no node type for these nodes (cudaGraphNodeGetType answers cudaErrorUnknown): the driver's
    type_fn nodeType = (type_fn) entry("cuGraphNodeGetType");
    CUcontext ctx;
    CU(getCurrent(&ctx));

    int *data, *out, round = 1;
    unsigned *flag;
    unsigned long long *flag64;
    CK(cudaMalloc(&data, n * sizeof(int)));
    CK(cudaMalloc(&out, n * sizeof(int)));
    CK(cudaMalloc(&flag, 64));
    flag64 = (unsigned long long *) (flag + 2);
    CK(cudaMemset(flag, 0, 64));
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int count = n;

    // reader: wait flag == 1, then consume
    cudaGraph_t rg, wg;
    CK(cudaGraphCreate(&rg, 0));
    CK(cudaGraphCreate(&wg, 0));
    CUstreamBatchMemOpParams op = wait32((CUdeviceptr) flag, 1);
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.count = 1;
    p.paramArray = &op;
    CUgraphNode waitNode, writeNode, write64Node;
    CU(addNode(&waitNode, (CUgraph) rg, NULL, 0, &p));
    cudaGraphNode_t consumer, producer;
    void *cargs[] = {&data, &out, &count};
    add_kernel(&consumer, rg, (cudaGraphNode_t *) &waitNode, 1, (void *) consume, cargs, n);
    // writer: produce, then write flag = 1, and (cuGraphAddNode) the 64-bit word after it
    void *pargs[] = {&data, &count, &round};
    add_kernel(&producer, wg, NULL, 0, (void *) produce, pargs, n);
    CUstreamBatchMemOpParams wop = write32((CUdeviceptr) flag, 1);
    p.paramArray = &wop;
    CU(addNode(&writeNode, (CUgraph) wg, (CUgraphNode *) &producer, 1, &p));
    CUstreamBatchMemOpParams w64;
    memset(&w64, 0, sizeof w64);
    w64.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    w64.writeValue.address = (CUdeviceptr) flag64;
    w64.writeValue.value64 = 0x0123456789abcdefULL;
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    gp.memOp.ctx = ctx;
    gp.memOp.count = 1;
    gp.memOp.paramArray = &w64;
    CU(addGeneric(&write64Node, (CUgraph) wg, &writeNode, NULL, 1, &gp));
    memset(&op, 0xee, sizeof op);   // the nodes hold copies: the program's arrays may change
    memset(&wop, 0xee, sizeof wop);
    memset(&w64, 0xee, sizeof w64);
    CUgraphNodeType type, type64;
    CU(nodeType(waitNode, &type));
    CU(nodeType(write64Node, &type64));
    printf("node types: %d, %d (cuGraphAddNode)\n", (int) type, (int) type64);

    cudaGraphExec_t re, we;
    CK(cudaGraphInstantiate(&re, rg, 0));
    CK(cudaGraphInstantiate(&we, wg, 0));
    run_round("round 1", re, we, s1, s2, data, out, flag, n, 1, 1);
    unsigned long long v64;
    CK(cudaMemcpy(&v64, flag64, sizeof v64, cudaMemcpyDeviceToHost));
    printf("64-bit write node (cuGraphAddNode): %016llx\n", v64);

    // parameters as the node holds them
    CUDA_BATCH_MEM_OP_NODE_PARAMS got, again;
    memset(&got, 0, sizeof got);
    CU(getParams(waitNode, &got));
    if (got.count != 1 || got.paramArray == NULL || got.paramArray == &op || got.ctx != ctx || got.flags != 0) {
        FAIL("reader node parameters: count %u, array %p, ctx %p", got.count, (void *) got.paramArray, (void *) got.ctx);
    }
    const auto *w = &got.paramArray[0].waitValue;
    if (w->operation != CU_STREAM_MEM_OP_WAIT_VALUE_32 || w->address != (CUdeviceptr) flag || w->value != 1
        || w->flags != CU_STREAM_WAIT_VALUE_EQ) {
        FAIL("reader node operation: %d at %llx value %u flags %u", (int) w->operation, (unsigned long long) w->address,
             w->value, w->flags);
    }
    CU(getParams(waitNode, &again));
    printf("reader node: 1 operation, wait32 EQ 1 on the flag, in the node's own array (%s on a second query)\n",
           again.paramArray == got.paramArray ? "the same" : "another");

    // new parameters in the graphs: flag 2, new exec graphs
    CUstreamBatchMemOpParams op2 = wait32((CUdeviceptr) flag, 2), wop2 = write32((CUdeviceptr) flag, 2);
    p.paramArray = &op2;
    CU(setParams(waitNode, &p));
    p.paramArray = &wop2;
    CU(setParams(writeNode, &p));
    CU(getParams(writeNode, &got));
    if (got.count != 1 || got.paramArray[0].writeValue.operation != CU_STREAM_MEM_OP_WRITE_VALUE_32
        || got.paramArray[0].writeValue.value != 2) {
        FAIL("writer node parameters after the set");
    }
    cudaGraphExec_t re2, we2;
    CK(cudaGraphInstantiate(&re2, rg, 0));
    CK(cudaGraphInstantiate(&we2, wg, 0));
    run_round("round 2 (graph node parameters set)", re2, we2, s1, s2, data, out, flag, n, 1, 2);

    // new parameters in the exec graphs only: flag 3
    CUstreamBatchMemOpParams op3 = wait32((CUdeviceptr) flag, 3), wop3 = write32((CUdeviceptr) flag, 3);
    p.paramArray = &op3;
    CU(execSetParams((CUgraphExec) re2, waitNode, &p));
    p.paramArray = &wop3;
    CU(execSetParams((CUgraphExec) we2, writeNode, &p));
    run_round("round 3 (exec graph parameters set)", re2, we2, s1, s2, data, out, flag, n, 1, 3);
    CU(getParams(waitNode, &got));
    printf("reader node after the exec update: waits for %u\n", got.paramArray[0].waitValue.value);

    // refused
    CUstreamBatchMemOpParams bad = wait32((CUdeviceptr) flag, 4);
    bad.waitValue.operation = (CUstreamBatchMemOpType) 99;
    p.paramArray = &bad;
    CUgraphNode badNode;
    printf("an unknown operation: %s\n", addNode(&badNode, (CUgraph) rg, NULL, 0, &p) != CUDA_SUCCESS ? "refused" : "accepted");
    p.paramArray = &op3;
    p.count = 0;
    printf("no operations: %s\n", addNode(&badNode, (CUgraph) rg, NULL, 0, &p) != CUDA_SUCCESS ? "refused" : "accepted");
    p.count = 1;
    p.paramArray = &wop3;   // a write where the exec graph's node waits
    printf("another operation type in the exec graph: %s\n",
           execSetParams((CUgraphExec) re2, waitNode, &p) != CUDA_SUCCESS ? "refused" : "accepted");

    CK(cudaGraphExecDestroy(re));
    CK(cudaGraphExecDestroy(we));
    CK(cudaGraphExecDestroy(re2));
    CK(cudaGraphExecDestroy(we2));
    CK(cudaGraphDestroy(rg));
    CK(cudaGraphDestroy(wg));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaFree(data));
    CK(cudaFree(out));
    CK(cudaFree(flag));
    printf("PASS\n");
    return 0;
}
