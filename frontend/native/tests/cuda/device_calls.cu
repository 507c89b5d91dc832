// device_calls' kernel: calls of non-inlined device functions (nvcc emits them as .func, called
// with call.uni) and real recursion. affine takes a struct by value, a pointer, an int, a 64-bit
// integer and a double and returns a float; fib and depth return ints and call themselves, to a
// depth that depends on the thread, so the lanes of a warp diverge inside the recursion.
struct Affine {
    int scale;
    float bias;
    short shift;
    unsigned char tag;
    double weight;
};

extern "C" __device__ __noinline__ float affine(struct Affine a, const float *x, int i, unsigned long long salt, double extra) {
    float v = x[i] * (float) a.scale + a.bias;
    v += (float) ((int) (salt & 7) - (int) a.tag);
    return v * (float) (a.weight + extra) + (float) a.shift;
}

extern "C" __device__ __noinline__ int fib(int n) {
    if (n < 2) {
        return n;
    }
    return fib(n - 1) + fib(n - 2);
}

// The height of the subtree of a binary tree (children in left/right, -1 for none) rooted at node.
extern "C" __device__ __noinline__ int depth(const int *left, const int *right, int node) {
    if (node < 0) {
        return 0;
    }
    int l = depth(left, right, left[node]);
    int r = depth(left, right, right[node]);
    return 1 + (l > r ? l : r);
}

extern "C" __global__ void device_calls(const float *x, struct Affine a, const int *left, const int *right, float *fout,
                                        int *fibs, int *depths, int n, int nodes) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        fout[i] = affine(a, x, i, (unsigned long long) i * 0x9e3779b97f4a7c15ull, (double) (i & 3) * 0.25);
        fibs[i] = fib(i % 19);
        depths[i] = depth(left, right, i % nodes);
    }
}
