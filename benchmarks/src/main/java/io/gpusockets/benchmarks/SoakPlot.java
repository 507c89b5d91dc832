package io.gpusockets.benchmarks;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;

/**
 * {@code scripts/bench soak-plot DIR}: draws DIR/soak.png from the samples.csv of {@code gpusockets soak}:
 * the backend's resident memory and the device memory in use against time, on one chart.
 */
public final class SoakPlot {
    private SoakPlot() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: scripts/bench soak-plot DIR   (DIR holds the samples.csv of gpusockets soak)");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        Path file = draw(dir);
        if (file != null) {
            System.out.println("soak-plot: " + file);
        }
    }

    /**
     * Draws {@code dir}/soak.png from {@code dir}/samples.csv; returns the file, or null where it was not drawn
     * ({@link Plots#png}: no java.desktop).
     */
    public static Path draw(Path dir) throws IOException {
        List<String> lines = Files.readAllLines(dir.resolve("samples.csv"));
        List<String> header = List.of(lines.getFirst().split(","));
        int t = header.indexOf("seconds");
        int rss = header.indexOf("rss_bytes");
        int dev = header.indexOf("device_used_bytes");
        if (t < 0 || rss < 0 || dev < 0) {
            throw new IOException(dir.resolve("samples.csv") + ": not a soak samples file (header " + lines.getFirst() + ")");
        }
        List<Double> x = new ArrayList<>();
        List<Double> r = new ArrayList<>();
        List<Double> d = new ArrayList<>();
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",");
            x.add(Double.parseDouble(f[t]) / 60);
            r.add(Double.parseDouble(f[rss]) / 1048576);
            d.add(Double.parseDouble(f[dev]) / 1048576);
        }
        return Plots.png(dir.resolve("soak.png"), () -> {
            XYChart chart = new XYChartBuilder().width(960).height(600).title("Soak: backend memory over time")
                    .xAxisTitle("minutes").yAxisTitle("MiB").build();
            chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE).setLegendPosition(Styler.LegendPosition.InsideSE);
            chart.getStyler().setXAxisDecimalPattern("0.#");
            chart.addSeries("backend resident memory (RSS)", x, r);
            chart.addSeries("device memory in use", x, d);
            return chart;
        });
    }
}
