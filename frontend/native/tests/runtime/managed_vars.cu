// __managed__ variables (issue 25): pointer attributes say managed; a counter with an initializer (the device's initial value is what the
// CPU first reads), a table the CPU fills and a kernel transforms, a struct holding a pointer to managed
// memory from cudaMallocManaged; the CPU reads each back after cudaDeviceSynchronize. Every value equals
// the CPU's reference.
#include "common.cuh"

__managed__ int counter = 7;
__managed__ float table[4096];
struct Box {
    int *data;
    int n;
};
__managed__ Box box;

__global__ void bump(int n) {
    atomicAdd(&counter, 1);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        table[i] = table[i] * 2.0f + 1.0f;
    }
    if (i < box.n) {
        box.data[i] += i;
    }
}

int main(void) {
    printf("counter before: %d\n", counter);
    cudaPointerAttributes attrs;
    CK(cudaPointerGetAttributes(&attrs, &table[100]));
    printf("table pointer type: %s\n", attrs.type == cudaMemoryTypeManaged ? "managed" : "not managed");
    for (int i = 0; i < 4096; i++) {
        table[i] = (float) (i % 100);
    }
    box.n = 1000;
    CK(cudaMallocManaged(&box.data, box.n * sizeof(int)));
    for (int i = 0; i < box.n; i++) {
        box.data[i] = 3 * i;
    }
    counter = 100;
    bump<<<16, 256>>>(4096);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    printf("counter after: %d\n", counter);
    if (counter != 100 + 16 * 256) {
        FAIL("counter %d, expected %d", counter, 100 + 16 * 256);
    }
    double sum = 0;
    for (int i = 0; i < 4096; i++) {
        float want = (float) (i % 100) * 2.0f + 1.0f;
        if (table[i] != want) {
            FAIL("table[%d] = %f, expected %f", i, table[i], want);
        }
        sum += table[i];
    }
    printf("table: n=4096 sum=%.0f ok\n", sum);
    long long bsum = 0;
    for (int i = 0; i < box.n; i++) {
        if (box.data[i] != 4 * i) {
            FAIL("box.data[%d] = %d, expected %d", i, box.data[i], 4 * i);
        }
        bsum += box.data[i];
    }
    printf("box: n=%d sum=%lld ok\n", box.n, bsum);
    CK(cudaFree(box.data));
    printf("PASS\n");
    return 0;
}
