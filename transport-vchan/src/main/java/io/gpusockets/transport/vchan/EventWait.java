package io.gpusockets.transport.vchan;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.locks.LockSupport;

/**
 * Waits for an event-channel descriptor to become readable: poll(2) on platform threads, in slices so
 * that close and events consumed by another thread of the same vchan are noticed; on virtual threads a
 * non-blocking poll and a short sleep (1 µs growing to 1 ms) so that no carrier is pinned in the kernel.
 */
final class EventWait {
    private static final short POLLIN = 1;
    private static final MethodHandle POLL = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("poll").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle STRERROR = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("strerror").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private final MemorySegment pollfd;
    private long backoffNanos;

    EventWait(Arena arena) {
        this.pollfd = arena.allocate(8, 4);
    }

    /** True when the descriptor is readable now or became so within {@code sliceMillis}. */
    boolean readable(int fd, int sliceMillis) {
        if (Thread.currentThread().isVirtual()) {
            if (poll(fd, 0)) {
                backoffNanos = 0;
                return true;
            }
            backoffNanos = Math.min(Math.max(1_000, backoffNanos * 2), 1_000_000);
            LockSupport.parkNanos(backoffNanos);
            return poll(fd, 0);
        }
        return poll(fd, sliceMillis);
    }

    /** poll with a zero timeout: does not block. */
    boolean readyNow(int fd) {
        return poll(fd, 0);
    }

    private boolean poll(int fd, int timeoutMillis) {
        pollfd.set(JAVA_INT, 0, fd);
        pollfd.set(JAVA_SHORT, 4, POLLIN);
        pollfd.set(JAVA_SHORT, 6, (short) 0);
        try {
            int n = (int) POLL.invokeExact(pollfd, 1L, timeoutMillis);
            return n > 0; // EINTR (-1) counts as not ready: the caller re-checks and waits again
        } catch (Throwable t) {
            throw new AssertionError("poll failed unexpectedly", t);
        }
    }

    static String strerror(int errno) {
        try {
            MemorySegment text = (MemorySegment) STRERROR.invokeExact(errno);
            return text.equals(MemorySegment.NULL) ? "errno " + errno : text.reinterpret(256).getString(0);
        } catch (Throwable t) {
            throw new AssertionError("strerror failed unexpectedly", t);
        }
    }
}
