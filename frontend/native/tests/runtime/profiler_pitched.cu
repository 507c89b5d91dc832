// cudaProfilerStart/Stop around the timed part, as many programs do, and cudaMemcpy2D between host
// memory and pitched device memory (cudart 13 makes each such copy a cuMemcpy2DUnaligned): an image
// goes up from a host buffer with a pitch of its own, a kernel transforms it in place, it comes back
// into another pitch, with a device-to-device 2D copy between two pitched images on the way. Every
// byte is compared with the CPU's result, and the host bytes no copy may touch are checked too.
#include "common.cuh"

#include <cuda_profiler_api.h>

// out(x, y) = 255 - in(x, y) + 3y + x, in bytes (wrapping)
__global__ void transform(unsigned char *img, size_t pitch, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y;
    if (x < width && y < height) {
        unsigned char *p = img + y * pitch + x;
        *p = (unsigned char) (255 - *p + 3 * y + x);
    }
}

int main() {
    const int width = 1001, height = 37;           // bytes per row, rows: odd on purpose
    const size_t hostPitch = 1013, backPitch = 1021; // host pitches of their own
    const unsigned char guard = 0xa5;
    CK(cudaProfilerStart());
    printf("cudaProfilerStart: ok\n");

    unsigned char *host = (unsigned char *) malloc(hostPitch * height);
    unsigned char *back = (unsigned char *) malloc(backPitch * height);
    uint64_t seed = 21;
    for (size_t i = 0; i < hostPitch * height; i++) {
        host[i] = (unsigned char) splitmix64(&seed);
    }
    memset(back, guard, backPitch * height);

    unsigned char *a, *b;
    size_t pitchA = 0, pitchB = 0;
    CK(cudaMallocPitch((void **) &a, &pitchA, width, height));
    CK(cudaMallocPitch((void **) &b, &pitchB, width, height));
    printf("pitches cover a row: %d\n", pitchA >= (size_t) width && pitchB >= (size_t) width);
    CK(cudaMemset2D(b, pitchB, 0, width, height));

    CK(cudaMemcpy2D(a, pitchA, host, hostPitch, width, height, cudaMemcpyHostToDevice));
    transform<<<dim3((width + 127) / 128, height), 128>>>(a, pitchA, width, height);
    CK(cudaGetLastError());
    CK(cudaMemcpy2D(b, pitchB, a, pitchA, width, height, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy2D(back, backPitch, b, pitchB, width, height, cudaMemcpyDeviceToHost));

    for (int y = 0; y < height; y++) {
        for (size_t x = 0; x < backPitch; x++) {
            unsigned char got = back[y * backPitch + x];
            unsigned char want = x < (size_t) width ? (unsigned char) (255 - host[y * hostPitch + x] + 3 * y + x) : guard;
            if (got != want) {
                FAIL("row %d byte %zu: %u, expected %u%s", y, x, got, want, x < (size_t) width ? "" : " (past the row)");
            }
        }
    }
    printf("cudaMemcpy2D host (pitch %zu) -> pitched device -> pitched device -> host (pitch %zu), %dx%d bytes: "
           "equal to the CPU's, fnv %016llx\n", hostPitch, backPitch, width, height,
           (unsigned long long) fnv1a(back, backPitch * height));

    // a sub-rectangle at an offset, host to device and back, into a host buffer with room around it
    const int sw = 77, sh = 11, sx = 5, sy = 3;
    CK(cudaMemcpy2D(a + sy * pitchA + sx, pitchA, host, hostPitch, sw, sh, cudaMemcpyHostToDevice));
    memset(back, guard, backPitch * height);
    CK(cudaMemcpy2D(back + backPitch + 2, backPitch, a + sy * pitchA + sx, pitchA, sw, sh, cudaMemcpyDeviceToHost));
    for (int y = 0; y < height; y++) {
        for (size_t x = 0; x < backPitch; x++) {
            int inside = y >= 1 && y < 1 + sh && x >= 2 && x < 2 + (size_t) sw;
            unsigned char want = inside ? host[(y - 1) * hostPitch + (x - 2)] : guard;
            if (back[y * backPitch + x] != want) {
                FAIL("sub-rectangle: row %d byte %zu: %u, expected %u", y, x, back[y * backPitch + x], want);
            }
        }
    }
    printf("cudaMemcpy2D of a %dx%d sub-rectangle at (%d,%d) and back: equal, nothing else touched\n", sw, sh, sx, sy);

    CK(cudaDeviceSynchronize());
    CK(cudaProfilerStop());
    printf("cudaProfilerStop: ok\n");
    CK(cudaFree(a));
    CK(cudaFree(b));
    free(host);
    free(back);
    printf("PASS\n");
    return 0;
}
