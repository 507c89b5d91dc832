// Separate compilation (-rdc=true): kernels here call device functions and read a __device__
// table defined in rdc_lib.cu, linked by nvcc's device link step. The runtime then registers a
// version-2 fatbin wrapper whose image is the NULL-terminated array of the linked fatbins.
#include "common.cuh"

extern __device__ int lookup_table[16];
extern __device__ int polynomial(int x);
extern __device__ int next_collatz(int x);

__global__ void evaluate(const int *in, int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int steps = 0, x = in[i];
        while (x != 1 && steps < 1000) {
            x = next_collatz(x);
            steps++;
        }
        out[i] = polynomial(in[i] % 100) + lookup_table[in[i] % 16] + steps;
    }
}

int main() {
    const int n = 100000;
    int *h = (int *) malloc(n * sizeof(int)), *hout = (int *) malloc(n * sizeof(int));
    uint64_t seed = 7;
    for (int i = 0; i < n; i++) {
        h[i] = 1 + (int) (splitmix64(&seed) % 100000);
    }
    int *din, *dout;
    CK(cudaMalloc(&din, n * sizeof(int)));
    CK(cudaMalloc(&dout, n * sizeof(int)));
    CK(cudaMemcpy(din, h, n * sizeof(int), cudaMemcpyHostToDevice));
    evaluate<<<(n + 127) / 128, 128>>>(din, dout, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hout, dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int steps = 0, x = h[i];
        while (x != 1 && steps < 1000) {
            x = x % 2 ? 3 * x + 1 : x / 2;
            steps++;
        }
        int v = h[i] % 100;
        int want = (v * v * 3 - 7 * v + 11) + (h[i] % 16) * (h[i] % 16) + steps;
        if (hout[i] != want) {
            FAIL("evaluate: out[%d] = %d, expected %d", i, hout[i], want);
        }
    }
    printf("evaluate: %d elements, checksum %016llx\n", n, (unsigned long long) fnv1a(hout, n * sizeof(int)));
    int table[16];
    CK(cudaMemcpyFromSymbol(table, lookup_table, sizeof table));
    printf("lookup_table[15] = %d\n", table[15]);
    CK(cudaFree(din));
    CK(cudaFree(dout));
    free(h);
    free(hout);
    printf("PASS\n");
    return 0;
}
