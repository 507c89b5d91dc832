// The start-up of a CUDA runtime-API program (DESIGN §10: main to its first cudaMalloc), timed by the
// program itself on CLOCK_MONOTONIC, for `scripts/bench startup`. Built by nvcc with the default
// static cudart. It prints its figures before anything that may fail, so a library that gets the
// program only part of the way still yields the time to its first cudaMalloc:
//   startup main-to-malloc-ms=<ms> malloc=<cudaError name> since-exec-ms=<ms>
//   startup vector-add=<ok|cudaError name> total-ms=<ms>
// since-exec-ms adds the time from the process's start (its start time in /proc/self/stat) to main.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

static double now_ms(clockid_t clock) {
    timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// The process's start on CLOCK_BOOTTIME (field 22 of /proc/self/stat, in clock ticks), or -1.
static double process_start_ms() {
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL) {
        return -1;
    }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL) {
        return -1;
    }
    unsigned long long start = 0;
    int field = 2;
    for (char *tok = strtok(p + 1, " "); tok != NULL; tok = strtok(NULL, " ")) {
        if (++field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    }
    return start * 1e3 / sysconf(_SC_CLK_TCK);
}

__global__ void add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

int main() {
    double t0 = now_ms(CLOCK_MONOTONIC);
    double boot0 = now_ms(CLOCK_BOOTTIME);
    const int n = 1 << 16;
    float *a = NULL, *b = NULL, *c = NULL;
    cudaError_t e = cudaMalloc((void **) &a, n * sizeof(float));
    double t1 = now_ms(CLOCK_MONOTONIC);
    double start = process_start_ms();
    printf("startup main-to-malloc-ms=%.3f malloc=%s since-exec-ms=%.3f\n", t1 - t0, cudaGetErrorName(e),
           start < 0 ? -1.0 : boot0 - start + (t1 - t0));
    fflush(stdout);
    if (e == cudaSuccess) {
        e = cudaMalloc((void **) &b, n * sizeof(float));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **) &c, n * sizeof(float));
    }
    float *h = (float *) malloc(n * sizeof(float));
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        h[i] = (float) i;
    }
    if (e == cudaSuccess) {
        e = cudaMemcpy(a, h, n * sizeof(float), cudaMemcpyHostToDevice);
    }
    if (e == cudaSuccess) {
        e = cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyHostToDevice);
    }
    if (e == cudaSuccess) {
        add<<<(n + 255) / 256, 256>>>(a, b, c, n);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) {
        e = cudaMemcpy(h, c, n * sizeof(float), cudaMemcpyDeviceToHost);
    }
    int wrong = 0;
    for (int i = 0; i < n && e == cudaSuccess; i++) {
        wrong += h[i] != 2.0f * i;
    }
    printf("startup vector-add=%s total-ms=%.3f\n", e != cudaSuccess ? cudaGetErrorName(e) : wrong ? "wrong" : "ok",
           now_ms(CLOCK_MONOTONIC) - t0);
    free(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return e == cudaSuccess && wrong == 0 ? 0 : 1;
}
