/*
 * ipc_shareable: a VMM allocation shared between two processes through a POSIX file descriptor, the way CUDA's
 * memMapIPCDrv sample does it. A Unix socket pair is made and the program forks before any CUDA call.
 *   parent: cuMemCreate with requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (size: 1 MiB rounded up
 *           to cuMemGetAllocationGranularity's minimum), cuMemAddressReserve, cuMemMap, cuMemSetAccess, a pattern
 *           copied in, cuMemExportToShareableHandle to a descriptor, sent to the child with SCM_RIGHTS (then closed
 *           here: the child's copy keeps what it names);
 *   child:  the descriptor dup'ed and the received one closed, cuMemImportFromShareableHandle from the dup,
 *           cuMemAddressReserve, cuMemMap, cuMemSetAccess, the pattern read back and checked, a new pattern written
 *           (cuMemsetD32Async on a stream of its own, synchronized), tells the parent, which checks it; then the child
 *           unmaps, releases, frees the range and closes its descriptor, and exits 0.
 * stdout: one line, "ipc_shareable: ok ..."; any failed call prints the call and its CUresult name to stderr and the
 * process exits nonzero (the parent also when the child did).
 *
 * usage: ipc_shareable [--expect-refused]
 * With --expect-refused the child is expected to be another tenant (IPC_CHILD_SERVER, IPC_CHILD_IDENTITY,
 * IPC_CHILD_PSK_FILE: see ipc.h): the import must FAIL; the program prints "ipc_shareable: refused: ..." with the
 * error and exits 0 only if it failed, the child got no handle (one it got anyway is released and fails the run) and
 * the parent's memory is unchanged; everything is released before exit.
 */
#include "ipc.h"

#include <sys/socket.h>
#include <sys/uio.h>

#define WANT_BYTES (1u << 20)
#define CHILD_LOW 0xbeef0001u
#define CHILD_HIGH 0xbeef0002u

/* What goes with the descriptor: the allocation's size. */
struct share_msg {
    uint64_t bytes;
};

/* The child's report: the import's result, and whether it checked the pattern and wrote its own. */
struct child_msg {
    int32_t import_result;
    int32_t written;
};

static uint32_t pattern(size_t i) {
    return (uint32_t) (i * 2246822519u) ^ 0x0badcafeu;
}

static void check_parent_pattern(const uint32_t *w, size_t words, const char *who) {
    for (size_t i = 0; i < words; i++) {
        if (w[i] != pattern(i)) {
            fail("%s: word %zu is 0x%08x, expected the parent's 0x%08x", who, i, w[i], pattern(i));
        }
    }
}

static CUmemAllocationProp allocation_prop(CUdevice dev) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

