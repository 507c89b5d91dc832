/*
 * copies_2d: cuMemAllocPitch, then cuMemcpy2D host to device, device to device and device to host
 * with odd host pitches, odd X offsets and a linear device buffer of odd pitch; every byte of every
 * destination checked, including the bytes between rows that no copy may touch.
 * usage: copies_2d
 */
#include "common.h"

#define WIDTH 1001  /* bytes per row copied */
#define HEIGHT 37   /* rows copied */
#define ROWS 40     /* rows allocated */
#define GUARD 0xEE
#define DGUARD 0xA5

static void copy2d(CUmemorytype srcType, const void *srcHost, CUdeviceptr srcDev, size_t srcX, size_t srcY, size_t srcPitch,
                   CUmemorytype dstType, void *dstHost, CUdeviceptr dstDev, size_t dstX, size_t dstY, size_t dstPitch) {
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = srcType;
    c.srcHost = srcHost;
    c.srcDevice = srcDev;
    c.srcXInBytes = srcX;
    c.srcY = srcY;
    c.srcPitch = srcPitch;
    c.dstMemoryType = dstType;
    c.dstHost = dstHost;
    c.dstDevice = dstDev;
    c.dstXInBytes = dstX;
    c.dstY = dstY;
    c.dstPitch = dstPitch;
    c.WidthInBytes = WIDTH;
    c.Height = HEIGHT;
    CHECK(cuMemcpy2D(&c));
}

/* Checks a whole image of `rows` rows of `pitch` bytes: the copied block (from `data`, rows of
 * dataPitch starting at dataX, dataY) at (x, y), `guard` everywhere else. */
static void expect_image(const unsigned char *img, size_t pitch, size_t rows, size_t x, size_t y, const unsigned char *data,
                         size_t dataX, size_t dataY, size_t dataPitch, unsigned char guard, const char *what) {
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < pitch; i++) {
            unsigned char want = guard;
            if (r >= y && r < y + HEIGHT && i >= x && i < x + WIDTH) {
                want = data[(dataY + r - y) * dataPitch + dataX + i - x];
            }
            if (img[r * pitch + i] != want) {
                fail("%s: row %zu byte %zu is 0x%02x, expected 0x%02x", what, r, i, img[r * pitch + i], want);
            }
        }
    }
}

int main(int argc, char **argv) {
    (void) argv;
    usage_if(argc != 1, "copies_2d");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);

    CUdeviceptr pitched;
    size_t pitch = 0;
    CHECK(cuMemAllocPitch(&pitched, &pitch, WIDTH + 3, ROWS, 4));
    if (pitch < WIDTH + 3) {
        fail("cuMemAllocPitch: pitch %zu is below the width %d", pitch, WIDTH + 3);
    }
    printf("cuMemAllocPitch(%d bytes x %d rows): pitch %zu\n", WIDTH + 3, ROWS, pitch);

    /* Host image: pitch 1013 (odd), data at X 5, Y 2. */
    const size_t hostPitch = 1013, hostRows = HEIGHT + 4;
    unsigned char *host = xmalloc(hostPitch * hostRows);
    fill_bytes(host, hostPitch * hostRows, 2024);

    /* 1. Host -> pitched device at X 3, Y 1. */
    CHECK(cuMemsetD8(pitched, DGUARD, pitch * ROWS));
    copy2d(CU_MEMORYTYPE_HOST, host, 0, 5, 2, hostPitch, CU_MEMORYTYPE_DEVICE, NULL, pitched, 3, 1, pitch);
    unsigned char *img = xmalloc(pitch * ROWS);
    CHECK(cuMemcpyDtoH(img, pitched, pitch * ROWS));
    expect_image(img, pitch, ROWS, 3, 1, host, 5, 2, hostPitch, DGUARD, "host to pitched device");
    printf("cuMemcpy2D host (pitch 1013) to pitched device: %d x %d bytes exact, nothing else written\n", WIDTH, HEIGHT);

    /* 2. Pitched device -> linear device of odd pitch 1009 at X 7, Y 0. */
    const size_t linPitch = 1009, linRows = HEIGHT + 1;
    CUdeviceptr linear;
    CHECK(cuMemAlloc(&linear, linPitch * linRows));
    CHECK(cuMemsetD8(linear, DGUARD, linPitch * linRows));
    copy2d(CU_MEMORYTYPE_DEVICE, NULL, pitched, 3, 1, pitch, CU_MEMORYTYPE_DEVICE, NULL, linear, 7, 0, linPitch);
    unsigned char *lin = xmalloc(linPitch * linRows);
    CHECK(cuMemcpyDtoH(lin, linear, linPitch * linRows));
    expect_image(lin, linPitch, linRows, 7, 0, host, 5, 2, hostPitch, DGUARD, "pitched device to linear device");
    printf("cuMemcpy2D pitched device to device (pitch 1009): exact, nothing else written\n");

    /* 3. Linear device -> host of odd pitch 1021 at X 1, Y 3. */
    const size_t outPitch = 1021, outRows = HEIGHT + 5;
    unsigned char *out = xmalloc(outPitch * outRows);
    memset(out, GUARD, outPitch * outRows);
    copy2d(CU_MEMORYTYPE_DEVICE, NULL, linear, 7, 0, linPitch, CU_MEMORYTYPE_HOST, out, 0, 1, 3, outPitch);
    expect_image(out, outPitch, outRows, 1, 3, host, 5, 2, hostPitch, GUARD, "linear device to host");
    printf("cuMemcpy2D device to host (pitch 1021): exact, nothing else written, fnv %016llx\n",
           (unsigned long long) fnv1a(FNV_INIT, out, outPitch * outRows));

    /* 4. Pitched device -> host, the whole pitch as width is not needed: rows of WIDTH at X 0. */
    memset(out, GUARD, outPitch * outRows);
    copy2d(CU_MEMORYTYPE_DEVICE, NULL, pitched, 3, 1, pitch, CU_MEMORYTYPE_HOST, out, 0, 0, 0, outPitch);
    expect_image(out, outPitch, outRows, 0, 0, host, 5, 2, hostPitch, GUARD, "pitched device to host");
    printf("cuMemcpy2D pitched device to host: exact\n");

    CHECK(cuMemFree(pitched));
    CHECK(cuMemFree(linear));
    free(host);
    free(img);
    free(lin);
    free(out);
    release_primary_context(dev);
    fprintf(stderr, "copies_2d: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
