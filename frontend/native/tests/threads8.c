/*
 * threads8: eight pthreads start together; each creates its own context (cuCtxCreate, current to
 * that thread only), its own stream and module, runs gpus_vector_add with async copies on its
 * stream, and a synchronous memcpy round trip of its own size; all checked. Each thread destroys
 * what it created; the main thread, which never had a context, destroys nothing and checks that
 * none is current to it. Results are printed in thread order after the join.
 * usage: threads8 KERNELS.ptx
 */
#include "common.h"

#include <pthread.h>

#define THREADS 8

static CUdevice device;
static unsigned char *ptx;
static pthread_barrier_t barrier;
static char lines[THREADS][160];

static void *worker(void *arg) {
    int t = (int) (intptr_t) arg;
    CUcontext ctx, cur;
    pthread_barrier_wait(&barrier);
    double t0 = now_ms();
    CHECK(cuCtxCreate(&ctx, NULL, 0, device));
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != ctx) {
        fail("thread %d: cuCtxCreate did not make the new context current", t);
    }
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, ptx));
    CUfunction add = get_function(mod, "gpus_vector_add");

    /* Vector add, its own size, copies queued on its own stream. */
    unsigned int n = 65536 + 1000 * (unsigned int) t + (unsigned int) t;
    size_t bytes = 4 * (size_t) n;
    float *a, *b, *c;
    CHECK(cuMemAllocHost((void **) &a, bytes));
    CHECK(cuMemAllocHost((void **) &b, bytes));
    CHECK(cuMemAllocHost((void **) &c, bytes));
    uint64_t seed = 100 + (uint64_t) t;
    for (unsigned int i = 0; i < n; i++) {
        a[i] = next_unit_float(&seed);
        b[i] = (float) t + next_unit_float(&seed);
    }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoDAsync(da, a, bytes, s));
    CHECK(cuMemcpyHtoDAsync(db, b, bytes, s));
    void *params[] = {&da, &db, &dc, &n};
    CHECK(cuLaunchKernel(add, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
    CHECK(cuMemcpyDtoHAsync(c, dc, bytes, s));
    CHECK(cuStreamSynchronize(s));
    for (unsigned int i = 0; i < n; i++) {
        float want = a[i] + b[i];
        if (memcmp(&c[i], &want, 4) != 0) {
            fail("thread %d: c[%u] = %.9g, expected %.9g", t, i, c[i], want);
        }
    }
    uint64_t addHash = fnv1a(FNV_INIT, c, bytes);

    /* Synchronous round trip of 1 MiB + t bytes. */
    size_t m = ((size_t) 1 << 20) + (size_t) t;
    unsigned char *src = xmalloc(m), *back = xmalloc(m);
    fill_bytes(src, m, 1000 + (uint64_t) t);
    CUdeviceptr dm;
    CHECK(cuMemAlloc(&dm, m));
    CHECK(cuMemcpyHtoD(dm, src, m));
    memset(back, 0, m);
    CHECK(cuMemcpyDtoH(back, dm, m));
    if (memcmp(src, back, m) != 0) {
        fail("thread %d: the %zu-byte round trip differs", t, m);
    }

    CUdevice d;
    CHECK(cuCtxGetDevice(&d));
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != ctx || d != device) {
        fail("thread %d: its context is no longer current", t);
    }
    snprintf(lines[t], sizeof lines[t], "thread %d: vector_add of %u floats ok, fnv %016llx; round trip of %zu bytes ok", t,
             n, (unsigned long long) addHash, m);

    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuMemFree(dm));
    CHECK(cuMemFreeHost(a));
    CHECK(cuMemFreeHost(b));
    CHECK(cuMemFreeHost(c));
    CHECK(cuModuleUnload(mod));
    CHECK(cuStreamDestroy(s));
    CHECK(cuCtxDestroy(ctx));
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != NULL) {
        fail("thread %d: a context is current after destroying its own", t);
    }
    free(src);
    free(back);
    fprintf(stderr, "thread %d: %.1f ms\n", t, now_ms() - t0);
    return NULL;
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "threads8 KERNELS.ptx");
    double t0 = now_ms();
    size_t size;
    ptx = read_file(argv[1], &size, 1);
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    if (pthread_barrier_init(&barrier, NULL, THREADS) != 0) {
        fail("pthread_barrier_init failed");
    }
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, worker, (void *) (intptr_t) t) != 0) {
            fail("pthread_create failed");
        }
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
    }
    pthread_barrier_destroy(&barrier);
    for (int t = 0; t < THREADS; t++) {
        printf("%s\n", lines[t]);
    }
    CUcontext cur = (CUcontext) 1;
    CHECK(cuCtxGetCurrent(&cur));
    if (cur != NULL) {
        fail("a context is current to the main thread, which made none");
    }
    printf("main thread: no context current, none destroyed\n");
    free(ptx);
    fprintf(stderr, "threads8: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
