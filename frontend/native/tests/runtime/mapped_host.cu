// Mapped pinned host memory (issue 25 item 5): cudaHostAlloc(..., cudaHostAllocMapped), cudaHostGetDevicePointer,
// kernels reading and writing host memory through the device pointer, the CPU writing between launches and reading
// after cudaDeviceSynchronize. Each result equals a CPU reference. On a GPU with unified addressing the device
// pointer of such memory is its host pointer; GPUsockets gives the same (managed memory's machinery: the pages the CPU
// wrote go to the device before the next GPU work, and come back at the CPU's first touch after it). The pages this
// program moves are counted and printed to stderr as "managed expect: ..." (as managed.cu does).
#include "common.cuh"
#include <unistd.h>

// b[i] = a[i] * 3 + i, read and written through the device pointers of mapped host memory.
__global__ void triple(int n, const int *a, int *b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        b[i] = a[i] * 3 + i;
    }
}

// The whole array summed into *out (one block), so that a kernel also writes a scalar in mapped memory.
__global__ void sum(int n, const int *b, long long *out) {
    __shared__ long long part[256];
    long long s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        s += b[i];
    }
    part[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long t = 0;
        for (int k = 0; k < blockDim.x; k++) {
            t += part[k];
        }
        *out = t;
    }
}

static long page_size;

static long pages(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t) p;
    return (long) ((a + bytes - 1) / page_size - a / page_size + 1);
}

int main(void) {
    page_size = sysconf(_SC_PAGESIZE);
    long sent = 0, fetched = 0;
    int can_map = 0;
    CK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0));
    printf("can map host memory: %d\n", can_map);

    const int n = 300000;
    int *a, *b;
    long long *total;
    CK(cudaHostAlloc(&a, n * sizeof(int), cudaHostAllocMapped));
    CK(cudaHostAlloc(&b, n * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
    CK(cudaHostAlloc(&total, sizeof(long long), cudaHostAllocMapped));
    int *da, *db;
    long long *dtotal;
    CK(cudaHostGetDevicePointer((void **) &da, a, 0));
    CK(cudaHostGetDevicePointer((void **) &db, b, 0));
    CK(cudaHostGetDevicePointer((void **) &dtotal, total, 0));
    printf("device pointer is the host pointer: %s\n", da == a && db == b && dtotal == total ? "yes" : "no");
    unsigned int flags = 0;
    CK(cudaHostGetFlags(&flags, b));
    printf("flags: mapped %d portable %d\n", (flags & cudaHostAllocMapped) != 0, (flags & cudaHostAllocPortable) != 0);
    cudaPointerAttributes attrs;
    CK(cudaPointerGetAttributes(&attrs, a + 10));
    printf("pointer type: %s, device pointer %s, host pointer %s\n",
           attrs.type == cudaMemoryTypeHost ? "host" : attrs.type == cudaMemoryTypeManaged ? "managed" : "other",
           attrs.devicePointer == (void *) (a + 10) ? "same" : "different",
           attrs.hostPointer == (void *) (a + 10) ? "same" : "different");

    uint64_t seed = 33;
    for (int round = 0; round < 3; round++) {
        // the CPU writes a (round 0: fresh pages; later: pages it read back after the last round, present here)
        for (int i = 0; i < n; i++) {
            a[i] = (int) (splitmix64(&seed) % 100000) - 50000;
        }
        sent += pages(a, n * sizeof(int));
        triple<<<(n + 255) / 256, 256>>>(n, da, db);
        CK(cudaGetLastError());
        sum<<<1, 256>>>(n, db, dtotal);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        long long want = 0;
        for (int i = 0; i < n; i++) {
            int expect = a[i] * 3 + i;
            if (b[i] != expect) {
                FAIL("round %d: b[%d] = %d, expected %d", round, i, b[i], expect);
            }
            want += expect;
        }
        fetched += pages(a, n * sizeof(int)) + pages(b, n * sizeof(int)) + pages(total, sizeof(long long));
        printf("round %d: n=%d sum=%lld %s\n", round, n, *total, *total == want ? "ok" : "WRONG");
        if (*total != want) {
            FAIL("round %d: sum %lld, expected %lld", round, *total, want);
        }
    }

    // a copy from mapped host memory to device memory (b is fetched for it: the copy is GPU work, after which every page
    // counts as the device's), and back into mapped host memory (a is fetched and then written by the copy), then the
    // CPU reads both (b once more)
    int *dev;
    CK(cudaMalloc(&dev, n * sizeof(int)));
    CK(cudaMemcpy(dev, b, n * sizeof(int), cudaMemcpyHostToDevice));
    triple<<<(n + 255) / 256, 256>>>(n, dev, dev);
    CK(cudaGetLastError());
    CK(cudaMemcpy(a, dev, n * sizeof(int), cudaMemcpyDeviceToHost));
    fetched += 2 * pages(b, n * sizeof(int)) + pages(a, n * sizeof(int));
    for (int i = 0; i < n; i++) {
        if (a[i] != b[i] * 3 + i) {
            FAIL("copy: a[%d] = %d, expected %d", i, a[i], b[i] * 3 + i);
        }
    }
    printf("copies: ok\n");
    CK(cudaFree(dev));
    CK(cudaFreeHost(a));
    CK(cudaFreeHost(b));
    CK(cudaFreeHost(total));
    fprintf(stderr, "managed expect: pages_sent=%ld pages_fetched=%ld\n", sent, fetched);
    printf("PASS\n");
    return 0;
}
