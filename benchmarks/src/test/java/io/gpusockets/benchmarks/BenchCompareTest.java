package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** How {@code bench compare} reads a bench-transports run and sums rounds up. */
class BenchCompareTest {
    private static final List<String> CSV = List.of(
            "transport,workload,metric,value,unit,baseline,ratio",
            "unix,socket-pingpong-64B,p50,13.9590,us,,",
            "unix,frame-pingpong-64B,p50,18.9110,us,socket-pingpong-64B,1.3548",
            "unix,null-call,p50,21.4710,us,socket-pingpong-64B,1.5381",
            "unix,null-call,p50,21.4710,us,frame-pingpong-64B,1.1354",
            "unix,null-call,p99,370.6870,us,socket-pingpong-64B,8.9454",
            "tcp,null-call,p50,25.0000,us,socket-pingpong-64B,1.6000",
            "tcp,null-call,p50,25.0000,us,frame-pingpong-64B,1.2000");

    @Test
    void readsTheNullCallsRatiosAndTheCpuLinesPerScheme() {
        List<String> log = List.of("== unix ==", "cpu-per-round-trip unix     socket 24.00  frame 34.00  null-call 78.00  own 44.00",
                "cpu-per-round-trip tcp      socket 24.00  frame 28.00  null-call 46.50  own 18.50");
        List<BenchCompare.Run> runs = BenchCompare.parse("B", 3, CSV, log);
        assertEquals(List.of(new BenchCompare.Run("B", 3, "unix", 21.471, 1.5381, 1.1354, 78.0, 44.0),
                new BenchCompare.Run("B", 3, "tcp", 25.0, 1.6, 1.2, 46.5, 18.5)), runs);
    }

    @Test
    void aRunOfABenchWithoutCpuFiguresHasNoneRatherThanZero() {
        List<BenchCompare.Run> runs = BenchCompare.parse("A", 1, CSV, List.of("no cpu lines in an older bench"));
        assertTrue(Double.isNaN(runs.getFirst().cpuNull()) && Double.isNaN(runs.getFirst().cpuOwn()), runs.toString());
        assertEquals(1.5381, runs.getFirst().perSocket());
    }

    @Test
    void medianOfOddAndEvenCountsSkipsMissingFigures() {
        assertEquals(2.0, BenchCompare.median(List.of(3.0, 1.0, 2.0)));
        assertEquals(2.5, BenchCompare.median(List.of(4.0, 1.0, Double.NaN, 2.0, 3.0)));
        assertTrue(Double.isNaN(BenchCompare.median(List.of(Double.NaN))));
    }
}
