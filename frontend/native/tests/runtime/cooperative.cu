// Cooperative launches, cudaLaunchKernelEx with attributes and occupancy through the runtime API.
// The kernels synchronise within blocks only (a grid-wide barrier needs every block resident at
// once, which the emulated device does not model), and the grid is sized from the occupancy query.
#include "common.cuh"

__global__ void block_sums(const unsigned int *in, unsigned long long *out, int n) {
    __shared__ unsigned long long part[256];
    unsigned long long s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        s += in[i];
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) {
            part[threadIdx.x] += part[threadIdx.x + w];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = part[0];
    }
}

int main() {
    int coop = 0, sms = 0, perSm = 0;
    CK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, block_sums, 256, 0));
    printf("cooperative launch: %d, occupancy known: %d\n", coop, perSm > 0);
    int minGrid = 0, bestBlock = 0;
    CK(cudaOccupancyMaxPotentialBlockSize(&minGrid, &bestBlock, block_sums, 0, 256));
    printf("potential block size within 256: %d\n", bestBlock);
    const int n = 1 << 20;
    unsigned int *h = (unsigned int *) malloc(n * sizeof(unsigned int)), *d;
    uint64_t seed = 9;
    unsigned long long want = 0;
    for (int i = 0; i < n; i++) {
        h[i] = (unsigned int) (splitmix64(&seed) & 0xffff);
        want += h[i];
    }
    CK(cudaMalloc(&d, n * sizeof(unsigned int)));
    CK(cudaMemcpy(d, h, n * sizeof(unsigned int), cudaMemcpyHostToDevice));
    int grid = 8; // within every device's co-residency limit
    unsigned long long *parts, hp[64];
    CK(cudaMalloc(&parts, sizeof hp));
    int count = n;
    void *args[] = {&d, &parts, &count};
    CK(cudaLaunchCooperativeKernel((void *) block_sums, dim3(grid), dim3(256), args, 0, 0));
    CK(cudaMemcpy(hp, parts, grid * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    unsigned long long got = 0;
    for (int b = 0; b < grid; b++) {
        got += hp[b];
    }
    printf("cooperative sum equals the CPU's: %d (%llu)\n", got == want, got);
    // cudaLaunchKernelEx with a priority attribute on a stream of its own
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(16);
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributePriority;
    attr[0].val.priority = 0;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, block_sums, (const unsigned int *) d, parts, count));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(hp, parts, 16 * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    got = 0;
    for (int b = 0; b < 16; b++) {
        got += hp[b];
    }
    printf("cudaLaunchKernelEx sum equals the CPU's: %d\n", got == want);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFree(parts));
    free(h);
    printf("PASS\n");
    return 0;
}
