package io.gpusockets.backend.server;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

/**
 * Gives freed native memory back to the system now and then: the backend allocates its buffers with
 * malloc (FFM arenas) on many short-lived threads (lanes, sessions), and glibc keeps what they free in
 * per-thread arenas, so resident memory creeps up with session churn although nothing leaks (a 30-minute
 * soak on the dev VM: 118 MiB given back by one trim). glibc's {@code malloc_trim(0)} returns it; this is
 * what the JDK's {@code -XX:TrimNativeHeapInterval} does, here without asking users for a JVM option.
 * Where the C library has no malloc_trim (musl), nothing is done.
 *
 * <p>Trimming gives back whole free pages; what it cannot give back is memory fragmented across glibc's
 * arenas, of which there are up to 8 per core, each keeping its own free lists. With two arenas
 * ({@code MALLOC_ARENA_MAX=2}, which the launchers set for the backend) a 12-minute dev soak held 735 MiB
 * instead of 1005 MiB at the same throughput. {@link #limitArenas} asks the same of a backend started
 * without it, though only arenas made afterwards obey.
 */
public final class NativeHeapTrim {
    /** How often the backend trims. */
    static final long INTERVAL_SECONDS = 30;

    private static final Optional<MethodHandle> MALLOC_TRIM = Linker.nativeLinker().defaultLookup().find("malloc_trim")
            .map(s -> Linker.nativeLinker().downcallHandle(s, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG)));

    private static final Optional<MethodHandle> MALLOPT = Linker.nativeLinker().defaultLookup().find("mallopt")
            .map(s -> Linker.nativeLinker().downcallHandle(s,
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT)));
    /** glibc's mallopt parameter M_ARENA_MAX (malloc.h). */
    private static final int M_ARENA_MAX = -8;
    /** The arenas the backend asks glibc for. */
    public static final int ARENAS = 2;

    private NativeHeapTrim() {
    }

    /**
     * Unless {@code MALLOC_ARENA_MAX} is set in the environment (the launchers set it; a user's own value
     * wins), asks glibc for at most {@link #ARENAS} malloc arenas from now on; true when it did.
     */
    public static boolean limitArenas() {
        if (System.getenv("MALLOC_ARENA_MAX") != null || MALLOPT.isEmpty()) {
            return false;
        }
        try {
            return (int) MALLOPT.get().invokeExact(M_ARENA_MAX, ARENAS) == 1;
        } catch (Throwable t) {
            return false;
        }
    }

    /** Whether this C library can trim. */
    static boolean available() {
        return MALLOC_TRIM.isPresent();
    }

    /** Trims once; true when memory was given back, false when none could be (or no malloc_trim). */
    static boolean trim() {
        if (MALLOC_TRIM.isEmpty()) {
            return false;
        }
        try {
            return (int) MALLOC_TRIM.get().invokeExact(0L) == 1;
        } catch (Throwable t) {
            return false;
        }
    }
}
