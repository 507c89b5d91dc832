package io.gpusockets.transport.vsock;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits until a non-blocking socket is ready, its {@link SocketFd} closes, or a deadline passes.
 *
 * <p>A platform thread calls poll(2) itself, in slices of at most {@link #SLICE_MILLIS}: shutdown(2) wakes
 * a poll on a connected socket at once, and the slice bounds how long a poll on a socket that shutdown
 * does not wake (a vsock listener) outlives close().
 *
 * <p>A virtual thread must not block in a native call (it would pin its carrier, and a few blocked
 * readers would stall every virtual thread in the JVM). It parks instead, and one daemon platform thread
 * polls all the descriptors that virtual threads wait on, unparking each waiter when its descriptor is
 * ready; an eventfd wakes that thread when a waiter arrives. This is what the JDK's own socket channels do
 * for virtual threads, reduced to poll(2).
 */
final class FdWait {
    static final int SLICE_MILLIS = 100;

    private FdWait() {
    }

    /** Ready, or nothing more to wait for. */
    enum Outcome { READY, CLOSED, TIMED_OUT }

    /**
     * @param scratch       a pollfd-sized segment the caller owns (platform threads only)
     * @param deadlineNanos a {@link System#nanoTime()} value, or {@code Long.MAX_VALUE} for none
     */
    static Outcome await(SocketFd fd, short events, MemorySegment callState, MemorySegment scratch, long deadlineNanos)
            throws IOException {
        if (Thread.currentThread().isVirtual()) {
            return Poller.INSTANCE.await(fd, events, deadlineNanos);
        }
        scratch.set(JAVA_INT, SockAddr.POLLFD_FD, fd.fd());
        scratch.set(JAVA_SHORT, SockAddr.POLLFD_EVENTS, events);
        while (true) {
            if (fd.isClosed()) {
                return Outcome.CLOSED;
            }
            int slice = SLICE_MILLIS;
            if (deadlineNanos != Long.MAX_VALUE) {
                long left = deadlineNanos - System.nanoTime();
                if (left <= 0) {
                    return Outcome.TIMED_OUT;
                }
                slice = (int) Math.min(SLICE_MILLIS, Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
            scratch.set(JAVA_SHORT, SockAddr.POLLFD_REVENTS, (short) 0);
            int n = NativeSockets.poll(callState, scratch, 1, slice);
            if (n < 0) {
                throw Errno.exception("poll on " + fd, NativeSockets.errno(callState));
            }
            if (n > 0) {
                return fd.isClosed() ? Outcome.CLOSED : Outcome.READY;
            }
        }
    }

    /** Unparks the virtual threads waiting on {@code fd} (it was just closed). */
    static void wakeWaitersOn(SocketFd fd) {
        Poller p = Poller.instanceIfStarted;
        if (p != null) {
            p.wake(fd);
        }
    }

    /** A virtual thread waiting for {@code events} on {@code fd}. */
    private static final class Waiter {
        final SocketFd fd;
        final short events;
        final Thread thread;
        volatile boolean fired;

        Waiter(SocketFd fd, short events, Thread thread) {
            this.fd = fd;
            this.events = events;
            this.thread = thread;
        }
    }

    /** The platform thread that polls for virtual threads. */
    private static final class Poller implements Runnable {
        static volatile Poller instanceIfStarted;
        static final Poller INSTANCE = start();

        private final Set<Waiter> waiters = ConcurrentHashMap.newKeySet();
        private final int eventFd;
        private final MemorySegment signalState;
        private final MemorySegment one;

        private Poller(int eventFd, Arena arena) {
            this.eventFd = eventFd;
            this.signalState = NativeSockets.newCallState(arena);
            this.one = arena.allocate(JAVA_LONG);
            one.set(JAVA_LONG, 0, 1L);
        }

        private static Poller start() {
            Arena arena = Arena.global();
            MemorySegment state = NativeSockets.newCallState(arena);
            int efd = NativeSockets.eventfd(state, 0, NativeSockets.EFD_CLOEXEC | NativeSockets.EFD_NONBLOCK);
            if (efd < 0) {
                throw new IllegalStateException("eventfd failed: " + Errno.describe(NativeSockets.errno(state)));
            }
            Poller p = new Poller(efd, arena);
            Thread.ofPlatform().daemon().name("gpusockets-fd-poller").start(p);
            instanceIfStarted = p;
            return p;
        }

        Outcome await(SocketFd fd, short events, long deadlineNanos) {
            Waiter w = new Waiter(fd, events, Thread.currentThread());
            waiters.add(w);
            signal();
            try {
                while (!w.fired) {
                    if (fd.isClosed()) {
                        return Outcome.CLOSED;
                    }
                    if (deadlineNanos == Long.MAX_VALUE) {
                        LockSupport.park(this);
                    } else {
                        long left = deadlineNanos - System.nanoTime();
                        if (left <= 0) {
                            return Outcome.TIMED_OUT;
                        }
                        LockSupport.parkNanos(this, left);
                    }
                }
                return fd.isClosed() ? Outcome.CLOSED : Outcome.READY;
            } finally {
                waiters.remove(w);
            }
        }

        void wake(SocketFd fd) {
            for (Waiter w : waiters) {
                if (w.fd == fd) {
                    LockSupport.unpark(w.thread);
                }
            }
        }

        private void signal() {
            // an eventfd counter only overflows after 2^64 - 2 signals; EAGAIN then would still leave it readable
            NativeSockets.write(signalState, eventFd, one, 8);
        }

        @Override
        public void run() {
            Arena arena = Arena.ofConfined();
            MemorySegment state = NativeSockets.newCallState(arena);
            MemorySegment drain = arena.allocate(JAVA_LONG);
            int capacity = 64;
            MemorySegment fds = arena.allocate(SockAddr.POLLFD, capacity);
            while (true) {
                Waiter[] snapshot = waiters.toArray(new Waiter[0]);
                if (snapshot.length + 1 > capacity) {
                    capacity = Math.max(capacity * 2, snapshot.length + 1);
                    fds = arena.allocate(SockAddr.POLLFD, capacity);
                }
                long size = SockAddr.POLLFD.byteSize();
                setPollFd(fds, 0, eventFd, NativeSockets.POLLIN);
                for (int i = 0; i < snapshot.length; i++) {
                    setPollFd(fds, (i + 1) * size, snapshot[i].fd.fd(), snapshot[i].events);
                }
                int n = NativeSockets.poll(state, fds, snapshot.length + 1, -1);
                if (n <= 0) {
                    continue;
                }
                if (fds.get(JAVA_SHORT, SockAddr.POLLFD_REVENTS) != 0) {
                    NativeSockets.read(state, eventFd, drain, 8);
                }
                for (int i = 0; i < snapshot.length; i++) {
                    if (fds.get(JAVA_SHORT, (i + 1) * size + SockAddr.POLLFD_REVENTS) != 0) {
                        Waiter w = snapshot[i];
                        w.fired = true;
                        waiters.remove(w);
                        LockSupport.unpark(w.thread);
                    }
                }
            }
        }

        private static void setPollFd(MemorySegment fds, long at, int fd, short events) {
            fds.set(JAVA_INT, at + SockAddr.POLLFD_FD, fd);
            fds.set(JAVA_SHORT, at + SockAddr.POLLFD_EVENTS, events);
            fds.set(JAVA_SHORT, at + SockAddr.POLLFD_REVENTS, (short) 0);
        }
    }
}
