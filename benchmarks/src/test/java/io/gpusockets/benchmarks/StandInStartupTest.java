package io.gpusockets.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link StandInStartup}: what it reads from the program's stdout, the deltas and verdicts it prints,
 * and that the stand-in libcuda.so.1 builds and carries the program through (no timings asserted).
 */
class StandInStartupTest {
    @TempDir
    Path dir;

    @Test
    void parsesAllThreeLines() {
        StandInStartup.Run r = StandInStartup.parse("""
                startup first-call-ms=12.500 init=0 main-ms=12.600
                startup main-to-malloc-ms=14.250 result=ok total-ms=20.000
                startup rss-kb=61440 hwm-kb=65536 cpu-ms=300.5
                """, 33.0, 0);
        assertEquals(12.5, r.firstCallMs());
        assertEquals(0, r.init());
        assertEquals(14.25, r.toMallocMs());
        assertEquals("ok", r.result());
        assertEquals(61440, r.rssKb());
        assertEquals(65536, r.hwmKb());
        assertEquals(300.5, r.cpuMs());
        assertEquals(33.0, r.wallMs());
    }

    @Test
    void aFailedCuInitLeavesNoMallocFigureAndSaysWhy() {
        StandInStartup.Run r = StandInStartup.parse("""
                startup first-call-ms=0.050 init=100 main-ms=0.051
                startup rss-kb=1900 hwm-kb=1900 cpu-ms=1.0
                """, 3.0, 100);
        assertEquals(100, r.init());
        assertTrue(Double.isNaN(r.toMallocMs()));
        assertEquals("init=100", r.result());
        assertEquals(100, r.exit());
    }

    @Test
    void nothingPrintedIsNaN() {
        StandInStartup.Run r = StandInStartup.parse("", 5.0, 139);
        assertTrue(Double.isNaN(r.firstCallMs()));
        assertEquals(-1, r.hwmKb());
        assertTrue(Double.isNaN(r.cpuMs()));
        assertEquals("(none printed)", r.result());
    }

    private static StandInStartup.Run run(double first, double wall, long hwmMb, int init) {
        return new StandInStartup.Run(first, init, first + 1, init == 0 ? "ok" : "init=" + init, hwmMb * 1024, hwmMb * 1024, 10 * first,
                wall, init);
    }

    @Test
    void verdictsCompareMediansWithTheStandIn() {
        Map<String, List<StandInStartup.Run>> results = new LinkedHashMap<>();
        results.put(StandInStartup.STAND_IN, List.of(run(0.1, 5, 4, 0), run(0.2, 6, 4, 0), run(0.1, 5, 4, 0)));
        results.put("unix", List.of(run(40, 60, 50, 0), run(45, 70, 52, 0), run(300, 400, 52, 0)));
        results.put("ring", List.of(run(90, 120, 70, 0), run(100, 130, 70, 0), run(95, 125, 70, 0)));
        results.put(StandInStartup.NO_BACKEND, List.of(run(0.1, 80, 2, 100), run(0.1, 6, 2, 100), run(0.1, 7, 2, 100)));
        List<String> v = StandInStartup.verdicts(results);
        assertEquals(List.of(
                "unix frontend's own start (first call over the stand-in's) ≤ 50 ms: +44.9 ms, met",
                "unix client VmHWM over the stand-in's ≤ 64 MB: +48.0 MB, met",
                "ring frontend's own start (first call over the stand-in's) ≤ 50 ms: +94.9 ms, NOT MET",
                "ring client VmHWM over the stand-in's ≤ 64 MB: +66.0 MB, NOT MET",
                "a program with no backend, wall over the stand-in's ≤ 50 ms: +2.0 ms, met"), v);
        String table = StandInStartup.table(results);
        assertTrue(table.contains("| unix | 45.0 | +44.9 | 46.0 | 70 | +65.0 | 450 | +449.0 | 52.0 | +48.0 | 52.0 | +48.0 | ok |"), table);
        assertTrue(table.contains("| no-backend |"), table);
        String csv = StandInStartup.csv(results);
        assertTrue(csv.contains("unix,startup-stand-in,first-call-median,45.000,ms,stand-in/startup-stand-in,450.0000"), csv);
    }

    /** The stand-in (frontend/native/tools/build-standin.sh) and the bench's program, built by gcc, run together. */
    @Test
    void theStandInCarriesTheProgramThrough() throws Exception {
        Path root = Path.of("").toAbsolutePath();
        while (root != null && !Files.isRegularFile(root.resolve("frontend/native/tools/build-standin.sh"))) {
            root = root.getParent();
        }
        assumeTrue(root != null, "no checkout above the working directory");
        assumeTrue(exec(List.of("gcc", "--version")).exit == 0, "no gcc");
        Path lib = dir.resolve("lib");
        Result b = exec(List.of(root.resolve("frontend/native/tools/build-standin.sh").toString(), lib.toString()));
        assertEquals(0, b.exit, b.out);
        Path src = dir.resolve("startup_driver.c");
        try (InputStream in = StandInStartup.class.getResourceAsStream("startup_driver.c")) {
            Files.write(src, in.readAllBytes());
        }
        Path exe = dir.resolve("startup_driver");
        Result g = exec(List.of("gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe.toString(), src.toString(),
                "-L" + lib, "-l:libcuda.so.1"));
        assertEquals(0, g.exit, g.out);
        ProcessBuilder pb = new ProcessBuilder(exe.toString()).redirectErrorStream(true);
        pb.environment().put("LD_LIBRARY_PATH", lib.toString());
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        StandInStartup.Run r = StandInStartup.parse(out, 0, 0);
        assertEquals(0, r.init(), out);
        assertEquals("ok", r.result(), out);
        assertTrue(r.hwmKb() > 0 && r.rssKb() > 0 && r.cpuMs() >= 0, out);
    }

    private record Result(int exit, String out) {
    }

    private static Result exec(List<String> cmd) throws Exception {
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            return new Result(p.waitFor(120, TimeUnit.SECONDS) ? p.exitValue() : 124, out);
        } catch (java.io.IOException e) {
            return new Result(127, e.toString());
        }
    }
}
