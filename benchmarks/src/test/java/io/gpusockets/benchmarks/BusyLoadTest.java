package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code bench transports --busy N}: the busy processes run until closed, and busy.png pairs each workload with its busy row. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BusyLoadTest {
    @TempDir
    Path dir;

    @Test
    void busyProcessesBurnCpuUntilClosed() throws Exception {
        List<ProcessHandle> children;
        try (BusyLoad load = BusyLoad.start(2)) {
            assertEquals(2, load.size());
            children = ProcessHandle.current().children().toList();
            assertTrue(children.size() >= 2, "children: " + children);
            ProcessHandle child = children.get(0);
            long before = child.info().totalCpuDuration().map(java.time.Duration::toNanos).orElse(-1L);
            if (before >= 0) {
                long after = before;
                while (after <= before) { // busy: its CPU time grows (the test's timeout ends a loop that never ran)
                    Thread.sleep(50);
                    after = child.info().totalCpuDuration().map(java.time.Duration::toNanos).orElse(before);
                }
            }
        }
        for (ProcessHandle c : children) {
            assertTrue(!c.isAlive() || c.onExit().get(5, TimeUnit.SECONDS) != null);
        }
        assertThrows(IllegalArgumentException.class, () -> BusyLoad.start(-1));
        try (BusyLoad none = BusyLoad.start(0)) {
            assertEquals(0, none.size());
        }
    }

    @Test
    void busyChartPairsEachWorkloadWithItsBusyRow() {
        ResultTable table = new ResultTable();
        Latency quiet = new Latency(100, 1.5, 3, 5);
        Latency busy = new Latency(100, 20, 40, 90);
        table.add(Measurement.latency("ring", Workloads.NULL_CALL, quiet));
        table.add(Measurement.latency("ring", TransportBench.busyName(Workloads.NULL_CALL, 2), busy));
        table.add(Measurement.latency("tcp", Workloads.NULL_CALL, busy));
        table.add(Measurement.latency("tcp", TransportBench.busyName(Workloads.NULL_CALL, 2), busy));
        var chart = TransportBench.busyChart(table, 2);
        assertNotNull(chart);
        assertEquals(List.of(Workloads.NULL_CALL, Workloads.NULL_CALL + ", 2 busy"), List.copyOf(chart.getSeriesMap().keySet()));
        assertNotNull(Plots.png(dir.resolve("busy.png"), () -> chart));
        assertNull(TransportBench.busyChart(new ResultTable(), 2), "nothing measured, nothing to plot");
    }
}
