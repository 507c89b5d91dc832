/*
 * copies: small and medium host<->device copies through whatever libcuda.so.1 the loader finds (the real
 * driver, or GPUsockets' frontend), for bench copies (CopiesBench). For every size given, HtoD and DtoH,
 * from pageable (malloc) and pinned (cuMemAllocHost) host memory, synchronous (cuMemcpyHtoD/DtoH, each
 * returning only when done) and asynchronous (cuMemcpyHtoDAsync/DtoHAsync on one stream, REPS of them, then
 * one cuStreamSynchronize): after WARM untimed copies, REPS copies timed together on CLOCK_MONOTONIC; one line
 * per case:
 *   copy DIR MEMORY MODE BYTES reps=N us=MICROSECONDS-PER-COPY [p50=MEDIAN-MICROSECONDS]
 * (the mean over the batch; synchronous copies are also timed one by one, and p50 is their median)
 * and first, as the floor of a call that moves no data, cuCtxSynchronize with nothing pending (through GPUsockets
 * one round trip: the frontend never answers it locally), timed the same way:
 *   call ctx-synchronize reps=N us=MICROSECONDS-PER-CALL p50=MEDIAN-MICROSECONDS
 * Before the first case, WARMUP untimed copies of the first size in every direction, memory and mode (the
 * frontend's JVM compiles its copy path meanwhile). The bytes that came back are checked once per size (a wrong
 * byte exits 1, naming it).
 * usage: copies BUDGET_BYTES MAX_REPS WARMUP SIZE...   (reps per case = BUDGET_BYTES / SIZE, within 3..MAX_REPS)
 */
#define _POSIX_C_SOURCE 200809L

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARM 3

static void check(CUresult r, const char *call, int line) {
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL) {
            name = "?";
        }
        fflush(stdout);
        fprintf(stderr, "copies.c:%d: %s failed: %d %s\n", line, call, (int) r, name);
        exit(1);
    }
}
#define CHECK(call) check((call), #call, __LINE__)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

static CUdeviceptr dev;
static double *lap; /* per-copy times of a synchronous batch, for its median */

static int by_value(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

/* The median of the first n entries of lap (sorted in place). */
static double lap_median(long n) {
    qsort(lap, (size_t) n, sizeof *lap, by_value);
    return n % 2 ? lap[n / 2] : (lap[n / 2 - 1] + lap[n / 2]) / 2;
}
static CUstream stream;

/* One copy of `bytes` in direction `htod` between `host` and dev. */
static void copy(int htod, int async, unsigned char *host, size_t bytes) {
    if (htod) {
        CHECK(async ? cuMemcpyHtoDAsync(dev, host, bytes, stream) : cuMemcpyHtoD(dev, host, bytes));
    } else {
        CHECK(async ? cuMemcpyDtoHAsync(host, dev, bytes, stream) : cuMemcpyDtoH(host, dev, bytes));
    }
}

static void measure(int htod, int pinned, int async, unsigned char *host, size_t bytes, long reps) {
    for (int i = 0; i < WARM; i++) {
        copy(htod, async, host, bytes);
    }
    if (async) {
        CHECK(cuStreamSynchronize(stream));
    }
    double t0 = now_us(), t = t0;
    for (long i = 0; i < reps; i++) {
        copy(htod, async, host, bytes);
        if (!async) {
            double now = now_us();
            lap[i] = now - t;
            t = now;
        }
    }
    if (async) {
        CHECK(cuStreamSynchronize(stream));
    }
    double us = (now_us() - t0) / (double) reps;
    printf("copy %s %s %s %zu reps=%ld us=%.3f", htod ? "htod" : "dtoh", pinned ? "pinned" : "pageable",
           async ? "async" : "sync", bytes, reps, us);
    if (!async) {
        printf(" p50=%.3f", lap_median(reps));
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: copies BUDGET_BYTES MAX_REPS WARMUP SIZE...\n");
        return 2;
    }
    long long budget = atoll(argv[1]);
    long max_reps = atol(argv[2]);
    long warmup = atol(argv[3]);
    if (max_reps < 3) {
        fprintf(stderr, "copies: MAX_REPS %ld is under 3\n", max_reps);
        return 2;
    }
    lap = malloc((size_t) max_reps * sizeof *lap);
    if (lap == NULL) {
        fprintf(stderr, "copies: out of memory\n");
        return 1;
    }
    size_t max = 0;
    for (int a = 4; a < argc; a++) {
        size_t s = (size_t) atoll(argv[a]);
        if (s == 0) {
            fprintf(stderr, "copies: size %s is not a positive number\n", argv[a]);
            return 2;
        }
        max = s > max ? s : max;
    }
    CUdevice device;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&device, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, device));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc(&dev, max));
    unsigned char *pageable[2], *pinned[2];
    for (int k = 0; k < 2; k++) {
        pageable[k] = malloc(max);
        if (pageable[k] == NULL) {
            fprintf(stderr, "copies: out of memory (%zu bytes)\n", max);
            return 1;
        }
        CHECK(cuMemAllocHost((void **) &pinned[k], max));
    }
    for (size_t i = 0; i < max; i++) {
        pageable[0][i] = pinned[0][i] = (unsigned char) (i * 131 + 7);
    }
    for (long i = 0; i < warmup; i++) {
        size_t first = (size_t) atoll(argv[4]);
        for (int k = 0; k < 8; k++) {
            copy(k & 1, k & 2, (k & 4) ? pinned[1] : pageable[1], first);
        }
    }
    CHECK(cuStreamSynchronize(stream));
    for (long i = 0; i < WARM + warmup; i++) {
        CHECK(cuCtxSynchronize());
    }
    double t0 = now_us(), t = t0;
    for (long i = 0; i < max_reps; i++) {
        CHECK(cuCtxSynchronize());
        double now = now_us();
        lap[i] = now - t;
        t = now;
    }
    printf("call ctx-synchronize reps=%ld us=%.3f p50=%.3f\n", max_reps, (now_us() - t0) / (double) max_reps,
           lap_median(max_reps));
    for (int a = 4; a < argc; a++) {
        size_t bytes = (size_t) atoll(argv[a]);
        long reps = (long) (budget / (long long) bytes);
        reps = reps < 3 ? 3 : reps > max_reps ? max_reps : reps;
        for (int mem = 0; mem < 2; mem++) {
            unsigned char *src = mem ? pinned[0] : pageable[0], *dst = mem ? pinned[1] : pageable[1];
            for (int async = 0; async < 2; async++) {
                measure(1, mem, async, src, bytes, reps);
                memset(dst, 0, bytes);
                measure(0, mem, async, dst, bytes, reps);
                if (memcmp(src, dst, bytes) != 0) {
                    size_t i = 0;
                    while (src[i] == dst[i]) {
                        i++;
                    }
                    fprintf(stderr, "copies: %zu bytes, %s %s: byte %zu came back 0x%02x, sent 0x%02x\n", bytes,
                            mem ? "pinned" : "pageable", async ? "async" : "sync", i, dst[i], src[i]);
                    return 1;
                }
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        free(pageable[k]);
        CHECK(cuMemFreeHost(pinned[k]));
    }
    CHECK(cuMemFree(dev));
    CHECK(cuStreamDestroy(stream));
    CHECK(cuDevicePrimaryCtxRelease(device));
    printf("copies done\n");
    return 0;
}
