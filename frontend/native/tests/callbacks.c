/*
 * callbacks: cuStreamAddCallback and cuLaunchHostFunc run after the work queued before them (a
 * 100 ms kernel, an async memset and a DtoH copy into pinned memory whose data the host function
 * reads), in the order they were queued, once each, with their userData (and, for stream
 * callbacks, their stream and CUDA_SUCCESS). Also on the legacy default stream.
 * usage: callbacks KERNELS.ptx
 */
#include "common.h"

#include <stdatomic.h>

#define CALLS 5
#define WORDS 4096
#define MS 1000000ULL

struct call {
    int index;            /* the order it was queued in */
    int order;            /* the order it ran in (1-based), 0 until it ran */
    int runs;
    CUstream stream;      /* stream callbacks: the stream they were queued on */
    CUstream gotStream;
    CUresult gotStatus;
    double atMs;          /* when it ran, from the start */
    uint32_t sawWord;     /* host functions: a word of the pinned buffer, as seen when it ran */
};

static atomic_int ran;
static struct call calls[CALLS];
static uint32_t *pinned;
static double start;

static void record(struct call *c) {
    c->runs++;
    c->order = atomic_fetch_add(&ran, 1) + 1;
    c->atMs = now_ms() - start;
}

static void CUDA_CB stream_callback(CUstream hStream, CUresult status, void *userData) {
    struct call *c = userData;
    c->gotStream = hStream;
    c->gotStatus = status;
    c->sawWord = pinned[WORDS - 1];
    record(c);
}

static void CUDA_CB host_function(void *userData) {
    struct call *c = userData;
    c->sawWord = pinned[WORDS - 1];
    record(c);
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "callbacks KERNELS.ptx");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_ptx_module(argv[1]);
    CUfunction sleep_fn = get_function(mod, "gpus_sleep");
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr buf;
    CHECK(cuMemAlloc(&buf, 4 * WORDS));
    CHECK(cuMemAllocHost((void **) &pinned, 4 * WORDS));
    memset(pinned, 0, 4 * WORDS);
    for (int i = 0; i < CALLS; i++) {
        calls[i].index = i;
    }

    start = now_ms();
    unsigned long long ns = 100 * MS;
    void *params[] = {&ns};
    CHECK(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
    CHECK(cuMemsetD32Async(buf, 0x11111111u, WORDS, s));
    CHECK(cuMemcpyDtoHAsync(pinned, buf, 4 * WORDS, s));
    calls[0].stream = s;
    CHECK(cuStreamAddCallback(s, stream_callback, &calls[0], 0));
    CHECK(cuLaunchHostFunc(s, host_function, &calls[1]));
    CHECK(cuMemsetD32Async(buf, 0x22222222u, WORDS, s));
    CHECK(cuMemcpyDtoHAsync(pinned, buf, 4 * WORDS, s));
    CHECK(cuLaunchHostFunc(s, host_function, &calls[2]));
    calls[3].stream = s;
    CHECK(cuStreamAddCallback(s, stream_callback, &calls[3], 0));
    CHECK(cuStreamSynchronize(s));

    /* The legacy default stream. */
    CHECK(cuMemsetD32Async(buf, 0x33333333u, WORDS, NULL));
    CHECK(cuMemcpyDtoHAsync(pinned, buf, 4 * WORDS, NULL));
    CHECK(cuLaunchHostFunc(NULL, host_function, &calls[4]));
    CHECK(cuCtxSynchronize());

    const uint32_t words[CALLS] = {0x11111111u, 0x11111111u, 0x22222222u, 0x22222222u, 0x33333333u};
    for (int i = 0; i < CALLS; i++) {
        struct call *c = &calls[i];
        int isCallback = i == 0 || i == 3;
        fprintf(stderr, "call %d ran %.1f ms after the 100 ms kernel was queued\n", i, c->atMs);
        if (c->runs != 1) {
            fail("call %d ran %d times", i, c->runs);
        }
        if (c->order != i + 1) {
            fail("call %d ran as number %d", i, c->order);
        }
        if (c->atMs < 95.0) {
            fail("call %d ran %.1f ms after the launch, before the 100 ms kernel ended", i, c->atMs);
        }
        if (c->sawWord != words[i]) {
            fail("call %d saw 0x%08x in pinned memory, expected 0x%08x (the copy queued before it)", i, c->sawWord, words[i]);
        }
        if (isCallback && (c->gotStream != c->stream || c->gotStatus != CUDA_SUCCESS)) {
            fail("callback %d got the wrong stream or status %d", i, (int) c->gotStatus);
        }
        printf("%s %d: ran once, in order, after the work before it, with its userData%s\n",
               isCallback ? "cuStreamAddCallback" : "cuLaunchHostFunc", i,
               isCallback ? ", its stream and CUDA_SUCCESS" : (i == 4 ? " (legacy default stream)" : ""));
    }
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree(buf));
    CHECK(cuStreamDestroy(s));
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "callbacks: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
