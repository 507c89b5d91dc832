/*
 * A stand-in libcuda.so.1 for calltrace's unit test (calltrace_test.c): functions whose results
 * depend on every argument, integer and floating point, in registers and on the stack, so that a
 * thunk that dropped or moved one would change the answer; cuGetProcAddress_v2 handing them out;
 * and one private table with a size word.
 */
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* 12 integer arguments: six in registers, six on the stack */
EXPORT int cuFakeMany(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e, uint64_t f, uint64_t g,
                      uint64_t h, uint64_t i, uint64_t j, uint64_t k, uint64_t l) {
    uint64_t v[12] = {a, b, c, d, e, f, g, h, i, j, k, l};
    uint64_t s = 0;
    for (int n = 0; n < 12; n++) {
        s = s * 31 + v[n];
    }
    return (int) (s % 1000003);
}

/* floats and doubles between integers, and a 9th floating-point argument (on the stack) */
EXPORT int cuFakeMixed(int a, float x, uint64_t b, double y, float z, double w, double p, double q, double r,
                       double t, double u, int c) {
    double s = a * 1.0 + x * 3.0 + (double) b * 5.0 + y * 7.0 + z * 11.0 + w * 13.0 + p * 17.0 + q * 19.0
               + r * 23.0 + t * 29.0 + u * 31.0 + c * 37.0;
    return (int) s;
}

/* an output through a pointer */
EXPORT int cuFakeOut(int *out, int v) {
    *out = v * 2;
    return 0;
}

static uint64_t slot1(uint64_t a, uint64_t b) {
    return a * 1000 + b;
}

static const void *table[] = {(void *) (uintptr_t) (2 * sizeof(void *)), (void *) slot1};
static const unsigned char table_id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

EXPORT int cuGetExportTable(const void **out, const void *id) {
    if (memcmp(id, table_id, 16) != 0) {
        return 500;
    }
    *out = table;
    return 0;
}

EXPORT int cuGetProcAddress_v2(const char *name, void **pfn, int version, uint64_t flags, int *status) {
    void *f = NULL;
    if (strcmp(name, "cuFakeMany") == 0) {
        f = (void *) cuFakeMany;
    } else if (strcmp(name, "cuFakeMixed") == 0) {
        f = (void *) cuFakeMixed;
    } else if (strcmp(name, "cuFakeOut") == 0) {
        f = (void *) cuFakeOut;
    } else if (strcmp(name, "cuGetProcAddress") == 0) {
        f = (void *) cuGetProcAddress_v2;
    }
    *pfn = f;
    if (status != NULL) {
        *status = f != NULL ? 0 : 1;
    }
    return f != NULL ? 0 : 500;
}

EXPORT int cuGetProcAddress(const char *name, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(name, pfn, version, flags, NULL);
}
