package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Set;

/**
 * The host buffers one session's copies between host and device stage through (both ways, {@link CopyCalls}),
 * each {@link #bufferBytes} long.
 *
 * <p>On the real driver they are pinned (cuMemAllocHost), so the GPU reads and writes them by DMA at full
 * speed and async copies out of and into them really are asynchronous, which is what lets one chunk's DMA
 * overlap the transport receiving the next chunk or sending the previous one. Where the driver has no
 * cuMemAllocHost (the emulated device answers CUDA_ERROR_NOT_SUPPORTED) or an allocation fails, a buffer
 * is plain native memory of an arena of its own, freed as soon as the pool drops it. A session that goes idle drops its free buffers ({@link #trim}).
 *
 * <p>A pinned allocation belongs to the context that was current when it was made (any context may
 * copy into it: with unified addressing such memory is portable), and the driver frees it with that
 * context. So every pinned buffer records its context, and before the session destroys a context in
 * any way (cuCtxDestroy, the last primary release, a primary reset, the end of the session)
 * {@link #retire} frees that context's buffers with cuMemFreeHost, waiting first for buffers lent to
 * copies in flight on other lanes. A buffer is never left pointing at memory the driver has freed.
 * At most {@link #MAX_PINNED} pinned buffers exist per session; past that, copies get plain ones.
 */
final class StagingPool {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** Pinned buffers per session (of 4 MiB by default: 64 MiB of page-locked memory at most). */
    static final int MAX_PINNED = 16;
    /** Free plain buffers kept for reuse. */
    private static final int MAX_FREE_PLAIN = 4;
    /** How long {@link #retire} waits for lent buffers of a context being destroyed. */
    private static final long RETIRE_WAIT_MILLIS = 10_000;

    /**
     * One staging buffer; {@code context} is the real context a pinned buffer belongs to, 0 for plain
     * memory, which {@code arena} (null for pinned) frees.
     */
    record Buffer(MemorySegment segment, long context, Arena arena) {
        boolean pinned() {
            return context != 0;
        }
    }

    private final CudaDriver driver;
    private final long sessionId;
    private final int bufferBytes;
    private final ArrayDeque<Buffer> free = new ArrayDeque<>();
    /** Pinned buffers in existence, free or lent. */
    private final Set<Buffer> pinned = new HashSet<>();
    /** Pinned buffers lent to copies. */
    private final Set<Buffer> lent = new HashSet<>();
    /** Contexts being destroyed: no new pinned buffer may be made in them. */
    private final Set<Long> dying = new HashSet<>();
    private boolean pinnedUnavailable;
    private boolean closed;
    private long allocatedPinned;
    private long freedPinned;

    /** The session's count of host buffer bytes, which these buffers are part of. */
    private final java.util.concurrent.atomic.AtomicLong held;

    StagingPool(CudaDriver driver, long sessionId, int bufferBytes) {
        this(driver, sessionId, bufferBytes, new java.util.concurrent.atomic.AtomicLong());
    }

    StagingPool(CudaDriver driver, long sessionId, int bufferBytes, java.util.concurrent.atomic.AtomicLong held) {
        this.held = held;
        this.driver = driver;
        this.sessionId = sessionId;
        this.bufferBytes = bufferBytes;
    }

    int bufferBytes() {
        return bufferBytes;
    }

    /**
     * A buffer for a copy running on the calling thread, whose current context in the driver is
     * {@code context} (0 for none); give it back with {@link #release}.
     */
    synchronized Buffer acquire(long context) {
        Buffer b = free.poll();
        if (b != null) {
            if (b.pinned()) {
                lent.add(b);
            }
            return b;
        }
        if (!pinnedUnavailable && !closed && context != 0 && !dying.contains(context) && pinned.size() < MAX_PINNED) {
            try (Arena a = Arena.ofConfined()) {
                MemorySegment pp = a.allocate(ValueLayout.ADDRESS);
                int r = driver.cuMemAllocHost(pp, bufferBytes);
                if (r == CuResult.CUDA_SUCCESS) {
                    long address = pp.get(ValueLayout.JAVA_LONG, 0);
                    b = new Buffer(MemorySegment.ofAddress(address).reinterpret(bufferBytes), context, null);
                    held.addAndGet(bufferBytes);
                    pinned.add(b);
                    lent.add(b);
                    allocatedPinned++;
                    return b;
                }
                if (r == CuResult.CUDA_ERROR_NOT_SUPPORTED) {
                    pinnedUnavailable = true;
                } else {
                    LOG.log(Level.DEBUG, "session " + sessionId + ": cuMemAllocHost(" + bufferBytes + ") failed: "
                            + CuResult.name(r) + "; staging through pageable memory");
                }
            }
        }
        Arena a = Arena.ofShared();
        held.addAndGet(bufferBytes);
        return new Buffer(a.allocate(bufferBytes, 4096), 0, a);
    }

