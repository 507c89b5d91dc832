// CUDA graphs through the runtime API: a stream capture of launches, a memset and a device copy
// (across two streams joined by events), replayed three times with new inputs; a graph built with
// the explicit API (kernel and memset nodes with dependencies), instantiated, launched, its kernel
// node's parameters updated in the exec graph and launched again. Results checked on the CPU.
#include "common.cuh"

__global__ void scale(float *p, int n, float k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] *= k;
    }
}

__global__ void add_into(float *dst, const float *src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        dst[i] += src[i];
    }
}

int main() {
    const int n = 1 << 16;
    float *x, *y, *h = (float *) malloc(n * sizeof(float)), *in = (float *) malloc(n * sizeof(float));
    CK(cudaMalloc(&x, n * sizeof(float)));
    CK(cudaMalloc(&y, n * sizeof(float)));
    cudaStream_t s, t;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    // capture: on t, y = 0, y += x, y *= 2; then on s, x *= 3, x += y: x becomes 5x
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus status;
    CK(cudaStreamIsCapturing(s, &status));
    printf("capturing: %d\n", status == cudaStreamCaptureStatusActive);
    CK(cudaEventRecord(fork, s));
    CK(cudaStreamWaitEvent(t, fork, 0));
    CK(cudaMemsetAsync(y, 0, n * sizeof(float), t));
    add_into<<<n / 256, 256, 0, t>>>(y, x, n);
    scale<<<n / 256, 256, 0, t>>>(y, n, 2.0f);
    CK(cudaEventRecord(join, t));
    CK(cudaStreamWaitEvent(s, join, 0)); // x is scaled only after t has read it
    scale<<<n / 256, 256, 0, s>>>(x, n, 3.0f);
    add_into<<<n / 256, 256, 0, s>>>(x, y, n);
    CK(cudaStreamEndCapture(s, &g));
    size_t nodes = 0;
    CK(cudaGraphGetNodes(g, NULL, &nodes));
    printf("captured nodes: %zu\n", nodes);
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < n; i++) {
            in[i] = (float) ((i + round) % 101);
        }
        CK(cudaMemcpyAsync(x, in, n * sizeof(float), cudaMemcpyHostToDevice, s));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaMemcpyAsync(h, x, n * sizeof(float), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < n; i++) {
            if (h[i] != 5.0f * in[i]) {
                FAIL("captured graph, round %d: x[%d] = %f, expected %f", round, i, h[i], 5.0f * in[i]);
            }
        }
        printf("replay %d: checksum %016llx\n", round, (unsigned long long) fnv1a(h, n * sizeof(float)));
    }

    // explicit: a memset node fills y with 2.0f, a kernel node after it scales y by k
    cudaGraph_t e;
    CK(cudaGraphCreate(&e, 0));
    cudaMemsetParams ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = y;
    ms.value = 0x40000000u; // 2.0f
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    cudaGraphNode_t setNode, scaleNode;
    CK(cudaGraphAddMemsetNode(&setNode, e, NULL, 0, &ms));
    float k = 1.5f;
    int count = n;
    void *args[] = {&y, &count, &k};
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *) scale;
    kp.gridDim = dim3(n / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(&scaleNode, e, &setNode, 1, &kp));
    cudaGraphExec_t ee;
    CK(cudaGraphInstantiate(&ee, e, 0));
    CK(cudaGraphLaunch(ee, s));
    CK(cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    printf("explicit graph: y[0] = %.2f, y[n-1] = %.2f\n", h[0], h[n - 1]);
    k = -4.0f; // the node keeps the parameters it was given: update them in the exec graph
    CK(cudaGraphExecKernelNodeSetParams(ee, scaleNode, &kp));
    CK(cudaGraphLaunch(ee, s));
    CK(cudaMemcpyAsync(h, y, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    printf("after the update: y[0] = %.2f, y[n-1] = %.2f\n", h[0], h[n - 1]);

    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphExecDestroy(ee));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphDestroy(e));
    CK(cudaEventDestroy(fork));
    CK(cudaEventDestroy(join));
    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(t));
    CK(cudaFree(x));
    CK(cudaFree(y));
    printf("PASS\n");
    return 0;
}
