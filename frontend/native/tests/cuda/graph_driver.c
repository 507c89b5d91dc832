/*
 * graph_driver: graphs through the driver API (issue 21), kernels of graph_driver.cu (fatbin by
 * cuModuleLoad of its path). (1) host work: a memcpy node from a host buffer, a kernel node, a
 * memcpy node back into another host buffer and a host node that sums it, launched three times with
 * new host data; (2) memory nodes: an allocation node whose address a memset node and a kernel node
 * use, a device-to-host copy out of it and a free node, launched twice; (3) a WHILE conditional node
 * made with cuGraphAddNode whose body kernel clears the condition after five passes. Every result
 * is compared with the CPU's.
 * usage: graph_driver GRAPH_DRIVER.fatbin
 */
#include "../common.h"

struct seen {
    const int *data;
    unsigned int n;
    long long sum;
    int calls;
};

static void CUDA_CB sum_host(void *user) {
    struct seen *s = user;
    long long t = 0;
    for (unsigned int i = 0; i < s->n; i++) {
        t += s->data[i];
    }
    s->sum = t;
    s->calls++;
}

static CUDA_MEMCPY3D copy1d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt, void *dh, CUdeviceptr dd,
                            size_t bytes) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    c.srcHost = sh;
    c.srcDevice = sd;
    c.dstMemoryType = dt;
    c.dstHost = dh;
    c.dstDevice = dd;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t nd, CUfunction f, unsigned int n, void **args) {
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = f;
    kp.gridDimX = (n + 255) / 256;
    kp.gridDimY = 1;
    kp.gridDimZ = 1;
    kp.blockDimX = 256;
    kp.blockDimY = 1;
    kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode node;
    CHECK(cuGraphAddKernelNode(&node, g, deps, nd, &kp));
    return node;
}

