package io.gpusockets.benchmarks;

import java.io.IOException;
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
        List<PlotPoint> points = plotPoints();
        files.add(Files.writeString(dir.resolve("plotdata.csv"), plotCsv(points)));
        List<Path> drawn = plots(dir, points); // none on a runtime without java.desktop (the lean bundle)
        if (drawn.isEmpty() && !points.isEmpty()) {
            System.out.println("bench: draw the plots from " + dir.resolve("plotdata.csv") + " with: scripts/bench --replot "
                    + dir);
        }
        files.addAll(drawn);
        return files;
    }

    /** One point of a plot: plot file stem ("latency", "bandwidth-htod", "clients"), series, x, y. */
    public record PlotPoint(String plot, String series, double x, double y) {
    }

    /** The plots' data, kept in plotdata.csv so that the plots can be drawn again elsewhere ({@code --replot}). */
    public synchronized List<PlotPoint> plotPoints() {
        List<PlotPoint> points = new ArrayList<>();
        for (var e : latencies.entrySet()) {
            for (HistogramIterationValue v : e.getValue().percentiles(5)) {
                double q = v.getPercentileLevelIteratedTo() / 100.0;
                if (q < 1.0 && q > 0) {
                    points.add(new PlotPoint("latency", e.getKey(), 1 / (1 - q), Math.max(v.getValueIteratedTo(), 1) / 1e3));
                }
            }
        }
        for (var direction : bandwidth.entrySet()) {
            String plot = "bandwidth-" + direction.getKey().toLowerCase(Locale.ROOT);
            for (var series : direction.getValue().entrySet()) {
                series.getValue().forEach((bytes, gbs) -> points.add(new PlotPoint(plot, series.getKey(), bytes, gbs)));
            }
        }
        clients.forEach((target, byCount) -> byCount.forEach(
                (n, rate) -> points.add(new PlotPoint("clients", target, n, rate))));
        return points;
    }

    static String plotCsv(List<PlotPoint> points) {
        StringBuilder b = new StringBuilder("plot,series,x,y\n");
        for (PlotPoint p : points) {
            b.append(p.plot()).append(',').append(p.series().replace(',', ' ')).append(',')
                    .append(p.x()).append(',').append(p.y()).append('\n');
        }
        return b.toString();
    }

    static List<PlotPoint> readPlotCsv(Path file) throws IOException {
        List<PlotPoint> points = new ArrayList<>();
        List<String> lines = Files.readAllLines(file);
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",");
            if (f.length == 4) {
                points.add(new PlotPoint(f[0], f[1], Double.parseDouble(f[2]), Double.parseDouble(f[3])));
            }
        }
        return points;
    }

    /** latency.png, bandwidth-htod.png / bandwidth-dtoh.png, clients.png (emulated-ptx.png for bench emulated-ptx): those with data. */
    public List<Path> plots(Path dir) throws IOException {
        return plots(dir, plotPoints());
    }

    /**
     * Draws the plots of {@code points} into {@code dir}; returns the files written ({@link Plots#png}: none where the
     * runtime has no java.desktop).
     */
    public static List<Path> plots(Path dir, List<PlotPoint> points) {
        Map<String, Map<String, List<PlotPoint>>> byPlot = new LinkedHashMap<>();
        for (PlotPoint p : points) {
            byPlot.computeIfAbsent(p.plot(), k -> new LinkedHashMap<>()).computeIfAbsent(p.series(), k -> new ArrayList<>()).add(p);
        }
        List<Path> files = new ArrayList<>();
        for (var plot : byPlot.entrySet()) {
            String name = plot.getKey();
            Path file = name.equals(PtxBench.PLOT)
                    // bench emulated-ptx's bar chart (its plotdata.csv has only this plot)
                    ? PtxBench.draw(dir, plot.getValue().values().stream().flatMap(List::stream).toList())
                    : Plots.png(dir.resolve(name + ".png"), () -> chart(name, plot.getValue()));
            if (file != null) {
                files.add(file);
            }
        }
        return files;
    }

    /** The XY chart of plot {@code name} with {@code bySeries}' points. */
    private static XYChart chart(String name, Map<String, List<PlotPoint>> bySeries) {
        XYChart chart;
        if (name.equals("latency")) {
            chart = chart("Null call (cuCtxGetDevice) latency: percentile curve",
                    "1 / (1 - quantile)   (10 = p90, 100 = p99, 1000 = p99.9)", "round trip, µs");
            chart.getStyler().setXAxisLogarithmic(true).setYAxisLogarithmic(true);
        } else if (name.equals("clients")) {
            chart = chart("Async empty-kernel launches, concurrent clients", "clients (log)", "aggregate launches/s");
            chart.getStyler().setXAxisLogarithmic(true);
        } else {
            String direction = name.substring("bandwidth-".length()).equalsIgnoreCase("htod") ? "HtoD" : "DtoH";
            chart = chart("cuMemcpy" + direction + " bandwidth against size", "bytes per copy (log)", "GB/s");
            chart.getStyler().setXAxisLogarithmic(true);
        }
        for (var series : bySeries.entrySet()) {
            List<Double> x = series.getValue().stream().map(PlotPoint::x).toList();
            List<Double> y = series.getValue().stream().map(PlotPoint::y).toList();
            var line = chart.addSeries(series.getKey(), x, y);
            if (name.equals("latency")) {
                line.setMarker(SeriesMarkers.NONE);
            } else if (series.getKey().endsWith("pinned")) {
                line.setLineStyle(SeriesLines.DASH_DASH);
            }
        }
        return chart;
    }

    private static XYChart chart(String title, String x, String y) {
        XYChart chart = new XYChartBuilder().width(960).height(600).title(title).xAxisTitle(x).yAxisTitle(y).build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE).setLegendPosition(Styler.LegendPosition.InsideNW);
        return chart;
    }
}
