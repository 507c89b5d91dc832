// Managed memory (issue 25), the way NVIDIA's introductions use it: cudaMallocManaged, the CPU writes,
// a kernel runs, cudaDeviceSynchronize, the CPU reads. Each result equals a CPU reference. The device
// attributes say managed memory without concurrent access (what GPUsockets offers; an H200 natively says
// concurrent access 1, so that line goes to stderr). The pages this program touches are counted and
// printed to stderr as "managed expect: ..." so that a test can compare them with what the frontend
// moved (GPUSOCKETS_MANAGED_STATS=1): pages the CPU wrote go to the device once, pages the CPU reads
// after GPU work come back once, and nothing else moves.
#include "common.cuh"
#include <unistd.h>

// "An Even Easier Introduction to CUDA": y = x + y with a grid-stride loop.
__global__ void add(int n, const float *x, float *y) {
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    int stride = blockDim.x * gridDim.x;
    for (int i = index; i < n; i += stride) {
        y[i] = x[i] + y[i];
    }
}

struct Node {
    long long value;
    Node *next;
};

// One thread walks the list the CPU built, by the pointers the CPU stored.
__global__ void walk(const Node *head, long long *sum, int *count) {
    long long s = 0;
    int c = 0;
    for (const Node *p = head; p != nullptr; p = p->next) {
        s += p->value;
        c++;
    }
    *sum = s;
    *count = c;
}

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
    uintptr_t first = a / page_size;
    uintptr_t last = (a + bytes - 1) / page_size;
    return (long) (last - first + 1);
}

int main(void) {
    page_size = sysconf(_SC_PAGESIZE);
    long sent = 0, fetched = 0;
    int managed = 0, concurrent = 0;
    CK(cudaDeviceGetAttribute(&managed, cudaDevAttrManagedMemory, 0));
    CK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, 0));
    printf("managed memory: %d\n", managed);
    fprintf(stderr, "concurrent managed access: %d\n", concurrent);

    // 1. the add of 1M floats
    const int n = 1 << 20;
    float *x, *y;
    CK(cudaMallocManaged(&x, n * sizeof(float)));
    CK(cudaMallocManaged(&y, n * sizeof(float)));
    cudaPointerAttributes attrs;
    CK(cudaPointerGetAttributes(&attrs, x));
    printf("pointer type: %s\n", attrs.type == cudaMemoryTypeManaged ? "managed" : "not managed");
    for (int i = 0; i < n; i++) {
        x[i] = 1.0f;
        y[i] = 2.0f;
    }
    sent += pages(x, n * sizeof(float)) + pages(y, n * sizeof(float));
    add<<<(n + 255) / 256, 256>>>(n, x, y);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float max_error = 0.0f;
    for (int i = 0; i < n; i++) {
        max_error = fmaxf(max_error, fabsf(y[i] - 3.0f));
    }
    fetched += pages(y, n * sizeof(float));
    printf("add: n=%d max_error=%g\n", n, max_error);
    if (max_error != 0.0f) {
        FAIL("add: max error %g", max_error);
    }

    // 2. a linked list built on the CPU in managed memory, walked by a kernel
    const int nodes = 1000;
    const size_t pool_bytes = 1 << 20;
    Node *pool;
    long long *sum;
    int *count;
    CK(cudaMallocManaged(&pool, pool_bytes));
    CK(cudaMallocManaged(&sum, sizeof(long long)));
    CK(cudaMallocManaged(&count, sizeof(int)));
    // the nodes lie in the first 1000 slots in a scattered order; the rest of the pool is never touched
    uint64_t seed = 25;
    long long want = 0;
    int order[nodes];
    for (int i = 0; i < nodes; i++) {
        order[i] = i;
    }
    for (int i = nodes - 1; i > 0; i--) {
        int j = (int) (splitmix64(&seed) % (uint64_t) (i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (int i = 0; i < nodes; i++) {
        Node *node = &pool[order[i]];
        node->value = (long long) (splitmix64(&seed) % 1000000);
        node->next = i + 1 < nodes ? &pool[order[i + 1]] : nullptr;
        want += node->value;
    }
    sent += pages(pool, nodes * sizeof(Node));
    walk<<<1, 1>>>(&pool[order[0]], sum, count);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    fetched += pages(sum, sizeof(long long)) + pages(count, sizeof(int));
    printf("list: nodes=%d sum=%lld %s\n", *count, *sum, *sum == want && *count == nodes ? "ok" : "WRONG");
    if (*sum != want || *count != nodes) {
        FAIL("list: sum %lld count %d, expected %lld %d", *sum, *count, want, nodes);
    }

    // 3. several streams, each with managed data of its own, all synchronised before the CPU reads
    const int streams = 4;
    const int m = 50000;
    cudaStream_t s[streams];
    int *v[streams];
    for (int k = 0; k < streams; k++) {
        CK(cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking));
        CK(cudaMallocManaged(&v[k], m * sizeof(int)));
        for (int i = 0; i < m; i++) {
            v[k][i] = i + k;
        }
        sent += pages(v[k], m * sizeof(int));
    }
    for (int k = 0; k < streams; k++) {
        scale<<<(m + 255) / 256, 256, 0, s[k]>>>(m, v[k], k + 2);
        CK(cudaGetLastError());
    }
    for (int k = 0; k < streams; k++) {
        CK(cudaStreamSynchronize(s[k]));
    }
    for (int k = 0; k < streams; k++) {
        long long total = 0;
        for (int i = 0; i < m; i++) {
            int expect = (i + k) * (k + 2) + i % 7;
            if (v[k][i] != expect) {
                FAIL("stream %d: v[%d] = %d, expected %d", k, i, v[k][i], expect);
            }
            total += v[k][i];
        }
        fetched += pages(v[k], m * sizeof(int));
        printf("stream %d: n=%d sum=%lld ok\n", k, m, total);
        CK(cudaStreamDestroy(s[k]));
        CK(cudaFree(v[k]));
    }

    // 4. x again, never touched since the add: advised read-mostly, prefetched to the CPU (GPUsockets fetches it at
    // the call), then read
    cudaMemLocation host = {};
    host.type = cudaMemLocationTypeHost;
    CK(cudaMemAdvise(x, n * sizeof(float), cudaMemAdviseSetReadMostly, host));
    CK(cudaMemPrefetchAsync(x, n * sizeof(float), host, 0, 0));
    CK(cudaStreamSynchronize(0));
    double xs = 0;
    for (int i = 0; i < n; i++) {
        xs += x[i];
    }
    fetched += pages(x, n * sizeof(float));
    printf("x: sum=%.0f\n", xs);

    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(pool));
    CK(cudaFree(sum));
    CK(cudaFree(count));
    fprintf(stderr, "managed expect: pages_sent=%ld pages_fetched=%ld\n", sent, fetched);
    printf("PASS\n");
    return 0;
}
