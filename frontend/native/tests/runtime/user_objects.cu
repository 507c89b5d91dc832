// CUDA user objects, as graph programs use them to keep a resource alive while graphs may still use
// it: objects with a destructor that counts its calls, references owned by an explicit graph, by a
// captured graph (retained through cudaStreamGetCaptureInfo's graph), by child graph nodes and clones,
// moved from the program or added to it, and the exec graphs made from them. Each destructor must run
// exactly once, only when the last reference is gone, and for an exec graph destroyed while its
// launches still run only after their work (a slow host node in the graph counts the launches done).
// Invalid arguments are refused. Kernel results are compared with the CPU's.
#include "common.cuh"

#include <atomic>
#include <unistd.h>

__global__ void twice(int *p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = 2 * p[i] + 1;
    }
}

static std::atomic<int> hostRuns(0);

// A host node: slow, so that work is still running when the program destroys the exec graph.
static void CUDART_CB slow_host(void *) {
    usleep(150 * 1000);
    hostRuns.fetch_add(1);
}

struct Tracked {
    std::atomic<int> destroyed;
    std::atomic<int> runsSeen;
};

static void CUDART_CB destroy_tracked(void *p) {
    Tracked *t = (Tracked *) p;
    t->runsSeen.store(hostRuns.load());
    t->destroyed.fetch_add(1);
}

// Destructors run on a thread of the driver, after the call that dropped the last reference: wait for it.
static void wait_destroyed(const char *what, Tracked *t) {
    for (int i = 0; i < 2000 && t->destroyed.load() == 0; i++) {
        usleep(5000);
    }
    if (t->destroyed.load() != 1) {
        FAIL("%s: destructor ran %d times, expected once", what, t->destroyed.load());
    }
}

// A destructor must not run while a reference is left: give a wrong one time to show itself.
static void expect_alive(const char *what, Tracked *t) {
    usleep(100 * 1000);
    if (t->destroyed.load() != 0) {
        FAIL("%s: destructor ran while a reference was left", what);
    }
}

static cudaUserObject_t make(Tracked *t, unsigned refs) {
    t->destroyed.store(0);
    t->runsSeen.store(-1);
    cudaUserObject_t o;
    CK(cudaUserObjectCreate(&o, t, destroy_tracked, refs, cudaUserObjectNoDestructorSync));
    return o;
}

static void add_twice(cudaGraphNode_t *node, cudaGraph_t g, const cudaGraphNode_t *deps, size_t ndeps, int **d, int *n) {
    void *args[] = {d, n};
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *) twice;
    kp.gridDim = dim3((*n + 127) / 128);
    kp.blockDim = dim3(128);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(node, g, deps, ndeps, &kp));
}

// Runs x -> 2x + 1 `times` times on the CPU and compares with the device's buffer.
static void check(const char *what, const int *host, const int *in, int n, int times) {
    for (int i = 0; i < n; i++) {
        int want = in[i];
        for (int k = 0; k < times; k++) {
            want = 2 * want + 1;
        }
        if (host[i] != want) {
            FAIL("%s: element %d is %d, CPU says %d", what, i, host[i], want);
        }
    }
}

