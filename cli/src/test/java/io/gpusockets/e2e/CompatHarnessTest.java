package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The compatibility harness {@code scripts/gpu-compat} (README, "Compatibility harness") on the
 * emulated device: its comparison rules ({@code --self-test}: a differing output fails, a declared
 * tolerance passes, a run that exits 0 with wrong output fails); a folder of CMake CUDA projects
 * compared with recorded native outputs through the whole harness (build, backend, tcp and ring, CSV);
 * and the corpus {@code ours} as far as the emulated device runs it, every case passing over tcp and ring
 * against its golden file: the C driver-API programs (those with kernels of their own among them) and
 * one runtime-API build ({@link #OURS}: {@code RuntimeProgramsTest} runs every runtime-API build, and
 * their nvcc builds would take this test past its few minutes on the 2-core CI); the library programs
 * are skips with their cause.
 *
 * <p>The harness runs as users run it, a bash script; it starts its own backend (emulated device,
 * mode context, to spare the 2-core CI a worker JVM per case) from this JVM's runtime and class path.
 * Skipped (with the reason) when {@code libcuda.so.1} has not been built, or gcc, nvcc or (for the
 * CMake folder) cmake is missing; the self-test needs only bash and awk.
 */
class CompatHarnessTest {
    private static final int HARNESS_TIMEOUT_SECONDS = 900;

    /** The cases of {@code ours} run here (the harness's --filter). */
    static final String OURS = "^ours/([^/]+|rt/basics-static|lib/.+)$";

    private static NativePrograms programs;
    private static String skipReason;
    private static Path work;

    @BeforeAll
    static void setUp() throws IOException {
        programs = NativePrograms.locate();
        skipReason = programs.cannotRun("the compatibility harness's runs");
        if (skipReason == null && NativePrograms.nvcc() == null) {
            skipReason = "the compatibility harness needs nvcc: none on the PATH or at /usr/local/cuda/bin/nvcc";
        }
        work = Files.createTempDirectory("gpusockets-compat");
    }

    @AfterAll
    static void tearDown() throws IOException {
        NativePrograms.deleteTree(work);
    }

    private static Path script() {
        return programs.root.resolve("scripts/gpu-compat");
    }

    /** Runs the harness with {@code args} and {@code extraEnv}, from the checkout's root, with this JVM as its Java. */
    private static NativePrograms.Run harness(List<String> args, Map<String, String> extraEnv) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("bash", script().toString()));
        cmd.addAll(args);
        Map<String, String> env = new HashMap<>(Map.of(
                "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path")));
        env.putAll(extraEnv);
        return NativePrograms.run(cmd, env, programs.root, HARNESS_TIMEOUT_SECONDS);
    }

    /** The options every run here takes: the emulated device, our library of this build, a backend in mode context. */
    private static List<String> common(Path results) {
        return List.of("--device", "emulated", "--schemes", "tcp,ring", "--results", results.toString(), "--jobs", "2",
                "--lib", programs.libDir.toString(), "--backend-arg", "--isolation", "--backend-arg", "context");
    }

    /** The rows of a results.csv: case name (corpus/case) to its fields (build, native, tcp, ring, cause). */
    private static Map<String, List<String>> rows(Path csv) throws IOException {
        List<String> lines = Files.readAllLines(csv, StandardCharsets.UTF_8);
        assertEquals("corpus,case,build,native,tcp,ring,cause,native_ms,tcp_ms,ring_ms", lines.get(0), "the CSV's header");
        Map<String, List<String>> rows = new HashMap<>();
        for (String line : lines.subList(1, lines.size())) {
            List<String> f = csvFields(line);
            assertEquals(10, f.size(), () -> "a CSV row of 10 fields: " + line);
            rows.put(f.get(0) + "/" + f.get(1), f.subList(2, 7));
        }
        return rows;
    }

    private static List<String> csvFields(String line) {
        List<String> fields = new ArrayList<>();
        StringBuilder f = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                    f.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    f.append(c);
                }
            } else if (c == '"') {
                quoted = true;
            } else if (c == ',') {
                fields.add(f.toString());
                f.setLength(0);
            } else {
                f.append(c);
            }
        }
        fields.add(f.toString());
        return fields;
    }

    @Test
    void comparisonRulesSelfTest() throws IOException {
        NativePrograms.Run r = harness(List.of("--self-test"), Map.of());
        assertEquals(0, r.exit(), () -> "gpu-compat --self-test:\n" + r.stdout() + r.stderrTail());
        assertTrue(r.stdout().contains("self-test: PASS"), r::stdout);
        assertFalse(r.stdout().contains("WRONG"), r::stdout);
        // the cases that must fail are there, so that the self-test cannot pass by comparing nothing
        for (String c : List.of("ok    exit 0 with a wrong number -> fail", "ok    within the declared tolerance -> pass",
                "ok    beyond the declared tolerance -> fail", "ok    right output, wrong exit -> fail",
                "ok    no rules file: a wrong number -> fail", "ok    rules, none for this case -> fail")) {
            assertTrue(r.stdout().contains(c), () -> "no '" + c + "' in:\n" + r.stdout());
        }
    }

    /** The fixture's one CUDA source: a kernel sums 1..100 on the device; SCALE and OFFSET make the wrong variants. */
    private static final String SUM_CU = """
            #include <cstdio>
            __global__ void sum(int *out) { atomicAdd(out, (int) threadIdx.x + 1); }
            int main() {
                int *d = nullptr, h = 0;
                if (cudaMalloc(&d, sizeof(int)) != cudaSuccess || cudaMemset(d, 0, sizeof(int)) != cudaSuccess) return 2;
                sum<<<1, 100>>>(d);
                if (cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) != cudaSuccess) return 3;
                printf("sum %d\\n", h + OFFSET);
                printf("scaled %.6f\\n", h * SCALE / 5050.0);
                printf("PASS\\n");
                return 0;
            }
            """;

    @Test
    void aFolderOfCmakeProjectsIsComparedWithItsRecordedNativeOutputs() throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        assumeTrue(onPath("cmake"), "the CMake corpus needs cmake on the PATH");
        Path corpus = Files.createDirectories(work.resolve("compat-fixture"));
        Files.writeString(corpus.resolve("sum.cu"), SUM_CU);
        Files.writeString(corpus.resolve("CMakeLists.txt"), """
                cmake_minimum_required(VERSION 3.18)
                project(compat_fixture LANGUAGES CXX CUDA)
                add_executable(good sum.cu)
                target_compile_definitions(good PRIVATE SCALE=1.0 OFFSET=0)
                add_executable(close sum.cu)
                target_compile_definitions(close PRIVATE SCALE=1.0004 OFFSET=0)
                add_executable(wrong sum.cu)
                target_compile_definitions(wrong PRIVATE SCALE=1.0 OFFSET=1)
                add_executable(unrecorded sum.cu)
                target_compile_definitions(unrecorded PRIVATE SCALE=1.0 OFFSET=0)
                """);
        Path rules = Files.createDirectories(work.resolve("rules"));
        Files.writeString(rules.resolve("compat-fixture.rules"), "# the fixture's rules\ncase */close tolerance 1e-3\n");
        Path nativeDir = Files.createDirectories(work.resolve("native/compat-fixture"));
        for (String c : List.of("good", "close", "wrong")) {
            Files.writeString(nativeDir.resolve("compat-fixture~" + c + ".out"), "sum 5050\nscaled 1.000000\nPASS\n");
        }
        Path results = work.resolve("results-fixture");
        List<String> args = new ArrayList<>(common(results));
        // the cases' runs go two at a time (the parallel pre-pass); the report is the same as one at a time
        args.addAll(List.of("--run-jobs", "2", corpus.toString()));
        NativePrograms.Run r = harness(args, Map.of("GPU_COMPAT_RULES", rules.toString(),
                "GPU_COMPAT_NATIVE", work.resolve("native").toString()));
        String context = "gpu-compat on the fixture:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertEquals(1, r.exit(), () -> "exit status (1: a case failed) of " + context);
        assertTrue(r.stderr().contains("running the cases 2 at a time"), () -> "the parallel pre-pass: " + context);
        Map<String, List<String>> rows = rows(results.resolve("results.csv"));
        assertEquals(List.of("pass", "recorded", "pass", "pass", ""), rows.get("compat-fixture/compat-fixture/good"), context);
        assertEquals(List.of("pass", "recorded", "pass", "pass", ""), rows.get("compat-fixture/compat-fixture/close"),
                () -> "within its declared tolerance: " + context);
        List<String> wrong = rows.get("compat-fixture/compat-fixture/wrong");
        assertEquals(List.of("pass", "recorded", "fail", "fail"), wrong.subList(0, 4), () -> "exit 0, wrong output: " + context);
        assertTrue(wrong.get(4).contains("tcp: stdout line 1 differs: sum 5051"), () -> wrong.get(4));
        List<String> unrecorded = rows.get("compat-fixture/compat-fixture/unrecorded");
        assertEquals(List.of("pass", "skip", "skip", "skip"), unrecorded.subList(0, 4), context);
        assertTrue(unrecorded.get(4).startsWith("no recorded native output"), () -> unrecorded.get(4));
        assertEquals(4, rows.size(), context);
        // the summary table: cases, pass, fail, skip, build failures, native failures
        assertTrue(Pattern.compile("(?m)^compat-fixture +4 +2 +1 +1 +0 +0$").matcher(r.stdout()).find(),
                () -> "the summary table: " + context);
    }

    @Test
    void oursRunsOnTheEmulatedDeviceOverTcpAndRing() throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Path results = work.resolve("results-ours");
        List<String> args = new ArrayList<>(common(results));
        args.addAll(List.of("--filter", OURS, "ours"));
        NativePrograms.Run r = harness(args, Map.of());
        String context = "gpu-compat ours:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertEquals(0, r.exit(), () -> "exit status of " + context);
        Map<String, List<String>> rows = rows(results.resolve("results.csv"));
        long skipped = 0;
        for (Map.Entry<String, List<String>> e : rows.entrySet()) {
            List<String> f = e.getValue();
            if (f.get(1).equals("skip")) {
                skipped++;
                assertTrue(e.getKey().startsWith("ours/lib/"), () -> "only the library programs are skipped: " + e);
                assertTrue(f.get(4).startsWith("needs a GPU: "), () -> "a skip says why: " + e);
            } else {
                assertEquals(List.of("pass", "recorded", "pass", "pass", ""), f, () -> e.getKey() + ": " + context);
            }
        }
        long libraries;
        try (Stream<Path> s = Files.list(programs.tests.resolve("libraries"))) {
            libraries = s.filter(p -> p.toString().endsWith(".cu")).count();
        }
        libraries++; // lib/torch_multiprocessing (torch_multiprocessing.py), a GPU only too
        assertEquals(libraries, skipped, context);
        // every driver-API program the list names for the emulated device is a case, and the runtime build
        long driverPrograms = programs.entries("emulated").size();
        assertEquals(driverPrograms + 1 + libraries, rows.size(), context);
        assertEquals(List.of("pass", "recorded", "pass", "pass", ""), rows.get("ours/rt/basics-static"), context);
    }

    private static boolean onPath(String tool) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, tool))) {
                return true;
            }
        }
        return false;
    }
}
