// Error paths of the runtime API through the driver underneath: each must give the error a GPU
// gives, and the runtime must go on working afterwards.
#include "common.cuh"

__global__ void touch(int *p) {
    p[threadIdx.x] = threadIdx.x;
}

int main() {
    int *d = NULL;
    CK(cudaMalloc(&d, 1024 * sizeof(int)));
    // a launch with too many threads per block is refused, and the error is not sticky
    touch<<<1, 4096>>>(d);
    EXPECT("launch of 4096 threads per block", cudaGetLastError(), cudaErrorInvalidConfiguration);
    EXPECT("after reading it", cudaGetLastError(), cudaSuccess);
    touch<<<1, 64, 1 << 30>>>(d);
    EXPECT("launch asking for 1 GiB of shared memory", cudaPeekAtLastError(), cudaErrorInvalidValue);
    EXPECT("peek does not clear it", cudaGetLastError(), cudaErrorInvalidValue);
    // an allocation far beyond the device's memory
    void *huge = NULL;
    EXPECT("cudaMalloc of 1 PiB", cudaMalloc(&huge, (size_t) 1 << 50), cudaErrorMemoryAllocation);
    EXPECT("the allocation error is cleared by cudaGetLastError", cudaGetLastError(), cudaErrorMemoryAllocation);
    // freeing what was never allocated, copying past an allocation's end
    EXPECT("cudaFree of a pointer inside an allocation", cudaFree(d + 1), cudaErrorInvalidValue);
    cudaGetLastError();
    int host[2048];
    EXPECT("cudaMemcpy past the allocation's end", cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost),
           cudaErrorInvalidValue);
    cudaGetLastError();
    EXPECT("cudaSetDevice of a missing device", cudaSetDevice(99), cudaErrorInvalidDevice);
    cudaGetLastError();
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    CK(cudaStreamDestroy(s));
    EXPECT("cudaEventRecord on a NULL event", cudaEventRecord(NULL, 0), cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    // error names and strings come from cudart itself
    printf("names: %s %s %s\n", cudaGetErrorName(cudaErrorInvalidValue), cudaGetErrorName(cudaErrorIllegalAddress),
           cudaGetErrorName(cudaErrorLaunchFailure));
    // the device still works
    touch<<<1, 64>>>(d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(host, d, 64 * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) {
        if (host[i] != i) {
            FAIL("touch: %d at %d", host[i], i);
        }
    }
    printf("still works: %d\n", host[63]);
    CK(cudaFree(d));
    printf("PASS\n");
    return 0;
}
