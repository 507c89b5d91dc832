package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link Plots}: a plot is written where the runtime can draw, and a plot that cannot be drawn never fails the bench. */
class PlotsTest {
    @TempDir
    Path dir;

    @Test
    void aChartIsWrittenAsPngWhereTheRuntimeHasJavaDesktop() throws Exception {
        assertTrue(Plots.available(), "the build's JDK has java.desktop");
        Path file = Plots.png(dir.resolve("a.png"), () -> {
            var chart = new org.knowm.xchart.CategoryChartBuilder().width(200).height(100).build();
            chart.addSeries("s", List.of("1", "2"), List.of(1.0, 2.0));
            return chart;
        });
        assertEquals(dir.resolve("a.png"), file);
        byte[] png = Files.readAllBytes(file);
        assertEquals((byte) 0x89, png[0]);
        assertEquals('P', png[1]);
    }

    /** What a runtime without java.desktop throws while building a chart: reported in a line, no file, no failure. */
    @Test
    void aChartThatCannotBeDrawnIsSkippedWithoutFailing() {
        assertNull(Plots.png(dir.resolve("b.png"), () -> {
            throw new NoClassDefFoundError("java/awt/Shape");
        }));
        assertFalse(Files.exists(dir.resolve("b.png")));
        assertNull(Plots.png(dir.resolve("c.png"), () -> null), "nothing to plot");
        assertFalse(Files.exists(dir.resolve("c.png")));
    }
}
