/*
 * arrays_driver: the driver API's arrays as a driver-API program uses them, through libcuda.so.1's own
 * entry points: cuArray3DCreate and cuArray3DGetDescriptor (a 2D layered surface array), a kernel writing
 * it through a surface object and another reading it back through a texture object (cuTexObjectGetTextureDesc,
 * cuSurfObjectGetResourceDesc), the 1D array copies cuMemcpyHtoA/AtoH/DtoA/AtoD/AtoA and HtoAAsync/AtoHAsync
 * at byte offsets, cuMemcpy3DPeer(Async) within the device, a mipmapped array's levels
 * (cuMipmappedArrayCreate/GetLevel/Destroy). Every value checked against what the CPU wrote or computes.
 * usage: arrays_driver ARRAYS_DRIVER.fatbin
 */
#include "../common.h"

#define W 16
#define H 8
#define L 3

static void check_floats(const float *got, const float *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fprintf(stderr, "%s: element %zu is %g, expected %g\n", what, i, got[i], want[i]);
            exit(1);
        }
    }
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "arrays_driver ARRAYS_DRIVER.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));

    /* a 2D layered float array made for surfaces */
    CUDA_ARRAY3D_DESCRIPTOR d;
    memset(&d, 0, sizeof d);
    d.Width = W;
    d.Height = H;
    d.Depth = L;
    d.Format = CU_AD_FORMAT_FLOAT;
    d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST;
    CUarray layered;
    CHECK(cuArray3DCreate(&layered, &d));
    CUDA_ARRAY3D_DESCRIPTOR back;
    CHECK(cuArray3DGetDescriptor(&back, layered));
    printf("cuArray3DGetDescriptor: %zux%zux%zu format 0x%x channels %u flags 0x%x\n", back.Width, back.Height, back.Depth,
           back.Format, back.NumChannels, back.Flags);

    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    res.resType = CU_RESOURCE_TYPE_ARRAY;
    res.res.array.hArray = layered;
    CUsurfObject surf;
    CHECK(cuSurfObjectCreate(&surf, &res));
    CUDA_RESOURCE_DESC rback;
    CHECK(cuSurfObjectGetResourceDesc(&rback, surf));
    if (rback.resType != CU_RESOURCE_TYPE_ARRAY || rback.res.array.hArray != layered) {
        fprintf(stderr, "cuSurfObjectGetResourceDesc: another resource\n");
        return 1;
    }
    int w = W, h = H, l = L;
    void *sp[] = {&surf, &w, &h, &l};
    CHECK(cuLaunchKernel(get_function(mod, "write_surface"), L, 1, 1, W, H, 1, 0, NULL, sp, NULL));

    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
    td.filterMode = CU_TR_FILTER_MODE_POINT;
    CUtexObject tex;
    CHECK(cuTexObjectCreate(&tex, &res, &td, NULL));
    CUDA_TEXTURE_DESC tback;
    CHECK(cuTexObjectGetTextureDesc(&tback, tex));
    if (memcmp(&tback, &td, sizeof td) != 0) {
        fprintf(stderr, "cuTexObjectGetTextureDesc: another descriptor\n");
        return 1;
    }
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, sizeof(float) * W * H * L));
    void *tp[] = {&tex, &out, &w, &h, &l};
    CHECK(cuLaunchKernel(get_function(mod, "sample_layers"), L, 1, 1, W, H, 1, 0, NULL, tp, NULL));
    static float got[L * H * W], want[L * H * W];
    CHECK(cuMemcpyDtoH(got, out, sizeof got));
    for (int k = 0; k < L; k++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) want[(k * H + y) * W + x] = 1000.0f * k + 10.0f * y + x;
    check_floats(got, want, L * H * W, "surface written, texture read");
    printf("surf2DLayeredwrite then tex2DLayered: %d values as the CPU computes them\n", L * H * W);

    /* 1D arrays: the array copy family at byte offsets */
    CUDA_ARRAY3D_DESCRIPTOR d1;
    memset(&d1, 0, sizeof d1);
    d1.Width = 1024;
    d1.Format = CU_AD_FORMAT_UNSIGNED_INT32;
    d1.NumChannels = 1;
    CUarray a, b;
    CHECK(cuArray3DCreate(&a, &d1));
    CHECK(cuArray3DCreate(&b, &d1));
    static unsigned int src[1024], dst[1024], mirror[1024];
    uint64_t seed = 77;
    for (int i = 0; i < 1024; i++) src[i] = mirror[i] = (unsigned int) next_u64(&seed);
    CHECK(cuMemcpyHtoA(a, 0, src, sizeof src));
    CHECK(cuMemcpyAtoA(b, 0, a, 4 * 100, 4 * 500));                /* b[0..500) = a[100..600) */
    CUdeviceptr dbuf;
    CHECK(cuMemAlloc(&dbuf, 4 * 500));
    CHECK(cuMemcpyAtoD(dbuf, b, 0, 4 * 500));
    CHECK(cuMemcpyDtoA(a, 4 * 1000, dbuf, 4 * 24));                /* a[1000..1024) = a[100..124) */
    memcpy(mirror + 1000, src + 100, 4 * 24);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned int patch[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(cuMemcpyHtoAAsync(a, 4 * 8, patch, sizeof patch, s));
    memcpy(mirror + 8, patch, sizeof patch);
    CHECK(cuMemcpyAtoHAsync(dst, a, 0, sizeof dst, s));
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < 1024; i++) {
        if (dst[i] != mirror[i]) {
            fprintf(stderr, "array copies: element %d is %u, expected %u\n", i, dst[i], mirror[i]);
            return 1;
        }
    }
    CHECK(cuMemcpyAtoH(dst, b, 0, 4 * 500));
    if (memcmp(dst, src + 100, 4 * 500) != 0) {
        fprintf(stderr, "cuMemcpyAtoA/AtoH: wrong\n");
        return 1;
    }
    printf("cuMemcpyHtoA/AtoA/AtoD/DtoA/HtoAAsync/AtoHAsync/AtoH: 1024 words as the CPU moved them, fnv %016llx\n",
           (unsigned long long) fnv1a(FNV_INIT, mirror, sizeof mirror));
    EXPECT("cuMemcpyHtoA past the array's end", cuMemcpyHtoA(a, 4 * 1020, patch, sizeof patch), CUDA_ERROR_INVALID_VALUE);

    /* cuMemcpy3DPeer within the device: layer 2 of the layered array to host */
    CUDA_MEMCPY3D_PEER p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    p.srcArray = layered;
    p.srcZ = 2;
    p.srcContext = ctx;
    static float slice[H * W];
    p.dstMemoryType = CU_MEMORYTYPE_HOST;
    p.dstHost = slice;
    p.dstPitch = W * sizeof(float);
    p.dstHeight = H;
    p.dstContext = ctx;
    p.WidthInBytes = W * sizeof(float);
    p.Height = H;
    p.Depth = 1;
    CHECK(cuMemcpy3DPeer(&p));
    check_floats(slice, want + 2 * H * W, H * W, "cuMemcpy3DPeer");
    memset(slice, 0, sizeof slice);
    CHECK(cuMemcpy3DPeerAsync(&p, s));
    CHECK(cuStreamSynchronize(s));
    check_floats(slice, want + 2 * H * W, H * W, "cuMemcpy3DPeerAsync");
    printf("cuMemcpy3DPeer(Async): layer 2 as the kernel wrote it\n");

    /* a mipmapped array: 64 x 32 floats, 6 levels, each level an array of halved size */
    CUDA_ARRAY3D_DESCRIPTOR dm;
    memset(&dm, 0, sizeof dm);
    dm.Width = 64;
    dm.Height = 32;
    dm.Format = CU_AD_FORMAT_FLOAT;
    dm.NumChannels = 1;
    CUmipmappedArray mip;
    CHECK(cuMipmappedArrayCreate(&mip, &dm, 6));
    for (unsigned int lv = 0; lv < 6; lv++) {
        CUarray level;
        CHECK(cuMipmappedArrayGetLevel(&level, mip, lv));
        CUDA_ARRAY3D_DESCRIPTOR ld;
        CHECK(cuArray3DGetDescriptor(&ld, level));
        printf("level %u: %zux%zu\n", lv, ld.Width, ld.Height);
    }
    CHECK(cuMipmappedArrayDestroy(mip));

    CHECK(cuTexObjectDestroy(tex));
    CHECK(cuSurfObjectDestroy(surf));
    CHECK(cuArrayDestroy(layered));
    CHECK(cuArrayDestroy(a));
    CHECK(cuArrayDestroy(b));
    CHECK(cuMemFree(out));
    CHECK(cuMemFree(dbuf));
    CHECK(cuStreamDestroy(s));
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "arrays_driver: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
