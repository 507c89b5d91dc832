/*
 * ipc_memory: device memory and an event shared between two processes through CUDA IPC handles, as NVIDIA's
 * simpleIPC does it with the driver API. The program forks before any CUDA call; each process then has a context
 * (and, through GPUsockets, a session) of its own.
 *   parent: cuMemAlloc 1 MiB, a pattern copied in, cuEventCreate(INTERPROCESS | DISABLE_TIMING),
 *           cuIpcGetMemHandle and cuIpcGetEventHandle, both handles to the child over a pipe;
 *   child:  cuIpcOpenMemHandle(LAZY_ENABLE_PEER_ACCESS), cuIpcOpenEventHandle, the pattern read back and checked,
 *           a new pattern written by two cuMemsetD32Async on a stream of its own, the opened event recorded on that
 *           stream; it tells the parent, which orders a stream of its own after the event (cuStreamWaitEvent), reads
 *           the memory on it, synchronizes the event too and checks the child's pattern; then the child closes the
 *           mapping (cuIpcCloseMemHandle) and its event and exits 0.
 * stdout: one line, "ipc_memory: ok ..."; any failed call prints the call and its CUresult name to stderr and the
 * process exits nonzero (the parent also when the child did).
 *
 * usage: ipc_memory [--expect-refused]
 * With --expect-refused the child is expected to be another tenant (IPC_CHILD_SERVER, IPC_CHILD_IDENTITY,
 * IPC_CHILD_PSK_FILE: see ipc.h): both opens must FAIL; the program prints "ipc_memory: refused: ..." with the two
 * errors and exits 0 only if both failed, the child opened nothing (a mapping or event it got anyway is closed and
 * fails the run) and the parent's memory is unchanged; everything is freed before exit.
 */
#include "ipc.h"

#define BYTES (1u << 20)
#define WORDS (BYTES / 4)
#define CHILD_LOW 0xc0de0001u
#define CHILD_HIGH 0xc0de0002u

struct handles_msg {
    CUipcMemHandle mem;
    CUipcEventHandle event;
};

/* The child's report: the results of its two opens, and whether it checked the pattern and recorded the event. */
struct child_msg {
    int32_t mem_result;
    int32_t event_result;
    int32_t recorded;
};

static uint32_t pattern(size_t i) {
    return (uint32_t) (i * 2654435761u) ^ 0x5eed1234u;
}

static void check_parent_pattern(const uint32_t *w, const char *who) {
    for (size_t i = 0; i < WORDS; i++) {
        if (w[i] != pattern(i)) {
            fail("%s: word %zu is 0x%08x, expected the parent's 0x%08x", who, i, w[i], pattern(i));
        }
    }
}

static void check_child_pattern(const uint32_t *w) {
    for (size_t i = 0; i < WORDS; i++) {
        uint32_t want = i < WORDS / 2 ? CHILD_LOW : CHILD_HIGH;
        if (w[i] != want) {
            fail("parent: word %zu is 0x%08x, expected the child's 0x%08x", i, w[i], want);
        }
    }
}

static int child(int from_parent, int to_parent, int expect_refused) {
    apply_child_environment();
    CUdevice dev;
    use_primary_context(&dev);
    struct handles_msg m;
    if (!read_all(from_parent, &m, sizeof m, "the handles")) {
        fprintf(stderr, "child: the parent ended before sending the handles\n");
        return 3;
    }
    CUdeviceptr d = 0;
    CUevent ev = NULL;
    CUresult rm = cuIpcOpenMemHandle(&d, m.mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CUresult re = cuIpcOpenEventHandle(&ev, m.event);
    fprintf(stderr, "child: cuIpcOpenMemHandle: %s, cuIpcOpenEventHandle: %s\n", err_name(rm), err_name(re));
    struct child_msg report = {(int32_t) rm, (int32_t) re, 0};
    char ack;
    if (expect_refused || rm != CUDA_SUCCESS || re != CUDA_SUCCESS) {
        write_all(to_parent, &report, sizeof report, "the report");
        if (rm == CUDA_SUCCESS) {
            CHECK(cuIpcCloseMemHandle(d));
        }
        if (re == CUDA_SUCCESS) {
            CHECK(cuEventDestroy(ev));
        }
        read_all(from_parent, &ack, 1, "the parent's ack");
        release_primary_context(dev);
        return expect_refused && rm != CUDA_SUCCESS && re != CUDA_SUCCESS ? 0 : 1;
    }
    uint32_t *host = xmalloc(BYTES);
    CHECK(cuMemcpyDtoH(host, d, BYTES));
    check_parent_pattern(host, "child");
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemsetD32Async(d, CHILD_LOW, WORDS / 2, s));
    CHECK(cuMemsetD32Async(d + BYTES / 2, CHILD_HIGH, WORDS / 2, s));
    CHECK(cuEventRecord(ev, s));
    report.recorded = 1;
    write_all(to_parent, &report, sizeof report, "the report");
    if (!read_all(from_parent, &ack, 1, "the parent's ack")) {
        fprintf(stderr, "child: the parent ended before checking\n");
    }
    CHECK(cuIpcCloseMemHandle(d));
    CHECK(cuEventDestroy(ev));
    CHECK(cuStreamDestroy(s));
    release_primary_context(dev);
    free(host);
    return 0;
}

