// Host copies recorded by stream capture (issue 21): a stream captures a cudaMemcpyAsync host to
// device (pageable memory), a kernel, a cudaMemcpyAsync device to host, and a second stream that joins
// the capture through an event adds a cudaMemcpyAsync with cudaMemcpyDefault (host to device, pinned
// memory) whose data the kernel also reads. The captured graph is launched four times, the host input
// changed before each launch: each launch must read the host input as it is when the graph reaches
// the copy and write the host output then, as the driver's memcpy nodes do. Results are compared with
// the CPU's. The captured graph's nodes are counted by type. Then cudaMemcpy2DAsync both ways between
// host rows and pitched device memory is captured (thread-local mode) and launched three times with new
// host rows. Copies after the captures run at once again.
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

    // 2D copies in a capture: host rows (pitch 40 ints) into pitched device memory and back into host
    // rows of another pitch (36 ints), 32 x 20 ints, three launches with new host rows.
    {
        const int w = 32, h = 20, hp = 40, op = 36;
        int *rows = (int *) malloc(h * hp * sizeof(int)), *back = (int *) malloc(h * op * sizeof(int));
        int *dp;
        size_t pitch;
        CK(cudaMallocPitch((void **) &dp, &pitch, w * sizeof(int), h));
        memset(back, 0xff, h * op * sizeof(int));
        cudaGraph_t g2;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        CK(cudaMemcpy2DAsync(dp, pitch, rows, hp * sizeof(int), w * sizeof(int), h, cudaMemcpyHostToDevice, s));
        CK(cudaMemcpy2DAsync(back, op * sizeof(int), dp, pitch, w * sizeof(int), h, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamEndCapture(s, &g2));
        cudaGraphExec_t x2;
        CK(cudaGraphInstantiate(&x2, g2, 0));
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < h * hp; i++) {
                rows[i] = i * 3 + round;
            }
            CK(cudaGraphLaunch(x2, s));
            CK(cudaStreamSynchronize(s));
            long long sum = 0;
            for (int y = 0; y < h; y++) {
                for (int x0 = 0; x0 < w; x0++) {
                    if (back[y * op + x0] != rows[y * hp + x0]) {
                        FAIL("2D round %d: (%d, %d) = %d, want %d", round, x0, y, back[y * op + x0], rows[y * hp + x0]);
                    }
                    sum += back[y * op + x0];
                }
                for (int x0 = w; x0 < op; x0++) {
                    if (back[y * op + x0] != -1) {
                        FAIL("2D round %d: written past the row at (%d, %d)", round, x0, y);
                    }
                }
            }
            printf("2D round %d: sum %lld\n", round, sum);
        }
        CK(cudaGraphExecDestroy(x2));
        CK(cudaGraphDestroy(g2));
        CK(cudaFree(dp));
        free(rows);
        free(back);
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
