// Tensor-core instructions and asynchronous copies, checked against the CPU: a 64x64x64 GEMM with wmma (16x16x16
// half products accumulated in float), the same with mma.sync.m16n8k16 through inline PTX (fragments placed as the
// PTX ISA lays them out), a bf16 variant, and a tiled copy through shared memory with cp.async (the pipeline
// primitives, commit and wait). Inputs are small integers, so every product and sum is exact in any order.
#include "common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_pipeline.h>
#include <mma.h>

#include <type_traits>

using namespace nvcuda;

constexpr int N = 64;

// One warp per 16x16 tile of C: C = A * B + C, A row-major, B column-major.
__global__ void wmma_gemm(const half *a, const half *b, float *c) {
    int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int ti = tile / (N / 16), tj = tile % (N / 16);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::load_matrix_sync(fc, c + ti * 16 * N + tj * 16, N, wmma::mem_row_major);
    for (int k = 0; k < N; k += 16) {
        wmma::load_matrix_sync(fa, a + ti * 16 * N + k, N);
        wmma::load_matrix_sync(fb, b + tj * 16 * N + k, N);
        wmma::mma_sync(fc, fa, fb, fc);
    }
    for (int i = 0; i < fc.num_elements; i++) {
        fc.x[i] = fc.x[i] * 2.0f;   // element-wise on a fragment: the same for every layout
    }
    wmma::store_matrix_sync(c + ti * 16 * N + tj * 16, fc, N, wmma::mem_row_major);
}

// One warp per 16x8 tile of D = A * B (A row-major halves, B row-major halves), fragments as the PTX ISA gives them.
template <typename T>
__global__ void mma_gemm(const T *a, const T *b, float *d) {
    int tile = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int ti = tile / (N / 8), tj = tile % (N / 8);
    int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float acc[4] = {0, 0, 0, 0};
    for (int k = 0; k < N; k += 16) {
        unsigned int ra[4], rb[2];
        for (int r = 0; r < 4; r++) {
            int row = ti * 16 + g + 8 * (r & 1), col = k + 2 * t + 8 * (r >> 1);
            T lo = a[row * N + col], hi = a[row * N + col + 1];
            ra[r] = (unsigned int) *(unsigned short *) &lo | (unsigned int) *(unsigned short *) &hi << 16;
        }
        for (int r = 0; r < 2; r++) {
            int row = k + 2 * t + 8 * r, col = tj * 8 + g;
            T lo = b[row * N + col], hi = b[(row + 1) * N + col];
            rb[r] = (unsigned int) *(unsigned short *) &lo | (unsigned int) *(unsigned short *) &hi << 16;
        }
        if constexpr (std::is_same<T, half>::value) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                         "{%0, %1, %2, %3};"
                         : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                         : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        } else {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                         "{%0, %1, %2, %3};"
                         : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                         : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
        }
    }
    for (int i = 0; i < 4; i++) {
        int row = ti * 16 + g + 8 * (i >> 1), col = tj * 8 + 2 * t + (i & 1);
        d[row * N + col] = acc[i];
    }
}

// Each block copies 256 ints through shared memory with cp.async (16 bytes per thread), then writes them reversed.
__global__ void async_copy(const int *in, int *out) {
    __shared__ __align__(16) int buf[256];
    const int *src = in + blockIdx.x * 256;
    __pipeline_memcpy_async(&buf[threadIdx.x * 4], &src[threadIdx.x * 4], 16);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int k = 0; k < 4; k++) {
        out[blockIdx.x * 256 + threadIdx.x * 4 + k] = buf[255 - (threadIdx.x * 4 + k)];
    }
}

