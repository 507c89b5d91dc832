package io.gpusockets.transport.ring;

/**
 * What a side of a ring does when a poll found nothing to do (no data to read, no room to write): the
 * one swappable policy for spinning, yielding and sleeping. One instance per waiting role; not shared
 * between threads. {@link #idle} must return within a bounded time (the connection re-checks liveness
 * after each call).
 */
public interface IdleStrategy {

    /** One idle step; may sleep on {@code bell} while its word still reads {@code expected}. */
    void idle(Doorbell bell, int expected);

    /** Work was done: start over with the cheapest step. */
    void reset();
}
