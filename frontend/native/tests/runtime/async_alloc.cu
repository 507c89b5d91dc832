// Stream-ordered allocation through the runtime API: cudaMallocAsync/cudaFreeAsync on two streams,
// the device's default pool and its attributes, a pool of the program's own (cudaMemPoolCreate,
// cudaMallocFromPoolAsync, release threshold, trim), results checked against the CPU.
#include "common.cuh"

__global__ void iota(unsigned int *p, int n, unsigned int base) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = base + (unsigned int) i * 3u;
    }
}

static int check(const unsigned int *h, int n, unsigned int base) {
    for (int i = 0; i < n; i++) {
        if (h[i] != base + (unsigned int) i * 3u) {
            return 0;
        }
    }
    return 1;
}

int main() {
    int supported = 0;
    CK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
    printf("memory pools supported: %d\n", supported);
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    const int n = 1 << 18;
    unsigned int *h = (unsigned int *) malloc(n * sizeof(unsigned int));
    // the default pool, on two streams, allocations freed and made again in stream order
    for (int round = 0; round < 3; round++) {
        unsigned int *a, *b;
        CK(cudaMallocAsync(&a, n * sizeof(unsigned int), s1));
        CK(cudaMallocAsync(&b, n * sizeof(unsigned int), s2));
        iota<<<n / 256, 256, 0, s1>>>(a, n, 100u * round);
        iota<<<n / 256, 256, 0, s2>>>(b, n, 7u + round);
        CK(cudaMemcpyAsync(h, a, n * sizeof(unsigned int), cudaMemcpyDeviceToHost, s1));
        CK(cudaStreamSynchronize(s1));
        int oka = check(h, n, 100u * round);
        CK(cudaMemcpyAsync(h, b, n * sizeof(unsigned int), cudaMemcpyDeviceToHost, s2));
        CK(cudaStreamSynchronize(s2));
        int okb = check(h, n, 7u + round);
        CK(cudaFreeAsync(a, s1));
        CK(cudaFreeAsync(b, s2));
        printf("round %d: %d %d\n", round, oka, okb);
    }
    CK(cudaStreamSynchronize(s1));
    CK(cudaStreamSynchronize(s2));
    cudaMemPool_t def;
    CK(cudaDeviceGetDefaultMemPool(&def, 0));
    uint64_t threshold = 0;
    CK(cudaMemPoolGetAttribute(def, cudaMemPoolAttrReleaseThreshold, &threshold));
    printf("default pool release threshold: %llu\n", (unsigned long long) threshold);
    // a pool of our own
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = 64ull << 20;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    printf("own pool release threshold: %llu MiB\n", (unsigned long long) (threshold >> 20));
    unsigned int *c;
    CK(cudaMallocFromPoolAsync(&c, n * sizeof(unsigned int), pool, s1));
    iota<<<n / 256, 256, 0, s1>>>(c, n, 42u);
    CK(cudaMemcpyAsync(h, c, n * sizeof(unsigned int), cudaMemcpyDeviceToHost, s1));
    CK(cudaFreeAsync(c, s1));
    CK(cudaStreamSynchronize(s1));
    printf("own pool allocation: %d\n", check(h, n, 42u));
    uint64_t used = 1;
    CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
    printf("own pool in use after the free: %llu\n", (unsigned long long) used);
    CK(cudaMemPoolTrimTo(pool, 0));
    CK(cudaMemPoolDestroy(pool));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    free(h);
    printf("PASS\n");
    return 0;
}
