package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** How {@code bench programs} reads its options and gpu-programs' programs.tsv, and how it sums the runs up (no timing here). */
class ProgramsBenchTest {
    private static ProgramsBench parse(String... args) {
        ProgramsBench b = new ProgramsBench();
        new CommandLine(b).setCaseInsensitiveEnumValuesAllowed(true).parseArgs(args);
        return b;
    }

    @Test
    void defaultsAndOptions() {
        ProgramsBench d = parse();
        assertEquals(List.of("ring", "tcp", "unix"), d.transports);
        assertEquals(3, d.rounds);
        assertNull(d.timeLimit);
        assertTrue(d.exclude.matcher("fault").find() && d.exclude.matcher("assert").find() && !d.exclude.matcher("rt/faulty x").find());
        ProgramsBench b = parse("--rounds", "5", "--transports", "tcp", "--built", "/tmp/x", "--time-limit", "200", "--programs", "^rt/",
                "--exclude", "^none$", "--timeout", "30");
        assertEquals(5, b.rounds);
        assertEquals(List.of("tcp"), b.transports);
        assertEquals(Path.of("/tmp/x"), b.built);
        assertEquals(200, b.timeLimit);
        assertTrue(b.programs.matcher("rt/basics static").find());
        assertEquals(30, b.timeout);
    }

    @Test
    void readsTheManifestsLabelsEnvironmentsAndCommands() {
        String tsv = "device_query\t\t/w/remote/device_query\n"
                + "streams_events\t\t/w/remote/streams_events /k/kernels.ptx\n"
                + "rt/basics static CUDA_MODULE_LOADING=EAGER\tCUDA_MODULE_LOADING=EAGER\t/w/native/rt-basics-static-3\n\n";
        List<ProgramsBench.Program> p = ProgramsBench.parseManifest(tsv);
        assertEquals(3, p.size());
        assertEquals(new ProgramsBench.Program("device_query", Map.of(), List.of("/w/remote/device_query")), p.get(0));
        assertEquals(List.of("/w/remote/streams_events", "/k/kernels.ptx"), p.get(1).command());
        assertEquals(Map.of("CUDA_MODULE_LOADING", "EAGER"), p.get(2).env());
        assertEquals("rt/basics static CUDA_MODULE_LOADING=EAGER", p.get(2).label());
    }

    @Test
    void aMalformedManifestLineIsRefusedNamingIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ProgramsBench.parseManifest("only a label\n"));
        assertTrue(e.getMessage().contains("only a label"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ProgramsBench.parseManifest("x\tNOEQUALS\t/bin/x\n"));
        assertTrue(e.getMessage().contains("NOEQUALS"), e.getMessage());
    }

    private static Map<String, Map<String, Double>> sample() {
        Map<String, Map<String, Double>> m = new LinkedHashMap<>();
        m.put("device_query", new LinkedHashMap<>(Map.of("native", 100.0, "ring", 120.0, "tcp", 200.0)));
        m.put("rt/basics static", new LinkedHashMap<>(Map.of("native", 200.0, "ring", 300.0)));
        return m;
    }

    @Test
    void geometricMeanOfTheRatiosOverProgramsWithBoth() {
        // ring: 1.2 and 1.5 -> sqrt(1.8); tcp: 2.0 only
        assertEquals(Math.sqrt(1.8), ProgramsBench.geomeanRatio(sample(), "ring"), 1e-12);
        assertEquals(2.0, ProgramsBench.geomeanRatio(sample(), "tcp"), 1e-12);
        assertTrue(Double.isNaN(ProgramsBench.geomeanRatio(sample(), "unix")));
    }

    @Test
    void tableHasARatioColumnPerTransportAndTheGeometricMeans() {
        String table = ProgramsBench.table(sample(), List.of("native", "ring", "tcp"));
        assertTrue(table.startsWith("| program | native ms | ring ms | × | tcp ms | × |\n|---|---|---|---|---|---|\n"), table);
        assertTrue(table.contains("| device_query | 100 | 120 | 1.20 | 200 | 2.00 |\n"), table);
        assertTrue(table.contains("| rt/basics static | 200 | 300 | 1.50 | - | - |\n"), table);
        assertTrue(table.contains("| geometric mean | | | 1.34 | | 2.00 |\n"), table);
    }

    @Test
    void withoutANativeColumnTheTableHasWallTimesOnly() {
        Map<String, Map<String, Double>> m = new LinkedHashMap<>();
        m.put("device_query", new LinkedHashMap<>(Map.of("unix", 1372.0, "ring", 1218.0)));
        String table = ProgramsBench.table(m, List.of("unix", "ring"));
        assertEquals("| program | unix ms | ring ms |\n|---|---|---|\n| device_query | 1372 | 1218 |\n", table);
        assertEquals(List.of(), ProgramsBench.verdicts(m, List.of("unix", "ring")));
    }

    @Test
    void verdictsJudgeTheWorstProgramAgainstEachTransportsTarget() {
        assertEquals(List.of("ring short programs ≤ 1.3× native: geometric mean ×1.34, worst ×1.50 (rt/basics static), NOT MET",
                "tcp short programs ≤ 1.5× native: geometric mean ×2.00, worst ×2.00 (device_query), NOT MET"),
                ProgramsBench.verdicts(sample(), List.of("native", "ring", "tcp")));
    }

    @Test
    void csvRowsNameTheProgramAndTheRatioToNative() {
        String csv = ProgramsBench.csv(sample());
        assertTrue(csv.contains("native,program-device_query,wall-median,100.000,ms,,\n"), csv);
        assertTrue(csv.contains("ring,program-rt/basics_static,wall-median,300.000,ms,native/program-rt/basics_static,1.5000\n"), csv);
    }
}
