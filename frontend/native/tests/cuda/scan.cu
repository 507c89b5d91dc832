// scan's kernels: an inclusive prefix sum of n unsigned ints in three launches.
// scan_blocks: each block scans its blockDim.x elements in shared memory (Hillis-Steele, double
// buffered) and writes its total to sums[blockIdx.x]; run again on sums (one block) it scans those;
// add_offsets: adds to every element of block b > 0 the scanned total of the blocks before it.
extern "C" __global__ void scan_blocks(const unsigned int *in, unsigned int *out, unsigned int *sums, unsigned int n) {
    extern __shared__ unsigned int buf[]; // 2 * blockDim.x
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    unsigned int *src = buf, *dst = buf + blockDim.x;
    src[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (unsigned int offset = 1; offset < blockDim.x; offset <<= 1) {
        dst[t] = t >= offset ? src[t] + src[t - offset] : src[t];
        __syncthreads();
        unsigned int *tmp = src;
        src = dst;
        dst = tmp;
    }
    if (i < n) {
        out[i] = src[t];
    }
    if (sums != 0 && t == blockDim.x - 1) {
        sums[blockIdx.x] = src[t];
    }
}

extern "C" __global__ void add_offsets(unsigned int *data, const unsigned int *scanned_sums, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (blockIdx.x > 0 && i < n) {
        data[i] += scanned_sums[blockIdx.x - 1];
    }
}
