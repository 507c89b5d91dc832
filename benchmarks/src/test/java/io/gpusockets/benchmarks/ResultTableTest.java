package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

class ResultTableTest {

    private static ResultTable tcpAndRing() {
        ResultTable t = new ResultTable();
        t.add(Measurement.latency("tcp", Workloads.SOCKET_PING_PONG, new Latency(100, 10, 20, 40)));
        t.add(Measurement.latency("tcp", Workloads.NULL_CALL, new Latency(100, 11, 30, 50.5), Workloads.SOCKET_PING_PONG,
                Workloads.FRAME_PING_PONG));
        t.add(Measurement.throughput("tcp", Workloads.STREAM, 4.0));
        t.add(Measurement.throughput("tcp", Workloads.HTOD, 3.0, Workloads.STREAM));
        t.add(Measurement.latency("ring", Workloads.NULL_CALL, new Latency(100, 1.5, 2, 3)));
        t.add(Measurement.throughput("ring", Workloads.STREAM, 6.25));
        return t;
    }

    @Test
    void csvHasOneRowPerMetricAndMeasuredBaseline() {
        List<String> lines = tcpAndRing().csv().lines().toList();
        assertEquals(ResultTable.CSV_HEADER, lines.getFirst());
        assertEquals("tcp,socket-pingpong-64B,p50,10.0000,us,,", lines.get(1));
        // frame-pingpong was not measured: only the socket baseline gets a row
        assertEquals("tcp,null-call,p50,11.0000,us,socket-pingpong-64B,1.1000", lines.get(4));
        assertEquals("tcp,null-call,p99,30.0000,us,socket-pingpong-64B,1.5000", lines.get(5));
        assertEquals("tcp,null-call,p99.9,50.5000,us,socket-pingpong-64B,1.2625", lines.get(6));
        assertEquals("tcp,stream-1MiB,throughput,4.0000,GB/s,,", lines.get(7));
        assertEquals("tcp,memcpy-htod-1MiB,throughput,3.0000,GB/s,stream-1MiB,0.7500", lines.get(8));
        assertEquals(1 + 3 + 3 + 1 + 1 + 3 + 1, lines.size());
        for (String line : lines) {
            assertEquals(7, line.split(",", -1).length, line);
        }
    }

    @Test
    void csvQuotesFieldsWithCommasAndQuotes() {
        assertEquals("plain", ResultTable.csvField("plain"));
        assertEquals("\"a,b\"", ResultTable.csvField("a,b"));
        assertEquals("\"say \"\"hi\"\"\"", ResultTable.csvField("say \"hi\""));
    }

    @Test
    void textTableAlignsColumnsAndShowsRatios() {
        List<String> lines = tcpAndRing().text("tcp").lines().toList();
        assertEquals(5, lines.size(), "header and four tcp rows");
        assertTrue(lines.getFirst().startsWith("workload"));
        String nullCall = lines.stream().filter(l -> l.startsWith("null-call")).findFirst().orElseThrow();
        assertTrue(nullCall.endsWith("1.10× socket-pingpong-64B"), nullCall);
        // figures right-aligned: each p50 ends at the same column as its header
        int p50End = lines.getFirst().indexOf("p50 µs") + "p50 µs".length();
        assertEquals("11.0", nullCall.substring(p50End - 4, p50End));
        assertEquals("10.0", lines.get(1).substring(p50End - 4, p50End));
        String htod = lines.stream().filter(l -> l.startsWith("memcpy-htod")).findFirst().orElseThrow();
        assertTrue(htod.contains(" 3.00  0.75× stream-1MiB"), htod);
    }

    @Test
    void markdownHasOneRowPerMeasurementAndSmallLatenciesKeepTwoDecimals() {
        List<String> lines = tcpAndRing().markdown().lines().toList();
        assertEquals(2 + 6, lines.size());
        assertEquals("| transport | workload | p50 µs | p99 µs | p99.9 µs | GB/s | ratio to baseline |", lines.get(0));
        assertEquals("|---|---|---:|---:|---:|---:|---|", lines.get(1));
        assertEquals("| tcp | null-call | 11.0 | 30.0 | 50.5 |  | 1.10× socket-pingpong-64B |", lines.get(3));
        assertEquals("| ring | null-call | 1.50 | 2.00 | 3.00 |  |  |", lines.get(6));
        assertEquals("| ring | stream-1MiB |  |  |  | 6.25 |  |", lines.get(7));
    }

    @Test
    void targetsAreFlaggedMetOrNotMet() {
        List<Targets.Verdict> v = Targets.check(tcpAndRing());
        assertEquals(3, v.size());
        assertEquals(new Targets.Verdict("tcp", "null call p50 ≤ 1.2× raw Java socket ping-pong", "1.10×", true), v.get(0));
        assertEquals(new Targets.Verdict("ring", "null call p50 ≤ 1 µs", "1.50 µs", false), v.get(1));
        assertEquals(new Targets.Verdict("ring", "stream ≥ 5 GB/s at 1 MiB", "6.25 GB/s", true), v.get(2));
        String md = Targets.markdown(v);
        assertTrue(md.contains("| ring | null call p50 ≤ 1 µs | 1.50 µs | **not met** |"), md);
    }

    @Test
    void aMeasurementIsEitherLatencyOrThroughput() {
        assertThrows(IllegalArgumentException.class,
                () -> new Measurement("tcp", "x", new Latency(1, 1, 1, 1), 2.0, List.of()));
        assertThrows(IllegalArgumentException.class, () -> new Measurement("tcp", "x", null, Double.NaN, List.of()));
    }

    @Test
    void selfHostingKnowsTheLocalSchemesAndSaysWhyNotTheOthers() {
        Path tmp = Path.of("/tmp/bench");
        assertEquals("tcp://127.0.0.1:0", SelfHosting.recipe("tcp", tmp, "a").listen().toString());
        assertEquals("unix:///tmp/bench/a.sock", SelfHosting.recipe("unix", tmp, "a").listen().toString());
        assertEquals("fdunix:///tmp/bench/a-fd.sock", SelfHosting.recipe("fdunix", tmp, "a").listen().toString());
        assertTrue(SelfHosting.recipe("ring", tmp, "a").listen().toString().matches("ring://bench-[0-9]+-a"));
        assertFalse(SelfHosting.recipe("vsock", tmp, "a").hostable());
        assertFalse(SelfHosting.recipe("vchan", tmp, "a").hostable());
        assertTrue(SelfHosting.recipe("tls", tmp, "a").skipReason().contains("certificates"));
        assertTrue(SelfHosting.recipe("carrier-pigeon", tmp, "a").skipReason().contains("no self-hosting recipe"));
    }
}