int main(int argc, char **argv) {
    int expect_refused = expect_refused_arg(argc, argv, "ipc_memory [--expect-refused]");
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
        fail("pipe failed: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork(); /* before any CUDA call: each process starts its own driver */
    if (pid < 0) {
        fail("fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        exit(child(down[0], up[1], expect_refused));
    }
    close(down[0]);
    close(up[1]);

    CUdevice dev;
    use_primary_context(&dev);
    uint32_t *host = xmalloc(BYTES);
    for (size_t i = 0; i < WORDS; i++) {
        host[i] = pattern(i);
    }
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, BYTES));
    CHECK(cuMemcpyHtoD(d, host, BYTES));
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    struct handles_msg m;
    memset(&m, 0, sizeof m);
    CHECK(cuIpcGetMemHandle(&m.mem, d));
    CHECK(cuIpcGetEventHandle(&m.event, ev));
    write_all(down[1], &m, sizeof m, "the handles");

    struct child_msg report;
    if (!read_all(up[0], &report, sizeof report, "the child's report")) {
        fail("parent: the child ended before reporting (exit %d)", wait_child(pid));
    }
    CUresult rm = (CUresult) report.mem_result, re = (CUresult) report.event_result;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (expect_refused) {
        write_all(down[1], "k", 1, "the ack");
        int status = wait_child(pid);
        if (rm == CUDA_SUCCESS || re == CUDA_SUCCESS) {
            fail("parent: another tenant's child opened the %s (child exit %d)",
                 rm == CUDA_SUCCESS ? "memory handle" : "event handle", status);
        }
        if (status != 0) {
            fail("parent: the child exited %d", status);
        }
        memset(host, 0, BYTES);
        CHECK(cuMemcpyDtoH(host, d, BYTES));
        check_parent_pattern(host, "parent");
        printf("ipc_memory: refused: cuIpcOpenMemHandle %s, cuIpcOpenEventHandle %s; memory unchanged\n", err_name(rm),
               err_name(re));
    } else {
        if (rm != CUDA_SUCCESS || re != CUDA_SUCCESS || !report.recorded) {
            write_all(down[1], "k", 1, "the ack");
            int status = wait_child(pid);
            fail("parent: the child could not open the handles: cuIpcOpenMemHandle %s, cuIpcOpenEventHandle %s (child exit %d)",
                 err_name(rm), err_name(re), status);
        }
        memset(host, 0, BYTES);
        CHECK(cuStreamWaitEvent(s, ev, 0));
        CHECK(cuMemcpyDtoHAsync(host, d, BYTES, s));
        CHECK(cuStreamSynchronize(s));
        CHECK(cuEventSynchronize(ev));
        check_child_pattern(host);
        write_all(down[1], "k", 1, "the ack");
        int status = wait_child(pid);
        if (status != 0) {
            fail("parent: the child exited %d", status);
        }
        printf("ipc_memory: ok %u bytes shared, the child's writes seen after its event\n", BYTES);
        printf("PASS\n"); /* scripts/gpu-programs: the native run must end with it */
    }
    CHECK(cuStreamDestroy(s));
    CHECK(cuEventDestroy(ev));
    CHECK(cuMemFree(d));
    release_primary_context(dev);
    free(host);
    return 0;
}
