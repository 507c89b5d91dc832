package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A listening non-blocking socket. {@link #accept()} waits through {@link FdWait}, so {@link #close()}
 * unblocks it on any kind of thread (within {@link FdWait#SLICE_MILLIS} for a platform thread on a vsock
 * listener, which shutdown(2) does not wake).
 */
final class NativeSocketListener implements Listener {
    /** Turns an accepted descriptor into a Connection; it owns the descriptor from then on. */
    @FunctionalInterface
    interface Wrapper {
        Connection wrap(int accepted) throws IOException;
    }

    private final SocketFd fd;
    private final TransportUri address;
    private final Wrapper wrapper;
    private final MemorySegment state;
    private final MemorySegment pollfd;
    private final Object acceptLock = new Object();
    private static final System.Logger LOG = System.getLogger(NativeSocketListener.class.getName());
    private static final long LOG_INTERVAL_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
    /** Rate limit of {@link #dropped}: no line before this nanoTime; those held back meanwhile are counted. */
    private final java.util.concurrent.atomic.AtomicLong quietUntil = new java.util.concurrent.atomic.AtomicLong(System.nanoTime() - 1);
    private final java.util.concurrent.atomic.AtomicLong heldBack = new java.util.concurrent.atomic.AtomicLong();

    NativeSocketListener(int descriptor, TransportUri address, Wrapper wrapper, Runnable afterClose) {
        Arena arena = Arena.ofShared();
        this.fd = new SocketFd(descriptor, () -> {
            arena.close();
            afterClose.run();
        });
        this.address = address;
        this.wrapper = wrapper;
        this.state = NativeSockets.newCallState(arena);
        this.pollfd = arena.allocate(SockAddr.POLLFD);
    }

    /**
     * The next peer. One whose connection cannot be set up (it reset before its address could be read) is
     * closed and logged, rate-limited, and the next one taken: that failure is the peer's, and thrown it
     * would make the caller pause its accepts as for a failure of the listener.
     */
    @Override
    public Connection accept() throws IOException {
        while (true) {
            int accepted;
            // one acceptor at a time: they share the call-state segment
            synchronized (acceptLock) {
                if (!fd.acquire()) {
                    throw closed();
                }
                try {
                    accepted = acceptOne();
                } finally {
                    fd.release();
                }
            }
            try {
                return wrapper.wrap(accepted);
            } catch (IOException | RuntimeException e) {
                try (Arena arena = Arena.ofConfined()) {
                    SocketFd.closeQuietly(NativeSockets.newCallState(arena), accepted);
                }
                dropped(e);
            }
        }
    }

    /** Logs a peer dropped at set-up: at most one line per {@link #LOG_INTERVAL_NANOS}, counting the rest. */
    private void dropped(Exception e) {
        long now = System.nanoTime();
        long until = quietUntil.get();
        if (now - until >= 0 && quietUntil.compareAndSet(until, now + LOG_INTERVAL_NANOS)) {
            long more = heldBack.getAndSet(0);
            LOG.log(System.Logger.Level.WARNING, "peer dropped at set-up on " + address + ": " + e.getMessage()
                    + (more == 0 ? "" : " (and " + more + " more since the last such line)"));
        } else {
            heldBack.incrementAndGet();
        }
    }

    private int acceptOne() throws IOException {
        while (true) {
            int c = NativeSockets.accept4(state, fd.fd(), NativeSockets.SOCK_NONBLOCK | NativeSockets.SOCK_CLOEXEC);
            if (c >= 0) {
                return c;
            }
            int errno = NativeSockets.errno(state);
            if (errno == Errno.ECONNABORTED) {
                continue; // the client gave up while queued: wait for the next one
            }
            if (errno != Errno.EAGAIN) {
                throw fd.isClosed() ? closed() : Errno.exception("accept on " + address, errno);
            }
            if (FdWait.await(fd, NativeSockets.POLLIN, state, pollfd, Long.MAX_VALUE) != FdWait.Outcome.READY) {
                throw closed();
            }
        }
    }

    private IOException closed() {
        return new IOException("listener closed: " + address);
    }

    @Override
    public TransportUri address() {
        return address;
    }

    @Override
    public void close() {
        fd.close();
    }

    /** Lets go of this process's descriptor without shutdown(2) and without removing a unix socket's file. */
    @Override
    public void closeLeavingSocket() {
        fd.closeKeepingSocket();
    }

    /** The listening socket's descriptor (for a take-over: {@link DescriptorPassing#listenerDescriptor}). */
    int descriptor() {
        return fd.fd();
    }

    @Override
    public String toString() {
        return "NativeSocketListener[" + address + ", " + fd + "]";
    }
}
