// Streams and events through the runtime API: a blocking and a non-blocking stream, pinned host
// memory (cudaMallocHost, cudaHostAlloc), async copies and memsets queued behind a slow kernel keep
// stream order, events (record, query, synchronize, elapsed time), cudaStreamWaitEvent between
// streams, host functions in stream order, cudaStreamQuery and cudaDeviceSynchronize. Built with the
// default (legacy) stream and with --default-stream per-thread (the _ptsz/_ptds entry points).
#include "common.cuh"

// Spins about `ms` milliseconds of device time (clock64 at the device's rate), then writes v.
__global__ void slow_fill(int *p, int n, int v, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        p[i] = v;
    }
}

__global__ void add_one(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] += 1;
    }
}

struct host_note {
    int *pinned;
    int seen;
    int calls;
};

static void CUDART_CB note(void *arg) {
    struct host_note *h = (struct host_note *) arg;
    h->seen = h->pinned[0];
    h->calls++;
}

int main() {
    int rate_khz = 0;
    CK(cudaDeviceGetAttribute(&rate_khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long) rate_khz * 30; // about 30 ms
    cudaStream_t s1, s2;
    CK(cudaStreamCreate(&s1));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    unsigned int flags = 0;
    CK(cudaStreamGetFlags(s2, &flags));
    printf("non-blocking flag: %u\n", flags & cudaStreamNonBlocking);
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    printf("priority range known: %d\n", lo >= hi);

    const int n = 1 << 16;
    int *d1, *d2, *pinned, *mapped;
    CK(cudaMalloc(&d1, n * sizeof(int)));
    CK(cudaMalloc(&d2, n * sizeof(int)));
    CK(cudaMallocHost(&pinned, n * sizeof(int)));
    CK(cudaHostAlloc(&mapped, n * sizeof(int), cudaHostAllocDefault));
    for (int i = 0; i < n; i++) {
        pinned[i] = -1;
    }

    // s1: slow fill with 5, +1, copy out; all in order behind the slow kernel
    cudaEvent_t start, stop, done1;
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&stop));
    CK(cudaEventCreateWithFlags(&done1, cudaEventDisableTiming));
    CK(cudaEventRecord(start, s1));
    slow_fill<<<1, 256, 0, s1>>>(d1, n, 5, cycles);
    add_one<<<n / 256, 256, 0, s1>>>(d1, n);
    CK(cudaMemcpyAsync(pinned, d1, n * sizeof(int), cudaMemcpyDeviceToHost, s1));
    struct host_note h = {pinned, 0, 0};
    CK(cudaLaunchHostFunc(s1, note, &h));
    CK(cudaEventRecord(stop, s1));
    CK(cudaEventRecord(done1, s1));
    cudaError_t q = cudaStreamQuery(s1);
    fprintf(stderr, "stream query while busy: %s\n", cudaGetErrorName(q));

    // s2 waits for s1's work, then copies d1 to d2 and adds one more
    CK(cudaStreamWaitEvent(s2, done1, 0));
    CK(cudaMemcpyAsync(d2, d1, n * sizeof(int), cudaMemcpyDeviceToDevice, s2));
    add_one<<<n / 256, 256, 0, s2>>>(d2, n);
    CK(cudaMemsetAsync(d2, 0, 16 * sizeof(int), s2));
    CK(cudaMemcpyAsync(mapped, d2, n * sizeof(int), cudaMemcpyDeviceToHost, s2));

    CK(cudaEventSynchronize(stop));
    CK(cudaEventQuery(stop));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start, stop));
    fprintf(stderr, "elapsed %.2f ms\n", ms);
    printf("elapsed time positive: %d\n", ms > 0);
    printf("host function: calls %d, saw %d\n", h.calls, h.seen);
    for (int i = 0; i < n; i++) {
        if (pinned[i] != 6) {
            FAIL("s1: pinned[%d] = %d", i, pinned[i]);
        }
    }
    CK(cudaStreamSynchronize(s2));
    for (int i = 0; i < n; i++) {
        int want = i < 16 ? 0 : 7;
        if (mapped[i] != want) {
            FAIL("s2: mapped[%d] = %d, expected %d", i, mapped[i], want);
        }
    }
    printf("stream order kept: s1 %d, s2 %d\n", pinned[0], mapped[n - 1]);
    EXPECT("elapsed time of a timing-disabled event", cudaEventElapsedTime(&ms, start, done1), cudaErrorInvalidResourceHandle);

    // the default stream: a synchronous copy waits for work queued on it
    slow_fill<<<1, 256>>>(d1, n, 9, cycles / 2);
    CK(cudaMemcpy(pinned, d1, n * sizeof(int), cudaMemcpyDeviceToHost));
    printf("default stream: %d %d\n", pinned[0], pinned[n - 1]);

    // many small async operations, then one device-wide synchronize
    for (int k = 0; k < 200; k++) {
        add_one<<<n / 256, 256, 0, k % 2 ? s1 : s2>>>(k % 2 ? d1 : d2, n);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(pinned, d1, n * sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(mapped, d2, n * sizeof(int), cudaMemcpyDeviceToHost));
    printf("after 200 launches: %d %d %d\n", pinned[5], mapped[5], mapped[n - 1]);

    CK(cudaEventDestroy(start));
    CK(cudaEventDestroy(stop));
    CK(cudaEventDestroy(done1));
    CK(cudaStreamDestroy(s1));
    CK(cudaStreamDestroy(s2));
    CK(cudaFreeHost(pinned));
    CK(cudaFreeHost(mapped));
    CK(cudaFree(d1));
    CK(cudaFree(d2));
    printf("PASS\n");
    return 0;
}