    /** Gives back a buffer from {@link #acquire} (null is ignored). */
    synchronized void release(Buffer b) {
        if (b == null) {
            return;
        }
        if (b.pinned()) {
            if (!lent.remove(b)) {
                return; // its context was retired while it was lent: the driver freed it with the context
            }
            notifyAll();
            if (!pinned.contains(b)) {
                return;
            }
            free.addFirst(b);
        } else if (!closed && free.size() < MAX_FREE_PLAIN + pinned.size()) {
            free.addLast(b);
        } else {
            dropPlain(b);
        }
    }

    /**
     * Frees the pinned buffers of {@code context}, about to be destroyed, first waiting (bounded) for
     * those lent to copies in flight; call {@link #destroyed} once it is. Runs on any thread: the
     * context is pushed for the frees and popped after, so the thread's current context is unchanged.
     */
    synchronized void retire(long context) {
        if (context == 0) {
            return;
        }
        dying.add(context);
        long deadline = System.currentTimeMillis() + RETIRE_WAIT_MILLIS;
        while (lentIn(context)) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                break;
            }
            try {
                wait(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        freePinned(context);
    }

    /** {@code context} is gone; a new context may reuse its value. */
    synchronized void destroyed(long context) {
        dying.remove(context);
    }

    /** Frees every pinned buffer not lent out and keeps no more; for the end of the session, before its contexts go. */
    synchronized void close() {
        closed = true;
        Set<Long> contexts = new HashSet<>();
        for (Buffer b : pinned) {
            contexts.add(b.context());
        }
        for (long ctx : contexts) {
            freePinned(ctx);
        }
        for (Buffer b; (b = free.poll()) != null; ) {
            if (!b.pinned()) {
                dropPlain(b);
            }
        }
    }

    /**
     * Frees every buffer not lent to a copy: the session is idle. Pinned ones are freed in their own
     * context (pushed for the free and popped after, so the calling thread's current context is unchanged).
     */
    synchronized void trim() {
        for (Iterator<Buffer> it = free.iterator(); it.hasNext(); ) {
            Buffer b = it.next();
            it.remove();
            if (!b.pinned()) {
                dropPlain(b);
            } else if (pinned.remove(b)) {
                freeHost(b);
            }
        }
    }

    private void dropPlain(Buffer b) {
        b.arena().close();
        held.addAndGet(-bufferBytes);
    }

    /** Frees pinned buffer {@code b}, no longer lent, with its context pushed around the free. */
    private void freeHost(Buffer b) {
        boolean pushed = driver.cuCtxPushCurrent(b.context()) == CuResult.CUDA_SUCCESS;
        int r = driver.cuMemFreeHost(b.segment());
        held.addAndGet(-bufferBytes);
        if (r == CuResult.CUDA_SUCCESS) {
            freedPinned++;
        } else {
            LOG.log(Level.WARNING, "session " + sessionId + ": cuMemFreeHost failed: " + CuResult.name(r));
        }
        if (pushed) {
            try (Arena a = Arena.ofConfined()) {
                driver.cuCtxPopCurrent(a.allocate(ValueLayout.ADDRESS));
            }
        }
    }

    /** Pinned buffers made and freed by this pool, for the session's release log and tests. */
    synchronized String summary() {
        return allocatedPinned == 0 ? "" : ", " + freedPinned + "/" + allocatedPinned + " pinned staging buffer(s) freed";
    }

    private boolean lentIn(long context) {
        for (Buffer b : lent) {
            if (b.context() == context) {
                return true;
            }
        }
        return false;
    }

    private void freePinned(long context) {
        boolean pushed = false;
        for (Iterator<Buffer> it = pinned.iterator(); it.hasNext(); ) {
            Buffer b = it.next();
            if (b.context() != context) {
                continue;
            }
            it.remove();
            free.remove(b);
            held.addAndGet(-bufferBytes);
            if (lent.remove(b)) {
                // Still inside a copy after the wait: leave it to the driver, which frees it with the context.
                LOG.log(Level.WARNING, "session " + sessionId + ": a pinned staging buffer was still in use when its context went");
                continue;
            }
            if (!pushed) {
                pushed = driver.cuCtxPushCurrent(context) == CuResult.CUDA_SUCCESS;
            }
            int r = driver.cuMemFreeHost(b.segment());
            if (r == CuResult.CUDA_SUCCESS) {
                freedPinned++;
            } else {
                LOG.log(Level.WARNING, "session " + sessionId + ": cuMemFreeHost failed: " + CuResult.name(r));
            }
        }
        if (pushed) {
            try (Arena a = Arena.ofConfined()) {
                driver.cuCtxPopCurrent(a.allocate(ValueLayout.ADDRESS));
            }
        }
    }
}
