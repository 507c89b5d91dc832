package io.gpusockets.benchmarks;

import org.HdrHistogram.Histogram;

/** Percentiles of round trips, in microseconds. */
public record Latency(long count, double p50Micros, double p99Micros, double p999Micros) {

    /** From a histogram of nanoseconds. */
    public static Latency of(Histogram nanos) {
        return new Latency(nanos.getTotalCount(), nanos.getValueAtPercentile(50) / 1e3,
                nanos.getValueAtPercentile(99) / 1e3, nanos.getValueAtPercentile(99.9) / 1e3);
    }

    /** The value of "p50", "p99" or "p99.9". */
    public double percentile(String metric) {
        return switch (metric) {
            case "p50" -> p50Micros;
            case "p99" -> p99Micros;
            case "p99.9" -> p999Micros;
            default -> throw new IllegalArgumentException("unknown latency metric: metric=" + metric);
        };
    }
}
