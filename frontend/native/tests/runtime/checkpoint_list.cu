// A program whose GPU state is made of pointers (issue 22's checkpoint test): a circular linked list of
// nodes spread over many allocations (some far smaller than a granule, some of several MiB, some from
// cudaMallocAsync), each node pointing at the next by its device address, the list's head kept in a
// __device__ global, walked a few steps per launch on a stream of its own priority, with an event and a
// CUDA graph (built with the graph API) in use. Every round prints what the walk accumulated.
//
// Run as any program, it just runs. With GPUSOCKETS_TEST_GATE=PATH set, it stops after round
// GATE_ROUND: it creates PATH.ready and waits (at most 300 s) until PATH.go exists, so that a test can
// checkpoint its session there, kill the backend, restore the session elsewhere, and let it go on. Its
// stdout must then equal an uninterrupted run's byte for byte: a pointer that came back at another
// address, a lost global or a lost allocation's contents changes the sums or faults.
#include "common.cuh"

#include <unistd.h>

struct Node {
    Node *next;
    unsigned int value;
    unsigned int visits;
};

__device__ Node *head;
__device__ unsigned long long acc;

// Links node i to node order[(k + 1) % n] where order[k] = i: one thread.
__global__ void link_nodes(Node **nodes, const int *order, int n) {
    for (int k = 0; k < n; k++) {
        Node *a = nodes[order[k]];
        a->next = nodes[order[(k + 1) % n]];
    }
    head = nodes[order[0]];
    acc = 1469598103934665603ULL;
}

__global__ void fill_values(Node **nodes, int n, unsigned int seed) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        nodes[i]->value = seed * 2654435761u + (unsigned int) i * 40503u;
        nodes[i]->visits = 0;
    }
}

// Walks `steps` nodes from the head: acc takes in each value, each node counts its visits.
__global__ void walk(int steps) {
    Node *p = head;
    unsigned long long a = acc;
    for (int s = 0; s < steps; s++) {
        a = (a ^ p->value) * 1099511628211ULL;
        p->visits++;
        p = p->next;
    }
    head = p;
    acc = a;
}

// The visit counts in list order from `from`, and whether every next pointer is one of `nodes`.
__global__ void census(Node **nodes, int n, unsigned int *visits, int *bad) {
    for (int i = 0; i < n; i++) {
        visits[i] = nodes[i]->visits;
        int found = 0;
        for (int j = 0; j < n; j++) {
            found |= nodes[i]->next == nodes[j];
        }
        if (!found) {
            atomicAdd(bad, 1);
        }
    }
}

static const int NODES = 96;
static const int ROUNDS = 12;
static const int GATE_ROUND = 5;

static void gate(int round) {
    const char *path = getenv("GPUSOCKETS_TEST_GATE");
    if (path == NULL || round != GATE_ROUND) {
        return;
    }
    char ready[4096], go[4096];
    snprintf(ready, sizeof ready, "%s.ready", path);
    snprintf(go, sizeof go, "%s.go", path);
    fflush(stdout);
    FILE *f = fopen(ready, "w");
    if (f == NULL) {
        FAIL("cannot create %s", ready);
    }
    fclose(f);
    for (int i = 0; i < 30000 && access(go, F_OK) != 0; i++) {
        usleep(10000);
    }
    if (access(go, F_OK) != 0) {
        FAIL("%s did not appear within 300 s", go);
    }
    fprintf(stderr, "checkpoint_list: gate passed after round %d\n", round);
}

