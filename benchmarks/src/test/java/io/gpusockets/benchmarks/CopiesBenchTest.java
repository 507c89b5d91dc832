package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.cli.DeviceChoice;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** How {@code bench copies} reads its options and copies.c's lines, and how it sums the cases up (no timing here). */
class CopiesBenchTest {
    private static final CopiesBench.Case HTOD_4K = new CopiesBench.Case("htod", "pageable", "sync", 4096);
    private static final CopiesBench.Case DTOH_1M = new CopiesBench.Case("dtoh", "pinned", "async", 1 << 20);

    private static CopiesBench parse(String... args) {
        CopiesBench b = new CopiesBench();
        new CommandLine(b).setCaseInsensitiveEnumValuesAllowed(true).parseArgs(args);
        return b;
    }

    @Test
    void defaultsAreTheIssuesSizesAllThreeTransportsAndThreeRounds() {
        CopiesBench b = parse();
        assertEquals(List.of(4096L, 16384L, 65536L, 262144L, 1048576L), java.util.Arrays.stream(b.sizes()).boxed().toList());
        assertEquals(List.of("unix", "tcp", "ring"), b.transports);
        assertEquals(3, b.rounds);
        assertEquals(DeviceChoice.AUTO, b.device);
    }

    @Test
    void optionsAreRead() {
        CopiesBench b = parse("--sizes", "1,8", "--transports", "ring", "--rounds", "5", "--budget", "2", "--max-reps", "10",
                "--warmup", "0", "--device", "emulated", "--quick");
        assertEquals(List.of(1024L, 8192L), java.util.Arrays.stream(b.sizes()).boxed().toList());
        assertEquals(List.of("ring"), b.transports);
        assertEquals(5, b.rounds);
        assertEquals(2, b.budgetMib);
        assertEquals(10, b.maxReps);
        assertEquals(0, b.warmup);
        assertEquals(DeviceChoice.EMULATED, b.device);
        assertTrue(b.quick);
    }

    @Test
    void aSizeThatIsNotPositiveIsRefused() {
        CopiesBench b = parse("--sizes", "4,0");
        assertThrows(CommandLine.ParameterException.class, b::sizes);
    }

    @Test
    void repsAreTheBudgetOverTheSizeWithinThreeAndTheMost() {
        assertEquals(2000, CopiesBench.reps(4096, 16 << 20, 2000));
        assertEquals(16, CopiesBench.reps(1 << 20, 16 << 20, 2000));
        assertEquals(3, CopiesBench.reps(1 << 20, 1 << 20, 2000));
    }

    @Test
    void readsTheProgramsCaseLinesAndNothingElse() {
        String stdout = """
                call ctx-synchronize reps=2000 us=7.250 p50=6.000
                copy htod pageable sync 4096 reps=2000 us=12.500 p50=11.000
                something else
                copy dtoh pinned async 1048576 reps=16 us=250.000
                copy sideways pinned async 1 reps=1 us=1
                copies done
                """;
        Map<CopiesBench.Case, Double> got = CopiesBench.parse(stdout);
        assertEquals(Map.of(CopiesBench.FLOOR, 7.25, CopiesBench.FLOOR.p50(), 6.0, HTOD_4K, 12.5, HTOD_4K.p50(), 11.0, DTOH_1M, 250.0), got);
        assertEquals(CopiesBench.FLOOR, got.keySet().iterator().next(), "the floor sorts first");
    }

    @Test
    void casesSortHtodFirstThenMemorySyncFirstThenSize() {
        List<CopiesBench.Case> sorted = new java.util.ArrayList<>(List.of(DTOH_1M, new CopiesBench.Case("htod", "pageable", "async", 4096),
                new CopiesBench.Case("htod", "pageable", "sync", 65536), HTOD_4K));
        java.util.Collections.sort(sorted);
        assertEquals(List.of(HTOD_4K, new CopiesBench.Case("htod", "pageable", "sync", 65536),
                new CopiesBench.Case("htod", "pageable", "async", 4096), DTOH_1M), sorted);
        assertEquals("copy-htod-pageable-sync-4KiB", HTOD_4K.workload());
        assertEquals("copy-dtoh-pinned-async-1MiB", DTOH_1M.workload());
        assertEquals("100B", CopiesBench.size(100));
    }

