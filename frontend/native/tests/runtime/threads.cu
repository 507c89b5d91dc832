// Eight host threads use the device at once through the runtime API, each with its own stream,
// buffers and kernel launches (the primary context is shared, as cudart does), checked per thread.
#include "common.cuh"
#include <pthread.h>

__global__ void affine(unsigned int *p, int n, unsigned int mul, unsigned int add) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = p[i] * mul + add;
    }
}

#define THREADS 8

struct work {
    int id;
    unsigned long long checksum;
    int ok;
};

static void *run(void *arg) {
    struct work *w = (struct work *) arg;
    int n = (1 << 18) + w->id * 1001;
    unsigned int *h = (unsigned int *) malloc(n * sizeof(unsigned int)), *d;
    uint64_t seed = 100 + w->id;
    for (int i = 0; i < n; i++) {
        h[i] = (unsigned int) splitmix64(&seed);
    }
    cudaStream_t s;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&s));
    CK(cudaMalloc(&d, n * sizeof(unsigned int)));
    CK(cudaMemcpyAsync(d, h, n * sizeof(unsigned int), cudaMemcpyHostToDevice, s));
    for (int k = 0; k < 10; k++) {
        affine<<<(n + 255) / 256, 256, 0, s>>>(d, n, 3 + w->id, k);
    }
    unsigned int *out = (unsigned int *) malloc(n * sizeof(unsigned int));
    CK(cudaMemcpyAsync(out, d, n * sizeof(unsigned int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    w->ok = 1;
    for (int i = 0; i < n; i++) {
        unsigned int v = h[i];
        for (int k = 0; k < 10; k++) {
            v = v * (3 + w->id) + k;
        }
        if (out[i] != v) {
            w->ok = 0;
            fprintf(stderr, "thread %d: element %d is %u, expected %u\n", w->id, i, out[i], v);
            break;
        }
    }
    w->checksum = fnv1a(out, n * sizeof(unsigned int));
    CK(cudaFree(d));
    CK(cudaStreamDestroy(s));
    free(h);
    free(out);
    return NULL;
}

int main() {
    CK(cudaFree(0)); // start the runtime on the main thread first
    pthread_t t[THREADS];
    struct work w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].ok = 0;
        if (pthread_create(&t[i], NULL, run, &w[i]) != 0) {
            FAIL("pthread_create");
        }
    }
    int ok = 1;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        printf("thread %d: %s, checksum %016llx\n", i, w[i].ok ? "ok" : "WRONG", w[i].checksum);
        ok &= w[i].ok;
    }
    if (!ok) {
        FAIL("a thread computed a wrong result");
    }
    printf("PASS\n");
    return 0;
}
