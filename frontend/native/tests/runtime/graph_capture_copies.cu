// Host copies recorded by stream capture (issue 21): a stream captures a cudaMemcpyAsync host to
// device (pageable memory), a kernel, a cudaMemcpyAsync device to host, and a second stream that joins
// the capture through an event adds a cudaMemcpyAsync with cudaMemcpyDefault (host to device, pinned
// memory) whose data the kernel also reads. The captured graph is launched four times, the host input
// changed before each launch: each launch must read the host input as it is when the graph reaches
// the copy and write the host output then, as the driver's memcpy nodes do. Results are compared with
// the CPU's. The captured graph's nodes are counted by type; copies after the capture ended run at
// once again.
#include "common.cuh"

__global__ void mix(const int *a, const int *b, int *out, int n, int k) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a[i] * k + b[i];
    }
}

int main() {
    const int n = 3000, k = 7;
    int *a = (int *) malloc(n * sizeof(int)), *out = (int *) malloc(n * sizeof(int));
    int *b;
    CK(cudaMallocHost(&b, n * sizeof(int)));
    int *da, *db, *dout;
    CK(cudaMalloc(&da, n * sizeof(int)));
    CK(cudaMalloc(&db, n * sizeof(int)));
    CK(cudaMalloc(&dout, n * sizeof(int)));
    cudaStream_t s, s2;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

    for (int i = 0; i < n; i++) {
        a[i] = -1;
        b[i] = -1;
        out[i] = -1;
    }
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaStreamCaptureStatus status;
    CK(cudaStreamIsCapturing(s, &status));
    printf("capturing: %d\n", (int) status);
    CK(cudaEventRecord(fork, s));
    CK(cudaStreamWaitEvent(s2, fork, 0));
    CK(cudaMemcpyAsync(db, b, n * sizeof(int), cudaMemcpyDefault, s2));
    CK(cudaEventRecord(join, s2));
    CK(cudaMemcpyAsync(da, a, n * sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaStreamWaitEvent(s, join, 0));
    mix<<<(n + 255) / 256, 256, 0, s>>>(da, db, dout, n, k);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(out, dout, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamEndCapture(s, &g));
    // Nothing ran during the capture: the host buffers are as they were.
    int untouched = 1;
    for (int i = 0; i < n; i++) {
        untouched &= out[i] == -1;
    }
    printf("output untouched by the capture: %s\n", untouched ? "yes" : "NO");

    size_t count = 0;
    CK(cudaGraphGetNodes(g, NULL, &count));
    cudaGraphNode_t nodes[16];
    if (count > 16) {
        FAIL("%zu nodes", count);
    }
    CK(cudaGraphGetNodes(g, nodes, &count));
    int memcpys = 0, kernels = 0, others = 0;
    for (size_t i = 0; i < count; i++) {
        cudaGraphNodeType t;
        CK(cudaGraphNodeGetType(nodes[i], &t));
        if (t == cudaGraphNodeTypeMemcpy) {
            memcpys++;
        } else if (t == cudaGraphNodeTypeKernel) {
            kernels++;
        } else {
            others++;
        }
    }
    printf("captured nodes: %d memcpy, %d kernel, %d other\n", memcpys, kernels, others);

    cudaGraphExec_t x;
    CK(cudaGraphInstantiate(&x, g, 0));
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < n; i++) {
            a[i] = i * (round + 1) - 1000;
            b[i] = (i ^ (round * 37)) + round;
        }
        CK(cudaGraphLaunch(x, s));
        CK(cudaStreamSynchronize(s));
        long long sum = 0;
        for (int i = 0; i < n; i++) {
            int want = a[i] * k + b[i];
            if (out[i] != want) {
                FAIL("round %d: out[%d] = %d, want %d", round, i, out[i], want);
            }
            sum += out[i];
        }
        printf("round %d: sum %lld\n", round, sum);
    }

    // After the capture the same calls copy at once again.
    for (int i = 0; i < n; i++) {
        a[i] = 5;
    }
    CK(cudaMemcpyAsync(da, a, n * sizeof(int), cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(out, da, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++) {
        if (out[i] != 5) {
            FAIL("after the capture: out[%d] = %d", i, out[i]);
        }
    }
    printf("after the capture: copies run at once\n");

    CK(cudaGraphExecDestroy(x));
    CK(cudaGraphDestroy(g));
    CK(cudaFreeHost(b));
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dout));
    free(a);
    free(out);
    printf("PASS\n");
    return 0;
}
