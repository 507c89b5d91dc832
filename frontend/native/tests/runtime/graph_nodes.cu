// Graph memory nodes and node parameters through the runtime API: an allocation node whose address
// the kernels after it use, a free node, a memset node and a device-to-host memcpy node; the graph
// instantiated with cudaGraphInstantiateWithParams (upload flag), launched several times (the
// allocation is made and freed by each launch), its memset node's parameters changed in the exec
// graph and in the graph, its memcpy node's parameters read back and changed in the exec graph.
// Every result is compared with the CPU's.
#include "common.cuh"

__global__ void fill(int *p, int n, int base) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = base + (i * i) % 977;
    }
}

__global__ void add_into(int *dst, const int *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] += src[i];
    }
}

static void check(const char *what, const int *out, int n, int set, int base) {
    for (int i = 0; i < n; i++) {
        int want = set + base + (i * i) % 977;
        if (out[i] != want) {
            FAIL("%s: out[%d] = %d, expected %d", what, i, out[i], want);
        }
    }
    printf("%s: ok, out[n-1] = %d\n", what, out[n - 1]);
}

int main() {
    const int n = 1 << 14;
    int *out = (int *) malloc(n * sizeof(int)), *acc, *half;
    CK(cudaMalloc(&acc, n * sizeof(int)));
    CK(cudaMalloc(&half, n * sizeof(int)));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = n * sizeof(int);
    cudaGraphNode_t alloc, fillNode, setNode, addNode, freeNode, copyNode, backNode;
    CK(cudaGraphAddMemAllocNode(&alloc, g, NULL, 0, &ap));
    int *tmp = (int *) ap.dptr;
    printf("allocation node gave an address: %s\n", tmp != NULL ? "yes" : "no");
    int count = n, base = 5;
    void *fillArgs[] = {&tmp, &count, &base};
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *) fill;
    kp.gridDim = dim3(n / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = fillArgs;
    CK(cudaGraphAddKernelNode(&fillNode, g, &alloc, 1, &kp));
    cudaMemsetParams ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = acc;
    ms.value = 7;
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    CK(cudaGraphAddMemsetNode(&setNode, g, NULL, 0, &ms));
    void *addArgs[] = {&acc, &tmp, &count};
    kp.func = (void *) add_into;
    kp.kernelParams = addArgs;
    cudaGraphNode_t both[] = {fillNode, setNode};
    CK(cudaGraphAddKernelNode(&addNode, g, both, 2, &kp));
    CK(cudaGraphAddMemFreeNode(&freeNode, g, &addNode, 1, tmp));
    CK(cudaGraphAddMemcpyNode1D(&copyNode, g, &addNode, 1, half, acc, n * sizeof(int), cudaMemcpyDeviceToDevice));
    CK(cudaGraphAddMemcpyNode1D(&backNode, g, &copyNode, 1, out, half, n * sizeof(int), cudaMemcpyDeviceToHost));

    cudaGraphInstantiateParams ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = s;
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiateWithParams(&ge, g, &ip));
    printf("instantiated: result %d\n", (int) ip.result_out);
    for (int round = 0; round < 2; round++) {
        memset(out, 0, n * sizeof(int));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        check(round == 0 ? "first launch" : "second launch", out, n, 7, base);
    }

    cudaMemAllocNodeParams got;
    memset(&got, 0, sizeof got);
    CK(cudaGraphMemAllocNodeGetParams(alloc, &got));
    printf("allocation node: bytesize %zu, same address %s\n", got.bytesize, got.dptr == (void *) tmp ? "yes" : "no");
    void *freed = NULL;
    CK(cudaGraphMemFreeNodeGetParams(freeNode, &freed));
    printf("free node frees it: %s\n", freed == (void *) tmp ? "yes" : "no");
    unsigned long long high = 0;
    CK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &high));
    printf("graph memory high mark covers it: %s\n", high >= (unsigned long long) n * sizeof(int) ? "yes" : "no");
    unsigned long long zero = 0;
    CK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
    CK(cudaDeviceGraphMemTrim(0));

    ms.value = 100;   // the exec graph's memset changes, the graph's does not
    CK(cudaGraphExecMemsetNodeSetParams(ge, setNode, &ms));
    memset(out, 0, n * sizeof(int));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    check("after the exec memset update", out, n, 100, base);

    cudaMemcpy3DParms cp;
    memset(&cp, 0, sizeof cp);
    CK(cudaGraphMemcpyNodeGetParams(copyNode, &cp));
    printf("memcpy node: width %zu, height %zu, depth %zu, kind %d\n", cp.extent.width, cp.extent.height, cp.extent.depth,
           (int) cp.kind);
    // the exec graph's copy moves only the first half now: the second half of `half` keeps the last launch's values
    CK(cudaMemset(half, 0, n * sizeof(int)));
    CK(cudaGraphExecMemcpyNodeSetParams1D(ge, copyNode, half, acc, n / 2 * sizeof(int), cudaMemcpyDeviceToDevice));
    memset(out, 0, n * sizeof(int));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    check("first half after the exec memcpy update", out, n / 2, 100, base);
    for (int i = n / 2; i < n; i++) {
        if (out[i] != 0) {
            FAIL("second half: out[%d] = %d, expected 0", i, out[i]);
        }
    }
    printf("second half untouched: ok\n");

    ms.value = 1;     // the graph's memset changes: a new exec graph has it
    CK(cudaGraphMemsetNodeSetParams(setNode, &ms));
    CK(cudaGraphExecDestroy(ge));   // a graph with memory nodes has one exec graph at a time
    cudaGraphExec_t ge2;
    CK(cudaGraphInstantiate(&ge2, g, 0));
    memset(out, 0, n * sizeof(int));
    CK(cudaGraphLaunch(ge2, s));
    CK(cudaStreamSynchronize(s));
    check("new exec graph after the graph's memset update", out, n, 1, base);

    CK(cudaGraphExecDestroy(ge2));
    CK(cudaGraphDestroy(g));

    // the generic node calls: a memset node, a kernel node filling `half` and one adding it into `acc`, made
    // with cudaGraphAddNode; the memset's value changed with cudaGraphExecNodeSetParams
    cudaGraph_t g3;
    CK(cudaGraphCreate(&g3, 0));
    // (its union holds dim3s, so C++ cannot default-construct it: zeroed storage instead)
    cudaGraphNodeParams &np = *(cudaGraphNodeParams *) calloc(1, sizeof(cudaGraphNodeParams));
    np.type = cudaGraphNodeTypeMemset;
    np.memset.dst = acc;
    np.memset.value = 3;
    np.memset.elementSize = 4;
    np.memset.width = n;
    np.memset.height = 1;
    cudaGraphNode_t gm, gf, ga;
    CK(cudaGraphAddNode(&gm, g3, NULL, NULL, 0, &np));
    int base3 = 11;
    void *fill3[] = {&half, &count, &base3};
    cudaGraphNodeParams &kn = *(cudaGraphNodeParams *) calloc(1, sizeof(cudaGraphNodeParams));
    kn.type = cudaGraphNodeTypeKernel;
    kn.kernel.func = (void *) fill;
    kn.kernel.gridDim = dim3(n / 256);
    kn.kernel.blockDim = dim3(256);
    kn.kernel.kernelParams = fill3;
    CK(cudaGraphAddNode(&gf, g3, NULL, NULL, 0, &kn));
    void *add3[] = {&acc, &half, &count};
    kn.kernel.func = (void *) add_into;
    kn.kernel.kernelParams = add3;
    cudaGraphNode_t before[] = {gm, gf};
    CK(cudaGraphAddNode(&ga, g3, before, NULL, 2, &kn));
    cudaGraphExec_t ge3;
    CK(cudaGraphInstantiate(&ge3, g3, 0));
    CK(cudaGraphLaunch(ge3, s));
    CK(cudaMemcpyAsync(out, acc, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    check("generic nodes", out, n, 3, base3);
    np.memset.value = 40;
    CK(cudaGraphExecNodeSetParams(ge3, gm, &np));
    CK(cudaGraphLaunch(ge3, s));
    CK(cudaMemcpyAsync(out, acc, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    check("generic exec update", out, n, 40, base3);
    CK(cudaGraphExecDestroy(ge3));
    CK(cudaGraphDestroy(g3));
    free(&np);
    free(&kn);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(acc));
    CK(cudaFree(half));
    free(out);
    printf("PASS\n");
    return 0;
}
