package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PtxBenchTest {
    private static final byte[] PNG_SIGNATURE = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

    private static PtxBench.PtxReport sample() {
        List<PtxWorkloads.Workload> w = PtxWorkloads.all(new PtxWorkloads.Sizes(1 << 20, 1024, 16, 16, 16), 1).subList(0, 2);
        List<PtxBench.Result> r = List.of(
                new PtxBench.Result("interpreter", "vector-add-1M", 90, new double[] {80, 60, 70}, 22_000_000, 3, 0, null),
                new PtxBench.Result("jit", "vector-add-1M", 50, new double[] {20, 30, 40}, 22_000_000, 0, 3, null),
                new PtxBench.Result("interpreter", "sgemm-1024", 16_000, new double[] {15_000}, 4_000_000_000L, 1, 0, null),
                new PtxBench.Result("jit", "sgemm-1024", 2_500, new double[] {1_500, 1_600, 1_700}, 4_000_000_000L, 0, 3,
                        null));
        return new PtxBench.PtxReport(List.of("interpreter", "jit"), w, r, false);
    }

    @Test
    void tableHasBothEnginesTheRatioAndTheTargets() {
        PtxBench.PtxReport r = sample();
        String table = r.table();
        assertTrue(table.contains("| vector-add-1M | 70.0 / 60.0 | 30.0 / 20.0 | 2.33× | 22,000,000 |"), table);
        assertTrue(table.contains("| interpreter | compiled |"), table);
        String targets = r.targets();
        assertTrue(targets.contains("| vector-add-1M ≤ 50 ms | 70.0 ms: **not met** | 30.0 ms: met |"), targets);
        assertTrue(targets.contains("| sgemm-1024 ≤ 2000 ms | 15000 ms: **not met** | 1600 ms: met |"), targets);
    }

    @Test
    void csvRatioIsInterpreterOverJit() {
        List<String> lines = sample().values().csv().lines().toList();
        assertTrue(lines.contains("interpreter,vector-add-1M,median,70.0000,ms,jit/vector-add-1M,2.3333"),
                () -> String.join("\n", lines));
        assertTrue(lines.contains("jit,sgemm-1024,compiled-launches,3.0000,launches,,"), () -> String.join("\n", lines));
    }

    @Test
    void drawsTheBarChartAndDrawsItAgainFromPlotData(@TempDir Path dir) throws IOException {
        PtxBench.PtxReport r = sample();
        List<Path> files = r.write(dir, "# test", List.of());
        assertTrue(files.contains(dir.resolve("emulated-ptx.png")), files::toString);
        Files.delete(dir.resolve("emulated-ptx.png"));
        BenchReport.plots(dir, BenchReport.readPlotCsv(dir.resolve("plotdata.csv")));
        try (InputStream in = Files.newInputStream(dir.resolve("emulated-ptx.png"))) {
            assertArrayEquals(PNG_SIGNATURE, Arrays.copyOf(in.readAllBytes(), 8));
        }
    }
}
