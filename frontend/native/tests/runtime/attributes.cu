// Stream and kernel-node attributes through the runtime API: a stream's priority and access-policy
// window (over memory of the program's own) set, read back and copied to another stream, work run on
// both; a graph kernel node's priority and window set, read back, copied to a second node; the graph
// run. Results are compared with the CPU's.
#include "common.cuh"

__global__ void scale_add(const int *in, int *out, int k, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * k + i;
    }
}

static void check_out(const int *in, const int *out, int k, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        if (out[i] != in[i] * k + i) {
            FAIL("%s: out[%d] = %d, expected %d", what, i, out[i], in[i] * k + i);
        }
    }
    printf("%s: equal to the CPU's for %d elements\n", what, n);
}

int main() {
    const int n = 5000;
    int *h = (int *) malloc(n * sizeof(int)), *back = (int *) malloc(n * sizeof(int));
    uint64_t seed = 77;
    for (int i = 0; i < n; i++) {
        h[i] = (int) (splitmix64(&seed) % 1000);
    }
    int *in, *out, *out2;
    CK(cudaMalloc(&in, n * sizeof(int)));
    CK(cudaMalloc(&out, n * sizeof(int)));
    CK(cudaMalloc(&out2, n * sizeof(int)));
    CK(cudaMemcpy(in, h, n * sizeof(int), cudaMemcpyHostToDevice));

    int least = 0, greatest = 0;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s, s2;
    CK(cudaStreamCreate(&s));
    CK(cudaStreamCreate(&s2));
    cudaStreamAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = greatest;
    CK(cudaStreamSetAttribute(s, cudaStreamAttributePriority, &v));
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.base_ptr = in;
    v.accessPolicyWindow.num_bytes = n * sizeof(int);
    v.accessPolicyWindow.hitRatio = 1.0f;
    v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    memset(&v, 0, sizeof v);
    CK(cudaStreamGetAttribute(s, cudaStreamAttributePriority, &v));
    printf("stream priority read back is the greatest: %d\n", v.priority == greatest);
    memset(&v, 0, sizeof v);
    CK(cudaStreamGetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
    printf("stream window read back: base ok %d, %zu bytes, hit ratio %.2f, hit %d, miss %d\n",
           v.accessPolicyWindow.base_ptr == in, v.accessPolicyWindow.num_bytes, v.accessPolicyWindow.hitRatio,
           (int) v.accessPolicyWindow.hitProp, (int) v.accessPolicyWindow.missProp);
    CK(cudaStreamCopyAttributes(s2, s));
    memset(&v, 0, sizeof v);
    CK(cudaStreamGetAttribute(s2, cudaStreamAttributeAccessPolicyWindow, &v));
    printf("copied window: base ok %d, %zu bytes\n", v.accessPolicyWindow.base_ptr == in, v.accessPolicyWindow.num_bytes);

    scale_add<<<(n + 255) / 256, 256, 0, s>>>(in, out, 3, n);
    scale_add<<<(n + 255) / 256, 256, 0, s2>>>(in, out2, 5, n);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamSynchronize(s2));
    CK(cudaMemcpy(back, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    check_out(h, back, 3, n, "kernel on the stream with attributes");
    CK(cudaMemcpy(back, out2, n * sizeof(int), cudaMemcpyDeviceToHost));
    check_out(h, back, 5, n, "kernel on the stream with copied attributes");

    // a graph of two kernel nodes, attributes set on the first and copied to the second
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    int count = n, k1 = 7, k2 = 11;
    void *args1[] = {&in, &out, &k1, &count};
    void *args2[] = {&in, &out2, &k2, &count};
    cudaKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = (void *) scale_add;
    p.gridDim = dim3((n + 255) / 256);
    p.blockDim = dim3(256);
    p.kernelParams = args1;
    cudaGraphNode_t n1, n2;
    CK(cudaGraphAddKernelNode(&n1, g, NULL, 0, &p));
    p.kernelParams = args2;
    CK(cudaGraphAddKernelNode(&n2, g, &n1, 1, &p));
    cudaKernelNodeAttrValue a;
    memset(&a, 0, sizeof a);
    a.priority = greatest;
    CK(cudaGraphKernelNodeSetAttribute(n1, cudaKernelNodeAttributePriority, &a));
    memset(&a, 0, sizeof a);
    a.accessPolicyWindow.base_ptr = in;
    a.accessPolicyWindow.num_bytes = 4096;
    a.accessPolicyWindow.hitRatio = 0.5f;
    a.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    a.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    CK(cudaGraphKernelNodeSetAttribute(n1, cudaKernelNodeAttributeAccessPolicyWindow, &a));
    CK(cudaGraphKernelNodeCopyAttributes(n2, n1));
    memset(&a, 0, sizeof a);
    CK(cudaGraphKernelNodeGetAttribute(n2, cudaKernelNodeAttributePriority, &a));
    printf("node priority copied: %d\n", a.priority == greatest);
    memset(&a, 0, sizeof a);
    CK(cudaGraphKernelNodeGetAttribute(n2, cudaKernelNodeAttributeAccessPolicyWindow, &a));
    printf("node window copied: base ok %d, %zu bytes, hit ratio %.2f\n", a.accessPolicyWindow.base_ptr == in,
           a.accessPolicyWindow.num_bytes, a.accessPolicyWindow.hitRatio);
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(back, out, n * sizeof(int), cudaMemcpyDeviceToHost));
    check_out(h, back, 7, n, "graph: first kernel node");
    CK(cudaMemcpy(back, out2, n * sizeof(int), cudaMemcpyDeviceToHost));
    check_out(h, back, 11, n, "graph: second kernel node");

    CK(cudaGraphExecDestroy(e));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(s2));
    CK(cudaFree(in));
    CK(cudaFree(out));
    CK(cudaFree(out2));
    free(h);
    free(back);
    printf("PASS\n");
    return 0;
}
