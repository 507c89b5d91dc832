package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What a thread that runs calls needs of its own: scratch memory, a staging buffer for copies, and
 * the context it last made current in the driver. Lanes are not tied to threads: a lane's calls run
 * on its own thread or, when quick and the lane is idle, on the session's reader thread; before each
 * call the thread makes the lane's current context its own ({@link #apply}), which costs nothing when
 * it already is.
 *
 * <p>The scratch and staging memory is the thread's own (confined arenas), made on first use and freed
 * deterministically, never left to the GC: by {@link #trim} when the thread goes idle between calls,
 * and by {@link #end} when it stops running calls. What it holds is counted in its session's
 * {@link Session#hostBufferBytes}.
 */
final class ExecutionThread {
    /** {@link #appliedContext} value meaning "not known": the next {@link #apply} calls the driver. */
    static final long UNKNOWN = -1;

    private static final ThreadLocal<ExecutionThread> CURRENT = new ThreadLocal<>();
    /**
     * Bumped whenever a context is destroyed anywhere: the driver may hand out the same value for a
     * later context, so a thread that still has the old one current must not take the new one for it.
     */
    private static final java.util.concurrent.atomic.AtomicLong DESTROYED = new java.util.concurrent.atomic.AtomicLong();

    private final int stagingBytes;
    /** The session's count of host buffer bytes, which this thread's memory is part of. */
    private final AtomicLong held;
    private Arena scratchArena;
    private MemorySegment scratch;
    private Arena stagingArena;
    private MemorySegment staging;
    long appliedContext = UNKNOWN;
    private long appliedEpoch;

    private ExecutionThread(int stagingBytes, AtomicLong held) {
        this.stagingBytes = stagingBytes;
        this.held = held;
    }

    /**
     * The calling thread's state, made on first use, with a staging buffer of at least {@code stagingBytes}
     * when one is needed, counted in {@code held}. Threads that run calls fetch it once and pass it along:
     * a ThreadLocal lookup per call was a measurable part of the reader's time per launch.
     */
    static ExecutionThread current(int stagingBytes, AtomicLong held) {
        ExecutionThread t = CURRENT.get();
        if (t == null || t.stagingBytes < stagingBytes || t.held != held) {
            if (t != null) {
                t.trim();
            }
            t = new ExecutionThread(stagingBytes, held);
            CURRENT.set(t);
        }
        return t;
    }

    /** The calling thread stops running calls: its memory is freed now and its state forgotten. */
    static void end() {
        ExecutionThread t = CURRENT.get();
        if (t != null) {
            t.trim();
            CURRENT.remove();
        }
    }

    /** Scratch memory for small values of one call at a time ({@link Lane#SCRATCH_BYTES}), made on first use. */
    MemorySegment scratch() {
        if (scratch == null) {
            scratchArena = Arena.ofConfined();
            scratch = scratchArena.allocate(Lane.SCRATCH_BYTES, 16);
            held.addAndGet(Lane.SCRATCH_BYTES);
        }
        return scratch;
    }

    /** The staging buffer for copies of one call at a time, made on first use. */
    MemorySegment staging() {
        if (staging == null) {
            stagingArena = Arena.ofConfined();
            staging = stagingArena.allocate(stagingBytes, 4096);
            held.addAndGet(stagingBytes);
        }
        return staging;
    }

    /** Frees the scratch and staging memory; the next call that needs them makes them afresh. Only between calls. */
    void trim() {
        if (scratch != null) {
            scratchArena.close();
            scratch = null;
            scratchArena = null;
            held.addAndGet(-Lane.SCRATCH_BYTES);
        }
        if (staging != null) {
            stagingArena.close();
            staging = null;
            stagingArena = null;
            held.addAndGet(-stagingBytes);
        }
    }

    /** Makes {@code context} (a real driver value, 0 for none) current on this thread if it is not already. */
    int apply(CudaDriver driver, long context) {
        long epoch = DESTROYED.get();
        if (appliedContext == context && appliedEpoch == epoch) {
            return CuResult.CUDA_SUCCESS;
        }
        int r = driver.cuCtxSetCurrent(context);
        appliedContext = r == CuResult.CUDA_SUCCESS ? context : UNKNOWN;
        appliedEpoch = epoch;
        return r;
    }

    /** A context was destroyed: every thread makes its lane's context current afresh on its next call. */
    static void contextDestroyed() {
        DESTROYED.incrementAndGet();
    }

    /** How many contexts were destroyed so far: what a value cached for a context is valid under. */
    static long destroyedEpoch() {
        return DESTROYED.get();
    }

    /** Forgets what is current: the driver's stack on this thread was changed behind {@link #apply}. */
    void invalidate() {
        appliedContext = UNKNOWN;
    }
}
