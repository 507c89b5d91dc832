// cuRAND: the host API's Philox and XORWOW generators with fixed seeds (their sequences are
// defined, so the checksums are the same on every GPU), and the device API's curand_init/curand.
#include "../runtime/common.cuh"
#include <curand.h>
#include <curand_kernel.h>

#define CR(call)                                                               \
    do {                                                                       \
        curandStatus_t r_ = (call);                                            \
        if (r_ != CURAND_STATUS_SUCCESS) {                                     \
            FAIL("%s:%d: %s failed: %d", __FILE__, __LINE__, #call, (int) r_); \
        }                                                                      \
    } while (0)

__global__ void draw(unsigned int *out, unsigned long long seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    curandStatePhilox4_32_10_t s;
    curand_init(seed, i, 0, &s);
    out[i] = curand(&s);
}

int main() {
    const int n = 1 << 20;
    unsigned int *d, *h = (unsigned int *) malloc(n * sizeof(unsigned int));
    CK(cudaMalloc(&d, n * sizeof(unsigned int)));
    curandRngType_t types[2] = {CURAND_RNG_PSEUDO_PHILOX4_32_10, CURAND_RNG_PSEUDO_XORWOW};
    const char *names[2] = {"philox", "xorwow"};
    for (int t = 0; t < 2; t++) {
        curandGenerator_t g;
        CR(curandCreateGenerator(&g, types[t]));
        CR(curandSetPseudoRandomGeneratorSeed(g, 1234));
        CR(curandGenerate(g, d, n));
        CK(cudaMemcpy(h, d, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
        printf("%s: %u %u, checksum %016llx\n", names[t], h[0], h[n - 1], (unsigned long long) fnv1a(h, n * 4));
        CR(curandDestroyGenerator(g));
    }
    draw<<<n / 256, 256>>>(d, 99);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, d, n * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    printf("device philox: %u, checksum %016llx\n", h[12345], (unsigned long long) fnv1a(h, n * 4));
    CK(cudaFree(d));
    free(h);
    printf("PASS\n");
    return 0;
}
