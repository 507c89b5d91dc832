// Shared helpers of the runtime-API test programs (README.md beside this file). Same rules as the
// driver-API programs: stdout holds only deterministic results and ends with "PASS"; timings and
// diagnostics go to stderr; an unexpected cudaError_t or a wrong datum exits 1 saying what.
#ifndef GPUSOCKETS_RUNTIME_COMMON_CUH
#define GPUSOCKETS_RUNTIME_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline void check_error(cudaError_t e, const char *call, const char *file, int line) {
    if (e != cudaSuccess) {
        fflush(stdout);
        fprintf(stderr, "%s:%d: %s failed: %d %s (%s)\n", file, line, call, (int) e, cudaGetErrorName(e),
                cudaGetErrorString(e));
        exit(1);
    }
}

// Runs a runtime call and exits 1 (naming the call and the error) unless it succeeds.
#define CK(call) check_error((call), #call, __FILE__, __LINE__)

// Runs a call that must fail with `want`; prints "LABEL: NAME" to stdout when it does.
#define EXPECT(label, call, want)                                                                     \
    do {                                                                                              \
        cudaError_t expect_e_ = (call);                                                               \
        if (expect_e_ != (want)) {                                                                    \
            fflush(stdout);                                                                           \
            fprintf(stderr, "%s:%d: %s returned %d %s, expected %d %s\n", __FILE__, __LINE__, #call, \
                    (int) expect_e_, cudaGetErrorName(expect_e_), (int) (want), cudaGetErrorName(want)); \
            exit(1);                                                                                  \
        }                                                                                             \
        printf("%s: %s\n", (label), cudaGetErrorName(expect_e_));                                     \
    } while (0)

// Prints the message to stderr and exits 1: for wrong data.
#define FAIL(...)                            \
    do {                                     \
        fflush(stdout);                      \
        fprintf(stderr, __VA_ARGS__);        \
        fprintf(stderr, "\n");               \
        exit(1);                             \
    } while (0)

// Test data: splitmix64, the same on every machine.
static inline uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// 64-bit FNV-1a of a buffer: the checksums printed.
static inline uint64_t fnv1a(const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *) data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

static inline double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#endif
