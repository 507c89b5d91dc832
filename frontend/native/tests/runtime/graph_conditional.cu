// Conditional graph nodes through the runtime API: a WHILE node whose body kernel runs until the
// kernel itself clears the condition (cudaGraphSetConditional), an IF/ELSE node whose condition a
// kernel before it sets from device memory, and a SWITCH node choosing one of three bodies. Each
// graph is launched more than once with new inputs (the handles made with cudaGraphCondAssignDefault
// start each launch at their default). Every result is compared with the CPU's.
#include "common.cuh"

// One pass of the loop: data = 2 * data + 1; thread 0 counts the passes and keeps the loop going below `limit`.
__global__ void pass(int *data, int n, int *passes, int limit, cudaGraphConditionalHandle loop) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] = 2 * data[i] + 1;
    }
    if (i == 0) {
        int done = ++*passes;
        cudaGraphSetConditional(loop, done < limit ? 1 : 0);
    }
}

__global__ void choose(const int *selector, cudaGraphConditionalHandle h) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        cudaGraphSetConditional(h, (unsigned int) *selector);
    }
}

__global__ void add(int *data, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        data[i] += v;
    }
}

static void kernelNode(cudaGraph_t g, const cudaGraphNode_t *deps, size_t nd, void *func, void **args, int n,
                       cudaGraphNode_t *out) {
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = func;
    kp.gridDim = dim3((n + 255) / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(out, g, deps, nd, &kp));
}

// A conditional node of `type` with `size` bodies after `dep` (NULL: a root); the body graphs come back in `bodies`.
static cudaGraphNode_t conditional(cudaGraph_t g, cudaGraphNode_t *dep, cudaGraphConditionalHandle h,
                                   cudaGraphConditionalNodeType type, unsigned size, cudaGraph_t *bodies) {
    // (its union holds dim3s, so C++ cannot default-construct it: zeroed storage instead)
    cudaGraphNodeParams &p = *(cudaGraphNodeParams *) calloc(1, sizeof(cudaGraphNodeParams));
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    cudaGraphNode_t node;
    CK(cudaGraphAddNode(&node, g, dep, NULL, dep ? 1 : 0, &p));
    for (unsigned i = 0; i < size; i++) {
        bodies[i] = p.conditional.phGraph_out[i];
    }
    free(&p);
    return node;
}

