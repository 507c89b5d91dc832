package io.gpusockets.benchmarks;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;

/**
 * The measurements of one run and their renderings: results.csv (one row per metric and baseline), a
 * fixed-width table per transport for the console, and one Markdown table for all transports.
 */
public final class ResultTable {
    static final String CSV_HEADER = "transport,workload,metric,value,unit,baseline,ratio";
    private static final String[] COLUMNS = {"workload", "p50 µs", "p99 µs", "p99.9 µs", "GB/s", "ratio to baseline"};
    private static final String[] LATENCY_METRICS = {"p50", "p99", "p99.9"};

    private final List<Measurement> rows = new ArrayList<>();

    public void add(Measurement m) {
        rows.add(m);
    }

    public List<Measurement> rows() {
        return List.copyOf(rows);
    }

    /** Transports in the order their first measurement arrived. */
    public List<String> transports() {
        Set<String> t = new LinkedHashSet<>();
        rows.forEach(m -> t.add(m.transport()));
        return List.copyOf(t);
    }

    public Optional<Measurement> find(String transport, String workload) {
        return rows.stream().filter(m -> m.transport().equals(transport) && m.workload().equals(workload)).findFirst();
    }

    /** {@code m}'s headline figure over its baseline's; empty when the baseline was not measured. */
    public Optional<Double> ratio(Measurement m, String baseline) {
        return find(m.transport(), baseline).filter(b -> b.isLatency() == m.isLatency())
                .map(b -> m.headline() / b.headline());
    }

    public String csv() {
        StringBuilder out = new StringBuilder(CSV_HEADER).append('\n');
        for (Measurement m : rows) {
            if (m.isLatency()) {
                for (String metric : LATENCY_METRICS) {
                    double value = m.latency().percentile(metric);
                    csvRows(out, m, metric, value, "us", b -> b.latency().percentile(metric));
                }
            } else {
                csvRows(out, m, "throughput", m.gbs(), "GB/s", Measurement::gbs);
            }
        }
        return out.toString();
    }

    private void csvRows(StringBuilder out, Measurement m, String metric, double value, String unit,
                         java.util.function.ToDoubleFunction<Measurement> baselineValue) {
        List<String> baselines = m.baselines().stream()
                .filter(b -> find(m.transport(), b).filter(x -> x.isLatency() == m.isLatency()).isPresent()).toList();
        if (baselines.isEmpty()) {
            csvLine(out, m.transport(), m.workload(), metric, number(value), unit, "", "");
        }
        for (String b : baselines) {
            double base = baselineValue.applyAsDouble(find(m.transport(), b).orElseThrow());
            csvLine(out, m.transport(), m.workload(), metric, number(value), unit, b, number(value / base));
        }
    }

    private static void csvLine(StringBuilder out, String... fields) {
        for (int i = 0; i < fields.length; i++) {
            if (i > 0) {
                out.append(',');
            }
            out.append(csvField(fields[i]));
        }
        out.append('\n');
    }

    static String csvField(String s) {
        if (s.indexOf(',') < 0 && s.indexOf('"') < 0 && s.indexOf('\n') < 0) {
            return s;
        }
        return '"' + s.replace("\"", "\"\"") + '"';
    }

    /** The console table of one transport: aligned columns, figures right-aligned. */
    public String text(String transport) {
        List<String[]> cells = new ArrayList<>();
        cells.add(COLUMNS);
        rows.stream().filter(m -> m.transport().equals(transport)).forEach(m -> cells.add(cells(m)));
        int[] width = new int[COLUMNS.length];
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                width[i] = Math.max(width[i], row[i].length());
            }
        }
        StringBuilder out = new StringBuilder();
        for (String[] row : cells) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < row.length; i++) {
                boolean left = i == 0 || i == row.length - 1;
                String pad = " ".repeat(width[i] - row[i].length());
                line.append(i == 0 ? "" : "  ").append(left ? row[i] + pad : pad + row[i]);
            }
            out.append(line.toString().stripTrailing()).append('\n');
        }
        return out.toString();
    }

    /** One Markdown table for every transport. */
    public String markdown() {
        StringBuilder out = new StringBuilder("| transport | ").append(String.join(" | ", COLUMNS)).append(" |\n");
        out.append("|---|---|").append("---:|".repeat(4)).append("---|\n");
        for (Measurement m : rows) {
            out.append("| ").append(m.transport()).append(" | ").append(String.join(" | ", cells(m))).append(" |\n");
        }
        return out.toString();
    }

    private String[] cells(Measurement m) {
        List<String> ratios = new ArrayList<>();
        for (String b : m.baselines()) {
            ratio(m, b).ifPresent(r -> ratios.add(String.format(Locale.ROOT, "%.2f× %s", r, b)));
        }
        String ratio = String.join(", ", ratios);
        if (m.isLatency()) {
            Latency l = m.latency();
            return new String[] {m.workload(), micros(l.p50Micros()), micros(l.p99Micros()), micros(l.p999Micros()), "",
                    ratio};
        }
        return new String[] {m.workload(), "", "", "", String.format(Locale.ROOT, "%.2f", m.gbs()), ratio};
    }

    static String micros(double us) {
        return String.format(Locale.ROOT, us < 10 ? "%.2f" : "%.1f", us);
    }

    private static String number(double v) {
        return String.format(Locale.ROOT, "%.4f", v);
    }
}
