// fault's kernels: fill_one writes 1 to p[0..n); store_far stores to p[offset] with offset far past
// the end of any allocation (an out-of-bounds store: the device reports an illegal address).
extern "C" __global__ void fill_one(unsigned int *p, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = 1;
    }
}

extern "C" __global__ void store_far(unsigned int *p, unsigned long long offset) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        p[offset] = 0xdeadbeefu;
    }
}