int main() {
    const int n = 1000;
    int *data, *passes, *selector;
    int *h = (int *) malloc(n * sizeof(int)), *in = (int *) malloc(n * sizeof(int));
    CK(cudaMalloc(&data, n * sizeof(int)));
    CK(cudaMalloc(&passes, sizeof(int)));
    CK(cudaMalloc(&selector, sizeof(int)));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int count = n;

    // WHILE: passes = 0, then the body runs until it has run `limit` times
    cudaGraph_t wg, body[3];
    CK(cudaGraphCreate(&wg, 0));
    cudaGraphConditionalHandle loop;
    CK(cudaGraphConditionalHandleCreate(&loop, wg, 1, cudaGraphCondAssignDefault));
    cudaGraphNode_t reset, whileNode, passNode;
    cudaMemsetParams zero;
    memset(&zero, 0, sizeof zero);
    zero.dst = passes;
    zero.elementSize = 4;
    zero.width = 1;
    zero.height = 1;
    CK(cudaGraphAddMemsetNode(&reset, wg, NULL, 0, &zero));
    whileNode = conditional(wg, &reset, loop, cudaGraphCondTypeWhile, 1, body);
    int limit = 10;
    void *passArgs[] = {&data, &count, &passes, &limit, &loop};
    kernelNode(body[0], NULL, 0, (void *) pass, passArgs, n, &passNode);
    cudaGraphNodeType type;
    CK(cudaGraphNodeGetType(whileNode, &type));
    printf("while node type: %d\n", (int) type);
    cudaGraphExec_t we;
    CK(cudaGraphInstantiate(&we, wg, 0));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            in[i] = (i * 7 + round) % 100 - 50;
        }
        CK(cudaMemcpy(data, in, n * sizeof(int), cudaMemcpyHostToDevice));
        CK(cudaGraphLaunch(we, s));
        CK(cudaStreamSynchronize(s));
        int ran = 0;
        CK(cudaMemcpy(&ran, passes, sizeof(int), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h, data, n * sizeof(int), cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++) {
            int want = in[i];
            for (int k = 0; k < limit; k++) {
                want = 2 * want + 1;
            }
            if (h[i] != want) {
                FAIL("while, round %d: data[%d] = %d, expected %d", round, i, h[i], want);
            }
        }
        printf("while, round %d: %d passes, data[n-1] = %d\n", round, ran, h[n - 1]);
    }

    // IF/ELSE: a kernel sets the condition from *selector; then adds 100, else adds 200
    cudaGraph_t ig;
    CK(cudaGraphCreate(&ig, 0));
    cudaGraphConditionalHandle cond;
    CK(cudaGraphConditionalHandleCreate(&cond, ig, 0, cudaGraphCondAssignDefault));
    cudaGraphNode_t setter, thenNode, elseNode;
    void *chooseArgs[] = {&selector, &cond};
    kernelNode(ig, NULL, 0, (void *) choose, chooseArgs, 1, &setter);
    conditional(ig, &setter, cond, cudaGraphCondTypeIf, 2, body);
    int hundred = 100, twoHundred = 200;
    void *thenArgs[] = {&data, &count, &hundred};
    void *elseArgs[] = {&data, &count, &twoHundred};
    kernelNode(body[0], NULL, 0, (void *) add, thenArgs, n, &thenNode);
    kernelNode(body[1], NULL, 0, (void *) add, elseArgs, n, &elseNode);
    cudaGraphExec_t ie;
    CK(cudaGraphInstantiate(&ie, ig, 0));
    for (int sel = 0; sel < 2; sel++) {
        CK(cudaMemset(data, 0, n * sizeof(int)));
        CK(cudaMemcpy(selector, &sel, sizeof(int), cudaMemcpyHostToDevice));
        CK(cudaGraphLaunch(ie, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(h, data, n * sizeof(int), cudaMemcpyDeviceToHost));
        int want = sel ? 100 : 200;
        for (int i = 0; i < n; i++) {
            if (h[i] != want) {
                FAIL("if, selector %d: data[%d] = %d, expected %d", sel, i, h[i], want);
            }
        }
        printf("if, selector %d: data = %d\n", sel, h[0]);
    }

    // SWITCH: body k adds 1000 * (k + 1); a selector past the last body runs none
    cudaGraph_t sg;
    CK(cudaGraphCreate(&sg, 0));
    cudaGraphConditionalHandle which;
    CK(cudaGraphConditionalHandleCreate(&which, sg, 0, cudaGraphCondAssignDefault));
    cudaGraphNode_t sset, cases[3];
    void *whichArgs[] = {&selector, &which};
    kernelNode(sg, NULL, 0, (void *) choose, whichArgs, 1, &sset);
    conditional(sg, &sset, which, cudaGraphCondTypeSwitch, 3, body);
    int amounts[3] = {1000, 2000, 3000};
    void *caseArgs[3][3];
    for (int k = 0; k < 3; k++) {
        caseArgs[k][0] = &data;
        caseArgs[k][1] = &count;
        caseArgs[k][2] = &amounts[k];
        kernelNode(body[k], NULL, 0, (void *) add, caseArgs[k], n, &cases[k]);
    }
    cudaGraphExec_t se;
    CK(cudaGraphInstantiate(&se, sg, 0));
    for (int sel = 0; sel < 4; sel++) {
        CK(cudaMemset(data, 0, n * sizeof(int)));
        CK(cudaMemcpy(selector, &sel, sizeof(int), cudaMemcpyHostToDevice));
        CK(cudaGraphLaunch(se, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(h, data, n * sizeof(int), cudaMemcpyDeviceToHost));
        int want = sel < 3 ? amounts[sel] : 0;
        for (int i = 0; i < n; i++) {
            if (h[i] != want) {
                FAIL("switch, selector %d: data[%d] = %d, expected %d", sel, i, h[i], want);
            }
        }
        printf("switch, selector %d: data = %d\n", sel, h[0]);
    }

    CK(cudaGraphExecDestroy(we));
    CK(cudaGraphExecDestroy(ie));
    CK(cudaGraphExecDestroy(se));
    CK(cudaGraphDestroy(wg));
    CK(cudaGraphDestroy(ig));
    CK(cudaGraphDestroy(sg));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(data));
    CK(cudaFree(passes));
    CK(cudaFree(selector));
    free(h);
    free(in);
    printf("PASS\n");
    return 0;
}
