package io.gpusockets.benchmarks;

import java.util.List;
import java.util.Objects;

/**
 * One workload's figures on one transport: either a latency distribution or a throughput. Ratios are
 * taken against the named baseline workloads of the same transport (p50 against p50, GB/s against GB/s).
 */
public record Measurement(String transport, String workload, Latency latency, double gbs, List<String> baselines) {

    public Measurement {
        Objects.requireNonNull(transport, "transport");
        Objects.requireNonNull(workload, "workload");
        if ((latency == null) == Double.isNaN(gbs)) {
            throw new IllegalArgumentException("a measurement is a latency or a throughput: workload=" + workload);
        }
        baselines = List.copyOf(baselines);
    }

    public static Measurement latency(String transport, String workload, Latency latency, String... baselines) {
        return new Measurement(transport, workload, latency, Double.NaN, List.of(baselines));
    }

    public static Measurement throughput(String transport, String workload, double gbs, String... baselines) {
        return new Measurement(transport, workload, null, gbs, List.of(baselines));
    }

    public boolean isLatency() {
        return latency != null;
    }

    /** The figure ratios are taken on: p50 in µs, or GB/s. */
    public double headline() {
        return isLatency() ? latency.p50Micros() : gbs;
    }
}
