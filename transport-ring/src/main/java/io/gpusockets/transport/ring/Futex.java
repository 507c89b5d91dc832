package io.gpusockets.transport.ring;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;

/**
 * futex(2) through {@code syscall(3)} with FFM. The words live in a mapping that two processes share, so
 * the operations are the non-private ones. Where futex is missing (not Linux, an unknown architecture),
 * {@link #available()} is false and callers poll instead.
 *
 * <p>Neither call allocates: a wake (on the path of every message whose reader sleeps) captures no errno,
 * and a wait reuses its thread's timeout and errno scratch.
 */
final class Futex {
    static final int FUTEX_WAIT = 0;
    static final int FUTEX_WAKE = 1;
    static final int EAGAIN = 11;
    static final int EINTR = 4;
    static final int ETIMEDOUT = 110;

    private static final long SYS_FUTEX = sysFutex();
    private static final MethodHandle SYSCALL;
    /** The same call without errno capture: a wake's result is not looked at. */
    private static final MethodHandle SYSCALL_NO_ERRNO;
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(
            MemoryLayout.PathElement.groupElement("errno"));

    /** Per thread: the timeout (a struct timespec, 16 bytes) followed by the errno capture state. */
    private static final ThreadLocal<MemorySegment> SCRATCH = ThreadLocal.withInitial(
            () -> Arena.ofAuto().allocate(16 + CALL_STATE.byteSize(), 8));

    static {
        MethodHandle handle = null;
        MethodHandle plain = null;
        if (SYS_FUTEX > 0) {
            try {
                Linker linker = Linker.nativeLinker();
                // syscall(long number, ...): every variadic argument is passed as a full register (long),
                // since glibc reads them back with va_arg(long).
                MemorySegment syscall = linker.defaultLookup().find("syscall").orElseThrow();
                FunctionDescriptor descriptor = FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG,
                        JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG);
                handle = linker.downcallHandle(syscall, descriptor, Linker.Option.firstVariadicArg(1),
                        Linker.Option.captureCallState("errno"));
                plain = linker.downcallHandle(syscall, descriptor, Linker.Option.firstVariadicArg(1));
            } catch (RuntimeException | LinkageError e) {
                handle = null;
                plain = null;
            }
        }
        SYSCALL = handle;
        SYSCALL_NO_ERRNO = plain;
    }

    private Futex() {
    }

    static boolean available() {
        return SYSCALL != null;
    }

    /**
     * Sleeps while the int at {@code address} equals {@code expected}, at most {@code timeoutNanos}.
     * Returns 0 when woken, else the errno (EAGAIN: the word had changed; ETIMEDOUT; EINTR).
     */
    static int await(long address, int expected, long timeoutNanos) {
        try {
            MemorySegment scratch = SCRATCH.get();
            scratch.set(JAVA_LONG, 0, timeoutNanos / 1_000_000_000L);
            scratch.set(JAVA_LONG, 8, timeoutNanos % 1_000_000_000L);
            MemorySegment state = scratch.asSlice(16, CALL_STATE.byteSize());
            long rc = (long) SYSCALL.invokeExact(state, SYS_FUTEX, address, (long) FUTEX_WAIT, (long) expected,
                    scratch.address(), 0L, 0L);
            return rc == 0 ? 0 : (int) ERRNO.get(state, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("futex wait failed", t);
        }
    }

    /** Wakes every thread (of any process) sleeping on the int at {@code address}. */
    static void wakeAll(long address) {
        try {
            long ignored = (long) SYSCALL_NO_ERRNO.invokeExact(SYS_FUTEX, address, (long) FUTEX_WAKE,
                    (long) Integer.MAX_VALUE, 0L, 0L, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("futex wake failed", t);
        }
    }

    private static long sysFutex() {
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            return -1;
        }
        return switch (System.getProperty("os.arch", "")) {
            case "amd64", "x86_64" -> 202;
            case "aarch64", "riscv64" -> 98;
            default -> -1;
        };
    }
}
