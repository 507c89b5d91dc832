// cuFFT: a forward and inverse 1D complex transform of 4096 points (and a batched 2D real one);
// the round trip must give back the input times n to within float rounding.
#include "../runtime/common.cuh"
#include <cufft.h>
#include <math.h>

#define CF(call)                                                               \
    do {                                                                       \
        cufftResult r_ = (call);                                               \
        if (r_ != CUFFT_SUCCESS) {                                             \
            FAIL("%s:%d: %s failed: %d", __FILE__, __LINE__, #call, (int) r_); \
        }                                                                      \
    } while (0)

int main() {
    const int n = 4096;
    cufftComplex *h = (cufftComplex *) malloc(n * sizeof(cufftComplex)), *back = (cufftComplex *) malloc(n * sizeof(cufftComplex));
    uint64_t seed = 5;
    for (int i = 0; i < n; i++) {
        h[i].x = (float) (splitmix64(&seed) % 1000) / 100.0f;
        h[i].y = (float) (splitmix64(&seed) % 1000) / 100.0f;
    }
    cufftComplex *d;
    CK(cudaMalloc(&d, n * sizeof(cufftComplex)));
    CK(cudaMemcpy(d, h, n * sizeof(cufftComplex), cudaMemcpyHostToDevice));
    cufftHandle plan;
    CF(cufftPlan1d(&plan, n, CUFFT_C2C, 1));
    CF(cufftExecC2C(plan, d, d, CUFFT_FORWARD));
    cufftComplex dc;
    CK(cudaMemcpy(&dc, d, sizeof dc, cudaMemcpyDeviceToHost));
    double sx = 0, sy = 0;
    for (int i = 0; i < n; i++) {
        sx += h[i].x;
        sy += h[i].y;
    }
    printf("c2c forward: the DC term is the sum: %d\n", fabs(dc.x - sx) < 1e-2 * fabs(sx) && fabs(dc.y - sy) < 1e-2 * fabs(sy));
    CF(cufftExecC2C(plan, d, d, CUFFT_INVERSE));
    CK(cudaMemcpy(back, d, n * sizeof(cufftComplex), cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(back[i].x / n - h[i].x));
        worst = fmax(worst, fabs(back[i].y / n - h[i].y));
    }
    printf("c2c round trip of %d points: within 1e-3: %d\n", n, worst < 1e-3);
    CF(cufftDestroy(plan));
    // 2D real-to-complex, batch of 3
    const int nx = 64, ny = 48, batch = 3;
    float *rin;
    cufftComplex *cout_;
    CK(cudaMalloc(&rin, batch * nx * ny * sizeof(float)));
    CK(cudaMalloc(&cout_, batch * nx * (ny / 2 + 1) * sizeof(cufftComplex)));
    float *hr = (float *) malloc(batch * nx * ny * sizeof(float));
    for (int i = 0; i < batch * nx * ny; i++) {
        hr[i] = 1.0f;
    }
    CK(cudaMemcpy(rin, hr, batch * nx * ny * sizeof(float), cudaMemcpyHostToDevice));
    int dims[2] = {nx, ny};
    CF(cufftPlanMany(&plan, 2, dims, NULL, 1, 0, NULL, 1, 0, CUFFT_R2C, batch));
    CF(cufftExecR2C(plan, rin, cout_));
    cufftComplex first[2];
    CK(cudaMemcpy(first, cout_, sizeof first, cudaMemcpyDeviceToHost));
    printf("r2c 2D of ones: DC %.1f, next %.1f\n", first[0].x, first[1].x);
    CF(cufftDestroy(plan));
    CK(cudaFree(d));
    CK(cudaFree(rin));
    CK(cudaFree(cout_));
    printf("PASS\n");
    return 0;
}
