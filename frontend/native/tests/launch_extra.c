/*
 * launch_extra: gpus_fill_u32 launched through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE);
 * gpus_mixed12 (twelve parameters of sizes 1 to 16 bytes, alignments 1 to 16) through kernelParams
 * and through a packed `extra` buffer, its 176-byte output checked byte for byte; cuFuncGetParamInfo
 * of all twelve parameters; cuFuncGetAttribute; cuOccupancyMaxActiveBlocksPerMultiprocessor > 0;
 * kernelParams and extra together fail with CUDA_ERROR_INVALID_VALUE.
 * usage: launch_extra KERNELS.ptx
 */
#include "common.h"

/* gpus_mixed12's parameters 0..10: sizes, and offsets in the parameter buffer (PTX ABI). */
static const size_t MIXED_SIZES[12] = {1, 2, 4, 8, 4, 8, 8, 16, 2, 4, 16, 8};
static const size_t MIXED_OFFSETS[12] = {0, 2, 4, 8, 16, 24, 32, 48, 64, 68, 80, 96};
#define MIXED_BUFFER 104
#define MIXED_OUT 176

static void fill_extra(CUmodule mod) {
    CUfunction f = get_function(mod, "gpus_fill_u32");
    const unsigned int n = 100003;
    CUdeviceptr p;
    CHECK(cuMemAlloc(&p, 4 * (size_t) (n + 16)));
    CHECK(cuMemsetD32(p, 0, n + 16));
    struct {
        CUdeviceptr p;
        unsigned int value;
        unsigned int n;
    } args = {p, 0xCAFEF00Du, n};
    size_t size = sizeof args;
    if (size != 16) {
        fail("gpus_fill_u32 argument struct is %zu bytes, expected 16", size);
    }
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
    uint32_t *back = xmalloc(4 * (size_t) (n + 16));
    CHECK(cuMemcpyDtoH(back, p, 4 * (size_t) (n + 16)));
    for (unsigned int i = 0; i < n + 16; i++) {
        uint32_t want = i < n ? 0xCAFEF00Du : 0;
        if (back[i] != want) {
            fail("gpus_fill_u32 via extra: word %u is 0x%08x, expected 0x%08x", i, back[i], want);
        }
    }
    printf("gpus_fill_u32 via extra (16-byte buffer): %u words filled, none past the end\n", n);

    void *params[] = {&p, &args.value, (void *) &n};
    EXPECT("kernelParams and extra together", with_sync(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, extra)),
           CUDA_ERROR_INVALID_VALUE);

    int v;
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    printf("gpus_fill_u32 max threads per block: %d\n", v);
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    printf("gpus_fill_u32 registers: %d\n", v);
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
    printf("gpus_fill_u32 static shared memory: %d\n", v);
    CHECK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    printf("gpus_fill_u32 binary version: %d\n", v);
    int blocks = 0;
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    if (blocks <= 0) {
        fail("cuOccupancyMaxActiveBlocksPerMultiprocessor gave %d", blocks);
    }
    printf("gpus_fill_u32 occupancy at 256 threads: %d blocks per multiprocessor\n", blocks);
    CHECK(cuMemFree(p));
    free(back);
}

/* The parameter values: byte j of parameter k is 0x10*k + j + 1. */
static void mixed_values(unsigned char values[11][16]) {
    memset(values, 0, 11 * 16);
    for (int k = 0; k < 11; k++) {
        for (size_t j = 0; j < MIXED_SIZES[k]; j++) {
            values[k][j] = (unsigned char) (0x10 * k + (int) j + 1);
        }
    }
}

/* Launches gpus_mixed12 (by kernelParams, or by extra when packed) and checks all 176 output bytes. */
static void mixed12(CUfunction f, int packed) {
    _Alignas(16) unsigned char values[11][16];
    mixed_values(values);
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, MIXED_OUT));
    CHECK(cuMemsetD8(out, 0xEE, MIXED_OUT));
    if (packed) {
        _Alignas(16) unsigned char buffer[MIXED_BUFFER];
        memset(buffer, 0, sizeof buffer);
        for (int k = 0; k < 11; k++) {
            memcpy(buffer + MIXED_OFFSETS[k], values[k], MIXED_SIZES[k]);
        }
        memcpy(buffer + MIXED_OFFSETS[11], &out, 8);
        size_t size = sizeof buffer;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    } else {
        void *params[12];
        for (int k = 0; k < 11; k++) {
            params[k] = values[k];
        }
        params[11] = &out;
        CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    }
    unsigned char got[MIXED_OUT];
    CHECK(cuMemcpyDtoH(got, out, MIXED_OUT));
    for (int k = 0; k < 11; k++) {
        for (int j = 0; j < 16; j++) {
            if (got[16 * k + j] != values[k][j]) {
                fail("gpus_mixed12 via %s: out[%d] (parameter %d, byte %d) is 0x%02x, expected 0x%02x",
                     packed ? "extra" : "kernelParams", 16 * k + j, k, j, got[16 * k + j], values[k][j]);
            }
        }
    }
    printf("gpus_mixed12 via %s: all %d output bytes as expected\n", packed ? "extra (104-byte buffer)" : "kernelParams",
           MIXED_OUT);
    if (!packed) {
        for (int k = 0; k < 11; k++) {
            printf("  out[%3d..%3d]:", 16 * k, 16 * k + 15);
            for (int j = 0; j < 16; j++) {
                printf(" %02x", got[16 * k + j]);
            }
            printf("\n");
        }
    }
    CHECK(cuMemFree(out));
}

static void param_info(CUfunction f) {
    for (size_t k = 0; k < 12; k++) {
        size_t offset = 999, size = 999;
        CHECK(cuFuncGetParamInfo(f, k, &offset, &size));
        if (offset != MIXED_OFFSETS[k] || size != MIXED_SIZES[k]) {
            fail("cuFuncGetParamInfo(gpus_mixed12, %zu): offset %zu size %zu, expected %zu and %zu", k, offset, size,
                 MIXED_OFFSETS[k], MIXED_SIZES[k]);
        }
    }
    printf("cuFuncGetParamInfo(gpus_mixed12): offsets 0 2 4 8 16 24 32 48 64 68 80 96, sizes 1 2 4 8 4 8 8 16 2 4 16 8\n");
    size_t offset, size;
    EXPECT("cuFuncGetParamInfo past the last parameter", cuFuncGetParamInfo(f, 12, &offset, &size), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "launch_extra KERNELS.ptx");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_ptx_module(argv[1]);
    fill_extra(mod);
    CUfunction mixed = get_function(mod, "gpus_mixed12");
    param_info(mixed);
    mixed12(mixed, 0);
    mixed12(mixed, 1);
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "launch_extra: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
