package io.gpusockets.benchmarks;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;

/**
 * The thread a benchmark's program runs on while the benchmark moves its session (MigrationBench, TakeOverBench): it
 * runs a body until {@link #stop} asks it to end, and {@link #stop} rethrows what the body threw, naming the program.
 */
final class ProgramThread {
    /** What the thread runs; it ends when {@code stopping} says so. */
    interface Body {
        void run(BooleanSupplier stopping) throws Throwable;
    }

    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failed = new AtomicReference<>();
    private final Thread thread;
    private final String what;

    /** Starts {@code body} on a platform thread named "program"; {@code what} names it when it failed. */
    ProgramThread(String what, Body body) {
        this.what = what;
        this.thread = Thread.ofPlatform().name("program").start(() -> {
            try {
                body.run(stop::get);
            } catch (Throwable t) {
                failed.set(t);
            }
        });
    }

    /** Asks the body to end, waits for it, and throws if it failed. */
    void stop() throws InterruptedException {
        stop.set(true);
        thread.join();
        if (failed.get() != null) {
            throw new IllegalStateException(what + " failed", failed.get());
        }
    }
}