    @Test
    void mediansPerCaseOverRounds() {
        Map<String, Map<CopiesBench.Case, List<Double>>> figures = new LinkedHashMap<>();
        figures.put("unix", new TreeMap<>(Map.of(HTOD_4K, List.of(30.0, 10.0, 20.0))));
        assertEquals(20.0, CopiesBench.medians(figures).get("unix").get(HTOD_4K));
    }

    private static Map<String, Map<CopiesBench.Case, Double>> sample() {
        Map<String, Map<CopiesBench.Case, Double>> m = new LinkedHashMap<>();
        m.put("native", new TreeMap<>(Map.of(CopiesBench.FLOOR, 2.0, HTOD_4K, 4.0, DTOH_1M, 100.0)));
        m.put("in-process", new TreeMap<>(Map.of(HTOD_4K, 2.0, DTOH_1M, 50.0)));
        m.put("ring", new TreeMap<>(Map.of(CopiesBench.FLOOR, 4.0, HTOD_4K, 5.0, HTOD_4K.p50(), 4.5, DTOH_1M, 200.0)));
        m.put("tcp", new TreeMap<>(Map.of(HTOD_4K, 10.0)));
        return m;
    }

    @Test
    void tableShowsMicrosecondsThroughputAndTheRatioToTheReference() {
        String table = CopiesBench.table(sample(), "native");
        assertTrue(table.startsWith("| copy | size | native | in-process (× native) | ring (× native) | tcp (× native) |\n"), table);
        // 4096 B in 4 µs = 1.02 GB/s; ring 5 µs: 0.82 GB/s, ×0.80 of native
        assertTrue(table.contains("| htod pageable sync | 4KiB | 4.0 µs 1.02 GB/s | 2.0 µs 2.05 GB/s ×2.00 | 5.0 µs (p50 4.5) 0.82 GB/s ×0.80 | 10.0 µs 0.41 GB/s ×0.40 |"),
                table);
        assertTrue(table.contains("| call ctx-synchronize | - | 2.0 µs | - | 4.0 µs ×0.50 | - |"), table);
        assertTrue(table.contains("| dtoh pinned async | 1MiB | 100.0 µs 10.49 GB/s | 50.0 µs 20.97 GB/s ×2.00 | 200.0 µs 5.24 GB/s ×0.50 | - |"), table);
    }

    @Test
    void verdictsTakeEachTransportsLowestRatioAgainstItsTarget() {
        List<String> v = CopiesBench.verdicts(sample());
        assertEquals(List.of("ring copies ≥ 0.8× native: lowest ×0.50 (copy-dtoh-pinned-async-1MiB), NOT MET",
                "tcp copies ≥ 0.5× native: lowest ×0.40 (copy-htod-pageable-sync-4KiB), NOT MET"), v);
        Map<String, Map<CopiesBench.Case, Double>> noNative = sample();
        noNative.remove("native");
        assertEquals(List.of(), CopiesBench.verdicts(noNative));
    }

    @Test
    void csvHasPerCopyAndThroughputRowsWithRatiosToTheReference() {
        String csv = CopiesBench.csv(sample(), "native");
        assertTrue(csv.startsWith(ResultTable.CSV_HEADER + "\n"), csv);
        assertTrue(csv.contains("native,copy-htod-pageable-sync-4KiB,per-copy,4.000,us,,\n"), csv);
        assertTrue(csv.contains("ring,call-ctx-synchronize,per-call,4.000,us,native/call-ctx-synchronize,2.0000\n"), csv);
        assertTrue(!csv.contains("call-ctx-synchronize,throughput"), csv);
        assertTrue(csv.contains("ring,copy-htod-pageable-sync-4KiB,per-copy-p50,4.500,us,,\n"), csv);
        assertTrue(!csv.contains("/p50"), csv);
        assertTrue(csv.contains("ring,copy-htod-pageable-sync-4KiB,per-copy,5.000,us,native/copy-htod-pageable-sync-4KiB,1.2500\n"), csv);
        assertTrue(csv.contains("ring,copy-htod-pageable-sync-4KiB,throughput,0.8192,GB/s,native/copy-htod-pageable-sync-4KiB,0.8000\n"), csv);
    }
}
