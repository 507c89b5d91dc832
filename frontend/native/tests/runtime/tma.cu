// Tensor memory access (TMA) from a runtime-API program, as CUTLASS-style kernels use it: tensor maps built on the
// host with cuTensorMapEncodeTiled (reached through cudaGetDriverEntryPointByVersion), passed to kernels as
// __grid_constant__ parameters, boxes loaded into shared memory by cp.async.bulk.tensor completing an mbarrier and
// stored back with a bulk group, in 2D and 3D, unswizzled and with the 64B and 128B swizzles, with boxes reaching past
// the tensor's edges (zero fill on load, nothing written on store) and an element stride; cuTensorMapReplaceAddress
// pointing a map at another buffer; encodes the driver documents as invalid refused. Every datum is compared with a
// CPU reference that lays out and swizzles the box as the CUDA documentation describes.
#include "common.cuh"
#include <cuda.h>

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                              const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
typedef CUresult (*replace_fn)(CUtensorMap *, void *);

static encode_fn encode;
static replace_fn replace;

static void *entry(const char *name) {
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || fn == NULL) {
        FAIL("%s: not found", name);
    }
    return fn;
}

#define CU(call)                                                        \
    do {                                                                \
        CUresult r_ = (call);                                           \
        if (r_ != CUDA_SUCCESS) {                                       \
            FAIL("%s:%d: %s failed: %d", __FILE__, __LINE__, #call, r_); \
        }                                                               \
    } while (0)

#define MAX_WORDS 2048

// Thread 0 loads the box at (c0, c1[, c2]) into a 1024-byte-aligned tile, completing an mbarrier; every thread then
// copies the tile's first `words` 32-bit words (its raw shared-memory layout, swizzle included) to out.
template <int DIMS>
__global__ void tma_load(const __grid_constant__ CUtensorMap map, int c0, int c1, int c2, unsigned words, unsigned *out) {
    __shared__ alignas(1024) unsigned tile[MAX_WORDS];
    __shared__ alignas(8) unsigned long long bar;
    unsigned smem = (unsigned) __cvta_generic_to_shared(tile);
    unsigned b = (unsigned) __cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        if (DIMS == 2) {
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         ::"r"(smem), "l"(&map), "r"(c0), "r"(c1), "r"(b) : "memory");
        } else {
            asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                         ::"r"(smem), "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(b) : "memory");
        }
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(words * 4) : "memory");
    }
    __syncthreads();
    unsigned ready = 0;
    while (!ready) {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(ready) : "r"(b) : "memory");
    }
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
        out[i] = tile[i];
    }
}

// Every thread fills tile word i with 5000 + 3i; thread 0 then stores the box at (c0, c1) through the map.
__global__ void tma_store(const __grid_constant__ CUtensorMap map, int c0, int c1, unsigned words) {
    __shared__ alignas(1024) unsigned tile[MAX_WORDS];
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x) {
        tile[i] = 5000 + 3 * i;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned smem = (unsigned) __cvta_generic_to_shared(tile);
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];"
                     ::"l"(&map), "r"(c0), "r"(c1), "r"(smem) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}

// The swizzles of cuda.h's CUtensorMapSwizzle (16-byte chunks within 32/64/128-byte spans): the chunk index XOR the
// 128-byte row index, from the shared-memory offset (the tile is 1024-aligned).
static unsigned swizzled(unsigned offset, CUtensorMapSwizzle s) {
    unsigned bits = s == CU_TENSOR_MAP_SWIZZLE_32B ? 0x10 : s == CU_TENSOR_MAP_SWIZZLE_64B ? 0x30 : s == CU_TENSOR_MAP_SWIZZLE_128B ? 0x70 : 0;
    return offset ^ ((offset >> 3) & bits);
}

static unsigned value(int x, int y, int z) {
    return 1000000u * z + 1000u * y + x;
}

static unsigned *dev_out;

