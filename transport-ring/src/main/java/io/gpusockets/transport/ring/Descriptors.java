package io.gpusockets.transport.ring;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;

/**
 * The few descriptor calls a ring:// connection needs to live on in another process (its hand-over, see
 * {@link RingHandOff}): open(2) of the shared file, so that its descriptor can be passed once the file is
 * unlinked; recv(2) with MSG_DONTWAIT on a received set-up socket, whose EOF tells the peer died; close(2).
 * Through FFM with errno captured; Linux only, as the rest of this transport.
 */
final class Descriptors {
    private static final int O_RDWR = 2;
    private static final int O_CLOEXEC = 0x80000;
    private static final int MSG_DONTWAIT = 0x40;
    private static final int EAGAIN = 11;
    private static final int EINTR = 4;

    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle OPEN;
    private static final MethodHandle RECV;
    private static final MethodHandle CLOSE;

    static {
        Linker linker = Linker.nativeLinker();
        Linker.Option errno = Linker.Option.captureCallState("errno");
        OPEN = linker.downcallHandle(linker.defaultLookup().find("open").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT), errno, Linker.Option.firstVariadicArg(2));
        RECV = linker.downcallHandle(linker.defaultLookup().find("recv").orElseThrow(),
                FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), errno);
        CLOSE = linker.downcallHandle(linker.defaultLookup().find("close").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    }

    private Descriptors() {
    }

    /** A read-write, close-on-exec descriptor of {@code path}, the caller's to close. */
    static int open(Path path) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path.toString()), O_RDWR | O_CLOEXEC);
            if (fd < 0) {
                throw new IOException("open " + path + " failed: errno " + (int) ERRNO.get(state, 0L));
            }
            return fd;
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * Whether the stream socket {@code fd}'s peer has gone: a non-blocking recv of one byte returns 0 (EOF, however
     * the peer died) or fails with another error than EAGAIN. Nobody sends on a ring's set-up socket after the
     * set-up, so a byte read is dropped.
     */
    static boolean peerGone(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            long n = (long) RECV.invokeExact(state, fd, arena.allocate(1), 1L, MSG_DONTWAIT);
            if (n >= 0) {
                return n == 0;
            }
            int e = (int) ERRNO.get(state, 0L);
            return e != EAGAIN && e != EINTR;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** Closes {@code fd} (no shutdown: another process may hold the same socket or file). */
    static void close(int fd) {
        try {
            int ignored = (int) CLOSE.invokeExact(fd);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
