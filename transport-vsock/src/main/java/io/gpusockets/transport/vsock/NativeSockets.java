package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The Linux socket calls this module needs, as FFM downcalls into libc with errno captured.
 *
 * <p>Every call takes a capture segment ({@link #newCallState}) as its first argument and returns the
 * raw result: {@code -1} means failure and {@link #errno(MemorySegment)} says why. Calls interrupted by
 * a signal (EINTR) are retried here, so callers never see EINTR. A capture segment must not be shared
 * by threads calling at the same time; each reader, writer and one-off operation has its own.
 *
 * <p>Sockets are created non-blocking (SOCK_NONBLOCK): no call here blocks a thread in the kernel
 * except {@link #poll}, which {@link FdWait} uses only on platform threads.
 */
final class NativeSockets {
    static final int AF_UNIX = 1;
    static final int AF_VSOCK = 40;
    static final int SOCK_STREAM = 1;
    static final int SOCK_NONBLOCK = 0x800;
    static final int SOCK_CLOEXEC = 0x80000;
    static final int SOL_SOCKET = 1;
    static final int SO_ERROR = 4;
    static final int SO_PEERCRED = 17;
    static final int SHUT_RDWR = 2;
    static final int MSG_NOSIGNAL = 0x4000;
    static final short POLLIN = 0x1;
    static final short POLLOUT = 0x4;
    static final int EFD_CLOEXEC = 0x80000;
    static final int EFD_NONBLOCK = 0x800;
    static final int SO_LINGER = 13;
    static final int SCM_RIGHTS = 1;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;
    static final int F_GETFL = 3;
    static final int F_SETFL = 4;
    static final int F_DUPFD_CLOEXEC = 1030;
    static final int SO_ACCEPTCONN = 30;
    static final int AF_INET = 2;
    static final int AF_INET6 = 10;
    static final int IPPROTO_TCP = 6;
    static final int TCP_NODELAY = 1;
    static final int O_NONBLOCK = 0x800;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(PathElement.groupElement("errno"));

    private static final MethodHandle SOCKET = errnoCall("socket", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle BIND = errnoCall("bind", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle LISTEN = errnoCall("listen", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle ACCEPT4 = errnoCall("accept4", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle CONNECT = errnoCall("connect", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle RECV = errnoCall("recv", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle SENDMSG = errnoCall("sendmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle RECVMSG = errnoCall("recvmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SOCKETPAIR = errnoCall("socketpair", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle FCNTL = errnoCall("fcntl", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle READ = errnoCall("read", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle WRITE = errnoCall("write", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG));
    private static final MethodHandle SHUTDOWN = errnoCall("shutdown", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle CLOSE = errnoCall("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle POLL = errnoCall("poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle GETSOCKOPT = errnoCall("getsockopt",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle SETSOCKOPT = errnoCall("setsockopt",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle GETSOCKNAME = errnoCall("getsockname", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle GETPEERNAME = errnoCall("getpeername", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle EVENTFD = errnoCall("eventfd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle STRERROR = LINKER.downcallHandle(symbol("strerror"), FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private NativeSockets() {
    }

    private static MemorySegment symbol(String name) {
        return LINKER.defaultLookup().find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("libc has no symbol " + name));
    }

    private static MethodHandle errnoCall(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(symbol(name), descriptor, Linker.Option.captureCallState("errno"));
    }

    /** A segment that receives errno; one per thread of use, from an arena that outlives the calls. */
    static MemorySegment newCallState(Arena arena) {
        return arena.allocate(CALL_STATE);
    }

    static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    private static boolean interrupted(long result, MemorySegment state) {
        return result == -1 && errno(state) == Errno.EINTR;
    }

    static int socket(MemorySegment state, int domain, int type) {
        try {
            int r;
            do {
                r = (int) SOCKET.invokeExact(state, domain, type, 0);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int bind(MemorySegment state, int fd, MemorySegment addr) {
        try {
            int r;
            do {
                r = (int) BIND.invokeExact(state, fd, addr, (int) addr.byteSize());
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int listen(MemorySegment state, int fd, int backlog) {
        try {
            int r;
            do {
                r = (int) LISTEN.invokeExact(state, fd, backlog);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** accept4 without the peer's address (ask getpeername when it matters). */
    static int accept4(MemorySegment state, int fd, int flags) {
        try {
            int r;
            do {
                r = (int) ACCEPT4.invokeExact(state, fd, MemorySegment.NULL, MemorySegment.NULL, flags);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /**
     * connect. Not retried on EINTR: an interrupted connect carries on in the kernel and a second call
     * would report EALREADY, so EINTR is handed back like EINPROGRESS.
     */
    static int connect(MemorySegment state, int fd, MemorySegment addr) {
        try {
            return (int) CONNECT.invokeExact(state, fd, addr, (int) addr.byteSize());
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static long recv(MemorySegment state, int fd, MemorySegment buf, long len) {
        try {
            long r;
            do {
                r = (long) RECV.invokeExact(state, fd, buf, len, 0);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** sendmsg with MSG_NOSIGNAL: a peer that went away is an EPIPE, never a SIGPIPE for the process. */
    static long sendmsg(MemorySegment state, int fd, MemorySegment msghdr) {
        try {
            long r;
            do {
                r = (long) SENDMSG.invokeExact(state, fd, msghdr, MSG_NOSIGNAL);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** recvmsg; descriptors that come with the bytes are made close-on-exec (MSG_CMSG_CLOEXEC). */
    static long recvmsg(MemorySegment state, int fd, MemorySegment msghdr) {
        try {
            long r;
            do {
                r = (long) RECVMSG.invokeExact(state, fd, msghdr, MSG_CMSG_CLOEXEC);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** socketpair; {@code fds} receives the two descriptors. */
    static int socketpair(MemorySegment state, int domain, int type, MemorySegment fds) {
        try {
            return (int) SOCKETPAIR.invokeExact(state, domain, type, 0, fds);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** fcntl with an int argument (F_GETFL ignores it). */
    static int fcntl(MemorySegment state, int fd, int cmd, int arg) {
        try {
            int r;
            do {
                r = (int) FCNTL.invokeExact(state, fd, cmd, arg);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static long read(MemorySegment state, int fd, MemorySegment buf, long len) {
        try {
            long r;
            do {
                r = (long) READ.invokeExact(state, fd, buf, len);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static long write(MemorySegment state, int fd, MemorySegment buf, long len) {
        try {
            long r;
            do {
                r = (long) WRITE.invokeExact(state, fd, buf, len);
            } while (interrupted(r, state));
            return r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int shutdown(MemorySegment state, int fd, int how) {
        try {
            return (int) SHUTDOWN.invokeExact(state, fd, how);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** close is never retried: on Linux the descriptor is released even when close reports EINTR. */
    static int close(MemorySegment state, int fd) {
        try {
            return (int) CLOSE.invokeExact(state, fd);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** poll; EINTR comes back as 0 ready descriptors so that the caller re-checks its deadline. */
    static int poll(MemorySegment state, MemorySegment fds, long count, int timeoutMillis) {
        try {
            int r = (int) POLL.invokeExact(state, fds, count, timeoutMillis);
            return interrupted(r, state) ? 0 : r;
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int getsockopt(MemorySegment state, int fd, int level, int name, MemorySegment value, MemorySegment lengthInOut) {
        try {
            return (int) GETSOCKOPT.invokeExact(state, fd, level, name, value, lengthInOut);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int setsockopt(MemorySegment state, int fd, int level, int name, MemorySegment value, int length) {
        try {
            return (int) SETSOCKOPT.invokeExact(state, fd, level, name, value, length);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int getsockname(MemorySegment state, int fd, MemorySegment addr, MemorySegment lengthInOut) {
        try {
            return (int) GETSOCKNAME.invokeExact(state, fd, addr, lengthInOut);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int getpeername(MemorySegment state, int fd, MemorySegment addr, MemorySegment lengthInOut) {
        try {
            return (int) GETPEERNAME.invokeExact(state, fd, addr, lengthInOut);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    static int eventfd(MemorySegment state, int initial, int flags) {
        try {
            return (int) EVENTFD.invokeExact(state, initial, flags);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    /** glibc's text for an errno; strerror returns static strings for every known errno. */
    static String strerror(int errno) {
        try {
            MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
            return text.equals(MemorySegment.NULL) ? "errno " + errno : text.reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw unexpected(t);
        }
    }

    private static AssertionError unexpected(Throwable t) {
        return new AssertionError("native call failed unexpectedly", t);
    }
}