int main() {
    uint64_t seed = 77;
    static half ha[N * N], hb[N * N], hbr[N * N];
    static __nv_bfloat16 ba[N * N], bbr[N * N];
    static float fa[N * N], fb[N * N], fc[N * N], want[N * N], got[N * N];
    for (int i = 0; i < N * N; i++) {
        fa[i] = (float) ((int) (splitmix64(&seed) % 7) - 3);
        fb[i] = (float) ((int) (splitmix64(&seed) % 7) - 3);
        fc[i] = (float) ((int) (splitmix64(&seed) % 9) - 4);
    }
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < N; c++) {
            ha[r * N + c] = __float2half(fa[r * N + c]);
            ba[r * N + c] = __float2bfloat16(fa[r * N + c]);
            hb[c * N + r] = __float2half(fb[r * N + c]);   // column-major B for wmma
            hbr[r * N + c] = __float2half(fb[r * N + c]);  // row-major B for mma
            bbr[r * N + c] = __float2bfloat16(fb[r * N + c]);
        }
    }
    half *da, *db, *dbr;
    __nv_bfloat16 *dba, *dbbr;
    float *dc;
    CK(cudaMalloc(&da, sizeof ha));
    CK(cudaMalloc(&db, sizeof hb));
    CK(cudaMalloc(&dbr, sizeof hbr));
    CK(cudaMalloc(&dba, sizeof ba));
    CK(cudaMalloc(&dbbr, sizeof bbr));
    CK(cudaMalloc(&dc, sizeof fc));
    CK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbr, hbr, sizeof hbr, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dba, ba, sizeof ba, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dbbr, bbr, sizeof bbr, cudaMemcpyHostToDevice));

    CK(cudaMemcpy(dc, fc, sizeof fc, cudaMemcpyHostToDevice));
    wmma_gemm<<<(N / 16) * (N / 16) / 4, 128>>>(da, db, dc);
    CK(cudaGetLastError());
    CK(cudaMemcpy(got, dc, sizeof got, cudaMemcpyDeviceToHost));
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < N; c++) {
            float s = fc[r * N + c];
            for (int k = 0; k < N; k++) {
                s += fa[r * N + k] * fb[k * N + c];
            }
            want[r * N + c] = 2 * s;
            if (got[r * N + c] != want[r * N + c]) {
                FAIL("wmma: C[%d][%d] = %g, expected %g", r, c, got[r * N + c], want[r * N + c]);
            }
        }
    }
    printf("wmma 16x16x16 half->float, %dx%d: equal the CPU's, checksum %016llx\n", N, N,
           (unsigned long long) fnv1a(got, sizeof got));

    for (int variant = 0; variant < 2; variant++) {
        CK(cudaMemset(dc, 0, sizeof fc));
        if (variant == 0) {
            mma_gemm<half><<<(N / 16) * (N / 8) / 4, 128>>>(da, dbr, dc);
        } else {
            mma_gemm<__nv_bfloat16><<<(N / 16) * (N / 8) / 4, 128>>>(dba, dbbr, dc);
        }
        CK(cudaGetLastError());
        CK(cudaMemcpy(got, dc, sizeof got, cudaMemcpyDeviceToHost));
        for (int i = 0; i < N * N; i++) {
            float w = want[i] / 2 - fc[i];
            if (got[i] != w) {
                FAIL("mma %s: D[%d] = %g, expected %g", variant == 0 ? "f16" : "bf16", i, got[i], w);
            }
        }
        printf("mma.sync m16n8k16 %s->f32, %dx%d: equal the CPU's, checksum %016llx\n", variant == 0 ? "f16" : "bf16", N, N,
               (unsigned long long) fnv1a(got, sizeof got));
    }

    const int blocks = 5;
    int hin[blocks * 256], hout[blocks * 256];
    for (int i = 0; i < blocks * 256; i++) {
        hin[i] = (int) splitmix64(&seed);
    }
    int *din, *dout;
    CK(cudaMalloc(&din, sizeof hin));
    CK(cudaMalloc(&dout, sizeof hout));
    CK(cudaMemcpy(din, hin, sizeof hin, cudaMemcpyHostToDevice));
    async_copy<<<blocks, 64>>>(din, dout);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        for (int i = 0; i < 256; i++) {
            if (hout[b * 256 + i] != hin[b * 256 + 255 - i]) {
                FAIL("cp.async: block %d element %d", b, i);
            }
        }
    }
    printf("cp.async through shared memory: %d elements, checksum %016llx\n", blocks * 256,
           (unsigned long long) fnv1a(hout, sizeof hout));
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dbr));
    CK(cudaFree(dba));
    CK(cudaFree(dbbr));
    CK(cudaFree(dc));
    CK(cudaFree(din));
    CK(cudaFree(dout));
    printf("PASS\n");
    return 0;
}
