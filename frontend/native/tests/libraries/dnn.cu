// cuDNN: one convolution forward (NCHW float, 3x3, padding 1, implicit GEMM) of small integers,
// exact in float, checked against a CPU convolution.
#include "../runtime/common.cuh"
#include <cudnn.h>

#define CD(call)                                                                                        \
    do {                                                                                                \
        cudnnStatus_t s_ = (call);                                                                      \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                               \
            FAIL("%s:%d: %s failed: %d %s", __FILE__, __LINE__, #call, (int) s_, cudnnGetErrorString(s_)); \
        }                                                                                               \
    } while (0)

int main() {
    const int N = 2, C = 3, H = 20, W = 24, K = 4, R = 3, S = 3;
    cudnnHandle_t h;
    CD(cudnnCreate(&h));
    fprintf(stderr, "cuDNN %zu\n", cudnnGetVersion());
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CD(cudnnCreateTensorDescriptor(&xd));
    CD(cudnnCreateTensorDescriptor(&yd));
    CD(cudnnCreateFilterDescriptor(&wd));
    CD(cudnnCreateConvolutionDescriptor(&cd));
    CD(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W));
    CD(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S));
    CD(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    int on, oc, oh, ow;
    CD(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
    CD(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
    printf("output %dx%dx%dx%d\n", on, oc, oh, ow);
    int nx = N * C * H * W, nw = K * C * R * S, ny = on * oc * oh * ow;
    float *hx = (float *) malloc(nx * 4), *hw = (float *) malloc(nw * 4), *hy = (float *) malloc(ny * 4),
          *ref = (float *) calloc(ny, 4);
    uint64_t seed = 3;
    for (int i = 0; i < nx; i++) hx[i] = (float) ((int) (splitmix64(&seed) % 9) - 4);
    for (int i = 0; i < nw; i++) hw[i] = (float) ((int) (splitmix64(&seed) % 5) - 2);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    float s = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int q = 0; q < S; q++) {
                                int iy = y + r - 1, ix = x + q - 1;
                                if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                                    s += hx[((n * C + c) * H + iy) * W + ix] * hw[((k * C + c) * R + r) * S + q];
                                }
                            }
                    ref[((n * K + k) * H + y) * W + x] = s;
                }
    float *dx, *dw, *dy;
    CK(cudaMalloc(&dx, nx * 4));
    CK(cudaMalloc(&dw, nw * 4));
    CK(cudaMalloc(&dy, ny * 4));
    CK(cudaMemcpy(dx, hx, nx * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, hw, nw * 4, cudaMemcpyHostToDevice));
    cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    size_t ws = 0;
    CD(cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, algo, &ws));
    void *work = NULL;
    if (ws > 0) {
        CK(cudaMalloc(&work, ws));
    }
    float one = 1, zero = 0;
    CD(cudnnConvolutionForward(h, &one, xd, dx, wd, dw, cd, algo, work, ws, &zero, yd, dy));
    CK(cudaMemcpy(hy, dy, ny * 4, cudaMemcpyDeviceToHost));
    int same = 1;
    for (int i = 0; i < ny; i++) {
        if (hy[i] != ref[i]) {
            fprintf(stderr, "y[%d] = %f, expected %f\n", i, hy[i], ref[i]);
            same = 0;
            break;
        }
    }
    printf("convolution forward equals the CPU: %d, checksum %016llx\n", same, (unsigned long long) fnv1a(hy, ny * 4));
    CD(cudnnDestroyTensorDescriptor(xd));
    CD(cudnnDestroyTensorDescriptor(yd));
    CD(cudnnDestroyFilterDescriptor(wd));
    CD(cudnnDestroyConvolutionDescriptor(cd));
    CD(cudnnDestroy(h));
    printf("PASS\n");
    return 0;
}