int main() {
    const int count = 1000;
    int n = count;
    int in[count], out[count];
    uint64_t seed = 21;
    for (int i = 0; i < n; i++) {
        in[i] = (int) (splitmix64(&seed) % 1000);
    }
    int *d;
    CK(cudaMalloc(&d, n * sizeof(int)));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    // 1. An explicit graph owns the object (moved from the program); its exec graph outlives the graph
    //    and is destroyed while its two launches still run.
    Tracked t1;
    cudaUserObject_t o1 = make(&t1, 1);
    cudaGraph_t g;
    CK(cudaGraphCreate(&g, 0));
    cudaGraphNode_t k, h;
    add_twice(&k, g, NULL, 0, &d, &n);
    cudaHostNodeParams hp = {slow_host, NULL};
    CK(cudaGraphAddHostNode(&h, g, &k, 1, &hp));
    CK(cudaGraphRetainUserObject(g, o1, 1, cudaGraphUserObjectMove));
    cudaGraphExec_t e;
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaMemcpy(d, in, n * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaGraphLaunch(e, s));
    CK(cudaGraphLaunch(e, s));
    CK(cudaGraphDestroy(g));
    expect_alive("explicit graph destroyed, exec graph left", &t1);
    CK(cudaGraphExecDestroy(e));
    wait_destroyed("explicit graph", &t1);
    printf("explicit graph: destructor ran once, after %d of 2 launches' host nodes\n", t1.runsSeen.load());
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(out, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    check("explicit graph", out, in, n, 2);

    // 2. A captured graph owns a reference retained during the capture; the program keeps one of its own.
    Tracked t2;
    cudaUserObject_t o2 = make(&t2, 2);
    CK(cudaMemcpy(d, in, n * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    twice<<<(n + 127) / 128, 128, 0, s>>>(d, n);
    CK(cudaGetLastError());
    cudaStreamCaptureStatus status;
    cudaGraph_t capturing;
    CK(cudaStreamGetCaptureInfo(s, &status, NULL, &capturing, NULL, NULL, NULL));
    if (status != cudaStreamCaptureStatusActive) {
        FAIL("capture status %d", (int) status);
    }
    CK(cudaGraphRetainUserObject(capturing, o2, 1, cudaGraphUserObjectMove));
    cudaGraph_t captured;
    CK(cudaStreamEndCapture(s, &captured));
    cudaGraphExec_t e2;
    CK(cudaGraphInstantiate(&e2, captured, 0));
    for (int i = 0; i < 3; i++) {
        CK(cudaGraphLaunch(e2, s));
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaGraphExecDestroy(e2));
    CK(cudaGraphDestroy(captured));
    expect_alive("captured graph and exec destroyed, program's reference left", &t2);
    CK(cudaUserObjectRelease(o2, 1));
    wait_destroyed("captured graph", &t2);
    printf("captured graph: destructor ran once, at the program's release\n");
    CK(cudaMemcpy(out, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    check("captured graph", out, in, n, 3);

    // 3. Child graph nodes and clones: a child graph's references are copied into each node made from
    //    it, clones copy them, and an exec graph owns its child graphs' references.
    Tracked t3, t4;
    cudaUserObject_t o3 = make(&t3, 1), o4 = make(&t4, 1);
    cudaGraph_t child, parent, clone;
    CK(cudaGraphCreate(&child, 0));
    cudaGraphNode_t ck;
    add_twice(&ck, child, NULL, 0, &d, &n);
    CK(cudaGraphRetainUserObject(child, o3, 1, 0));
    CK(cudaUserObjectRetain(o3, 2));
    CK(cudaUserObjectRelease(o3, 2));
    CK(cudaGraphCreate(&parent, 0));
    cudaGraphNode_t node, node2;
    CK(cudaGraphAddChildGraphNode(&node, parent, NULL, 0, child));
    CK(cudaGraphAddChildGraphNode(&node2, parent, &node, 1, child));
    CK(cudaGraphDestroy(child));
    CK(cudaUserObjectRelease(o3, 1));
    expect_alive("child graph and program's reference gone, nodes left", &t3);
    // a reference retained into the second node's own graph goes with that node
    cudaGraph_t nodeGraph;
    CK(cudaGraphChildGraphNodeGetGraph(node2, &nodeGraph));
    CK(cudaGraphRetainUserObject(nodeGraph, o4, 1, cudaGraphUserObjectMove));
    expect_alive("reference moved into a node's graph", &t4);
    CK(cudaGraphDestroyNode(node2));
    wait_destroyed("node's graph", &t4);
    printf("child graph node destroyed: destructor ran once\n");
    expect_alive("one node left", &t3);
    CK(cudaGraphClone(&clone, parent));
    CK(cudaGraphDestroy(parent));
    expect_alive("parent destroyed, clone left", &t3);
    cudaGraphExec_t e3;
    CK(cudaGraphInstantiate(&e3, clone, 0));
    CK(cudaGraphDestroy(clone));
    CK(cudaMemcpy(d, in, n * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaGraphLaunch(e3, s));
    CK(cudaStreamSynchronize(s));
    expect_alive("clone destroyed, exec graph left", &t3);
    CK(cudaGraphExecDestroy(e3));
    wait_destroyed("child graph", &t3);
    printf("child graph, clone, exec graph: destructor ran once, at the exec graph's destruction\n");
    CK(cudaMemcpy(out, d, n * sizeof(int), cudaMemcpyDeviceToHost));
    check("child graph", out, in, n, 1);

    // 4. References a graph releases go back; the program's release ends the object.
    Tracked t5;
    cudaUserObject_t o5 = make(&t5, 1);
    cudaGraph_t g5;
    CK(cudaGraphCreate(&g5, 0));
    CK(cudaGraphRetainUserObject(g5, o5, 3, 0));
    CK(cudaGraphReleaseUserObject(g5, o5, 2));
    CK(cudaGraphReleaseUserObject(g5, o5, 1));
    CK(cudaGraphDestroy(g5));
    expect_alive("graph released its references", &t5);

    // 5. Invalid arguments.
    cudaUserObject_t bad;
    Tracked t6;
    t6.destroyed.store(0);
    EXPECT("create without a destructor", cudaUserObjectCreate(&bad, &t6, NULL, 1, cudaUserObjectNoDestructorSync),
           cudaErrorInvalidValue);
    EXPECT("create without the flag", cudaUserObjectCreate(&bad, &t6, destroy_tracked, 1, 0), cudaErrorInvalidValue);
    EXPECT("create with no reference", cudaUserObjectCreate(&bad, &t6, destroy_tracked, 0, cudaUserObjectNoDestructorSync),
           cudaErrorInvalidValue);
    cudaGraph_t g6;
    CK(cudaGraphCreate(&g6, 0));
    EXPECT("graph retains 0 references", cudaGraphRetainUserObject(g6, o5, 0, 0), cudaErrorInvalidValue);
    EXPECT("graph retains with an unknown flag", cudaGraphRetainUserObject(g6, o5, 1, 2), cudaErrorInvalidValue);
    EXPECT("graph releases 0 references", cudaGraphReleaseUserObject(g6, o5, 0), cudaErrorInvalidValue);
    EXPECT("retain 0 references", cudaUserObjectRetain(o5, 0), cudaErrorInvalidValue);
    EXPECT("release 0 references", cudaUserObjectRelease(o5, 0), cudaErrorInvalidValue);
    CK(cudaGraphDestroy(g6));

    CK(cudaUserObjectRelease(o5, 1));
    wait_destroyed("released by the program", &t5);
    printf("graph retain and release: destructor ran once, at the program's release\n");

    // No destructor ran twice.
    usleep(100 * 1000);
    Tracked *all[] = {&t1, &t2, &t3, &t4, &t5};
    for (int i = 0; i < 5; i++) {
        if (all[i]->destroyed.load() != 1) {
            FAIL("object %d: destructor ran %d times", i + 1, all[i]->destroyed.load());
        }
    }
    if (t6.destroyed.load() != 0) {
        FAIL("a refused object's destructor ran");
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    printf("PASS\n");
    return 0;
}
