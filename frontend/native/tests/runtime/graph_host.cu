// Graphs whose work touches host memory, built the way graph programs build them with the runtime
// API: memcpy nodes from and to host buffers (1D, pitched 2D with host pitches other than the
// device's, cudaMemcpyDefault), a host node that reads what the graph copied back, a host-to-host
// memcpy node after it, and a kernel between. The exec graph is launched three times with new host
// data, so each launch must read and write the host buffers at the node's moment, in the graph's
// order. Then the host node's parameters are read back and replaced in the exec graph and in the
// graph, and a host function launched on a capturing stream runs at each launch of the captured
// graph. Every result is compared with the CPU's.
#include "common.cuh"

__global__ void affine(int *p, int n, int a, int b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = p[i] * a + b;
    }
}

struct Seen {
    const int *data;
    int n;
    long long sum;
    int calls;
};

// A host node: sums what the device-to-host node before it wrote.
static void CUDART_CB sum_host(void *user) {
    Seen *s = (Seen *) user;
    long long t = 0;
    for (int i = 0; i < s->n; i++) {
        t += s->data[i];
    }
    s->sum = t;
    s->calls++;
}

static void CUDART_CB count_host(void *user) {
    (*(int *) user)++;
}

int main() {
    const int n = 1 << 14;
    const int cols = 100, rows = 64, srcPitch = 128, dstPitch = 112;   // in ints
    int *in = (int *) malloc(n * sizeof(int)), *out = (int *) malloc(n * sizeof(int));
    int *copy = (int *) malloc(n * sizeof(int));
    int *hsrc = (int *) malloc((size_t) rows * srcPitch * sizeof(int));
    int *hdst = (int *) malloc((size_t) rows * dstPitch * sizeof(int));
    int *d, *d2;
    size_t dpitch;
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMallocPitch((void **) &d2, &dpitch, cols * sizeof(int), rows));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    // in -> d, d = 3d + 1, d -> out, host node sums out, out -> copy (host to host)
    cudaGraphNode_t h2d, kernel, d2h, hostNode, h2h;
    CK(cudaGraphAddMemcpyNode1D(&h2d, g, NULL, 0, d, in, n * sizeof(int), cudaMemcpyHostToDevice));
    int count = n, a = 3, b = 1;
    void *args[] = {&d, &count, &a, &b};
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *) affine;
    kp.gridDim = dim3(n / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(&kernel, g, &h2d, 1, &kp));
    cudaMemcpy3DParms back;
    memset(&back, 0, sizeof back);
    back.srcPtr = make_cudaPitchedPtr(d, n * sizeof(int), n * sizeof(int), 1);
    back.dstPtr = make_cudaPitchedPtr(out, n * sizeof(int), n * sizeof(int), 1);
    back.extent = make_cudaExtent(n * sizeof(int), 1, 1);
    back.kind = cudaMemcpyDeviceToHost;
    CK(cudaGraphAddMemcpyNode(&d2h, g, &kernel, 1, &back));
    Seen seen = {out, n, 0, 0};
    cudaHostNodeParams hp = {sum_host, &seen};
    CK(cudaGraphAddHostNode(&hostNode, g, &d2h, 1, &hp));
    CK(cudaGraphAddMemcpyNode1D(&h2h, g, &hostNode, 1, copy, out, n * sizeof(int), cudaMemcpyHostToHost));

    // an independent branch: pitched host rows -> pitched device rows -> other pitched host rows
    cudaGraphNode_t up2d, down2d;
    cudaMemcpy3DParms up;
    memset(&up, 0, sizeof up);
    up.srcPtr = make_cudaPitchedPtr(hsrc, srcPitch * sizeof(int), cols * sizeof(int), rows);
    up.dstPtr = make_cudaPitchedPtr(d2, dpitch, cols * sizeof(int), rows);
    up.extent = make_cudaExtent(cols * sizeof(int), rows, 1);
    up.kind = cudaMemcpyHostToDevice;
    CK(cudaGraphAddMemcpyNode(&up2d, g, NULL, 0, &up));
    cudaMemcpy3DParms down;
    memset(&down, 0, sizeof down);
    down.srcPtr = make_cudaPitchedPtr(d2, dpitch, cols * sizeof(int), rows);
    down.dstPtr = make_cudaPitchedPtr(hdst, dstPitch * sizeof(int), cols * sizeof(int), rows);
    down.extent = make_cudaExtent(cols * sizeof(int), rows, 1);
    down.kind = cudaMemcpyDefault;   // unified addressing decides which side is the host's
    CK(cudaGraphAddMemcpyNode(&down2d, g, &up2d, 1, &down));

    size_t nodes = 0;
    CK(cudaGraphGetNodes(g, NULL, &nodes));
    printf("nodes: %zu\n", nodes);
    cudaGraphNodeType type;
    CK(cudaGraphNodeGetType(hostNode, &type));
    printf("host node type: %d\n", (int) type);
    CK(cudaGraphNodeGetType(h2d, &type));
    printf("memcpy node type: %d\n", (int) type);

    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int round = 0; round < 3; round++) {
        uint64_t state = 1000 + round;
        long long want = 0;
        for (int i = 0; i < n; i++) {
            in[i] = (int) (splitmix64(&state) % 20001) - 10000;
            out[i] = copy[i] = -1;
            want += 3LL * in[i] + 1;
        }
        for (int i = 0; i < rows * srcPitch; i++) {
            hsrc[i] = (i % srcPitch) < cols ? (int) (splitmix64(&state) & 0xffffff) : -5;
        }
        for (int i = 0; i < rows * dstPitch; i++) {
            hdst[i] = -7;
        }
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < n; i++) {
            if (out[i] != 3 * in[i] + 1 || copy[i] != out[i]) {
                FAIL("round %d: out[%d] = %d, copy %d, expected %d", round, i, out[i], copy[i], 3 * in[i] + 1);
            }
        }
        if (seen.sum != want || seen.calls != round + 1) {
            FAIL("round %d: the host node saw sum %lld (calls %d), expected %lld", round, seen.sum, seen.calls, want);
        }
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < dstPitch; c++) {
                int expect = c < cols ? hsrc[r * srcPitch + c] : -7;
                if (hdst[r * dstPitch + c] != expect) {
                    FAIL("round %d: 2D row %d column %d = %d, expected %d", round, r, c, hdst[r * dstPitch + c], expect);
                }
            }
        }
        printf("round %d: host node sum %lld, calls %d, 2D rows %016llx\n", round, seen.sum, seen.calls,
               (unsigned long long) fnv1a(hdst, (size_t) rows * dstPitch * sizeof(int)));
    }

    cudaHostNodeParams got;
    CK(cudaGraphHostNodeGetParams(hostNode, &got));
    printf("host node params: %s\n", got.fn == sum_host && got.userData == &seen ? "as given" : "WRONG");
    int counted = 0;
    cudaHostNodeParams other = {count_host, &counted};
    CK(cudaGraphExecHostNodeSetParams(ge, hostNode, &other));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    printf("after the exec update: counted %d, sums %d\n", counted, seen.calls);
    CK(cudaGraphHostNodeSetParams(hostNode, &other));
    CK(cudaGraphHostNodeGetParams(hostNode, &got));
    printf("graph node params: %s\n", got.fn == count_host && got.userData == &counted ? "replaced" : "WRONG");
    if (counted != 2 || seen.calls != 3) {
        FAIL("counted %d, sums %d", counted, seen.calls);
    }

    // a host function on a capturing stream becomes a host node of the captured graph: it runs at each launch
    int captured = 0;
    cudaGraph_t cg;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    affine<<<n / 256, 256, 0, s>>>(d, n, 1, 1);
    CK(cudaLaunchHostFunc(s, count_host, &captured));
    CK(cudaStreamEndCapture(s, &cg));
    if (captured != 0) {
        FAIL("the captured host function ran at the capture");
    }
    cudaGraphExec_t ce;
    CK(cudaGraphInstantiate(&ce, cg, 0));
    for (int i = 0; i < 3; i++) {
        CK(cudaGraphLaunch(ce, s));
    }
    CK(cudaStreamSynchronize(s));
    printf("captured host function: ran %d times\n", captured);
    if (captured != 3) {
        FAIL("the captured host function ran %d times, expected 3", captured);
    }
    CK(cudaGraphExecDestroy(ce));
    CK(cudaGraphDestroy(cg));

    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFree(d2));
    free(in);
    free(out);
    free(copy);
    free(hsrc);
    free(hdst);
    printf("PASS\n");
    return 0;
}
