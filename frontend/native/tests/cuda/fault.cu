// fault's kernels: fill_one writes 1 to p[0..n); store_far stores to p[offset], which the program
// points into the first page of the address space (p = NULL, offset 4: no allocation is there, and
// the device reports an illegal address). A store far past an allocation instead lands wherever the
// address layout puts it: on the H200 that gave CUDA_ERROR_ILLEGAL_ADDRESS in one run and
// CUDA_ERROR_INVALID_ADDRESS_SPACE in another.
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
