// Dynamic parallelism (built with -rdc=true -lcudadevrt): kernels launching kernels from device code, checked
// against the CPU. Each block of a parent grid launches a child grid into its NULL stream (two children in order,
// the second reading what the first wrote), a kernel launches itself down to a depth of 4, and a tail launch
// (cudaStreamTailLaunch) sums what the fire-and-forget children wrote, after all of them have completed.
#include "common.cuh"

__global__ void fill(int *out, int base, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = base * 1000 + i;
    }
}

__global__ void twice(int *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] *= 2;   // launched after fill into the same (NULL) stream: sees fill's values
    }
}

__global__ void parent(int *out, int per) {
    if (threadIdx.x == 0) {
        int *mine = out + blockIdx.x * per;
        fill<<<(per + 63) / 64, 64>>>(mine, blockIdx.x + 1, per);
        twice<<<(per + 31) / 32, 32>>>(mine, per);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) {
            mine[0] = -1;
        }
    }
}

// Each level writes its depth into its slot and launches the next, two children per node, down to depth 4.
__global__ void tree(int *nodes, int node, int depth) {
    nodes[node] = depth;
    if (depth < 4) {
        tree<<<1, 1>>>(nodes, 2 * node + 1, depth + 1);
        tree<<<1, 1>>>(nodes, 2 * node + 2, depth + 1);
    }
}

__global__ void total(const int *values, int n, unsigned long long *sum) {
    unsigned long long s = 0;
    for (int i = 0; i < n; i++) {
        s += values[i];
    }
    *sum = s;
}

__global__ void scatter_then_sum(int *values, int n, unsigned long long *sum) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        for (int b = 0; b < 4; b++) {
            fill<<<1, 64, 0, cudaStreamFireAndForget>>>(values + b * (n / 4), b, n / 4);
        }
        total<<<1, 1, 0, cudaStreamTailLaunch>>>(values, n, sum);
    }
}

int main() {
    const int blocks = 6, per = 100;
    int *d;
    CK(cudaMalloc(&d, blocks * per * sizeof(int)));
    CK(cudaMemset(d, 0, blocks * per * sizeof(int)));
    parent<<<blocks, 32>>>(d, per);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    int h[blocks * per];
    CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) {
        for (int i = 0; i < per; i++) {
            if (h[b * per + i] != 2 * ((b + 1) * 1000 + i)) {
                FAIL("child of block %d: element %d is %d", b, i, h[b * per + i]);
            }
        }
    }
    printf("children of %d blocks, in stream order: %d elements equal the CPU's, checksum %016llx\n", blocks, blocks * per,
           (unsigned long long) fnv1a(h, sizeof h));

    int *nodes;
    const int count = 31;
    CK(cudaMalloc(&nodes, count * sizeof(int)));
    CK(cudaMemset(nodes, 0xff, count * sizeof(int)));
    tree<<<1, 1>>>(nodes, 0, 0);
    CK(cudaDeviceSynchronize());
    int hn[count];
    CK(cudaMemcpy(hn, nodes, sizeof hn, cudaMemcpyDeviceToHost));
    for (int i = 0; i < count; i++) {
        int depth = 0;
        for (int k = i; k > 0; k = (k - 1) / 2) {
            depth++;
        }
        if (hn[i] != depth) {
            FAIL("tree node %d: depth %d, expected %d", i, hn[i], depth);
        }
    }
    printf("nested launches to depth 4: %d nodes\n", count);

    const int n = 256;
    int *values;
    unsigned long long *sum, hs = 0, want = 0;
    CK(cudaMalloc(&values, n * sizeof(int)));
    CK(cudaMalloc(&sum, sizeof *sum));
    scatter_then_sum<<<1, 32>>>(values, n, sum);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(&hs, sum, sizeof hs, cudaMemcpyDeviceToHost));
    for (int b = 0; b < 4; b++) {
        for (int i = 0; i < n / 4; i++) {
            want += (unsigned long long) (b * 1000 + i);
        }
    }
    if (hs != want) {
        FAIL("tail launch summed %llu, expected %llu", hs, want);
    }
    printf("tail launch after its fire-and-forget siblings: sum %llu\n", hs);
    CK(cudaFree(d));
    CK(cudaFree(nodes));
    CK(cudaFree(values));
    CK(cudaFree(sum));
    printf("PASS\n");
    return 0;
}