int main(int argc, char **argv) {
    usage_if(argc != 2, "graph_driver GRAPH_DRIVER.fatbin");
    CUdevice dev;
    CUcontext ctx = use_primary_context(&dev);
    CUmodule mod;
    CHECK(cuModuleLoad(&mod, argv[1]));
    CUfunction affine = get_function(mod, "affine");
    CUfunction loop_pass = get_function(mod, "loop_pass");
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned int n = 4096;
    size_t bytes = n * sizeof(int);
    int *in = xmalloc(bytes), *out = xmalloc(bytes);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, bytes));

    /* (1) host work */
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D up = copy1d(CU_MEMORYTYPE_HOST, in, 0, CU_MEMORYTYPE_DEVICE, NULL, d, bytes);
    CUgraphNode h2d, k, d2h, host;
    CHECK(cuGraphAddMemcpyNode(&h2d, g, NULL, 0, &up, ctx));
    int a = -2, b = 7;
    void *args[] = {&d, &n, &a, &b};
    k = kernel_node(g, &h2d, 1, affine, n, args);
    CUDA_MEMCPY3D down = copy1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_HOST, out, 0, bytes);
    CHECK(cuGraphAddMemcpyNode(&d2h, g, &k, 1, &down, ctx));
    struct seen seen = {out, n, 0, 0};
    CUDA_HOST_NODE_PARAMS hp = {sum_host, &seen};
    CHECK(cuGraphAddHostNode(&host, g, &d2h, 1, &hp));
    CUgraphNodeType type;
    CHECK(cuGraphNodeGetType(host, &type));
    printf("host node type %d\n", (int) type);
    CUgraphExec ge;
    CHECK(cuGraphInstantiate(&ge, g, 0));
    for (int round = 0; round < 3; round++) {
        uint64_t state = 77 + round;
        long long want = 0;
        for (unsigned int i = 0; i < n; i++) {
            in[i] = (int) (next_u64(&state) % 1001) - 500;
            out[i] = 0;
            want += -2LL * in[i] + 7;
        }
        CHECK(cuGraphLaunch(ge, s));
        CHECK(cuStreamSynchronize(s));
        for (unsigned int i = 0; i < n; i++) {
            if (out[i] != -2 * in[i] + 7) {
                fail("host work, round %d: out[%u] = %d, expected %d", round, i, out[i], -2 * in[i] + 7);
            }
        }
        if (seen.sum != want || seen.calls != round + 1) {
            fail("host work, round %d: the host node saw %lld after %d calls, expected %lld", round, seen.sum, seen.calls, want);
        }
        printf("host work, round %d: sum %lld, host node calls %d\n", round, seen.sum, seen.calls);
    }
    CHECK(cuGraphExecDestroy(ge));
    CHECK(cuGraphDestroy(g));

    /* (2) memory nodes */
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = dev;
    ap.bytesize = bytes;
    CUgraphNode alloc, set, k2, copy, freeNode;
    CHECK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &ap));
    CUdeviceptr tmp = ap.dptr;
    CUDA_MEMSET_NODE_PARAMS ms;
    memset(&ms, 0, sizeof ms);
    ms.dst = tmp;
    ms.value = 5;
    ms.elementSize = 4;
    ms.width = n;
    ms.height = 1;
    CHECK(cuGraphAddMemsetNode(&set, g, &alloc, 1, &ms, ctx));
    int a2 = 3, b2 = 1;
    void *args2[] = {&tmp, &n, &a2, &b2};
    k2 = kernel_node(g, &set, 1, affine, n, args2);
    CUDA_MEMCPY3D back = copy1d(CU_MEMORYTYPE_DEVICE, NULL, tmp, CU_MEMORYTYPE_DEVICE, NULL, d, bytes);
    CHECK(cuGraphAddMemcpyNode(&copy, g, &k2, 1, &back, ctx));
    CHECK(cuGraphAddMemFreeNode(&freeNode, g, &copy, 1, tmp));
    CHECK(cuGraphInstantiate(&ge, g, 0));
    for (int round = 0; round < 2; round++) {
        CHECK(cuMemsetD32(d, 0, n));
        CHECK(cuGraphLaunch(ge, s));
        CHECK(cuStreamSynchronize(s));
        CHECK(cuMemcpyDtoH(out, d, bytes));
        for (unsigned int i = 0; i < n; i++) {
            if (out[i] != 16) {
                fail("memory nodes, round %d: out[%u] = %d, expected 16", round, i, out[i]);
            }
        }
        printf("memory nodes, round %d: all %d\n", round, out[0]);
    }
    CUDA_MEM_ALLOC_NODE_PARAMS got;
    CHECK(cuGraphMemAllocNodeGetParams(alloc, &got));
    printf("allocation node: %zu bytes, same address %s\n", got.bytesize, got.dptr == tmp ? "yes" : "no");
    CHECK(cuGraphExecDestroy(ge));
    CHECK(cuGraphDestroy(g));

    /* (3) a WHILE node */
    CHECK(cuGraphCreate(&g, 0));
    CUgraphConditionalHandle handle;
    CHECK(cuGraphConditionalHandleCreate(&handle, g, ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUdeviceptr passes;
    CHECK(cuMemAlloc(&passes, sizeof(int)));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = handle;
    np.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
    np.conditional.size = 1;
    np.conditional.ctx = ctx;
    CUgraphNode loop;
    CHECK(cuGraphAddNode(&loop, g, NULL, NULL, 0, &np));
    CUgraph body = np.conditional.phGraph_out[0];
    int limit = 5;
    void *args3[] = {&d, &n, &passes, &limit, &handle};
    kernel_node(body, NULL, 0, loop_pass, n, args3);
    CHECK(cuGraphInstantiate(&ge, g, 0));
    CHECK(cuMemsetD32(d, 100, n));
    CHECK(cuMemsetD32(passes, 0, 1));
    CHECK(cuGraphLaunch(ge, s));
    CHECK(cuStreamSynchronize(s));
    int ran = 0;
    CHECK(cuMemcpyDtoH(&ran, passes, sizeof ran));
    CHECK(cuMemcpyDtoH(out, d, bytes));
    for (unsigned int i = 0; i < n; i++) {
        if (out[i] != 100 + 3 * limit) {
            fail("while node: out[%u] = %d, expected %d", i, out[i], 100 + 3 * limit);
        }
    }
    printf("while node: %d passes, all %d\n", ran, out[0]);
    CHECK(cuGraphExecDestroy(ge));
    CHECK(cuGraphDestroy(g));

    CHECK(cuMemFree(passes));
    CHECK(cuMemFree(d));
    CHECK(cuStreamDestroy(s));
    CHECK(cuModuleUnload(mod));
    free(in);
    free(out);
    release_primary_context(dev);
    printf("PASS\n");
    return 0;
}
