/*
 * tensor_maps (GPU only, native: a record, not a check): what the driver's cuTensorMapEncodeTiled,
 * cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress write, and the
 * errors they give, for a set of cases that vary one parameter at a time from a base case. Each line:
 * case name, result, the 128 bytes of the CUtensorMap in hex (on success only: a refused encode may leave
 * bytes written, which no program may rely on and a remote answer does not copy back). The global
 * address is a fixed, 128-byte-aligned number: the encoders take any aligned address (they do not look
 * at the memory), so the output is the same on every run and machine with the same driver.
 * Listed in programs.list as GPU-only: scripts/gpu-programs also runs it through our libcuda.so.1 (the encoders
 * forwarded to the backend's driver) and compares the two outputs.
 * Ends with PASS when it ran to the end (every case recorded, whatever each encode answered), as the
 * programs scripts/gpu-programs judges by their last line; a failure of its own (no device, a failed
 * context) ends it earlier without PASS.
 * usage: tensor_maps
 */
#include "../common.h"

#define ADDR ((void *) 0x7f1234560000ULL)

static void print_map(const char *name, CUresult r, const CUtensorMap *map) {
    const unsigned char *b = (const unsigned char *) map;
    printf("%-34s %-28s ", name, err_name(r));
    if (r != CUDA_SUCCESS) {
        putchar('\n');
        return;
    }
    for (int i = 0; i < 128; i++) {
        printf("%02x", b[i]);
        if (i % 8 == 7 && i != 127) {
            putchar(' ');
        }
    }
    putchar('\n');
}

typedef struct {
    const char *name;
    CUtensorMapDataType type;
    cuuint32_t rank;
    void *addr;
    cuuint64_t dim[5];
    cuuint64_t stride[4];
    cuuint32_t box[5];
    cuuint32_t estride[5];
    CUtensorMapInterleave interleave;
    CUtensorMapSwizzle swizzle;
    CUtensorMapL2promotion l2;
    CUtensorMapFloatOOBfill oob;
} tiled_case;

static void tiled(tiled_case c) {
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    CUresult r = cuTensorMapEncodeTiled(&map, c.type, c.rank, c.addr, c.dim, c.stride, c.box, c.estride,
            c.interleave, c.swizzle, c.l2, c.oob);
    print_map(c.name, r, &map);
}

static tiled_case base2d(const char *name) {
    tiled_case c = {name, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, ADDR, {1024, 512, 1, 1, 1}, {4096, 0, 0, 0},
            {32, 16, 1, 1, 1}, {1, 1, 1, 1, 1}, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE};
    return c;
}

