package io.gpusockets.emulated;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * A stream: work runs in submission order on one daemon thread of its own, so streams run
 * concurrently with each other and with the host. The thread is started on demand and ends after a
 * few idle seconds, so thousands of idle streams cost no threads.
 *
 * <p>{@code tail} is the completion of the last work submitted; the ordering rules between streams
 * (legacy default stream versus blocking streams) live in {@link EmulatedContext}, which guards it.
 */
final class EmulatedStream {
    enum Kind { LEGACY, PER_THREAD, CREATED }

    static final int NON_BLOCKING = 0x1;
    private static final long IDLE_SECONDS = 5;

    final long handle;
    final EmulatedContext context;
    final Kind kind;
    final int flags;
    final int priority;
    private final ThreadPoolExecutor executor;
    /** Written under the context's lock; volatile so a synchronizing caller may read it without. */
    private volatile CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
    private volatile boolean destroyed;
    /** The capture sequence this stream is in, or null; written under {@link Captures}' lock. */
    volatile Captures.Sequence capture;

    EmulatedStream(long handle, EmulatedContext context, Kind kind, int flags, int priority, String name) {
        this.handle = handle;
        this.context = context;
        this.kind = kind;
        this.flags = flags;
        this.priority = priority;
        ThreadFactory threads = Thread.ofPlatform().daemon().name(name).factory();
        // At most one thread, none while idle: the queue keeps submission order.
        this.executor = new ThreadPoolExecutor(0, 1, IDLE_SECONDS, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), threads);
    }

    /** Waits for the legacy stream and is waited for by it (every stream but a NON_BLOCKING one). */
    boolean blocking() {
        return kind != Kind.LEGACY && (flags & NON_BLOCKING) == 0;
    }

    CompletableFuture<Void> tail() {
        return tail;
    }

    void tail(CompletableFuture<Void> f) {
        tail = f;
    }

    boolean destroyed() {
        return destroyed;
    }

    CompletableFuture<Void> submit(Runnable task) {
        return CompletableFuture.runAsync(task, executor);
    }

    /** Queued work still runs; the thread ends after it. */
    void destroy() {
        destroyed = true;
        executor.shutdown();
    }
}
