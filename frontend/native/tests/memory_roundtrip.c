/*
 * memory_roundtrip: cuMemAlloc/cuMemFree; HtoD then DtoH of sizes from 1 byte to 9 MiB at host and
 * device offsets 0..7, byte-exact, bytes around each copy untouched (host and device); cuMemsetD8,
 * D16 and D32 (small, odd counts and 9 MiB); DtoD between odd offsets; zero-byte copies; and
 * cuMemGetInfo: free memory drops by at least an allocation and comes back when it is freed.
 * usage: memory_roundtrip
 */
#include "common.h"

#define GUARD 0xEE   /* host bytes that no copy may touch */
#define DGUARD 0xA5  /* device bytes that no copy may touch */

static const size_t SIZES[] = {
    1, 2, 3, 7, 8, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097,
    65535, 65536, 65537, 1048575, 1048576, 1048579, 4194311, 9437184,
};
/* Sizes up to this get every pair of host and device offset 0..7; larger ones get PAIRS below. */
#define ALL_PAIRS_UP_TO 65537
static const int PAIRS[][2] = {{0, 0}, {1, 7}, {7, 1}, {3, 5}};

static unsigned char *src, *dst, *whole;

static void expect_bytes(const unsigned char *p, size_t n, unsigned char v, const char *what, size_t size, int h, int d) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != v) {
            fail("size %zu host offset %d device offset %d: %s byte %zu is 0x%02x, expected 0x%02x", size, h, d, what, i,
                 p[i], v);
        }
    }
}

/* One round trip of `size` bytes from src+h to dev+d and back to dst+(7-h); returns the readback's checksum. */
static uint64_t round_trip(CUdeviceptr dev, size_t size, int h, int d, uint64_t hash) {
    int back = 7 - h;
    fill_bytes(src + h, size, size * 64 + (size_t) h * 8 + (size_t) d);
    memset(dst, GUARD, size + 16);
    CHECK(cuMemsetD8(dev, DGUARD, size + 8));
    CHECK(cuMemcpyHtoD(dev + (CUdeviceptr) d, src + h, size));
    CHECK(cuMemcpyDtoH(dst + back, dev + (CUdeviceptr) d, size));
    if (memcmp(dst + back, src + h, size) != 0) {
        size_t i = 0;
        while (dst[back + i] == src[h + i]) {
            i++;
        }
        fail("size %zu host offset %d device offset %d: byte %zu read back as 0x%02x, written 0x%02x", size, h, d, i,
             dst[back + i], src[h + i]);
    }
    expect_bytes(dst, (size_t) back, GUARD, "host byte before the DtoH target", size, h, d);
    expect_bytes(dst + back + size, 16 - (size_t) back, GUARD, "host byte after the DtoH target", size, h, d);
    /* The device bytes around the HtoD target keep their memset value. */
    CHECK(cuMemcpyDtoH(whole, dev, size + 8));
    expect_bytes(whole, (size_t) d, DGUARD, "device byte before the HtoD target", size, h, d);
    expect_bytes(whole + d + size, 8 - (size_t) d, DGUARD, "device byte after the HtoD target", size, h, d);
    return fnv1a(hash, dst + back, size);
}

static void copies(void) {
    size_t max = SIZES[sizeof SIZES / sizeof SIZES[0] - 1];
    src = xmalloc(max + 16);
    dst = xmalloc(max + 16);
    whole = xmalloc(max + 16);
    for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k++) {
        size_t size = SIZES[k];
        CUdeviceptr dev;
        CHECK(cuMemAlloc(&dev, size + 8));
        uint64_t hash = FNV_INIT;
        int n = 0;
        double t0 = now_ms();
        if (size <= ALL_PAIRS_UP_TO) {
            for (int h = 0; h < 8; h++) {
                for (int d = 0; d < 8; d++, n++) {
                    hash = round_trip(dev, size, h, d, hash);
                }
            }
        } else {
            for (size_t p = 0; p < sizeof PAIRS / sizeof PAIRS[0]; p++, n++) {
                hash = round_trip(dev, size, PAIRS[p][0], PAIRS[p][1], hash);
            }
        }
        double ms = now_ms() - t0;
        CHECK(cuMemFree(dev));
        printf("copy %zu bytes: %d offset pairs ok, fnv %016llx\n", size, n, (unsigned long long) hash);
        fprintf(stderr, "copy %zu bytes x %d: %.2f ms (%.1f MB/s both ways)\n", size, n, ms,
                ms > 0 ? 2.0 * (double) size * n / ms / 1e3 : 0.0);
    }
    free(src);
    free(dst);
    free(whole);
}

