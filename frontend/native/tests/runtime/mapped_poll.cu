// A kernel polling mapped pinned host memory that the CPU writes while the kernel runs (how NVIDIA's bandwidth
// samples wait for a host flag). On a GPU the kernel sees the CPU's write and the program prints "flag seen" and PASS.
// Through GPUsockets the device sees CPU writes to mapped memory only at the next launch or copy, so this cannot work:
// the frontend says so once on stderr and the kernel's bounded spin ends with the flag unseen (the program fails as it
// says), or with GPUSOCKETS_MAPPED_POLLING=exit it ends the program at the CPU's write (exit 1), never silently wrong
// data. Not in programs.list (its remote result is a failure by design): MappedHostMemoryTest runs it.
#include "common.cuh"
#include <unistd.h>

// Spins until the host sets *flag (bounded, so that nothing spins forever where the write never comes).
__global__ void wait_for_host(volatile int *flag, int *seen) {
    long long spins = 0;
    while (*flag == 0 && spins < (1LL << 24)) {
        spins++;
    }
    *seen = *flag;
}

int main(void) {
    int *flag, *seen;
    CK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
    CK(cudaHostAlloc(&seen, sizeof(int), cudaHostAllocMapped));
    *flag = 0;
    *seen = -1;
    int *dflag, *dseen;
    CK(cudaHostGetDevicePointer((void **) &dflag, flag, 0));
    CK(cudaHostGetDevicePointer((void **) &dseen, seen, 0));
    wait_for_host<<<1, 1>>>(dflag, dseen);
    CK(cudaGetLastError());
    usleep(10000);
    *(volatile int *) flag = 1; // the kernel is spinning on it
    CK(cudaDeviceSynchronize());
    printf("flag %s\n", *seen == 1 ? "seen" : "NOT seen");
    if (*seen != 1) {
        FAIL("the kernel did not see the host's write (%d)", *seen);
    }
    CK(cudaFreeHost(flag));
    CK(cudaFreeHost(seen));
    printf("PASS\n");
    return 0;
}
