package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BenchReportTest {
    private static final byte[] PNG_SIGNATURE = {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

    private static BenchReport sample() {
        BenchReport r = new BenchReport();
        Histogram nativeCalls = new Histogram(3);
        Histogram tcpCalls = new Histogram(3);
        for (int i = 1; i <= 1000; i++) {
            nativeCalls.recordValue(20 + i % 7);
            tcpCalls.recordValue(20_000 + 13L * i);
        }
        r.addLatency("native", Workloads.NULL_CALL, nativeCalls);
        r.latencyCurve("native", nativeCalls);
        r.add("tcp", Workloads.FRAME_PING_PONG, "p50", 18, "us");
        r.addLatency("tcp", Workloads.NULL_CALL, tcpCalls, "native/" + Workloads.NULL_CALL,
                "tcp/" + Workloads.FRAME_PING_PONG);
        r.latencyCurve("tcp", tcpCalls);
        r.add("native", "clients-1", "throughput", 200_000, "launches/s");
        r.add("tcp", "clients-16", "throughput", 100_000, "launches/s", "native/clients-1", "native/clients-16");
        for (long bytes : DriverBench.copySizes(16L << 20)) {
            r.bandwidthPoint("tcp pageable", "HtoD", bytes, bytes / 1e6);
            r.bandwidthPoint("tcp pinned", "DtoH", bytes, bytes / 2e6);
        }
        r.clientsPoint("tcp", 1, 10_000);
        r.clientsPoint("tcp", 16, 100_000);
        return r;
    }

    @Test
    void csvHeaderIsExactAndRowsCarryTheirBaselineAndRatio() {
        List<String> lines = sample().csv().lines().toList();
        assertEquals("transport,workload,metric,value,unit,baseline,ratio", lines.getFirst());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("tcp,null-call,p50,") && l.contains(",tcp/frame-pingpong-64B,")),
                () -> String.join("\n", lines));
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("tcp,null-call,p50,") && l.contains(",native/null-call,")));
        // the p99 row has no frame-pingpong p99 to compare with: only the native ratio
        assertTrue(lines.stream().noneMatch(l -> l.startsWith("tcp,null-call,p99,") && l.contains("frame-pingpong")));
        assertTrue(lines.contains("tcp,clients-16,throughput,100000.0000,launches/s,native/clients-1,0.5000"));
        // native/clients-16 was never measured: no row for it
        assertTrue(lines.stream().noneMatch(l -> l.contains("native/clients-16")));
        assertTrue(lines.contains("native,clients-1,throughput,200000.0000,launches/s,,"));
        for (String l : lines) {
            assertEquals(7, l.split(",", -1).length, l);
        }
    }

    @Test
    void writesCsvSummaryAndPngPlots(@TempDir Path dir) throws IOException {
        List<Path> files = sample().write(dir, "# heading",
                List.of(Workloads.NULL_CALL, "clients-16#throughput", "nothing-measured"));
        for (String name : List.of("results.csv", "summary.md", "latency.png", "bandwidth-htod.png",
                "bandwidth-dtoh.png", "clients.png")) {
            Path f = dir.resolve(name);
            assertTrue(Files.isRegularFile(f), name);
            assertTrue(files.contains(f), name);
        }
        assertEquals(BenchReport.CSV_HEADER, Files.readAllLines(dir.resolve("results.csv")).getFirst());
        for (Path png : files.stream().filter(p -> p.toString().endsWith(".png")).toList()) {
            try (InputStream in = Files.newInputStream(png)) {
                assertArrayEquals(PNG_SIGNATURE, in.readNBytes(8), png.toString());
            }
        }
        String md = Files.readString(dir.resolve("summary.md"));
        assertTrue(md.startsWith("# heading\n\n| workload | metric | native | tcp |"), md);
        assertTrue(md.contains("| clients-16 | throughput launches/s |  | 100000 (0.50× native/clients-1) |"), md);
    }

    @Test
    void plotsCanBeDrawnAgainFromTheirDataFile(@TempDir Path dir) throws IOException {
        BenchReport r = sample();
        r.write(dir, "# heading", List.of(Workloads.NULL_CALL));
        List<BenchReport.PlotPoint> saved = BenchReport.readPlotCsv(dir.resolve("plotdata.csv"));
        assertEquals(r.plotPoints(), saved);
        Path again = Files.createDirectory(dir.resolve("again"));
        List<Path> pngs = BenchReport.plots(again, saved);
        assertEquals(List.of("latency.png", "bandwidth-htod.png", "bandwidth-dtoh.png", "clients.png"),
                pngs.stream().map(p -> p.getFileName().toString()).toList());
        for (Path png : pngs) {
            try (InputStream in = Files.newInputStream(png)) {
                assertArrayEquals(PNG_SIGNATURE, in.readNBytes(8), png.toString());
            }
        }
    }

    @Test
    void copySizesGrowByFourFromEightBytesIncludeSixteenMebibytesAndEndAtTheMaximum() {
        long[] quick = DriverBench.copySizes(16L << 20);
        assertEquals(8, quick[0]);
        assertEquals(16L << 20, quick[quick.length - 1]);
        assertEquals(8L << 20, quick[quick.length - 2]);
        long[] full = DriverBench.copySizes(256L << 20);
        assertEquals(256L << 20, full[full.length - 1]);
        assertEquals(128L << 20, full[full.length - 2]);
        assertEquals(32L << 20, full[full.length - 3]);
        assertEquals(16L << 20, full[full.length - 4], "the 16 MiB target size is measured in the full run too");
        assertEquals(8L << 20, full[full.length - 5]);
    }

    @Test
    void baselinesNameTargetAndWorkload() {
        assertArrayEquals(new String[] {"native/null-call", "tcp/frame-pingpong-64B"},
                Bench.baselines("tcp", true, Workloads.NULL_CALL));
        assertArrayEquals(new String[] {"tcp/frame-pingpong-64B"}, Bench.baselines("tcp", false, Workloads.NULL_CALL));
        assertArrayEquals(new String[] {"native/clients-1", "native/clients-16"}, Bench.baselines("ring", true, "clients-16"));
        assertArrayEquals(new String[] {"ring/clients-1"}, Bench.baselines("ring", false, "clients-16"));
        assertArrayEquals(new String[] {"unix/stream-1MiB"}, Bench.baselines("unix", false, "memcpy-htod-pageable-16MiB"));
        assertArrayEquals(new String[0], Bench.baselines("native", true, Workloads.NULL_CALL));
        assertEquals("16MiB", Bench.size(16L << 20));
        assertEquals("8B", Bench.size(8));
        assertEquals("2KiB", Bench.size(2048));
    }
}