static void zero_byte_copies(void) {
    CUdeviceptr dev;
    unsigned char host[4] = {1, 2, 3, 4};
    CHECK(cuMemAlloc(&dev, 64));
    CHECK(cuMemsetD8(dev, 0x11, 64));
    CHECK(cuMemcpyHtoD(dev, host, 0));
    CHECK(cuMemcpyDtoH(host, dev, 0));
    CHECK(cuMemcpyDtoD(dev + 1, dev, 0));
    CHECK(cuMemsetD8(dev, 0x22, 0));
    if (host[0] != 1 || host[3] != 4) {
        fail("a zero-byte DtoH changed host memory");
    }
    unsigned char back[64];
    CHECK(cuMemcpyDtoH(back, dev, 64));
    expect_bytes(back, 64, 0x11, "device byte after zero-byte operations", 0, 0, 0);
    CHECK(cuMemFree(dev));
    printf("zero-byte copies and sets: ok\n");
}

static void memsets(void) {
    const size_t n = (1 << 20) + 64;
    CUdeviceptr dev;
    CHECK(cuMemAlloc(&dev, n));
    unsigned char *host = xmalloc(n);
    unsigned char *want = xmalloc(n);

    CHECK(cuMemsetD8(dev, 0, n));
    memset(want, 0, n);
    CHECK(cuMemsetD8(dev + 1, 0x5A, 1001));            /* odd start, odd count */
    memset(want + 1, 0x5A, 1001);
    CHECK(cuMemsetD16(dev + 2048, 0xBEEF, 777));       /* 2-byte aligned, odd count */
    for (size_t i = 0; i < 777; i++) {
        uint16_t v = 0xBEEF;
        memcpy(want + 2048 + 2 * i, &v, 2);
    }
    CHECK(cuMemsetD32(dev + 8192, 0xDEADBEEFu, 4099)); /* 4-byte aligned, odd count */
    for (size_t i = 0; i < 4099; i++) {
        uint32_t v = 0xDEADBEEFu;
        memcpy(want + 8192 + 4 * i, &v, 4);
    }
    CHECK(cuMemsetD8(dev + n - 3, 0xC3, 3));           /* up to the last byte */
    memset(want + n - 3, 0xC3, 3);
    CHECK(cuMemcpyDtoH(host, dev, n));
    for (size_t i = 0; i < n; i++) {
        if (host[i] != want[i]) {
            fail("memset: byte %zu is 0x%02x, expected 0x%02x", i, host[i], want[i]);
        }
    }
    printf("memset D8/D16/D32 at odd offsets and counts: ok, fnv %016llx\n", (unsigned long long) fnv1a(FNV_INIT, host, n));
    CHECK(cuMemFree(dev));
    free(host);
    free(want);

    const size_t big = 9u << 20;
    CHECK(cuMemAlloc(&dev, big));
    uint32_t *words = xmalloc(big);
    CHECK(cuMemsetD32(dev, 0x01020304u, big / 4));
    CHECK(cuMemcpyDtoH(words, dev, big));
    for (size_t i = 0; i < big / 4; i++) {
        if (words[i] != 0x01020304u) {
            fail("memset D32 of 9 MiB: word %zu is 0x%08x", i, words[i]);
        }
    }
    CHECK(cuMemsetD16(dev, 0xA1B2, big / 2));
    CHECK(cuMemcpyDtoH(words, dev, big));
    for (size_t i = 0; i < big / 4; i++) {
        if (words[i] != 0xA1B2A1B2u) {
            fail("memset D16 of 9 MiB: word %zu is 0x%08x", i, words[i]);
        }
    }
    printf("memset D32 and D16 of 9 MiB: ok\n");
    CHECK(cuMemFree(dev));
    free(words);
}

