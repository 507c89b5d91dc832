// histogram's kernel: 256 bins of the bytes in[0..n). Each block counts its grid-stride slice
// in shared memory (shared atomicAdd), then adds its counts to bins (global atomicAdd).
extern "C" __global__ void histogram256(const unsigned char *in, unsigned int n, unsigned int *bins) {
    __shared__ unsigned int local[256];
    for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x) {
        local[b] = 0;
    }
    __syncthreads();
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&local[in[i]], 1u);
    }
    __syncthreads();
    for (unsigned int b = threadIdx.x; b < 256; b += blockDim.x) {
        if (local[b] != 0) {
            atomicAdd(&bins[b], local[b]);
        }
    }
}