static CUtensorMap tiled(void *base, int rank, const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                         const cuuint32_t *es, CUtensorMapSwizzle swizzle) {
    CUtensorMap map __attribute__((aligned(64)));
    CU(encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, rank, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
              swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
    return map;
}

// Loads the 2D box at (c0, c1) of a w x h tensor (row pitch `pitch` words) whose element (x, y) is value(x, y, 0),
// and checks every word of the tile against the CPU's layout of it.
static void load2d(const char *label, const CUtensorMap &map, int w, int h, const cuuint32_t *box, CUtensorMapSwizzle s,
                   int c0, int c1) {
    unsigned words = box[0] * box[1];
    tma_load<2><<<1, 128>>>(map, c0, c1, 0, words, dev_out);
    CK(cudaGetLastError());
    static unsigned got[MAX_WORDS];
    CK(cudaMemcpy(got, dev_out, words * 4, cudaMemcpyDeviceToHost));
    static unsigned want[MAX_WORDS];
    int outside = 0;
    for (unsigned y = 0; y < box[1]; y++) {
        for (unsigned x = 0; x < box[0]; x++) {
            int gx = c0 + (int) x, gy = c1 + (int) y;
            bool in = gx >= 0 && gx < w && gy >= 0 && gy < h;
            outside += !in;
            want[swizzled((y * box[0] + x) * 4, s) / 4] = in ? value(gx, gy, 0) : 0;
        }
    }
    for (unsigned i = 0; i < words; i++) {
        if (got[i] != want[i]) {
            FAIL("%s at (%d, %d): tile word %u is %u, expected %u", label, c0, c1, i, got[i], want[i]);
        }
    }
    printf("%s box at (%d, %d): %u words, %d outside the tensor, fnv %016llx\n", label, c0, c1, words, outside,
           (unsigned long long) fnv1a(got, words * 4));
}

static void expect_invalid(const char *label, CUresult r) {
    if (r != CUDA_ERROR_INVALID_VALUE) {
        FAIL("%s: %d, expected CUDA_ERROR_INVALID_VALUE", label, r);
    }
    printf("invalid %s: CUDA_ERROR_INVALID_VALUE\n", label);
}

int main() {
    CK(cudaFree(0));
    encode = (encode_fn) entry("cuTensorMapEncodeTiled");
    replace = (replace_fn) entry("cuTensorMapReplaceAddress");
    CK(cudaMalloc(&dev_out, MAX_WORDS * 4));

    // A 100 x 50 tensor in rows of 104 words (the padding words hold a value no box may show).
    const int W = 100, H = 50, PITCH = 104;
    static unsigned host[PITCH * H];
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < PITCH; x++) {
            host[y * PITCH + x] = x < W ? value(x, y, 0) : 0xdeadbeefu;
        }
    }
    unsigned *a, *b;
    CK(cudaMalloc(&a, sizeof host));
    CK(cudaMalloc(&b, sizeof host));
    CK(cudaMemcpy(a, host, sizeof host, cudaMemcpyHostToDevice));
    const cuuint64_t dims2[] = {W, H}, strides2[] = {PITCH * 4};
    const cuuint32_t box2[] = {32, 8}, es2[] = {1, 1};
    CUtensorMap plain = tiled(a, 2, dims2, strides2, box2, es2, CU_TENSOR_MAP_SWIZZLE_NONE);
    load2d("2d", plain, W, H, box2, CU_TENSOR_MAP_SWIZZLE_NONE, 0, 0);
    load2d("2d", plain, W, H, box2, CU_TENSOR_MAP_SWIZZLE_NONE, 40, 21);
    load2d("2d", plain, W, H, box2, CU_TENSOR_MAP_SWIZZLE_NONE, 96, 46);
    load2d("2d", plain, W, H, box2, CU_TENSOR_MAP_SWIZZLE_NONE, -8, -3);
    CUtensorMap sw128 = tiled(a, 2, dims2, strides2, box2, es2, CU_TENSOR_MAP_SWIZZLE_128B);
    load2d("2d swizzle 128B", sw128, W, H, box2, CU_TENSOR_MAP_SWIZZLE_128B, 64, 8);
    load2d("2d swizzle 128B", sw128, W, H, box2, CU_TENSOR_MAP_SWIZZLE_128B, 80, 45);
    const cuuint32_t box64[] = {16, 16};
    CUtensorMap sw64 = tiled(a, 2, dims2, strides2, box64, es2, CU_TENSOR_MAP_SWIZZLE_64B);
    load2d("2d swizzle 64B", sw64, W, H, box64, CU_TENSOR_MAP_SWIZZLE_64B, 90, 3);

    // The same map pointed at a second buffer holding the tensor plus 7 in each element.
    static unsigned other[PITCH * H];
    for (int i = 0; i < PITCH * H; i++) {
        other[i] = host[i] + 7;
    }
    CK(cudaMemcpy(b, other, sizeof other, cudaMemcpyHostToDevice));
    CUtensorMap moved = plain;
    CU(replace(&moved, b));
    tma_load<2><<<1, 128>>>(moved, 8, 2, 0, 256, dev_out);
    static unsigned got[MAX_WORDS];
    CK(cudaMemcpy(got, dev_out, 256 * 4, cudaMemcpyDeviceToHost));
    for (int y = 0; y < 8; y++) {
        for (int x = 0; x < 32; x++) {
            if (got[y * 32 + x] != value(8 + x, 2 + y, 0) + 7) {
                FAIL("replaced address: element (%d, %d) is %u", x, y, got[y * 32 + x]);
            }
        }
    }
    printf("replaced address: box from the second buffer, fnv %016llx\n", (unsigned long long) fnv1a(got, 256 * 4));
    expect_invalid("replaced address not 16-aligned", replace(&moved, (char *) b + 4));

    // A 3D tensor 16 x 12 x 6, box 16 x 6 x 4 taking every second row: 16 x 3 x 4 elements, its last plane outside.
    const int X = 16, Y = 12, Z = 6;
    static unsigned cube[X * Y * Z];
    for (int z = 0; z < Z; z++) {
        for (int y = 0; y < Y; y++) {
            for (int x = 0; x < X; x++) {
                cube[(z * Y + y) * X + x] = value(x, y, z);
            }
        }
    }
    unsigned *c;
    CK(cudaMalloc(&c, sizeof cube));
    CK(cudaMemcpy(c, cube, sizeof cube, cudaMemcpyHostToDevice));
    const cuuint64_t dims3[] = {X, Y, Z}, strides3[] = {X * 4, X * Y * 4};
    const cuuint32_t box3[] = {16, 6, 4}, es3[] = {1, 2, 1};
    CUtensorMap map3 = tiled(c, 3, dims3, strides3, box3, es3, CU_TENSOR_MAP_SWIZZLE_NONE);
    tma_load<3><<<1, 128>>>(map3, 0, 3, 3, 16 * 3 * 4, dev_out);
    CK(cudaMemcpy(got, dev_out, 16 * 3 * 4 * 4, cudaMemcpyDeviceToHost));
    int k = 0;
    for (int z = 0; z < 4; z++) {
        for (int y = 0; y < 3; y++) {
            for (int x = 0; x < 16; x++, k++) {
                int gy = 3 + 2 * y, gz = 3 + z;
                unsigned want = gy < Y && gz < Z ? value(x, gy, gz) : 0;
                if (got[k] != want) {
                    FAIL("3d box: element (%d, %d, %d) is %u, expected %u", x, y, z, got[k], want);
                }
            }
        }
    }
    printf("3d box at (0, 3, 3), element strides 1 2 1: 192 words, fnv %016llx\n", (unsigned long long) fnv1a(got, 192 * 4));

    // Stores: a 40 x 20 tensor filled with a guard value; a 16 x 8 box at (32, 16) with the 64B swizzle writes only
    // the 8 x 4 elements inside the tensor.
    const int SW = 40, SH = 20;
    unsigned *s;
    CK(cudaMalloc(&s, SW * SH * 4));
    CK(cudaMemset(s, 0xaa, SW * SH * 4));
    const cuuint64_t dimsS[] = {SW, SH}, stridesS[] = {SW * 4};
    const cuuint32_t boxS[] = {16, 8};
    CUtensorMap store = tiled(s, 2, dimsS, stridesS, boxS, es2, CU_TENSOR_MAP_SWIZZLE_64B);
    tma_store<<<1, 128>>>(store, 32, 16, 16 * 8);
    CK(cudaGetLastError());
    static unsigned stored[SW * SH];
    CK(cudaMemcpy(stored, s, sizeof stored, cudaMemcpyDeviceToHost));
    int written = 0;
    for (int y = 0; y < SH; y++) {
        for (int x = 0; x < SW; x++) {
            int bx = x - 32, by = y - 16;
            unsigned want = 0xaaaaaaaau;
            if (bx >= 0 && bx < 16 && by >= 0 && by < 8) {
                // the tile word the swizzled layout puts at box element (bx, by)
                want = 5000 + 3 * (swizzled((unsigned) (by * 16 + bx) * 4, CU_TENSOR_MAP_SWIZZLE_64B) / 4);
                written++;
            }
            if (stored[y * SW + x] != want) {
                FAIL("store: element (%d, %d) is %08x, expected %08x", x, y, stored[y * SW + x], want);
            }
        }
    }
    printf("2d store swizzle 64B at (32, 16): %d elements written, the rest untouched, fnv %016llx\n", written,
           (unsigned long long) fnv1a(stored, sizeof stored));

    // Encodes the driver documents as invalid.
    CUtensorMap m __attribute__((aligned(64)));
    const cuuint64_t dims6[] = {4, 4, 4, 4, 4, 4}, strides6[] = {16, 64, 256, 1024, 4096};
    const cuuint32_t box6[] = {4, 4, 4, 4, 4, 4}, es6[] = {1, 1, 1, 1, 1, 1};
    const CUtensorMapSwizzle none = CU_TENSOR_MAP_SWIZZLE_NONE;
    const CUtensorMapInterleave il = CU_TENSOR_MAP_INTERLEAVE_NONE;
    const CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_NONE;
    const CUtensorMapFloatOOBfill fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
    const CUtensorMapDataType u32 = CU_TENSOR_MAP_DATA_TYPE_UINT32;
    expect_invalid("rank 0", encode(&m, u32, 0, a, dims2, strides2, box2, es2, il, none, l2, fill));
    expect_invalid("rank 6", encode(&m, u32, 6, a, dims6, strides6, box6, es6, il, none, l2, fill));
    expect_invalid("address not 16-aligned", encode(&m, u32, 2, (char *) a + 4, dims2, strides2, box2, es2, il, none, l2, fill));
    const cuuint64_t badStride[] = {404};
    expect_invalid("stride not a multiple of 16", encode(&m, u32, 2, a, dims2, badStride, box2, es2, il, none, l2, fill));
    const cuuint64_t zeroDim[] = {0, H};
    expect_invalid("dimension 0", encode(&m, u32, 2, a, zeroDim, strides2, box2, es2, il, none, l2, fill));
    const cuuint32_t box0[] = {32, 0}, box257[] = {32, 257}, box6w[] = {6, 8};
    expect_invalid("box 0", encode(&m, u32, 2, a, dims2, strides2, box0, es2, il, none, l2, fill));
    expect_invalid("box 257", encode(&m, u32, 2, a, dims2, strides2, box257, es2, il, none, l2, fill));
    expect_invalid("inner box of 24 bytes", encode(&m, u32, 2, a, dims2, strides2, box6w, es2, il, none, l2, fill));
    const cuuint32_t es9[] = {1, 9};
    expect_invalid("element stride 9", encode(&m, u32, 2, a, dims2, strides2, box2, es9, il, none, l2, fill));
    const cuuint32_t wide[] = {64, 8};
    expect_invalid("inner box of 256 bytes with swizzle 128B",
                   encode(&m, u32, 2, a, dims2, strides2, wide, es2, il, CU_TENSOR_MAP_SWIZZLE_128B, l2, fill));
    expect_invalid("NaN fill of an integer type", encode(&m, u32, 2, a, dims2, strides2, box2, es2, il, none, l2,
                                                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA));
    expect_invalid("interleave with rank 2",
                   encode(&m, u32, 2, a, dims2, strides2, box2, es2, CU_TENSOR_MAP_INTERLEAVE_16B, none, l2, fill));

    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(s));
    CK(cudaFree(dev_out));
    printf("PASS\n");
    return 0;
}
