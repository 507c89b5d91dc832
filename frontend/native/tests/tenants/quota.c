/*
 * A tenant's device-memory quota as a program sees it (scripts/gpu-tenants): cuMemGetInfo, then
 * 256 MiB allocations (each filled) until one fails or MAX were made, cuMemGetInfo while they are
 * held, a pause of HOLD seconds (for a status snapshot), then everything freed and cuMemGetInfo again.
 * Sizes are device-specific, so nothing here is compared with a golden file; exits 1 on an unexpected
 * failure, 0 when the allocations stop at CUDA_ERROR_OUT_OF_MEMORY or at MAX.
 *
 *   quota [MAX [HOLD]]   MAX allocations at most (16), HOLD seconds to hold them (0)
 */
#include "../common.h"

#include <unistd.h>

#define CHUNK ((size_t) 256 << 20)
#define MAX_CHUNKS 64

int main(int argc, char **argv) {
    int max = argc > 1 ? atoi(argv[1]) : 16;
    int hold = argc > 2 ? atoi(argv[2]) : 0;
    if (max < 1 || max > MAX_CHUNKS || hold < 0) {
        fprintf(stderr, "usage: quota [MAX (1..%d) [HOLD seconds]]\n", MAX_CHUNKS);
        return 2;
    }
    CHECK(cuInit(0));
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    size_t free0, total0;
    CHECK(cuMemGetInfo(&free0, &total0));
    printf("before: free %zu MiB of %zu MiB\n", free0 >> 20, total0 >> 20);
    CUdeviceptr p[MAX_CHUNKS];
    int n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < max) {
        r = cuMemAlloc(&p[n], CHUNK);
        if (r != CUDA_SUCCESS) {
            break;
        }
        CHECK(cuMemsetD8(p[n], (unsigned char) n, CHUNK));
        n++;
    }
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "cuMemAlloc failed: %s\n", err_name(r));
        return 1;
    }
    CHECK(cuCtxSynchronize());
    size_t free1, total1;
    CHECK(cuMemGetInfo(&free1, &total1));
    printf("allocated %d x 256 MiB, then %s\n", n, r == CUDA_SUCCESS ? "stopped (MAX reached)" : err_name(r));
    printf("holding: free %zu MiB of %zu MiB\n", free1 >> 20, total1 >> 20);
    fflush(stdout);
    if (hold > 0) {
        sleep((unsigned) hold);
    }
    for (int i = 0; i < n; i++) {
        CHECK(cuMemFree(p[i]));
    }
    size_t free2, total2;
    CHECK(cuMemGetInfo(&free2, &total2));
    printf("after freeing: free %zu MiB of %zu MiB\n", free2 >> 20, total2 >> 20);
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("PASS\n");
    return 0;
}
