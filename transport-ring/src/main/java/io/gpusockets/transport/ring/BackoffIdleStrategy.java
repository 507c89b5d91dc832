package io.gpusockets.transport.ring;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Spin, then yield, then sleep. Platform threads sleep on the futex ({@link Doorbell#await}) for at most
 * {@code sleepNanos}, so a waiter re-checks liveness at that period even if no wake comes. Virtual
 * threads never enter the futex (it would pin their carrier); they park with a doubling timeout up to
 * {@code maxPollNanos} and rely on polling, which costs them latency, not correctness.
 */
public final class BackoffIdleStrategy implements IdleStrategy {
    public static final int DEFAULT_SPINS = 2000;
    public static final int DEFAULT_YIELDS = 50;
    public static final long DEFAULT_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    public static final long DEFAULT_MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final int spins;
    private final int yields;
    private final long sleepNanos;
    private final long maxPollNanos;
    private int step;
    private long pollNanos;

    public BackoffIdleStrategy() {
        this(DEFAULT_SPINS, DEFAULT_YIELDS, DEFAULT_SLEEP_NANOS, DEFAULT_MAX_POLL_NANOS);
    }

    public BackoffIdleStrategy(int spins, int yields, long sleepNanos, long maxPollNanos) {
        if (spins < 0 || yields < 0 || sleepNanos <= 0 || maxPollNanos <= 0) {
            throw new IllegalArgumentException("spins=" + spins + " yields=" + yields + " sleepNanos=" + sleepNanos
                    + " maxPollNanos=" + maxPollNanos);
        }
        this.spins = spins;
        this.yields = yields;
        this.sleepNanos = sleepNanos;
        this.maxPollNanos = Math.min(maxPollNanos, sleepNanos);
        reset();
    }

    @Override
    public void idle(Doorbell bell, int expected) {
        if (step < spins) {
            step++;
            Thread.onSpinWait();
        } else if (step < spins + yields) {
            step++;
            Thread.yield();
        } else if (Thread.currentThread().isVirtual() || !bell.canSleep()) {
            LockSupport.parkNanos(pollNanos);
            pollNanos = Math.min(2 * pollNanos, maxPollNanos);
        } else {
            bell.await(expected, sleepNanos);
        }
    }

    @Override
    public void reset() {
        step = 0;
        pollNanos = 1_000;
    }
}
