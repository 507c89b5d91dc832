package io.gpusockets.protocol.transport;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.LongSupplier;

/**
 * Observing threads that are meant to block. A test cannot see "blocked in the kernel", only "made no
 * progress for a while", so these helpers wait on observable progress with explicit bounds.
 */
public final class ThreadProbes {
    /** Progress that stays unchanged this long counts as a stall. */
    public static final Duration QUIET = Duration.ofMillis(250);
    /** How long something that should happen "promptly" may take before the test fails. */
    public static final Duration PROMPTLY = Duration.ofSeconds(5);

    private ThreadProbes() {
    }

    /** Waits until {@code progress} stops changing for {@link #QUIET}; fails if it still moves after 15 s. */
    public static long awaitStall(LongSupplier progress) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        long last = progress.getAsLong();
        long quietSince = System.nanoTime();
        while (System.nanoTime() - quietSince < QUIET.toNanos()) {
            if (System.nanoTime() > deadline) {
                fail("still making progress after 15 s: " + last);
            }
            Thread.sleep(20);
            long now = progress.getAsLong();
            if (now != last) {
                last = now;
                quietSince = System.nanoTime();
            }
        }
        return last;
    }

    /** Asserts that {@code task} has not finished after {@code wait}: it is (still) blocked. */
    public static void assertStillBlocked(Future<?> task, Duration wait, String what) throws Exception {
        try {
            Object result = task.get(wait.toMillis(), TimeUnit.MILLISECONDS);
            fail(what + " should block but returned " + result);
        } catch (TimeoutException expected) {
            assertFalse(task.isDone(), what);
        } catch (ExecutionException e) {
            throw new AssertionError(what + " should block but failed", e.getCause());
        }
    }

    /** The exception {@code task} ends with, which must happen within {@link #PROMPTLY}. */
    public static Throwable failureOf(Future<?> task, String what) throws InterruptedException {
        try {
            Object result = task.get(PROMPTLY.toMillis(), TimeUnit.MILLISECONDS);
            return fail(what + " should fail but returned " + result);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (TimeoutException e) {
            return fail(what + " still blocked after " + PROMPTLY.toSeconds() + " s");
        }
    }

    /** The result of {@code task}, which must arrive within {@link #PROMPTLY}. */
    public static <T> T resultOf(Future<T> task, String what) throws Exception {
        return resultOf(task, what, PROMPTLY);
    }

    /** The result of {@code task}, which must arrive within {@code within}. */
    public static <T> T resultOf(Future<T> task, String what, Duration within) throws Exception {
        try {
            return task.get(within.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError(what + " failed", e.getCause());
        } catch (TimeoutException e) {
            return fail(what + " did not finish within " + within.toSeconds() + " s");
        }
    }
}
