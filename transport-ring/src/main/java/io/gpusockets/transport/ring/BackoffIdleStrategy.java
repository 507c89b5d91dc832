package io.gpusockets.transport.ring;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * Spin for a while, measured in time, then sleep. A wait (the idle steps between two {@link #reset}s) first
 * spins for at most {@code spinNanos}, then platform threads sleep on the futex ({@link Doorbell#await})
 * for at most {@code sleepNanos} at a time, so a waiter re-checks liveness at that period even if no wake
 * comes. Virtual threads never enter the futex (it would pin their carrier); they park with a doubling
 * timeout up to {@code maxPollNanos} and rely on polling, which costs them latency, not correctness.
 *
 * <p>The spin is skipped while {@link CpuPressure} says the machine has more runnable threads than cores
 * and recent spins did not pay (each spin tells it whether it ended with the answer):
 * there the other side usually needs the core this thread would spin on, and a waiter that sleeps at once
 * (and is woken by the other side's FUTEX_WAKE, which also makes the scheduler run it soon) answers in
 * about a socket's time, where spinning made it many times slower. A spinning wait that finds a gap of
 * more than {@link #PREEMPTED_NANOS} between two of its steps was descheduled: it stops spinning and tells
 * {@link CpuPressure}. So an idle connection burns at most one spin ({@code spinNanos}) per wait, then sleeps.
 */
public final class BackoffIdleStrategy implements IdleStrategy {
    /** System property: the spin of each wait in microseconds, 0 to sleep at once ({@link #spinNanosFromProperties}). */
    public static final String SPIN_MICROS_PROP = "gpusockets.ring.spinMicros";
    /** Long enough for a null call's round trip and a quick call's dispatch; short enough that idling costs little. */
    public static final long DEFAULT_SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(20);
    /** The largest spin {@link #SPIN_MICROS_PROP} may ask for: longer spins only burn. */
    public static final long MAX_SPIN_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    public static final long DEFAULT_SLEEP_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    public static final long DEFAULT_MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /**
     * A gap between two spinning steps this long means the thread was not running: a scheduler's time slice, not
     * the blips of a virtual machine's CPU (50 µs, the first choice, took the spin away from a quiet 2-core VM).
     */
    static final long PREEMPTED_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final long spinNanos;
    private final long sleepNanos;
    private final long maxPollNanos;
    /** Whether the current wait has taken its first step, when, and when its last step was. */
    private boolean waiting;
    private long waitStart;
    private long lastStep;
    private boolean spinning;
    private long pollNanos;

    /** The defaults, the spin from {@link #SPIN_MICROS_PROP}. */
    public BackoffIdleStrategy() {
        this(spinNanosFromProperties(), DEFAULT_SLEEP_NANOS, DEFAULT_MAX_POLL_NANOS);
    }

    public BackoffIdleStrategy(long spinNanos, long sleepNanos, long maxPollNanos) {
        if (spinNanos < 0 || spinNanos > MAX_SPIN_NANOS || sleepNanos <= 0 || maxPollNanos <= 0) {
            throw new IllegalArgumentException("spinNanos=" + spinNanos + " (max " + MAX_SPIN_NANOS + ") sleepNanos="
                    + sleepNanos + " maxPollNanos=" + maxPollNanos);
        }
        this.spinNanos = spinNanos;
        this.sleepNanos = sleepNanos;
        this.maxPollNanos = Math.min(maxPollNanos, sleepNanos);
        reset();
    }

    /** {@link #SPIN_MICROS_PROP} in nanoseconds, {@link #DEFAULT_SPIN_NANOS} when unset. */
    public static long spinNanosFromProperties() {
        String value = System.getProperty(SPIN_MICROS_PROP);
        if (value == null || value.isBlank()) {
            return DEFAULT_SPIN_NANOS;
        }
        long micros;
        try {
            micros = Long.parseLong(value.strip());
        } catch (NumberFormatException e) {
            micros = -1;
        }
        if (micros < 0 || micros > TimeUnit.NANOSECONDS.toMicros(MAX_SPIN_NANOS)) {
            throw new IllegalArgumentException(SPIN_MICROS_PROP + " must be 0.." + TimeUnit.NANOSECONDS.toMicros(MAX_SPIN_NANOS)
                    + ": " + SPIN_MICROS_PROP + "=" + value);
        }
        return TimeUnit.MICROSECONDS.toNanos(micros);
    }

    @Override
    public void idle(Doorbell bell, int expected) {
        long now = System.nanoTime();
        if (!waiting) {
            waiting = true;
            waitStart = now;
            lastStep = now;
            spinning = spinNanos > 0 && CpuPressure.shouldSpin();
            if (spinning) {
                CpuPressure.spinning(1);
            }
        }
        if (spinning) {
            if (now - lastStep > PREEMPTED_NANOS) {
                CpuPressure.preempted(now);
                CpuPressure.spinWasted();
                stopSpinning();
            } else if (now - waitStart < spinNanos) {
                lastStep = now;
                Thread.onSpinWait();
                return;
            } else {
                CpuPressure.spinWasted();
                stopSpinning();
            }
        }
        CpuPressure.sample(now);
        if (Thread.currentThread().isVirtual() || !bell.canSleep()) {
            LockSupport.parkNanos(pollNanos);
            pollNanos = Math.min(2 * pollNanos, maxPollNanos);
        } else {
            bell.await(expected, sleepNanos);
        }
    }

    private void stopSpinning() {
        spinning = false;
        CpuPressure.spinning(-1);
    }

    @Override
    public void reset() {
        if (spinning) {
            CpuPressure.spinPaid();   // the wait ended while it spun
            stopSpinning();
        }
        waiting = false;
        pollNanos = 1_000;
    }
}
