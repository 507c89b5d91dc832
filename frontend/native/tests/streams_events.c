/*
 * streams_events: two streams (one blocking, one CU_STREAM_NON_BLOCKING); async memsets and copies
 * between pinned host memory and the device queued behind gpus_sleep keep stream order; events are
 * recorded, synchronized, queried and timed (elapsed only checked > 0; its value goes to stderr);
 * cuStreamWaitEvent orders one stream after another; the legacy default stream waits for a
 * blocking stream; a non-blocking stream does not wait for a sleeping one; elapsed time with a
 * DISABLE_TIMING or unrecorded event fails with CUDA_ERROR_INVALID_HANDLE.
 * usage: streams_events KERNELS.ptx
 */
#include "common.h"

#define N (1u << 20) /* words in the device buffer */
#define MS 1000000ULL

static CUfunction sleep_fn;

static void sleep_on(CUstream s, unsigned long long ns) {
    void *params[] = {&ns};
    CHECK(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

static void expect_words(const uint32_t *got, const uint32_t *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fail("%s: word %zu is 0x%08x, expected 0x%08x", what, i, got[i], want[i]);
        }
    }
}

static void expect_all(const uint32_t *got, size_t from, size_t to, uint32_t v, const char *what) {
    for (size_t i = from; i < to; i++) {
        if (got[i] != v) {
            fail("%s: word %zu is 0x%08x, expected 0x%08x", what, i, got[i], v);
        }
    }
}

