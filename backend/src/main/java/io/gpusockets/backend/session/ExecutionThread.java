package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * What a thread that runs calls needs of its own: scratch memory, a staging buffer for copies, and
 * the context it last made current in the driver. Lanes are not tied to threads: a lane's calls run
 * on its own thread or, when quick and the lane is idle, on the session's reader thread; before each
 * call the thread makes the lane's current context its own ({@link #apply}), which costs nothing when
 * it already is.
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

    final MemorySegment scratch;
    final MemorySegment staging;
    long appliedContext = UNKNOWN;
    private long appliedEpoch;

    private ExecutionThread(int stagingBytes) {
        // GC-managed: the memory goes when the thread (and this object) does.
        Arena arena = Arena.ofAuto();
        this.scratch = arena.allocate(Lane.SCRATCH_BYTES, 16);
        this.staging = arena.allocate(stagingBytes, 4096);
    }

    /**
     * The calling thread's state, made on first use with a staging buffer of at least {@code stagingBytes}.
     * Threads that run calls fetch it once and pass it along: a ThreadLocal lookup per call was a
     * measurable part of the reader's time per launch.
     */
    static ExecutionThread current(int stagingBytes) {
        ExecutionThread t = CURRENT.get();
        if (t == null || t.staging.byteSize() < stagingBytes) {
            t = new ExecutionThread(stagingBytes);
            CURRENT.set(t);
        }
        return t;
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

    /** Forgets what is current: the driver's stack on this thread was changed behind {@link #apply}. */
    void invalidate() {
        appliedContext = UNKNOWN;
    }
}
