// Managed memory attached to streams and to the host (issue 25, item 3): cudaStreamAttachMemAsync narrows what a
// kernel launch must make coherent. a is attached to stream s, b to stream t, h is allocated attached to the host
// (cudaMemAttachHost) and never used by a kernel. While s's kernel runs, the CPU writes b and reads h (allowed on a
// GPU without concurrent managed access: neither is associated with s). The pages this program expects to move are
// printed to stderr as "managed expect: ..." for the test to compare with the frontend's count
// (GPUSOCKETS_MANAGED_STATS=1): a's and b's written pages go to the device once each, at their own stream's launch;
// a's and b's pages come back once each when the CPU reads them after that launch; h never moves.
#include "common.cuh"
#include <unistd.h>

__global__ void scale(int n, int *v, int factor) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        v[i] = v[i] * factor + i % 7;
    }
}

static long page_size;

// Guest pages covered by [p, p + bytes).
static long pages(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t) p;
    return (long) ((a + bytes - 1) / page_size - a / page_size + 1);
}

int main(void) {
    page_size = sysconf(_SC_PAGESIZE);
    long sent = 0, fetched = 0;
    const int n = 100000;
    const size_t bytes = n * sizeof(int);
    cudaStream_t s, t;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    int *a, *b, *h;
    CK(cudaMallocManaged(&a, bytes));
    CK(cudaMallocManaged(&b, bytes));
    CK(cudaMallocManaged(&h, bytes, cudaMemAttachHost));
    CK(cudaStreamAttachMemAsync(s, a, 0, cudaMemAttachSingle));
    CK(cudaStreamAttachMemAsync(t, b, 0, cudaMemAttachSingle));
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamSynchronize(t));
    for (int i = 0; i < n; i++) {
        a[i] = i;
        b[i] = 2 * i;
        h[i] = 3 * i;
    }

    // s's kernel uses a; meanwhile the CPU writes b (t's) and reads h (the host's)
    scale<<<(n + 255) / 256, 256, 0, s>>>(n, a, 2);
    CK(cudaGetLastError());
    sent += pages(a, bytes);
    long long hs = 0;
    for (int i = 0; i < n; i++) {
        b[i] += 1;
        hs += h[i];
    }
    CK(cudaStreamSynchronize(s));
    long long as = 0;
    for (int i = 0; i < n; i++) {
        if (a[i] != i * 2 + i % 7) {
            FAIL("a[%d] = %d, expected %d", i, a[i], i * 2 + i % 7);
        }
        as += a[i];
    }
    fetched += pages(a, bytes);
    printf("a (stream s): n=%d sum=%lld ok\n", n, as);

    // t's kernel uses b, with the CPU's writes made while s's kernel ran
    scale<<<(n + 255) / 256, 256, 0, t>>>(n, b, 3);
    CK(cudaGetLastError());
    sent += pages(b, bytes);
    CK(cudaStreamSynchronize(t));
    long long bs = 0;
    for (int i = 0; i < n; i++) {
        int expect = (2 * i + 1) * 3 + i % 7;
        if (b[i] != expect) {
            FAIL("b[%d] = %d, expected %d", i, b[i], expect);
        }
        bs += b[i];
    }
    fetched += pages(b, bytes);
    printf("b (stream t): n=%d sum=%lld ok\n", n, bs);
    for (int i = 0; i < n; i++) {
        if (h[i] != 3 * i) {
            FAIL("h[%d] = %d, expected %d", i, h[i], 3 * i);
        }
    }
    printf("h (host): n=%d sum=%lld ok\n", n, hs);

    CK(cudaStreamDestroy(s));
    CK(cudaStreamDestroy(t));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(h));
    fprintf(stderr, "managed expect: pages_sent=%ld pages_fetched=%ld\n", sent, fetched);
    printf("PASS\n");
    return 0;
}
