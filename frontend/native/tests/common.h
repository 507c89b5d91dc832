/*
 * Shared helpers of the driver-API test programs (see README.md). Include it first: it sets the
 * POSIX feature level before any system header.
 *
 * Rules every program keeps: stdout holds only deterministic results (no pointers, no timings) and
 * ends with "PASS"; timings and diagnostics go to stderr; any unexpected CUresult or wrong datum
 * prints what failed to stderr and exits 1.
 */
#ifndef GPUSOCKETS_TESTS_COMMON_H
#define GPUSOCKETS_TESTS_COMMON_H

#define _POSIX_C_SOURCE 200809L

#include <cuda.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The code's enum name from cuGetErrorName, or "?" when the library does not know it. */
static inline const char *err_name(CUresult r) {
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL) {
        return "?";
    }
    return name;
}

static inline void check_result(CUresult r, const char *call, const char *file, int line) {
    if (r != CUDA_SUCCESS) {
        fflush(stdout);
        fprintf(stderr, "%s:%d: %s failed: %d %s\n", file, line, call, (int) r, err_name(r));
        exit(1);
    }
}

/* Runs a driver call and exits 1 (naming the call, the code and its name) unless it succeeds. */
#define CHECK(call) check_result((call), #call, __FILE__, __LINE__)

static inline void expect_result(CUresult got, CUresult want, const char *call, const char *file, int line) {
    if (got != want) {
        fflush(stdout);
        fprintf(stderr, "%s:%d: %s returned %d %s, expected %d %s\n", file, line, call, (int) got, err_name(got),
                (int) want, err_name(want));
        exit(1);
    }
}

/* Runs a driver call that must fail with `want`; prints "LABEL: NAME" to stdout when it does. */
#define EXPECT(label, call, want)                                              \
    do {                                                                       \
        CUresult expect_r_ = (call);                                           \
        expect_result(expect_r_, (want), #call, __FILE__, __LINE__);           \
        printf("%s: %s\n", (label), err_name(expect_r_));                      \
    } while (0)

/* Prints the message to stderr and exits 1: for wrong data, as opposed to a failed call. */
__attribute__((format(printf, 1, 2), noreturn)) static inline void fail(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec * 1e3 + (double) t.tv_nsec / 1e6;
}

#define FNV_INIT 0xcbf29ce484222325ULL

/* 64-bit FNV-1a over n bytes, continuing from h: the checksums printed to stdout. */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* splitmix64: the deterministic source of all test data. */
static inline uint64_t next_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline void fill_bytes(unsigned char *p, size_t n, uint64_t seed) {
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = next_u64(&s);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = next_u64(&s);
        memcpy(p + i, &v, n - i);
    }
}

/* A float in [0, 1) with 24 significant bits: exact, so sums are the same on every IEEE device. */
static inline float next_unit_float(uint64_t *state) {
    return (float) (next_u64(state) >> 40) / 16777216.0f;
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n == 0 ? 1 : n);
    if (p == NULL) {
        fail("out of host memory (%zu bytes)", n);
    }
    return p;
}

/* Reads a whole file; with add_nul, one NUL byte follows the content (PTX images need it). */
static inline unsigned char *read_file(const char *path, size_t *size, int add_nul) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail("cannot open %s", path);
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            unsigned char *bigger = realloc(buf, cap);
            if (bigger == NULL) {
                fail("out of host memory reading %s", path);
            }
            buf = bigger;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    if (ferror(f)) {
        fail("cannot read %s", path);
    }
    fclose(f);
    if (add_nul) {
        buf[n] = 0;
    }
    *size = n;
    return buf;
}

/* cuInit, device 0, its primary context retained and made current. */
static inline CUcontext use_primary_context(CUdevice *dev) {
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

static inline void release_primary_context(CUdevice dev) {
    CHECK(cuCtxSetCurrent(NULL));
    CHECK(cuDevicePrimaryCtxRelease(dev));
}

/* The kernels' module from the PTX file at path (text read into memory, NUL-terminated). */
static inline CUmodule load_ptx_module(const char *path) {
    size_t size;
    unsigned char *ptx = read_file(path, &size, 1);
    CUmodule mod;
    double t0 = now_ms();
    CHECK(cuModuleLoadData(&mod, ptx));
    fprintf(stderr, "cuModuleLoadData(%zu bytes of PTX): %.1f ms\n", size, now_ms() - t0);
    free(ptx);
    return mod;
}

/* A module from the image file at path (a fatbin or cubin, its bytes read into memory as they are). */
static inline CUmodule load_image_module(const char *path) {
    size_t size;
    unsigned char *image = read_file(path, &size, 0);
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, image));
    free(image);
    return mod;
}

static inline CUfunction get_function(CUmodule mod, const char *name) {
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, name));
    return f;
}

/*
 * The result of a launch or another asynchronous call: its own code, or when it returned success
 * the code of the cuCtxSynchronize that follows. A remote driver may report an asynchronous call's
 * error at the next synchronizing call (the CUDA docs allow it); both places count the same here.
 */
static inline CUresult with_sync(CUresult r) {
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "  (error returned by the call itself)\n");
        return r;
    }
    CUresult s = cuCtxSynchronize();
    if (s != CUDA_SUCCESS) {
        fprintf(stderr, "  (error returned by the following cuCtxSynchronize)\n");
    }
    return s;
}

static inline void usage_if(int bad, const char *usage) {
    if (bad) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
}

#endif
