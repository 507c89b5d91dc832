// reduce_shfl's kernels: a sum by warp shuffles. reduce_partial: each block sums a grid-stride
// slice of in[0..n) into partial[blockIdx.x]; reduce_final (one block) sums partial[0..n).
// Lanes reduce with __shfl_down_sync, warps through shared memory.

__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

__device__ float block_sum(float v) {
    __shared__ float warps[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) {
        warps[warp] = v;
    }
    __syncthreads();
    int nwarps = (blockDim.x + 31) >> 5;
    v = threadIdx.x < nwarps ? warps[threadIdx.x] : 0.0f;
    if (warp == 0) {
        v = warp_sum(v);
    }
    return v;
}

extern "C" __global__ void reduce_partial(const float *in, float *partial, unsigned int n) {
    float v = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        v += in[i];
    }
    v = block_sum(v);
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = v;
    }
}

extern "C" __global__ void reduce_final(const float *partial, float *out, unsigned int n) {
    float v = 0.0f;
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) {
        v += partial[i];
    }
    v = block_sum(v);
    if (threadIdx.x == 0) {
        *out = v;
    }
}
