package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.OptionalInt;

/** Socket set-up on top of {@link NativeSockets}: open, bind+listen, connect with a deadline, peer identity. */
final class SocketCalls {
    static final int BACKLOG = 128;
    private static final int TYPE = NativeSockets.SOCK_STREAM | NativeSockets.SOCK_NONBLOCK | NativeSockets.SOCK_CLOEXEC;

    private SocketCalls() {
    }

    /** A bound, listening, non-blocking socket; {@code what} names it in errors ("cannot listen on URI"). */
    static int listen(int family, MemorySegment addr, String what) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            int fd = open(state, family, what);
            if (NativeSockets.bind(state, fd, addr) < 0 || NativeSockets.listen(state, fd, BACKLOG) < 0) {
                int errno = NativeSockets.errno(state);
                SocketFd.closeQuietly(state, fd);
                throw Errno.exception(what, errno);
            }
            return fd;
        }
    }

    /**
     * A connected non-blocking socket, or an IOException naming {@code what} within {@code timeout}.
     * EAGAIN (a unix listener's backlog is full) is retried with a short back-off until the deadline:
     * Linux gives no readiness event for room in a backlog.
     */
    static int connect(int family, MemorySegment addr, Duration timeout, String what) throws IOException {
        long deadline = System.nanoTime() + timeout.toNanos();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment pollfd = arena.allocate(SockAddr.POLLFD);
            long backoffMillis = 1;
            while (true) {
                int fd = open(state, family, what);
                SocketFd owner = new SocketFd(fd, () -> { });
                boolean handedOver = false;
                try {
                    int r = NativeSockets.connect(state, fd, addr);
                    int errno = r == 0 ? 0 : NativeSockets.errno(state);
                    if (errno == Errno.EAGAIN) {
                        if (System.nanoTime() + backoffMillis * 1_000_000 > deadline) {
                            throw new SocketTimeoutException(what + ": listener busy (backlog full) for "
                                    + timeout.toMillis() + " ms");
                        }
                        sleep(backoffMillis, what);
                        backoffMillis = Math.min(backoffMillis * 2, 50);
                        continue;
                    }
                    if (errno == Errno.EINPROGRESS || errno == Errno.EINTR) {
                        if (!owner.acquire()) {
                            throw new IOException(what + ": closed");
                        }
                        FdWait.Outcome outcome;
                        try {
                            outcome = FdWait.await(owner, NativeSockets.POLLOUT, state, pollfd, deadline);
                        } finally {
                            owner.release();
                        }
                        if (outcome == FdWait.Outcome.TIMED_OUT) {
                            throw new SocketTimeoutException(what + ": timed out after " + timeout.toMillis() + " ms");
                        }
                        errno = socketError(state, fd, what);
                    }
                    if (errno != 0) {
                        throw Errno.exception(what, errno);
                    }
                    handedOver = true;
                    return fd;
                } finally {
                    if (!handedOver) {
                        SocketFd.closeQuietly(state, fd);
                    }
                }
            }
        }
    }

    private static void sleep(long millis, String what) throws InterruptedIOException {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException(what + ": interrupted");
        }
    }

    private static int open(MemorySegment state, int family, String what) throws IOException {
        int fd = NativeSockets.socket(state, family, TYPE);
        if (fd < 0) {
            throw Errno.exception(what + " (socket)", NativeSockets.errno(state));
        }
        return fd;
    }

    private static int socketError(MemorySegment state, int fd, String what) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(JAVA_INT);
            MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, 4);
            if (NativeSockets.getsockopt(state, fd, NativeSockets.SOL_SOCKET, NativeSockets.SO_ERROR, value, length) < 0) {
                throw Errno.exception(what + " (SO_ERROR)", NativeSockets.errno(state));
            }
            return value.get(JAVA_INT, 0);
        }
    }

    /** The uid of a unix-socket peer from SO_PEERCRED, or empty if the kernel does not say. */
    static OptionalInt peerUid(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment cred = arena.allocate(SockAddr.UCRED);
            MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, (int) SockAddr.UCRED.byteSize());
            if (NativeSockets.getsockopt(state, fd, NativeSockets.SOL_SOCKET, NativeSockets.SO_PEERCRED, cred, length) < 0) {
                return OptionalInt.empty();
            }
            // uids above Integer.MAX_VALUE exist in theory only; they come back empty rather than negative
            int uid = cred.get(JAVA_INT, SockAddr.UCRED_UID);
            return uid >= 0 ? OptionalInt.of(uid) : OptionalInt.empty();
        }
    }

    /** {cid, port} of the local or remote end of a vsock socket. */
    static long[] vsockName(int fd, boolean peer) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment addr = arena.allocate(SockAddr.SOCKADDR_VM);
            MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, (int) SockAddr.SOCKADDR_VM.byteSize());
            int r = peer ? NativeSockets.getpeername(state, fd, addr, length) : NativeSockets.getsockname(state, fd, addr, length);
            if (r < 0) {
                throw Errno.exception(peer ? "getpeername" : "getsockname", NativeSockets.errno(state));
            }
            return new long[] {SockAddr.vsockCid(addr), SockAddr.vsockPort(addr)};
        }
    }
}