static const char *ready_name(CUresult r) {
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
        fail("a query returned %d %s, expected CUDA_SUCCESS or CUDA_ERROR_NOT_READY", (int) r, err_name(r));
    }
    return err_name(r);
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "streams_events KERNELS.ptx");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_ptx_module(argv[1]);
    sleep_fn = get_function(mod, "gpus_sleep");

    CUstream s1, s2;
    CHECK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent start, end, ev1, ev2, untimed, never;
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&end, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&ev1, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&ev2, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&never, CU_EVENT_DEFAULT));

    CUdeviceptr buf;
    CHECK(cuMemAlloc(&buf, 4 * N));
    uint32_t *host, *src;
    CHECK(cuMemAllocHost((void **) &host, 4 * N));
    CHECK(cuMemAllocHost((void **) &src, 4 * 5000));
    uint32_t *want = xmalloc(4 * N);

    /* 1. One stream: everything queued behind a 50 ms kernel runs in order; events around it. */
    for (uint32_t j = 0; j < 5000; j++) {
        src[j] = 3 * j + 1;
    }
    memset(host, 0, 4 * N);
    CHECK(cuEventRecord(start, s1));
    sleep_on(s1, 50 * MS);
    CHECK(cuMemsetD32Async(buf, 7, N, s1));
    CHECK(cuMemcpyHtoDAsync(buf + 4 * 1000, src, 4 * 5000, s1));
    CHECK(cuMemsetD16Async(buf + 4 * 20000, 0x1234, 10, s1));
    CHECK(cuMemsetD8Async(buf + 4 * N - 3, 0x99, 3, s1));
    CHECK(cuMemcpyDtoHAsync(host, buf, 4 * N, s1));
    CHECK(cuEventRecord(end, s1));
    fprintf(stderr, "cuEventQuery right after queuing: %s\n", ready_name(cuEventQuery(end)));
    CHECK(cuEventSynchronize(end));
    EXPECT("cuEventQuery after cuEventSynchronize", cuEventQuery(end), CUDA_SUCCESS);
    for (uint32_t i = 0; i < N; i++) {
        want[i] = 7;
    }
    memcpy(want + 1000, src, 4 * 5000);
    for (uint32_t i = 20000; i < 20005; i++) {
        want[i] = 0x12341234u;
    }
    memset((unsigned char *) want + 4 * N - 3, 0x99, 3);
    expect_words(host, want, N, "one stream");
    printf("one stream: sleep, memset D32/D16/D8, HtoD and DtoH ran in order, fnv %016llx\n",
           (unsigned long long) fnv1a(FNV_INIT, host, 4 * N));
    float ms = 0;
    CHECK(cuEventElapsedTime(&ms, start, end));
    fprintf(stderr, "elapsed between events around a 50 ms kernel: %.3f ms\n", ms);
    if (!(ms > 0)) {
        fail("cuEventElapsedTime gave %f ms, expected > 0", ms);
    }
    printf("cuEventElapsedTime: > 0\n");

    /* 2. cuStreamWaitEvent: s2 (non-blocking) waits for s1's sleep and memset before its own work. */
    CHECK(cuMemsetD32(buf, 0, N));
    sleep_on(s1, 100 * MS);
    CHECK(cuMemsetD32Async(buf, 1, N, s1));
    CHECK(cuEventRecord(ev1, s1));
    CHECK(cuStreamWaitEvent(s2, ev1, 0));
    CHECK(cuMemsetD32Async(buf + 4 * (N / 2), 2, N / 2, s2));
    CHECK(cuMemcpyDtoHAsync(host, buf, 4 * N, s2));
    CHECK(cuStreamSynchronize(s2));
    expect_all(host, 0, N / 2, 1, "cuStreamWaitEvent, first half (written by the first stream)");
    expect_all(host, N / 2, N, 2, "cuStreamWaitEvent, second half (written by the second stream)");
    printf("cuStreamWaitEvent: the second stream ran after the first stream's event\n");

    /* 3. The legacy default stream (a synchronous copy) waits for the blocking stream s1. */
    sleep_on(s1, 50 * MS);
    CHECK(cuMemsetD32Async(buf, 5, N, s1));
    CHECK(cuMemcpyDtoH(host, buf, 4 * N));
    expect_all(host, 0, N, 5, "synchronous copy after work on a blocking stream");
    printf("legacy default stream: a synchronous copy waited for the blocking stream\n");

    /* 4. A non-blocking stream does not wait for a sleeping one (timing-dependent: stderr only). */
    double t1 = now_ms();
    sleep_on(s1, 300 * MS);
    CHECK(cuEventRecord(ev2, s1));
    CHECK(cuMemsetD32Async(buf + 4 * 16, 9, 16, s2));
    CHECK(cuMemcpyDtoHAsync(host, buf, 4 * 64, s2));
    CHECK(cuStreamSynchronize(s2));
    double s2ms = now_ms() - t1;
    CUresult busyEvent = cuEventQuery(ev2), busyStream = cuStreamQuery(s1);
    fprintf(stderr, "non-blocking stream done after %.1f ms while the other sleeps 300 ms; event query %s, stream query %s\n",
            s2ms, ready_name(busyEvent), ready_name(busyStream));
    if (busyEvent == CUDA_SUCCESS) {
        fprintf(stderr, "warning: the sleeping stream had finished already (slow machine?)\n");
    }
    expect_all(host, 0, 16, 5, "non-blocking stream, words before its memset");
    expect_all(host, 16, 32, 9, "non-blocking stream, its memset");
    expect_all(host, 32, 64, 5, "non-blocking stream, words after its memset");
    CHECK(cuStreamSynchronize(s1));
    EXPECT("cuStreamQuery after cuStreamSynchronize", cuStreamQuery(s1), CUDA_SUCCESS);
    EXPECT("cuEventQuery of its last event", cuEventQuery(ev2), CUDA_SUCCESS);
    CHECK(cuEventElapsedTime(&ms, ev1, ev2));
    fprintf(stderr, "elapsed from part 2 to part 4: %.3f ms\n", ms);
    printf("non-blocking stream: its work completed while the other stream slept\n");

    /* 5. Elapsed time needs two recorded timing events. */
    CHECK(cuEventRecord(untimed, s1));
    CHECK(cuEventSynchronize(untimed));
    EXPECT("cuEventElapsedTime with a DISABLE_TIMING event", cuEventElapsedTime(&ms, start, untimed),
           CUDA_ERROR_INVALID_HANDLE);
    EXPECT("cuEventElapsedTime with an unrecorded event", cuEventElapsedTime(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);

    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(end));
    CHECK(cuEventDestroy(ev1));
    CHECK(cuEventDestroy(ev2));
    CHECK(cuEventDestroy(untimed));
    CHECK(cuEventDestroy(never));
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    CHECK(cuMemFreeHost(host));
    CHECK(cuMemFreeHost(src));
    CHECK(cuMemFree(buf));
    CHECK(cuModuleUnload(mod));
    free(want);
    release_primary_context(dev);
    fprintf(stderr, "streams_events: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
