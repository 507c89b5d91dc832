package io.gpusockets.benchmarks;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.internal.chartpart.Chart;

/**
 * The one place the benches write their PNG plots (XChart). XChart draws with java.awt, which is in the java.desktop
 * module; a Java runtime without it (the GPU bundle's lean runtime) cannot build a chart at all (NoClassDefFoundError
 * java/awt/Shape). There each plot is skipped, the first skip printing one line ({@value #SKIPPED}), and a plot that
 * fails to draw or write is reported in one line too: a bench's exit status comes from its measurements only. The data
 * behind a plot stays in the bench's own files (plotdata.csv, the tables), to be drawn elsewhere.
 */
public final class Plots {
    /** The line printed, once per run, where plots are skipped. */
    public static final String SKIPPED = "plots skipped: this Java runtime has no java.desktop";
    private static final AtomicBoolean TOLD = new AtomicBoolean();

    private Plots() {
    }

    /** Builds a chart; called only where the runtime can draw. */
    @FunctionalInterface
    public interface Drawing {
        Chart<?, ?> draw() throws IOException;
    }

    /** Whether this Java runtime can draw plots (it has the java.desktop module). */
    public static boolean available() {
        return ModuleLayer.boot().findModule("java.desktop").isPresent();
    }

    /**
     * Draws {@code drawing} into {@code file} as PNG; returns the file, or null where it was not written: the runtime
     * has no java.desktop ({@value #SKIPPED}, printed once) or drawing or writing it failed (one line naming the file).
     */
    public static Path png(Path file, Drawing drawing) {
        if (!available()) {
            if (TOLD.compareAndSet(false, true)) {
                System.out.println(SKIPPED);
            }
            return null;
        }
        System.setProperty("java.awt.headless", "true");
        try {
            Chart<?, ?> chart = drawing.draw();
            if (chart == null) {
                return null; // nothing to plot
            }
            try (OutputStream out = Files.newOutputStream(file)) {
                BitmapEncoder.saveBitmap(chart, out, BitmapEncoder.BitmapFormat.PNG);
            }
            return file;
        } catch (IOException | RuntimeException | LinkageError e) {
            System.out.println("plot " + file + " not written: " + e);
            return null;
        }
    }
}
