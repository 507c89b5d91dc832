package io.gpusockets.benchmarks;

import org.HdrHistogram.Histogram;

/**
 * An open round-trip workload. The bench interleaves rounds of several of them (raw socket, raw frame,
 * GPUsockets null call) so that a shift in the machine's state during a run (a busy neighbour, the
 * two threads landing on one core or on two) weighs on all of them alike, which keeps their ratio honest.
 */
public interface PingPong extends AutoCloseable {

    /** {@code n} round trips, each recorded in nanoseconds into {@code into} (null: untimed warm-up). */
    void roundTrips(int n, Histogram into) throws Exception;

    @Override
    void close() throws Exception;
}
