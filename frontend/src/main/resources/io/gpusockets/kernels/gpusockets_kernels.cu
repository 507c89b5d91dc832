// Kernels used by the demo, the examples, the GPU suite and the benchmarks. The emulated device
// implements each of them in Java under the same name (backend/.../emulated/EmulatedKernels.java), so
// the same PTX runs on the real driver and on the emulated device.
//
// Rebuild the PTX (needs a CUDA toolkit; the build itself does not):
//   nvcc -arch=sm_90 -ptx -o gpusockets_kernels.ptx gpusockets_kernels.cu
#include <cuda_runtime.h>

extern "C" {

// c[i] = a[i] + b[i]
__global__ void gpus_vector_add(const float *a, const float *b, float *c, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// y[i] = alpha * x[i] + y[i]
__global__ void gpus_saxpy(float alpha, const float *x, float *y, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = alpha * x[i] + y[i];
}

// p[i] = value
__global__ void gpus_fill_u32(unsigned int *p, unsigned int value, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = value;
}

// Does nothing: launch-rate benchmarks.
__global__ void gpus_empty() {}

// Spins for about `nanoseconds` (global timer): stream-ordering and concurrency tests.
__global__ void gpus_sleep(unsigned long long nanoseconds) {
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start >= nanoseconds) break;
        __nanosleep(1000);
    }
}

// out[blockIdx.x] = sum of in[blockIdx.x*blockDim.x .. +blockDim.x) (missing elements count as 0).
// Shared memory and barriers; blockDim.x must be a power of two <= 1024.
__global__ void gpus_block_sum(const float *in, float *out, unsigned int n) {
    extern __shared__ float partial[];
    unsigned int t = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}

// Twelve parameters of sizes 1 to 16 bytes and alignments 1 to 16. Thread 0 of block 0 writes each
// parameter's bytes, in order, into `out`, each parameter starting at a 16-byte slot:
// out + 16*k holds parameter k (k = 0..10), zero-padded to 16 bytes. 176 bytes in all.
__global__ void gpus_mixed12(unsigned char p0, short p1, int p2, long long p3, float p4, double p5,
                             float2 p6, int4 p7, unsigned short p8, char4 p9, double2 p10,
                             unsigned char *out) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (int k = 0; k < 176; k++) out[k] = 0;
#define PUT(k, v) { const unsigned char *s = (const unsigned char *)&(v); \
                    for (int j = 0; j < (int)sizeof(v); j++) out[16 * (k) + j] = s[j]; }
    PUT(0, p0) PUT(1, p1) PUT(2, p2) PUT(3, p3) PUT(4, p4) PUT(5, p5)
    PUT(6, p6) PUT(7, p7) PUT(8, p8) PUT(9, p9) PUT(10, p10)
#undef PUT
}

}
