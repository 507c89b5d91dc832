// graph_driver's kernels: an affine map, and one pass of a loop that clears its own condition.
#include <cuda_runtime.h>

extern "C" __global__ void affine(int *p, unsigned int n, int a, int b) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = p[i] * a + b;
    }
}

// p[i] += 3; thread 0 counts the passes and keeps the loop going while fewer than `limit` have run.
extern "C" __global__ void loop_pass(int *p, unsigned int n, int *passes, int limit, cudaGraphConditionalHandle h) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] += 3;
    }
    if (i == 0) {
        int done = ++*passes;
        cudaGraphSetConditional(h, done < limit ? 1u : 0u);
    }
}