static void device_to_device(void) {
    const size_t n = (3u << 20) + 5;
    CUdeviceptr a, b;
    CHECK(cuMemAlloc(&a, n + 8));
    CHECK(cuMemAlloc(&b, n + 8));
    unsigned char *data = xmalloc(n + 8);
    unsigned char *back = xmalloc(n + 8);
    fill_bytes(data, n + 8, 4242);
    CHECK(cuMemcpyHtoD(a, data, n + 8));
    CHECK(cuMemsetD8(b, DGUARD, n + 8));
    CHECK(cuMemcpyDtoD(b + 3, a + 1, n));
    CHECK(cuMemcpyDtoH(back, b, n + 8));
    expect_bytes(back, 3, DGUARD, "device byte before the DtoD target", n, 1, 3);
    if (memcmp(back + 3, data + 1, n) != 0) {
        fail("DtoD of %zu bytes from offset 1 to offset 3 differs", n);
    }
    expect_bytes(back + 3 + n, 5, DGUARD, "device byte after the DtoD target", n, 1, 3);
    /* A copy within one allocation, not overlapping. */
    CHECK(cuMemcpyDtoD(a + 4, a + n / 2 + 4, n / 2 - 8));
    CHECK(cuMemcpyDtoH(back, a, n + 8));
    memmove(data + 4, data + n / 2 + 4, n / 2 - 8);
    if (memcmp(back, data, n + 8) != 0) {
        fail("DtoD within one allocation differs");
    }
    printf("DtoD %zu bytes between odd offsets: ok, fnv %016llx\n", n, (unsigned long long) fnv1a(FNV_INIT, back, n + 8));
    CHECK(cuMemFree(a));
    CHECK(cuMemFree(b));
    free(data);
    free(back);
}

/*
 * Free memory drops by at least an allocation and comes back when it is freed. Other programs may
 * allocate or free on the same device meanwhile (a shared backend, another process on the GPU), so
 * one of three tries must show it.
 */
static void memory_info(void) {
    const size_t big = 64u << 20;
    for (int attempt = 1;; attempt++) {
        size_t free0 = 0, total = 0, free1 = 0, free2 = 0, t;
        CHECK(cuMemGetInfo(&free0, &total));
        if (total == 0 || free0 > total) {
            fail("cuMemGetInfo: free %zu of total %zu", free0, total);
        }
        CUdeviceptr p;
        CHECK(cuMemAlloc(&p, big));
        CHECK(cuMemGetInfo(&free1, &t));
        CHECK(cuMemFree(p));
        CHECK(cuMemGetInfo(&free2, &t));
        fprintf(stderr, "cuMemGetInfo, try %d: total %zu MiB, free %zu -> %zu -> %zu MiB\n", attempt, total >> 20, free0 >> 20,
                free1 >> 20, free2 >> 20);
        int dropped = free1 <= free0 && free0 - free1 >= big;
        int returned = free2 >= free1 && free2 - free1 >= big;
        if (dropped && returned) {
            break;
        }
        if (attempt == 3) {
            fail("cuMemGetInfo: allocating %zu MiB %s free memory by that much, freeing it %s", big >> 20,
                 dropped ? "lowered" : "did not lower", returned ? "gave it back" : "did not give it back");
        }
    }
    printf("cuMemGetInfo: a 64 MiB allocation lowers free memory by at least that, freeing it gives it back\n");
}

int main(int argc, char **argv) {
    (void) argv;
    usage_if(argc != 1, "memory_roundtrip");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    copies();
    zero_byte_copies();
    memsets();
    device_to_device();
    memory_info();
    release_primary_context(dev);
    fprintf(stderr, "memory_roundtrip: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
