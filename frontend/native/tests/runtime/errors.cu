// Error paths of the runtime API through the driver underneath. Each line prints the error the
// call gave (stdout): the golden file holds what the H200 gives, so a remote driver must give the
// same; the runtime must go on working afterwards (checked).
#include "common.cuh"

__global__ void touch(int *p) {
    p[threadIdx.x] = threadIdx.x;
}

#define REPORT(label, call)                                              \
    do {                                                                 \
        cudaError_t report_e_ = (call);                                  \
        printf("%s: %s\n", (label), cudaGetErrorName(report_e_));        \
    } while (0)

int main() {
    int *d = NULL;
    CK(cudaMalloc(&d, 1024 * sizeof(int)));
    // launches the device refuses; the errors are not sticky
    touch<<<1, 4096>>>(d);
    REPORT("launch of 4096 threads per block", cudaGetLastError());
    REPORT("after reading it", cudaGetLastError());
    touch<<<1, 64, 1 << 30>>>(d);
    REPORT("launch asking for 1 GiB of shared memory (peek)", cudaPeekAtLastError());
    REPORT("launch asking for 1 GiB of shared memory (get)", cudaGetLastError());
    touch<<<dim3(1, 1 << 17), 32>>>(d);
    REPORT("grid y of 2^17", cudaGetLastError());
    // an allocation far beyond the device's memory
    void *huge = NULL;
    REPORT("cudaMalloc of 1 PiB", cudaMalloc(&huge, (size_t) 1 << 50));
    REPORT("then cudaGetLastError", cudaGetLastError());
    // freeing what was never allocated, copying past an allocation's end
    REPORT("cudaFree of a pointer inside an allocation", cudaFree(d + 1));
    cudaGetLastError();
    int host[2048];
    REPORT("cudaMemcpy past the allocation's end", cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost));
    cudaGetLastError();
    REPORT("cudaMemset past the allocation's end", cudaMemset(d + 1000, 0, 4096));
    cudaGetLastError();
    REPORT("cudaSetDevice of a missing device", cudaSetDevice(99));
    cudaGetLastError();
    cudaDeviceProp prop;
    REPORT("cudaGetDeviceProperties of a missing device", cudaGetDeviceProperties(&prop, 99));
    cudaGetLastError();
    REPORT("cudaEventRecord on a NULL event", cudaEventRecord(NULL, 0));
    cudaGetLastError();
    cudaEvent_t e;
    CK(cudaEventCreate(&e));
    REPORT("cudaEventQuery of an event never recorded", cudaEventQuery(e));
    float ms = 0;
    REPORT("cudaEventElapsedTime of unrecorded events", cudaEventElapsedTime(&ms, e, e));
    cudaGetLastError();
    CK(cudaEventDestroy(e));
    REPORT("cudaFuncGetAttributes of a host function", cudaFuncGetAttributes(NULL, (const void *) main));
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
