/*
 * device_calls: the kernel of device_calls.cu calls non-inlined device functions (.func in its PTX,
 * call.uni at each call site): affine(struct by value, pointer, int, 64-bit salt, double) returning
 * a float, and the recursive fib(i % 19) and depth (the height of a 200-node binary search tree's
 * subtree rooted at node i % 200), so each thread recurses to its own depth and the lanes of a warp
 * diverge inside the recursion. 500 threads in blocks of 128 (the last one partial). The floats are
 * small integers and quarters, so affine is exact: every result must equal the CPU's bit for bit.
 * usage: device_calls DEVICE_CALLS.fatbin
 */
#include "../common.h"

#define N 500
#define NODES 200

/* The struct the kernel takes by value: the same layout as in device_calls.cu (24 bytes, align 8). */
struct Affine {
    int scale;
    float bias;
    short shift;
    unsigned char tag;
    double weight;
};

static float cpu_affine(struct Affine a, const float *x, int i, unsigned long long salt, double extra) {
    float v = x[i] * (float) a.scale + a.bias;
    v += (float) ((int) (salt & 7) - (int) a.tag);
    return v * (float) (a.weight + extra) + (float) a.shift;
}

static int cpu_fib(int n) {
    return n < 2 ? n : cpu_fib(n - 1) + cpu_fib(n - 2);
}

static int cpu_depth(const int *left, const int *right, int node) {
    if (node < 0) {
        return 0;
    }
    int l = cpu_depth(left, right, left[node]), r = cpu_depth(left, right, right[node]);
    return 1 + (l > r ? l : r);
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "device_calls DEVICE_CALLS.fatbin");
    double t0 = now_ms();
    CUdevice dev;
    use_primary_context(&dev);
    CUmodule mod = load_image_module(argv[1]);
    CUfunction f = get_function(mod, "device_calls");

    float x[N];
    uint64_t seed = 61;
    for (int i = 0; i < N; i++) {
        x[i] = (float) (int) (next_u64(&seed) % 201) - 100.0f;
    }
    /* A binary search tree of NODES random keys, node 0 the root, inserted in index order. */
    int key[NODES], left[NODES], right[NODES];
    for (int k = 0; k < NODES; k++) {
        key[k] = (int) (next_u64(&seed) % 100000);
        left[k] = right[k] = -1;
        for (int at = 0; k > 0;) {
            int *child = key[k] < key[at] ? &left[at] : &right[at];
            if (*child < 0) {
                *child = k;
                break;
            }
            at = *child;
        }
    }
    struct Affine a = {3, 0.5f, -7, 5, 1.5};

    CUdeviceptr dx, dleft, dright, dfout, dfibs, ddepths;
    CHECK(cuMemAlloc(&dx, sizeof x));
    CHECK(cuMemAlloc(&dleft, sizeof left));
    CHECK(cuMemAlloc(&dright, sizeof right));
    CHECK(cuMemAlloc(&dfout, sizeof(float) * N));
    CHECK(cuMemAlloc(&dfibs, sizeof(int) * N));
    CHECK(cuMemAlloc(&ddepths, sizeof(int) * N));
    CHECK(cuMemcpyHtoD(dx, x, sizeof x));
    CHECK(cuMemcpyHtoD(dleft, left, sizeof left));
    CHECK(cuMemcpyHtoD(dright, right, sizeof right));
    int n = N, nodes = NODES;
    void *params[] = {&dx, &a, &dleft, &dright, &dfout, &dfibs, &ddepths, &n, &nodes};
    double t1 = now_ms();
    CHECK(cuLaunchKernel(f, (N + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    CHECK(cuCtxSynchronize());
    fprintf(stderr, "device_calls kernel: %.1f ms\n", now_ms() - t1);
    float fout[N];
    int fibs[N], depths[N];
    CHECK(cuMemcpyDtoH(fout, dfout, sizeof fout));
    CHECK(cuMemcpyDtoH(fibs, dfibs, sizeof fibs));
    CHECK(cuMemcpyDtoH(depths, ddepths, sizeof depths));

    double fsum = 0;
    long long fibsum = 0, depthsum = 0;
    int height = 0;
    for (int i = 0; i < N; i++) {
        float want = cpu_affine(a, x, i, (unsigned long long) i * 0x9e3779b97f4a7c15ull, (double) (i & 3) * 0.25);
        if (memcmp(&fout[i], &want, sizeof want) != 0) {
            fail("affine: thread %d returned %.9g, expected %.9g", i, fout[i], want);
        }
        int wf = cpu_fib(i % 19), wd = cpu_depth(left, right, i % NODES);
        if (fibs[i] != wf) {
            fail("fib: thread %d: fib(%d) = %d, expected %d", i, i % 19, fibs[i], wf);
        }
        if (depths[i] != wd) {
            fail("depth: thread %d: depth(node %d) = %d, expected %d", i, i % NODES, depths[i], wd);
        }
        fsum += fout[i];
        fibsum += fibs[i];
        depthsum += depths[i];
        height = depths[i] > height ? depths[i] : height;
    }
    printf("affine (struct by value, pointer, int, u64, double -> float) n=%d sum=%.3f fnv %016llx ok\n", N, fsum,
           (unsigned long long) fnv1a(FNV_INIT, fout, sizeof fout));
    printf("fib recursive n=%d fib(0..18) sum=%lld fib(18)=%d ok\n", N, fibsum, fibs[18]);
    printf("depth recursive nodes=%d height=%d sum=%lld fnv %016llx ok\n", NODES, height, depthsum,
           (unsigned long long) fnv1a(FNV_INIT, depths, sizeof depths));
    CHECK(cuMemFree(dx));
    CHECK(cuMemFree(dleft));
    CHECK(cuMemFree(dright));
    CHECK(cuMemFree(dfout));
    CHECK(cuMemFree(dfibs));
    CHECK(cuMemFree(ddepths));
    CHECK(cuModuleUnload(mod));
    release_primary_context(dev);
    fprintf(stderr, "device_calls: %.1f ms\n", now_ms() - t0);
    printf("PASS\n");
    return 0;
}
