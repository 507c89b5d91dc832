package io.gpusockets.benchmarks;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.lines.SeriesLines;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * What {@code gpusockets bench} measured, and its renderings: results.csv (one row per metric and
 * baseline: {@value #CSV_HEADER}), summary.md (the headline rows, one column per target) and the PNG plots (XChart):
 * null-call latency percentile curves, copy bandwidth against size, launch throughput against clients.
 *
 * <p>A baseline is named {@code TARGET/WORKLOAD} (e.g. {@code native/null-call},
 * {@code tcp/frame-pingpong-64B}); the ratio is this row's value over the baseline's value of the
 * same metric, so above 1 means slower for times and faster for rates.
 */
public final class BenchReport {
    public static final String CSV_HEADER = "transport,workload,metric,value,unit,baseline,ratio";

    /** One figure; {@code baselines} are {@code TARGET/WORKLOAD} names, compared on the same metric. */
    public record Value(String transport, String workload, String metric, double value, String unit,
                        List<String> baselines) {
        public Value {
            baselines = List.copyOf(baselines);
        }
    }

    /** The summary table's rows: workload, metric and how to label it. */
    private record SummaryRow(String workload, String metric, String label) {
    }

    private final List<Value> values = new ArrayList<>();
    private final Map<String, Histogram> latencies = new LinkedHashMap<>();
    /** series name ("tcp pageable") → size in bytes → GB/s, per direction. */
    private final Map<String, Map<String, TreeMap<Long, Double>>> bandwidth = new LinkedHashMap<>();
    /** target → clients → aggregate launches/s. */
    private final Map<String, TreeMap<Integer, Double>> clients = new LinkedHashMap<>();

    public synchronized void add(Value v) {
        values.add(v);
    }

    public void add(String transport, String workload, String metric, double value, String unit, String... baselines) {
        add(new Value(transport, workload, metric, value, unit, List.of(baselines)));
    }

    /** Adds p50, p99 and p99.9 (µs) of a histogram of nanoseconds. */
    public void addLatency(String transport, String workload, Histogram nanos, String... baselines) {
        Latency l = Latency.of(nanos);
        for (String metric : new String[] {"p50", "p99", "p99.9"}) {
            add(transport, workload, metric, l.percentile(metric), "us", baselines);
        }
    }

    /** Keeps a null-call histogram for the latency plot. */
    public synchronized void latencyCurve(String transport, Histogram nanos) {
        latencies.put(transport, nanos.copy());
    }

    public synchronized void bandwidthPoint(String series, String direction, long bytes, double gbs) {
        bandwidth.computeIfAbsent(direction, d -> new LinkedHashMap<>())
                .computeIfAbsent(series, s -> new TreeMap<>()).put(bytes, gbs);
    }

    public synchronized void clientsPoint(String transport, int n, double launchesPerSecond) {
        clients.computeIfAbsent(transport, t -> new TreeMap<>()).put(n, launchesPerSecond);
    }

    public synchronized List<Value> values() {
        return List.copyOf(values);
    }

    /** Targets in the order their first figure arrived. */
    public synchronized List<String> transports() {
        Set<String> t = new LinkedHashSet<>();
        values.forEach(v -> t.add(v.transport()));
        return List.copyOf(t);
    }

    public synchronized Optional<Value> find(String transport, String workload, String metric) {
        return values.stream().filter(v -> v.transport().equals(transport) && v.workload().equals(workload)
                && v.metric().equals(metric)).findFirst();
    }

    /** {@code v} over its baseline {@code TARGET/WORKLOAD}'s same metric; empty when that was not measured. */
    public Optional<Double> ratio(Value v, String baseline) {
        int slash = baseline.indexOf('/');
        if (slash < 0) {
            throw new IllegalArgumentException("a baseline is TARGET/WORKLOAD: baseline=" + baseline);
        }
        return find(baseline.substring(0, slash), baseline.substring(slash + 1), v.metric())
                .filter(b -> b.unit().equals(v.unit()) && b.value() != 0).map(b -> v.value() / b.value());
    }

    public synchronized String csv() {
        StringBuilder out = new StringBuilder(CSV_HEADER).append('\n');
        for (Value v : values) {
            boolean any = false;
            for (String b : v.baselines()) {
                Optional<Double> r = ratio(v, b);
                if (r.isPresent()) {
                    any = true;
                    line(out, v, b, number(r.get()));
                }
            }
            if (!any) {
                line(out, v, "", "");
            }
        }
        return out.toString();
    }

    private static void line(StringBuilder out, Value v, String baseline, String ratio) {
        String[] fields = {v.transport(), v.workload(), v.metric(), number(v.value()), v.unit(), baseline, ratio};
        for (int i = 0; i < fields.length; i++) {
            out.append(i == 0 ? "" : ",").append(ResultTable.csvField(fields[i]));
        }
        out.append('\n');
    }

    /**
     * One row per headline figure, one column per target: the value and, where a baseline was measured,
     * its ratio to the first one.
     */
    public synchronized String summary(List<String> rowOrder) {
        List<String> targets = transports();
        StringBuilder md = new StringBuilder("| workload | metric |");
        targets.forEach(t -> md.append(' ').append(t).append(" |"));
        md.append("\n|---|---|").append("---:|".repeat(targets.size())).append('\n');
        for (SummaryRow row : summaryRows(rowOrder)) {
            String unit = values.stream().filter(v -> v.workload().equals(row.workload()) && v.metric().equals(row.metric()))
                    .map(Value::unit).findFirst().orElse("");
            md.append("| ").append(row.workload()).append(" | ").append(row.label()).append(' ').append(unit).append(" |");
            for (String t : targets) {
                md.append(' ').append(find(t, row.workload(), row.metric()).map(this::cell).orElse("")).append(" |");
            }
            md.append('\n');
        }
        return md.toString();
    }

    /**
     * The rows {@code order} names that were measured: {@code WORKLOAD} (a row per metric) or
     * {@code WORKLOAD#METRIC} (results.csv has them all).
     */
    private List<SummaryRow> summaryRows(List<String> order) {
        List<SummaryRow> out = new ArrayList<>();
        for (String entry : order) {
            int hash = entry.indexOf('#');
            String workload = hash < 0 ? entry : entry.substring(0, hash);
            String metric = hash < 0 ? null : entry.substring(hash + 1);
            for (Value v : values) {
                if (v.workload().equals(workload) && (metric == null || metric.equals(v.metric())) && out.stream()
                        .noneMatch(r -> r.workload().equals(workload) && r.metric().equals(v.metric()))) {
                    out.add(new SummaryRow(v.workload(), v.metric(), v.metric()));
                }
            }
        }
        return out;
    }

    private String cell(Value v) {
        String s = figure(v.value());
        for (String b : v.baselines()) {
            Optional<Double> r = ratio(v, b);
            if (r.isPresent()) {
                return s + String.format(Locale.ROOT, " (%.2f× %s)", r.get(), b);
            }
        }
        return s;
    }

    static String figure(double v) {
        double a = Math.abs(v);
        return String.format(Locale.ROOT, a >= 100 ? "%.0f" : a >= 10 ? "%.1f" : a >= 1 ? "%.2f" : "%.3f", v);
    }

    private static String number(double v) {
        return String.format(Locale.ROOT, "%.4f", v);
    }

    /** Writes results.csv, summary.md (with {@code heading} above the table) and the PNG plots; returns the files. */
    public List<Path> write(Path dir, String heading, List<String> rowOrder) throws IOException {
        Files.createDirectories(dir);
        List<Path> files = new ArrayList<>();
        files.add(Files.writeString(dir.resolve("results.csv"), csv()));
        files.add(Files.writeString(dir.resolve("summary.md"), heading + "\n\n" + summary(rowOrder)));
        files.addAll(plots(dir));
        return files;
    }

    /** latency.png, bandwidth-htod.png / bandwidth-dtoh.png, clients.png: those with data. */
    public synchronized List<Path> plots(Path dir) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<Path> files = new ArrayList<>();
        if (!latencies.isEmpty()) {
            XYChart chart = chart("Null call (cuCtxGetDevice) latency: percentile curve",
                    "1 / (1 - quantile)   (10 = p90, 100 = p99, 1000 = p99.9)", "round trip, µs");
            chart.getStyler().setXAxisLogarithmic(true).setYAxisLogarithmic(true);
            for (var e : latencies.entrySet()) {
                List<Double> x = new ArrayList<>();
                List<Double> y = new ArrayList<>();
                for (HistogramIterationValue v : e.getValue().percentiles(5)) {
                    double q = v.getPercentileLevelIteratedTo() / 100.0;
                    if (q >= 1.0 || q <= 0) {
                        continue;
                    }
                    x.add(1 / (1 - q));
                    y.add(Math.max(v.getValueIteratedTo(), 1) / 1e3);
                }
                if (!x.isEmpty()) {
                    chart.addSeries(e.getKey(), x, y).setMarker(SeriesMarkers.NONE);
                }
            }
            files.add(save(chart, dir.resolve("latency.png")));
        }
        for (var direction : bandwidth.entrySet()) {
            XYChart chart = chart("cuMemcpy" + direction.getKey() + " bandwidth against size", "bytes per copy (log)",
                    "GB/s");
            chart.getStyler().setXAxisLogarithmic(true).setLegendPosition(Styler.LegendPosition.InsideNW);
            for (var series : direction.getValue().entrySet()) {
                List<Double> x = series.getValue().keySet().stream().map(Long::doubleValue).toList();
                var line = chart.addSeries(series.getKey(), x, List.copyOf(series.getValue().values()));
                if (series.getKey().endsWith("pinned")) {
                    line.setLineStyle(SeriesLines.DASH_DASH);
                }
            }
            files.add(save(chart, dir.resolve("bandwidth-" + direction.getKey().toLowerCase(Locale.ROOT) + ".png")));
        }
        if (!clients.isEmpty()) {
            XYChart chart = chart("Async empty-kernel launches, concurrent clients", "clients (log)",
                    "aggregate launches/s");
            chart.getStyler().setXAxisLogarithmic(true).setLegendPosition(Styler.LegendPosition.InsideNW);
            for (var e : clients.entrySet()) {
                List<Double> x = e.getValue().keySet().stream().map(Integer::doubleValue).toList();
                chart.addSeries(e.getKey(), x, List.copyOf(e.getValue().values()));
            }
            files.add(save(chart, dir.resolve("clients.png")));
        }
        return files;
    }

    private static XYChart chart(String title, String x, String y) {
        XYChart chart = new XYChartBuilder().width(960).height(600).title(title).xAxisTitle(x).yAxisTitle(y).build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE).setLegendPosition(Styler.LegendPosition.InsideNW);
        return chart;
    }

    private static Path save(XYChart chart, Path file) throws IOException {
        try (OutputStream out = Files.newOutputStream(file)) {
            BitmapEncoder.saveBitmap(chart, out, BitmapEncoder.BitmapFormat.PNG);
        }
        return file;
    }
}
