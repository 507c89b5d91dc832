package io.gpusockets.transport.vsock;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A socket descriptor shared by the threads that use it, closed without racing them.
 *
 * <p>Every call on the descriptor runs between {@link #acquire()} and {@link #release()}. {@link #close()}
 * marks it closed (later acquires fail), shuts the socket down so that the kernel wakes a thread waiting
 * on it, wakes threads parked in {@link FdWait}, and leaves the real close(2) to whoever releases last.
 * So the number is never closed (and reused by another socket) while a thread still passes it to the
 * kernel. The {@code onRelease} action (freeing native buffers) runs once, after that close.
 */
final class SocketFd {
    private static final int CLOSED = 1 << 30;

    private final int fd;
    private final Runnable onRelease;
    /** Users in flight (low bits) and the CLOSED flag. */
    private final AtomicInteger state = new AtomicInteger();
    private final AtomicBoolean released = new AtomicBoolean();

    SocketFd(int fd, Runnable onRelease) {
        this.fd = fd;
        this.onRelease = onRelease;
    }

    int fd() {
        return fd;
    }

    /** Registers a user; false once closed. */
    boolean acquire() {
        while (true) {
            int s = state.get();
            if ((s & CLOSED) != 0) {
                return false;
            }
            if (state.compareAndSet(s, s + 1)) {
                return true;
            }
        }
    }

    void release() {
        if (state.decrementAndGet() == CLOSED) {
            releaseNow();
        }
    }

    boolean isClosed() {
        return (state.get() & CLOSED) != 0;
    }

    /** Idempotent; never throws. */
    void close() {
        // closing counts as a use, so that the descriptor cannot be released under our shutdown call
        int before = state.getAndUpdate(s -> (s & CLOSED) != 0 ? s : (s | CLOSED) + 1);
        if ((before & CLOSED) != 0) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            // ENOTCONN for a listener or an unconnected socket is fine: close(2) follows
            NativeSockets.shutdown(NativeSockets.newCallState(arena), fd, NativeSockets.SHUT_RDWR);
        }
        FdWait.wakeWaitersOn(this);
        release();
    }

    /**
     * As {@link #close()}, but without shutdown(2): another process holds the socket now (it was passed on
     * with SCM_RIGHTS) and must keep using it; only this process's descriptor goes.
     */
    void closeKeepingSocket() {
        int before = state.getAndUpdate(s -> (s & CLOSED) != 0 ? s : (s | CLOSED) + 1);
        if ((before & CLOSED) != 0) {
            return;
        }
        FdWait.wakeWaitersOn(this);
        release();
    }

    private void releaseNow() {
        if (released.compareAndSet(false, true)) {
            try (Arena arena = Arena.ofConfined()) {
                NativeSockets.close(NativeSockets.newCallState(arena), fd);
            } finally {
                onRelease.run();
            }
        }
    }

    /** Closes a descriptor no SocketFd owns yet (an error path before construction). */
    static void closeQuietly(MemorySegment callState, int fd) {
        if (fd >= 0) {
            NativeSockets.close(callState, fd);
        }
    }

    @Override
    public String toString() {
        return "fd " + fd + (isClosed() ? " (closed)" : "");
    }
}
