/*
 * The start-up of a small driver-API program, timed by itself on CLOCK_MONOTONIC, for
 * `bench startup --stand-in`: the same binary runs against the stand-in libcuda.so.1 (which answers
 * at once) and against GPUsockets', so the difference is the frontend's own start. Built by gcc with
 * no CUDA toolkit: it declares the few driver functions it calls (the ABI names cuda.h maps to).
 * It prints, before anything that may fail:
 *   startup first-call-ms=<cuInit's entry to its return> init=<CUresult> main-ms=<main to cuInit's return>
 * (GPUSOCKETS_BENCH_WORK_MS=N: N ms of the program's own work on the CPU before cuInit)
 * then, if cuInit succeeded, a context, 1 MiB allocated, copied there and back and checked, freed:
 *   startup main-to-malloc-ms=<main to cuMemAlloc's return> result=<ok|call=CUresult> total-ms=<main to the end>
 * and last, always:
 *   startup rss-kb=<VmRSS> hwm-kb=<VmHWM> cpu-ms=<user+system CPU of all its threads>
 * (this process's /proc/self/status and getrusage at the end of main: the CPU time is a figure that a
 * loaded machine disturbs less than the wall times)
 * Exit status: 0, or the first failing CUresult (capped at 255).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuCtxCreate_v2(CUcontext *ctx, unsigned int flags, CUdevice device);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes);

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* VmRSS and VmHWM of this process in kB (-1 where absent). */
static void memory(long *rss, long *hwm) {
    *rss = *hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return;
    }
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            *rss = strtol(line + 6, NULL, 10);
        } else if (strncmp(line, "VmHWM:", 6) == 0) {
            *hwm = strtol(line + 6, NULL, 10);
        }
    }
    fclose(f);
}

static int finish(int status) {
    long rss, hwm;
    memory(&rss, &hwm);
    struct rusage u;
    double cpu = -1;
    if (getrusage(RUSAGE_SELF, &u) == 0) {
        cpu = (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
    }
    printf("startup rss-kb=%ld hwm-kb=%ld cpu-ms=%.1f\n", rss, hwm, cpu);
    fflush(stdout);
    return status > 255 ? 255 : status;
}

/* Records the first failing call as NAME=CUresult. */
#define STEP(name, call)                                                \
    do {                                                                \
        CUresult r_ = (call);                                           \
        if (r_ != 0 && failed == 0) {                                   \
            failed = r_;                                                \
            snprintf(result, sizeof result, "%s=%d", name, r_);         \
        }                                                               \
    } while (0)

int main(void) {
    double t0 = now_ms();
    /* the program's own start before its first CUDA call (GPUSOCKETS_BENCH_WORK_MS, default 0), spent
     * on this thread's CPU, as imports and set-up would be: what an early start can overlap */
    const char *work = getenv("GPUSOCKETS_BENCH_WORK_MS");
    double until = t0 + (work != NULL ? atof(work) : 0);
    volatile unsigned long spin = 0;
    while (now_ms() < until) {
        spin++;
    }
    double c0 = now_ms();
    CUresult init = cuInit(0);
    double c1 = now_ms();
    printf("startup first-call-ms=%.3f init=%d main-ms=%.3f\n", c1 - c0, init, c1 - t0);
    fflush(stdout);
    if (init != 0) {
        return finish(init);
    }
    int failed = 0;
    char result[96] = "ok";
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUdeviceptr d = 0;
    size_t bytes = 1 << 20;
    unsigned char *out = malloc(bytes), *back = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) {
        out[i] = (unsigned char) (i * 131 + 7);
    }
    STEP("cuDeviceGet", cuDeviceGet(&dev, 0));
    STEP("cuCtxCreate_v2", cuCtxCreate_v2(&ctx, 0, dev));
    STEP("cuMemAlloc_v2", cuMemAlloc_v2(&d, bytes));
    double malloc_ms = now_ms() - t0;
    STEP("cuMemcpyHtoD_v2", cuMemcpyHtoD_v2(d, out, bytes));
    STEP("cuMemcpyDtoH_v2", cuMemcpyDtoH_v2(back, d, bytes));
    if (failed == 0 && memcmp(out, back, bytes) != 0) {
        failed = 1;
        snprintf(result, sizeof result, "data-differs");
    }
    STEP("cuMemFree_v2", cuMemFree_v2(d));
    STEP("cuCtxDestroy_v2", cuCtxDestroy_v2(ctx));
    printf("startup main-to-malloc-ms=%.3f result=%s total-ms=%.3f\n", malloc_ms, result, now_ms() - t0);
    free(out);
    free(back);
    return finish(failed);
}
