package io.gpusockets.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The performance targets of DESIGN §10 that one run on one machine can check: tcp/unix null call
 * p50 at most 1.2× a raw Java socket ping-pong of the same size; ring null call p50 at most 1 µs; ring
 * streaming at least 5 GB/s in 1 MiB writes over the Connection.
 */
public final class Targets {
    static final double SOCKET_RATIO_MAX = 1.2;
    static final double RING_NULL_CALL_P50_MAX_US = 1.0;
    static final double RING_STREAM_MIN_GBS = 5.0;

    public record Verdict(String transport, String target, String measured, boolean met) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%-6s %-48s %-26s %s", transport, target, measured,
                    met ? "met" : "NOT MET");
        }
    }

    private Targets() {
    }

    /** The targets whose figures the table has; a transport without a target gets none. */
    public static List<Verdict> check(ResultTable table) {
        List<Verdict> out = new ArrayList<>();
        for (String t : table.transports()) {
            if (t.equals("tcp") || t.equals("unix")) {
                table.find(t, Workloads.NULL_CALL).ifPresent(m -> table.ratio(m, Workloads.SOCKET_PING_PONG)
                        .ifPresent(r -> out.add(new Verdict(t, "null call p50 ≤ 1.2× raw Java socket ping-pong",
                                String.format(Locale.ROOT, "%.2f×", r), r <= SOCKET_RATIO_MAX))));
            }
            if (t.equals("ring")) {
                table.find(t, Workloads.NULL_CALL).ifPresent(m -> out.add(new Verdict(t, "null call p50 ≤ 1 µs",
                        ResultTable.micros(m.latency().p50Micros()) + " µs",
                        m.latency().p50Micros() <= RING_NULL_CALL_P50_MAX_US)));
                table.find(t, Workloads.STREAM).ifPresent(m -> out.add(new Verdict(t, "stream ≥ 5 GB/s at 1 MiB",
                        String.format(Locale.ROOT, "%.2f GB/s", m.gbs()), m.gbs() >= RING_STREAM_MIN_GBS)));
            }
        }
        return out;
    }

    public static String markdown(List<Verdict> verdicts) {
        StringBuilder out = new StringBuilder("| transport | target | measured | |\n|---|---|---|---|\n");
        for (Verdict v : verdicts) {
            out.append("| ").append(v.transport()).append(" | ").append(v.target()).append(" | ").append(v.measured())
                    .append(" | ").append(v.met() ? "met" : "**not met**").append(" |\n");
        }
        return out.toString();
    }
}
