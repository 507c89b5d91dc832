// The runtime API's everyday path: device queries, cudaMalloc/cudaMemcpy/cudaMemset, launches of
// plain, templated and dynamic-shared-memory kernels, __device__ and __constant__ symbols,
// function attributes and occupancy. Built with the default static cudart, with -cudart shared,
// and run with CUDA_MODULE_LOADING=EAGER as well as the default lazy loading.
#include "common.cuh"

__device__ unsigned int d_counter;
__constant__ float c_scale[4];

__global__ void vector_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

template <typename T, int K>
__global__ void scale_add(T *out, const T *in, T add, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * (T) K + add;
        atomicAdd(&d_counter, 1u);
    }
}

// Reverses each block's slice through dynamic shared memory, scaled by c_scale[blockIdx.x % 4].
__global__ void reverse_blocks(const float *in, float *out) {
    extern __shared__ float tile[];
    int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    tile[t] = in[base + t];
    __syncthreads();
    out[base + t] = tile[blockDim.x - 1 - t] * c_scale[blockIdx.x % 4];
}

int main() {
    int count = 0, dev = -1, version = 0;
    CK(cudaGetDeviceCount(&count));
    printf("devices: %d\n", count > 0);
    CK(cudaSetDevice(0));
    CK(cudaGetDevice(&dev));
    CK(cudaRuntimeGetVersion(&version));
    printf("device: %d, runtime %d\n", dev, version);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("compute capability %d.%d, warp %d, max threads per block %d, unified addressing %d\n", prop.major, prop.minor,
           prop.warpSize, prop.maxThreadsPerBlock, prop.unifiedAddressing);
    int attr = 0;
    CK(cudaDeviceGetAttribute(&attr, cudaDevAttrMaxSharedMemoryPerBlock, 0));
    printf("shared memory per block %d\n", attr);

    const int n = 1 << 20;
    float *ha = (float *) malloc(n * sizeof(float)), *hb = (float *) malloc(n * sizeof(float));
    float *hc = (float *) malloc(n * sizeof(float));
    uint64_t seed = 11;
    for (int i = 0; i < n; i++) {
        ha[i] = (float) (splitmix64(&seed) % 2048) - 1024.0f;
        hb[i] = (float) (splitmix64(&seed) % 2048);
    }
    float *a, *b, *c;
    CK(cudaMalloc(&a, n * sizeof(float)));
    CK(cudaMalloc(&b, n * sizeof(float)));
    CK(cudaMalloc(&c, n * sizeof(float)));
    CK(cudaMemcpy(a, ha, n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, hb, n * sizeof(float), cudaMemcpyHostToDevice));
    vector_add<<<(n + 255) / 256, 256>>>(a, b, c, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hc, c, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        if (hc[i] != ha[i] + hb[i]) {
            FAIL("vector_add: c[%d] = %f, expected %f", i, hc[i], ha[i] + hb[i]);
        }
    }
    printf("vector_add: %d elements, checksum %016llx\n", n, (unsigned long long) fnv1a(hc, n * sizeof(float)));

    // templates (mangled names), a __device__ counter through cudaMemcpyToSymbol/FromSymbol
    unsigned int zero = 0, counted = 0;
    CK(cudaMemcpyToSymbol(d_counter, &zero, sizeof zero));
    int m = n - 7;
    scale_add<float, 3><<<(m + 127) / 128, 128>>>(c, a, 0.5f, m);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hc, c, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < m; i++) {
        if (hc[i] != ha[i] * 3.0f + 0.5f) {
            FAIL("scale_add<float,3>: c[%d] = %f", i, hc[i]);
        }
    }
    CK(cudaMemcpyFromSymbol(&counted, d_counter, sizeof counted));
    printf("scale_add<float,3>: %d elements, counter %u\n", m, counted);
    int *ia, *ib;
    CK(cudaMalloc(&ia, 1000 * sizeof(int)));
    CK(cudaMalloc(&ib, 1000 * sizeof(int)));
    CK(cudaMemset(ia, 0, 1000 * sizeof(int)));
    scale_add<int, 7><<<8, 128>>>(ib, ia, -5, 1000);
    int hi[1000];
    CK(cudaMemcpy(hi, ib, sizeof hi, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 1000; i++) {
        if (hi[i] != -5) {
            FAIL("scale_add<int,7>: %d at %d", hi[i], i);
        }
    }
    CK(cudaMemcpyFromSymbol(&counted, d_counter, sizeof counted));
    printf("scale_add<int,7>: counter %u\n", counted);
    void *counter_address = NULL;
    size_t counter_size = 0;
    CK(cudaGetSymbolAddress(&counter_address, d_counter));
    CK(cudaGetSymbolSize(&counter_size, d_counter));
    printf("d_counter: %zu bytes, address known %d\n", counter_size, counter_address != NULL);

    // __constant__ memory and dynamic shared memory
    float scales[4] = {1.0f, -2.0f, 0.25f, 4.0f};
    CK(cudaMemcpyToSymbol(c_scale, scales, sizeof scales));
    reverse_blocks<<<n / 512, 512, 512 * sizeof(float)>>>(a, c);
    CK(cudaGetLastError());
    CK(cudaMemcpy(hc, c, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) {
        int blk = i / 512, t = i % 512;
        float want = ha[blk * 512 + 511 - t] * scales[blk % 4];
        if (hc[i] != want) {
            FAIL("reverse_blocks: c[%d] = %f, expected %f", i, hc[i], want);
        }
    }
    printf("reverse_blocks: checksum %016llx\n", (unsigned long long) fnv1a(hc, n * sizeof(float)));

    // memset, device-to-device copies at offsets
    CK(cudaMemset(c, 0x7f, 8192));
    CK(cudaMemcpy(c + 1024, a + 3, 333 * sizeof(float), cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(hc, c, 8192, cudaMemcpyDeviceToHost));
    int same = memcmp(hc + 1024, ha + 3, 333 * sizeof(float)) == 0;
    unsigned char *bytes = (unsigned char *) hc;
    int set = 1;
    for (int i = 0; i < 8192; i++) {
        if ((i < 1024 * 4 || i >= (1024 + 333) * 4) && bytes[i] != 0x7f) {
            set = 0;
        }
    }
    printf("memset and device copy: %d %d\n", set, same);

    // attributes and occupancy of a kernel
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, reverse_blocks));
    printf("reverse_blocks: max threads %d, static shared %zu\n", fa.maxThreadsPerBlock, fa.sharedSizeBytes);
    int blocks = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, vector_add, 256, 0));
    printf("vector_add: occupancy known %d\n", blocks > 0);
    CK(cudaFuncSetAttribute(reverse_blocks, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    reverse_blocks<<<2, 512, 60 * 1024>>>(a, c);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    printf("reverse_blocks with 60 KiB dynamic shared memory: ok\n");

    size_t free_bytes = 0, total_bytes = 0;
    CK(cudaMemGetInfo(&free_bytes, &total_bytes));
    printf("memory info: %d\n", free_bytes > 0 && free_bytes <= total_bytes);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(ia));
    CK(cudaFree(ib));
    CK(cudaDeviceReset());
    free(ha);
    free(hb);
    free(hc);
    printf("PASS\n");
    return 0;
}
