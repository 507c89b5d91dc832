package io.gpusockets.frontend;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Copies large pieces of memory with two threads: the caller copies the first half while a helper
 * thread copies the second. On the H200 host one thread copies 1 MiB pieces at 10–13 GB/s and two
 * at 25–26 GB/s, and the driver's own copy of pageable memory runs at 14–15 GB/s, so a remote copy
 * through the shared window, which the frontend's copy paces, needs both to keep up with it.
 *
 * <p>The helper is started on first use and polls for work for {@link #SPIN_NANOS} after each piece
 * (a parked thread takes tens of microseconds to wake), then parks. One caller at a time splits its
 * copies; another caller meanwhile, or a piece under {@link #MIN_SPLIT_BYTES}, is copied on the
 * calling thread alone. Used where {@link FrontendConfig#copyThreads()} says 2: by default only
 * where there are more than two cores ({@value FrontendConfig#COPY_THREADS_PROP}: 1 for never, 2 for always).
 */
final class SplitCopier {
    /** Pieces smaller than this are not worth a hand-off. */
    static final long MIN_SPLIT_BYTES = 256 << 10;
    static final long SPIN_NANOS = 200_000;

    /** The copier of this process, or null where copies stay on one thread. */
    static final SplitCopier SHARED = FrontendConfig.copyThreads() > 1 ? new SplitCopier() : null;

    private final ReentrantLock use = new ReentrantLock();
    private Thread helper;
    // The job: written by the caller before it publishes seq, read by the helper after it sees seq.
    private MemorySegment src;
    private MemorySegment dst;
    private long srcOffset;
    private long dstOffset;
    private long bytes;
    private volatile int seq;
    private volatile int done;
    private volatile Throwable failure;

    /** {@code bytes} from {@code src} at {@code srcOffset} to {@code dst} at {@code dstOffset}, as MemorySegment.copy. */
    static void copy(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes) {
        SplitCopier c = SHARED;
        if (c == null || bytes < MIN_SPLIT_BYTES) {
            MemorySegment.copy(src, srcOffset, dst, dstOffset, bytes);
        } else {
            c.split(src, srcOffset, dst, dstOffset, bytes);
        }
    }

    void split(MemorySegment src, long srcOffset, MemorySegment dst, long dstOffset, long bytes) {
        Thread h = helper();
        if (!src.isAccessibleBy(h) || !dst.isAccessibleBy(h) || !use.tryLock()) {
            // memory confined to the caller's thread, or another caller has the helper
            MemorySegment.copy(src, srcOffset, dst, dstOffset, bytes);
            return;
        }
        try {
            long half = (bytes / 2) & ~4095L;
            // Bounds are checked here, on the caller, before the helper touches anything.
            src.asSlice(srcOffset, bytes);
            dst.asSlice(dstOffset, bytes);
            this.src = src;
            this.dst = dst;
            this.srcOffset = srcOffset + half;
            this.dstOffset = dstOffset + half;
            this.bytes = bytes - half;
            int job = seq + 1;
            seq = job; // publishes the job
            LockSupport.unpark(h);
            MemorySegment.copy(src, srcOffset, dst, dstOffset, half);
            while (done != job) {
                Thread.onSpinWait();
            }
            Throwable t = failure;
            if (t != null) {
                failure = null;
                if (t instanceof RuntimeException r) {
                    throw r;
                }
                throw new IllegalStateException("copy helper failed", t);
            }
        } finally {
            this.src = null;
            this.dst = null;
            use.unlock();
        }
    }

    private synchronized Thread helper() {
        if (helper == null) {
            helper = Thread.ofPlatform().daemon().name("gpusockets-copy").start(this::serve);
        }
        return helper;
    }

    private void serve() {
        int seen = 0;
        long idleSince = System.nanoTime();
        while (true) {
            int job = seq;
            if (job != seen) {
                try {
                    MemorySegment.copy(src, srcOffset, dst, dstOffset, bytes);
                } catch (RuntimeException | Error e) {
                    failure = e;
                }
                seen = job;
                done = job;
                idleSince = System.nanoTime();
            } else if (System.nanoTime() - idleSince < SPIN_NANOS) {
                Thread.onSpinWait();
            } else {
                LockSupport.park(this);
                idleSince = System.nanoTime();
            }
        }
    }
}
