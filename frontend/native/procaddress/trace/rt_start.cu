// cudart start-up: time from main to the first cudaMalloc's return, then a launch and a sync.
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
__global__ void fill(float *p) { p[threadIdx.x] = threadIdx.x; }
int main() {
    auto t0 = std::chrono::steady_clock::now();
    float *d = nullptr;
    cudaError_t e = cudaMalloc(&d, 1024);
    auto t1 = std::chrono::steady_clock::now();
    fill<<<1, 32>>>(d);
    cudaError_t s = cudaDeviceSynchronize();
    auto t2 = std::chrono::steady_clock::now();
    float h[32];
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("cudaMalloc %s after %.1f ms; launch+sync %s %.3f ms; h[31]=%g\n", cudaGetErrorName(e),
           std::chrono::duration<double, std::milli>(t1 - t0).count(), cudaGetErrorName(s),
           std::chrono::duration<double, std::milli>(t2 - t1).count(), h[31]);
    return e == cudaSuccess && s == cudaSuccess ? 0 : 1;
}