int main() {
    int lo = 0, hi = 0;
    CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t stream;
    CK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, hi));
    cudaEvent_t done;
    CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));

    // The nodes: one per small allocation (sizes 16 to 2000 bytes), then several in each of a few large
    // allocations (3 MiB and more), then some from cudaMallocAsync on the stream.
    Node *nodes[NODES];
    void *allocations[NODES];
    int nalloc = 0;
    uint64_t rng = 42;
    int i = 0;
    for (; i < 40; i++) {
        size_t size = sizeof(Node) + (splitmix64(&rng) % 2000);
        CK(cudaMalloc(&allocations[nalloc], size));
        nodes[i] = (Node *) allocations[nalloc++];
    }
    for (int big = 0; big < 4; big++) {
        size_t size = (3u << 20) + big * 4096 + 123;
        CK(cudaMalloc(&allocations[nalloc], size));
        char *base = (char *) allocations[nalloc++];
        for (int k = 0; k < 8; k++, i++) {
            nodes[i] = (Node *) (base + (size - sizeof(Node)) / 8 * k / 16 * 16);
        }
    }
    int async_from = nalloc;
    for (; i < NODES; i++) {
        size_t size = sizeof(Node) + (splitmix64(&rng) % 70000);
        CK(cudaMallocAsync(&allocations[nalloc], size, stream));
        nodes[i] = (Node *) allocations[nalloc++];
    }
    printf("nodes: %d in %d allocations (%d stream-ordered)\n", NODES, nalloc, nalloc - async_from);

    // A shuffled order links them; the table of nodes lives on the device too.
    int order[NODES];
    for (int k = 0; k < NODES; k++) {
        order[k] = k;
    }
    for (int k = NODES - 1; k > 0; k--) {
        int j = (int) (splitmix64(&rng) % (uint64_t) (k + 1));
        int t = order[k];
        order[k] = order[j];
        order[j] = t;
    }
    Node **d_nodes;
    int *d_order;
    CK(cudaMalloc(&d_nodes, sizeof nodes));
    CK(cudaMalloc(&d_order, sizeof order));
    CK(cudaMemcpyAsync(d_nodes, nodes, sizeof nodes, cudaMemcpyHostToDevice, stream));
    CK(cudaMemcpyAsync(d_order, order, sizeof order, cudaMemcpyHostToDevice, stream));
    fill_values<<<(NODES + 63) / 64, 64, 0, stream>>>(d_nodes, NODES, 7u);
    link_nodes<<<1, 1, 0, stream>>>(d_nodes, d_order, NODES);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(stream));

    // The graph: two walks of 5 steps, one after the other.
    cudaGraph_t graph;
    CK(cudaGraphCreate(&graph, 0));
    int five = 5;
    void *args[] = {&five};
    cudaKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = (void *) walk;
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = args;
    cudaGraphNode_t first, second;
    CK(cudaGraphAddKernelNode(&first, graph, NULL, 0, &p));
    CK(cudaGraphAddKernelNode(&second, graph, &first, 1, &p));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));

    for (int round = 0; round < ROUNDS; round++) {
        if (round % 3 == 2) {
            CK(cudaGraphLaunch(exec, stream));
        } else {
            walk<<<1, 1, 0, stream>>>(3 + round);
            CK(cudaGetLastError());
        }
        CK(cudaEventRecord(done, stream));
        CK(cudaEventSynchronize(done));
        unsigned long long a = 0;
        Node *h = NULL;
        CK(cudaMemcpyFromSymbol(&a, acc, sizeof a));
        CK(cudaMemcpyFromSymbol(&h, head, sizeof h));
        int at = -1;
        for (int k = 0; k < NODES; k++) {
            if (nodes[k] == h) {
                at = k;
            }
        }
        Node hn;
        CK(cudaMemcpy(&hn, h, sizeof hn, cudaMemcpyDeviceToHost));
        printf("round %2d: acc=%016llx head=node %d value=%08x visits=%u\n", round, a, at, hn.value, hn.visits);
        gate(round);
    }

    unsigned int *d_visits;
    int *d_bad;
    CK(cudaMalloc(&d_visits, NODES * sizeof(unsigned int)));
    CK(cudaMalloc(&d_bad, sizeof(int)));
    CK(cudaMemset(d_bad, 0, sizeof(int)));
    census<<<1, 1, 0, stream>>>(d_nodes, NODES, d_visits, d_bad);
    CK(cudaGetLastError());
    unsigned int visits[NODES];
    int bad = -1;
    CK(cudaMemcpyAsync(visits, d_visits, sizeof visits, cudaMemcpyDeviceToHost, stream));
    CK(cudaMemcpyAsync(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
    unsigned long long total = 0;
    for (int k = 0; k < NODES; k++) {
        total += visits[k];
    }
    printf("visits: %llu in all, checksum %016llx, pointers outside the list: %d\n", total,
           (unsigned long long) fnv1a(visits, sizeof visits), bad);
    // Each allocation is still device memory at the address the program was given.
    int still = 0;
    for (int k = 0; k < nalloc; k++) {
        cudaPointerAttributes at;
        CK(cudaPointerGetAttributes(&at, allocations[k]));
        still += at.type == cudaMemoryTypeDevice && at.devicePointer == allocations[k];
    }
    printf("allocations at their addresses: %d of %d\n", still, nalloc);

    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    for (int k = 0; k < nalloc; k++) {
        if (k >= async_from) {
            CK(cudaFreeAsync(allocations[k], stream));
        } else {
            CK(cudaFree(allocations[k]));
        }
    }
    CK(cudaStreamSynchronize(stream));
    CK(cudaFree(d_nodes));
    CK(cudaFree(d_order));
    CK(cudaFree(d_visits));
    CK(cudaFree(d_bad));
    CK(cudaEventDestroy(done));
    CK(cudaStreamDestroy(stream));
    if (bad != 0) {
        FAIL("%d next pointers point outside the list", bad);
    }
    printf("PASS\n");
    return 0;
}
