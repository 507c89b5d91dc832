// cudaMemcpyBatchAsync (CUDA 12.8+, the CUDA 13 form) on a stream of its own: a batch uploading from
// pageable and from pinned memory, then one of device-to-device copies at offsets and a download, each
// under two attribute groups (stream-ordered sources, then sources read during the call), then a
// third batch after a kernel that depends on them; every byte equals the CPU's. A batch on
// the legacy stream and attributes that leave copies uncovered are refused (cudaErrorInvalidValue).
#include "common.cuh"

__global__ void add_index(unsigned int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] += (unsigned int) i;
    }
}

int main() {
    const int n = 10007;
    const size_t bytes = n * sizeof(unsigned int);
    unsigned int *h = (unsigned int *) malloc(bytes), *pinned, *back = (unsigned int *) malloc(bytes);
    unsigned int *back2 = (unsigned int *) malloc(bytes);
    CK(cudaMallocHost(&pinned, bytes));
    uint64_t seed = 5;
    for (int i = 0; i < n; i++) {
        h[i] = (unsigned int) splitmix64(&seed);
        pinned[i] = (unsigned int) splitmix64(&seed);
    }
    unsigned int *a, *b, *c;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMalloc(&c, bytes));
    CK(cudaMemset(c, 0, bytes));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // batch 1 uploads a and b; batch 2 (copies in a batch may run in any order, so it only reads what
    // batch 1 wrote) fills pieces of c from them and downloads b
    void *up[2] = {a, b};
    const void *upSrc[2] = {h, pinned};
    size_t upSizes[2] = {bytes, bytes};
    cudaMemcpyAttributes attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attrs[1].srcAccessOrder = cudaMemcpySrcAccessOrderDuringApiCall;
    size_t idx[2] = {0, 1};
    CK(cudaMemcpyBatchAsync(up, upSrc, upSizes, 2, attrs, idx, 2, s));
    void *dsts[4] = {c + 1000, c, c + 9000, back};
    const void *srcs[4] = {a, b + 17, a + 3, b};
    size_t sizes[4] = {5000 * sizeof(unsigned int), 100 * sizeof(unsigned int), 1000 * sizeof(unsigned int), bytes};
    size_t idx4[2] = {0, 3};
    CK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 4, attrs, idx4, 2, s));
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++) {
        if (back[i] != pinned[i]) {
            FAIL("batch 2: back[%d] = %u, expected %u", i, back[i], pinned[i]);
        }
    }
    CK(cudaMemcpy(back2, c, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        unsigned int want = 0;
        if (i < 100) {
            want = pinned[17 + i];
        } else if (i >= 1000 && i < 6000) {
            want = h[i - 1000];
        } else if (i >= 9000 && i < 10000) {
            want = h[3 + i - 9000];
        }
        if (back2[i] != want) {
            FAIL("batch 2: c[%d] = %u, expected %u", i, back2[i], want);
        }
    }
    printf("batches of 2 and 4 copies (HtoD from pageable and pinned memory, DtoD at offsets, DtoH), 2 attribute groups each: equal to the CPU's\n");

    // a kernel on the stream, then batch 3 reads its result back in two halves
    add_index<<<(n + 255) / 256, 256, 0, s>>>(a, n);
    CK(cudaGetLastError());
    void *dsts2[2] = {back, back + n / 2};
    const void *srcs2[2] = {a, a + n / 2};
    size_t sizes2[2] = {(n / 2) * sizeof(unsigned int), (n - n / 2) * sizeof(unsigned int)};
    size_t idx2[1] = {0};
    CK(cudaMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, attrs, idx2, 1, s));
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++) {
        if (back[i] != h[i] + (unsigned int) i) {
            FAIL("batch 3: back[%d] = %u, expected %u", i, back[i], h[i] + (unsigned int) i);
        }
    }
    printf("batch after a kernel in stream order: equal to the CPU's, fnv %016llx\n", (unsigned long long) fnv1a(back, bytes));

    EXPECT("a batch on the legacy stream", cudaMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, attrs, idx2, 1, 0), cudaErrorInvalidValue);
    size_t badIdx[2] = {1, 0};
    EXPECT("attributes that do not start at copy 0", cudaMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, attrs, badIdx, 1, s),
           cudaErrorInvalidValue);
    cudaMemcpyAttributes invalid;
    memset(&invalid, 0, sizeof invalid);
    EXPECT("an invalid source access order", cudaMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, &invalid, idx2, 1, s),
           cudaErrorInvalidValue);

    CK(cudaStreamDestroy(s));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFreeHost(pinned));
    free(h);
    free(back);
    free(back2);
    printf("PASS\n");
    return 0;
}