int main(void) {
    CUdevice dev;
    use_primary_context(&dev);
    int driver = 0;
    CHECK(cuDriverGetVersion(&driver));
    printf("driver %d, address %p\n", driver, ADDR);

    /* Tiled: the base case and one change at a time. */
    tiled(base2d("tiled.base"));
    tiled_case c;
    c = base2d("tiled.addr+128");
    c.addr = (char *) ADDR + 128;
    tiled(c);
    c = base2d("tiled.addr+16");
    c.addr = (char *) ADDR + 16;
    tiled(c);
    c = base2d("tiled.addr+8");
    c.addr = (char *) ADDR + 8;
    tiled(c);
    c = base2d("tiled.dim0=1000");
    c.dim[0] = 1000;
    tiled(c);
    c = base2d("tiled.dim1=7");
    c.dim[1] = 7;
    tiled(c);
    c = base2d("tiled.dim0=2^32");
    c.dim[0] = 1ULL << 32;
    c.stride[0] = 1ULL << 34;
    tiled(c);
    c = base2d("tiled.stride=8192");
    c.stride[0] = 8192;
    tiled(c);
    c = base2d("tiled.stride=4100");
    c.stride[0] = 4100;
    tiled(c);
    c = base2d("tiled.box=8x4");
    c.box[0] = 8;
    c.box[1] = 4;
    tiled(c);
    c = base2d("tiled.box0=256");
    c.box[0] = 256;
    tiled(c);
    c = base2d("tiled.box0=257");
    c.box[0] = 257;
    tiled(c);
    c = base2d("tiled.box0=3");
    c.box[0] = 3;
    tiled(c);
    c = base2d("tiled.estride=2,1");
    c.estride[0] = 2;
    tiled(c);
    c = base2d("tiled.estride=1,8");
    c.estride[1] = 8;
    tiled(c);
    c = base2d("tiled.estride0=9");
    c.estride[0] = 9;
    tiled(c);
    c = base2d("tiled.swizzle32");
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    c.box[0] = 8;
    tiled(c);
    c = base2d("tiled.swizzle64");
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_64B;
    c.box[0] = 16;
    tiled(c);
    c = base2d("tiled.swizzle128");
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    tiled(c);
    c = base2d("tiled.swizzle128.box0=64");
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
    c.box[0] = 64;
    tiled(c);
    c = base2d("tiled.swizzle128atom32");
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B;
    tiled(c);
    c = base2d("tiled.l2_64");
    c.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    tiled(c);
    c = base2d("tiled.l2_128");
    c.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    tiled(c);
    c = base2d("tiled.l2_256");
    c.l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    tiled(c);
    c = base2d("tiled.oobnan");
    c.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
    tiled(c);
    c = base2d("tiled.interleave16");
    c.rank = 3;
    c.dim[2] = 4;
    c.stride[1] = 4096 * 512;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_16B;
    c.box[0] = 4;
    c.box[2] = 1;
    tiled(c);
    c = base2d("tiled.interleave32");
    c.rank = 3;
    c.dim[2] = 4;
    c.stride[1] = 4096 * 512;
    c.interleave = CU_TENSOR_MAP_INTERLEAVE_32B;
    c.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
    c.box[0] = 8;
    c.box[2] = 1;
    tiled(c);
    static const struct {
        const char *name;
        CUtensorMapDataType type;
        unsigned int size;
    } types[] = {
            {"tiled.type.uint8", CU_TENSOR_MAP_DATA_TYPE_UINT8, 1},
            {"tiled.type.uint16", CU_TENSOR_MAP_DATA_TYPE_UINT16, 2},
            {"tiled.type.uint32", CU_TENSOR_MAP_DATA_TYPE_UINT32, 4},
            {"tiled.type.int32", CU_TENSOR_MAP_DATA_TYPE_INT32, 4},
            {"tiled.type.uint64", CU_TENSOR_MAP_DATA_TYPE_UINT64, 8},
            {"tiled.type.int64", CU_TENSOR_MAP_DATA_TYPE_INT64, 8},
            {"tiled.type.float16", CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2},
            {"tiled.type.float64", CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 8},
            {"tiled.type.bfloat16", CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2},
            {"tiled.type.float32ftz", CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, 4},
            {"tiled.type.tfloat32", CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, 4},
            {"tiled.type.tfloat32ftz", CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ, 4},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        c = base2d(types[i].name);
        c.type = types[i].type;
        tiled(c);
    }
    /* Ranks 1 to 5. */
    for (cuuint32_t rank = 1; rank <= 5; rank++) {
        char name[32];
        snprintf(name, sizeof name, "tiled.rank%u", rank);
        tiled_case r = base2d(name);
        r.rank = rank;
        cuuint64_t dims[5] = {64, 32, 16, 8, 4};
        cuuint64_t bytes = 4;
        for (cuuint32_t d = 0; d < rank; d++) {
            r.dim[d] = dims[d];
            r.box[d] = d == 0 ? 16 : 2;
            if (d > 0) {
                r.stride[d - 1] = bytes;
            }
            bytes *= dims[d];
        }
        tiled(r);
    }
    c = base2d("tiled.rank0");
    c.rank = 0;
    tiled(c);
    c = base2d("tiled.rank6");
    c.rank = 6;
    tiled(c);
    c = base2d("tiled.null-address");
    c.addr = NULL;
    tiled(c);

    /* Replace the address of the base map. */
    {
        CUtensorMap map;
        memset(&map, 0, sizeof map);
        tiled_case b = base2d("replace.base");
        CHECK(cuTensorMapEncodeTiled(&map, b.type, b.rank, b.addr, b.dim, b.stride, b.box, b.estride,
                b.interleave, b.swizzle, b.l2, b.oob));
        CUresult r = cuTensorMapReplaceAddress(&map, (char *) ADDR + 0x10000);
        print_map("replace.addr+0x10000", r, &map);
        r = cuTensorMapReplaceAddress(&map, (char *) ADDR + 8);
        print_map("replace.addr+8", r, &map);
    }

    /* Im2col: a 4D NHWC tensor. */
    {
        cuuint64_t dim[5] = {64, 28, 28, 8, 1};
        cuuint64_t stride[4] = {64 * 2, 64 * 2 * 28, 64 * 2 * 28 * 28, 0};
        cuuint32_t estride[5] = {1, 1, 1, 1, 1};
        int lower[3] = {-1, -1, 0}, upper[3] = {-1, -1, 0};
        CUtensorMap map;
        memset(&map, 0, sizeof map);
        CUresult r = cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, ADDR, dim, stride, lower,
                upper, 64, 128, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        print_map("im2col.base", r, &map);
        memset(&map, 0, sizeof map);
        lower[0] = -2;
        upper[0] = 1;
        r = cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, ADDR, dim, stride, lower, upper, 32,
                64, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        print_map("im2col.corners-2,1", r, &map);
        memset(&map, 0, sizeof map);
        cuuint64_t dim5[5] = {32, 8, 8, 8, 2};
        cuuint64_t stride5[4] = {32 * 4, 32 * 4 * 8, 32 * 4 * 64, 32 * 4 * 512};
        int lower5[3] = {-1, -1, -1}, upper5[3] = {1, 1, 1};
        r = cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 5, ADDR, dim5, stride5, lower5, upper5,
                32, 16, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
        print_map("im2col.rank5", r, &map);
        memset(&map, 0, sizeof map);
        r = cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, ADDR, dim, stride, lower, upper, 64,
                128, estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        print_map("im2col.rank2", r, &map);
#if CUDA_VERSION >= 12080
        memset(&map, 0, sizeof map);
        r = cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, ADDR, dim, stride, -1, 1, 64, 128,
                estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        print_map("im2colwide.base", r, &map);
        memset(&map, 0, sizeof map);
        r = cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, ADDR, dim, stride, -1, 1, 64, 128,
                estride, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        print_map("im2colwide.w128", r, &map);
#endif
    }
    release_primary_context(dev);
    printf("PASS\n");
    return 0;
}
