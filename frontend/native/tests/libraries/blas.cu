// cuBLAS SGEMM and DGEMM and a cuBLASLt matmul, each checked against a CPU product (the inputs are
// small integers, so every product is exact in float and double and the GPU's equals the CPU's).
// GPU only (scripts/gpu-libraries): cuBLAS ships no PTX the emulated device could run.
#include "../runtime/common.cuh"
#include <cublasLt.h>
#include <cublas_v2.h>

#define CB(call)                                                                          \
    do {                                                                                  \
        cublasStatus_t s_ = (call);                                                       \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                \
            FAIL("%s:%d: %s failed: %d %s", __FILE__, __LINE__, #call, (int) s_, cublasGetStatusName(s_)); \
        }                                                                                 \
    } while (0)

template <typename T>
static void fill(T *p, int n, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        p[i] = (T) ((int) (splitmix64(&seed) % 17) - 8);
    }
}

// C = A * B, column-major, m x k times k x n
template <typename T>
static void cpu_gemm(int m, int n, int k, const T *a, const T *b, T *c) {
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            T s = 0;
            for (int p = 0; p < k; p++) {
                s += a[i + p * m] * b[p + j * k];
            }
            c[i + j * m] = s;
        }
    }
}

template <typename T>
static int same(const T *x, const T *y, int n) {
    for (int i = 0; i < n; i++) {
        if (x[i] != y[i]) {
            fprintf(stderr, "element %d: %f vs %f\n", i, (double) x[i], (double) y[i]);
            return 0;
        }
    }
    return 1;
}

int main() {
    const int m = 384, n = 256, k = 320;
    cublasHandle_t h;
    CB(cublasCreate(&h));
    int version = 0;
    CB(cublasGetVersion(h, &version));
    fprintf(stderr, "cuBLAS %d\n", version);
    {
        float *ha = (float *) malloc(m * k * 4), *hb = (float *) malloc(k * n * 4), *hc = (float *) malloc(m * n * 4),
              *ref = (float *) malloc(m * n * 4);
        fill(ha, m * k, 1);
        fill(hb, k * n, 2);
        cpu_gemm(m, n, k, ha, hb, ref);
        float *a, *b, *c, one = 1, zero = 0;
        CK(cudaMalloc(&a, m * k * 4));
        CK(cudaMalloc(&b, k * n * 4));
        CK(cudaMalloc(&c, m * n * 4));
        CB(cublasSetMatrix(m, k, 4, ha, m, a, m));
        CB(cublasSetMatrix(k, n, 4, hb, k, b, k));
        CB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m, b, k, &zero, c, m));
        CB(cublasGetMatrix(m, n, 4, c, m, hc, m));
        printf("sgemm %dx%dx%d: equals the CPU: %d, checksum %016llx\n", m, n, k, same(hc, ref, m * n),
               (unsigned long long) fnv1a(hc, m * n * 4));
        // cuBLASLt: the same product through a matmul descriptor
        cublasLtHandle_t lt;
        CB(cublasLtCreate(&lt));
        cublasLtMatmulDesc_t op;
        CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        cublasLtMatrixLayout_t la, lb, lc;
        CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
        CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
        CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
        CK(cudaMemset(c, 0, m * n * 4));
        CB(cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, c, lc, c, lc, NULL, NULL, 0, 0));
        CK(cudaMemcpy(hc, c, m * n * 4, cudaMemcpyDeviceToHost));
        printf("cublasLt matmul: equals the CPU: %d\n", same(hc, ref, m * n));
        CB(cublasLtMatrixLayoutDestroy(la));
        CB(cublasLtMatrixLayoutDestroy(lb));
        CB(cublasLtMatrixLayoutDestroy(lc));
        CB(cublasLtMatmulDescDestroy(op));
        CB(cublasLtDestroy(lt));
        CK(cudaFree(a));
        CK(cudaFree(b));
        CK(cudaFree(c));
        free(ha);
        free(hb);
        free(hc);
        free(ref);
    }
    {
        double *ha = (double *) malloc(m * k * 8), *hb = (double *) malloc(k * n * 8), *hc = (double *) malloc(m * n * 8),
               *ref = (double *) malloc(m * n * 8);
        fill(ha, m * k, 3);
        fill(hb, k * n, 4);
        cpu_gemm(m, n, k, ha, hb, ref);
        double *a, *b, *c, one = 1, zero = 0;
        CK(cudaMalloc(&a, m * k * 8));
        CK(cudaMalloc(&b, k * n * 8));
        CK(cudaMalloc(&c, m * n * 8));
        CK(cudaMemcpy(a, ha, m * k * 8, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(b, hb, k * n * 8, cudaMemcpyHostToDevice));
        CB(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, m, b, k, &zero, c, m));
        CK(cudaMemcpy(hc, c, m * n * 8, cudaMemcpyDeviceToHost));
        printf("dgemm %dx%dx%d: equals the CPU: %d, checksum %016llx\n", m, n, k, same(hc, ref, m * n),
               (unsigned long long) fnv1a(hc, m * n * 8));
        CK(cudaFree(a));
        CK(cudaFree(b));
        CK(cudaFree(c));
        free(ha);
        free(hb);
        free(hc);
        free(ref);
    }
    CB(cublasDestroy(h));
    printf("PASS\n");
    return 0;
}