/* Reserves a range for the allocation, maps it and makes it readable and writable from dev. */
static CUdeviceptr map_allocation(CUmemGenericAllocationHandle h, size_t bytes, CUdevice dev) {
    CUdeviceptr ptr;
    CHECK(cuMemAddressReserve(&ptr, bytes, 0, 0, 0));
    CHECK(cuMemMap(ptr, bytes, 0, h, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(ptr, bytes, &access, 1));
    return ptr;
}

static void unmap_allocation(CUdeviceptr ptr, CUmemGenericAllocationHandle h, size_t bytes) {
    CHECK(cuMemUnmap(ptr, bytes));
    CHECK(cuMemRelease(h));
    CHECK(cuMemAddressFree(ptr, bytes));
}

static void send_fd(int sock, int fd, const struct share_msg *m) {
    char control[CMSG_SPACE(sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {(void *) m, sizeof *m};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t n;
    while ((n = sendmsg(sock, &msg, 0)) < 0 && errno == EINTR) {
    }
    if (n != (ssize_t) sizeof *m) {
        fail("sendmsg with the descriptor failed: %s", n < 0 ? strerror(errno) : "short write");
    }
}

/* Receives the message and its descriptor; returns -2 at end of file (the parent ended before sending). */
static int receive_fd(int sock, struct share_msg *m) {
    char control[CMSG_SPACE(sizeof(int))];
    memset(control, 0, sizeof control);
    struct iovec iov = {m, sizeof *m};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (n == 0) {
        return -2;
    }
    if (n != (ssize_t) sizeof *m) {
        fail("child: recvmsg failed: %s", n < 0 ? strerror(errno) : "short read");
    }
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c == NULL || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int))) {
        fail("child: the message carried no descriptor");
    }
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

static int child(int sock, int expect_refused) {
    apply_child_environment();
    CUdevice dev;
    use_primary_context(&dev);
    struct share_msg m;
    int received = receive_fd(sock, &m);
    if (received == -2) {
        fprintf(stderr, "child: the parent ended before sending the descriptor\n");
        return 3;
    }
    int fd = dup(received); /* a copy names the same allocation */
    if (fd < 0) {
        fail("child: dup failed: %s", strerror(errno));
    }
    close(received);
    size_t bytes = (size_t) m.bytes;
    CUmemGenericAllocationHandle h = 0;
    CUresult ri = cuMemImportFromShareableHandle(&h, (void *) (uintptr_t) fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    fprintf(stderr, "child: cuMemImportFromShareableHandle: %s\n", err_name(ri));
    struct child_msg report = {(int32_t) ri, 0};
    char ack;
    if (expect_refused || ri != CUDA_SUCCESS) {
        write_all(sock, &report, sizeof report, "the report");
        if (ri == CUDA_SUCCESS) {
            CHECK(cuMemRelease(h));
        }
        read_all(sock, &ack, 1, "the parent's ack");
        release_primary_context(dev);
        return expect_refused && ri != CUDA_SUCCESS ? 0 : 1;
    }
    CUdeviceptr ptr = map_allocation(h, bytes, dev);
    uint32_t *host = xmalloc(bytes);
    CHECK(cuMemcpyDtoH(host, ptr, bytes));
    check_parent_pattern(host, bytes / 4, "child");
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemsetD32Async(ptr, CHILD_LOW, bytes / 8, s));
    CHECK(cuMemsetD32Async(ptr + bytes / 2, CHILD_HIGH, bytes / 8, s));
    CHECK(cuStreamSynchronize(s));
    report.written = 1;
    write_all(sock, &report, sizeof report, "the report");
    if (!read_all(sock, &ack, 1, "the parent's ack")) {
        fprintf(stderr, "child: the parent ended before checking\n");
    }
    CHECK(cuStreamDestroy(s));
    unmap_allocation(ptr, h, bytes);
    release_primary_context(dev);
    free(host);
    return 0;
}

int main(int argc, char **argv) {
    int expect_refused = expect_refused_arg(argc, argv, "ipc_shareable [--expect-refused]");
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        fail("socketpair failed: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork(); /* before any CUDA call: each process starts its own driver */
    if (pid < 0) {
        fail("fork failed: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        exit(child(sv[1], expect_refused));
    }
    close(sv[1]);
    int sock = sv[0];

    CUdevice dev;
    use_primary_context(&dev);
    CUmemAllocationProp prop = allocation_prop(dev);
    size_t granularity;
    CHECK(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (granularity == 0) {
        fail("parent: cuMemGetAllocationGranularity answered 0");
    }
    size_t bytes = (WANT_BYTES + granularity - 1) / granularity * granularity;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, bytes, &prop, 0));
    CUdeviceptr ptr = map_allocation(h, bytes, dev);
    size_t words = bytes / 4;
    uint32_t *host = xmalloc(bytes);
    for (size_t i = 0; i < words; i++) {
        host[i] = pattern(i);
    }
    CHECK(cuMemcpyHtoD(ptr, host, bytes));
    int fd = -1;
    CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (fd < 0) {
        fail("parent: cuMemExportToShareableHandle succeeded with descriptor %d", fd);
    }
    struct share_msg m = {(uint64_t) bytes};
    send_fd(sock, fd, &m);
    close(fd);

    struct child_msg report;
    if (!read_all(sock, &report, sizeof report, "the child's report")) {
        fail("parent: the child ended before reporting (exit %d)", wait_child(pid));
    }
    CUresult ri = (CUresult) report.import_result;
    if (expect_refused) {
        write_all(sock, "k", 1, "the ack");
        int status = wait_child(pid);
        if (ri == CUDA_SUCCESS) {
            fail("parent: another tenant's child imported the allocation (child exit %d)", status);
        }
        if (status != 0) {
            fail("parent: the child exited %d", status);
        }
        memset(host, 0, bytes);
        CHECK(cuMemcpyDtoH(host, ptr, bytes));
        check_parent_pattern(host, words, "parent");
        printf("ipc_shareable: refused: cuMemImportFromShareableHandle %s; memory unchanged\n", err_name(ri));
    } else {
        if (ri != CUDA_SUCCESS || !report.written) {
            write_all(sock, "k", 1, "the ack");
            int status = wait_child(pid);
            fail("parent: the child could not import the allocation: %s (child exit %d)", err_name(ri), status);
        }
        memset(host, 0, bytes);
        CHECK(cuMemcpyDtoH(host, ptr, bytes));
        for (size_t i = 0; i < words; i++) {
            uint32_t want = i < words / 2 ? CHILD_LOW : CHILD_HIGH;
            if (host[i] != want) {
                fail("parent: word %zu is 0x%08x, expected the child's 0x%08x", i, host[i], want);
            }
        }
        write_all(sock, "k", 1, "the ack");
        int status = wait_child(pid);
        if (status != 0) {
            fail("parent: the child exited %d", status);
        }
        printf("ipc_shareable: ok a %s allocation shared through a descriptor, the child's writes seen\n",
               bytes == WANT_BYTES ? "1 MiB" : "granularity-rounded");
        printf("PASS\n"); /* scripts/gpu-programs: the native run must end with it */
    }
    unmap_allocation(ptr, h, bytes);
    release_primary_context(dev);
    free(host);
    return 0;
}
