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
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The CUDA runtime-API programs of {@code frontend/native/tests/runtime} (its README.md): each built
 * here by nvcc as an ordinary executable (static cudart, shared cudart, per-thread default stream,
 * {@code -rdc}), run unmodified with our {@code libcuda.so.1} first on {@code LD_LIBRARY_PATH}
 * against one backend process on the emulated device, which runs the PTX nvcc put in each fatbin.
 * Each run must exit 0 and print exactly its golden file ({@code expected/runtime/NAME.out},
 * checked against the H200's own output by scripts/gpu-runtime-programs). Every program runs over
 * unix://; the first build of each program also over tcp://. nvcc builds every program ahead, one at a time on a
 * thread of its own, so that the builds overlap the runs of the programs already built.
 *
 * <p>Skipped (with the reason) when {@code libcuda.so.1} has not been built or nvcc is missing.
 */
class RuntimeProgramsTest {
    private static final int PROGRAM_TIMEOUT_SECONDS = 180;

    /** One line of runtime/programs.list. */
    record Line(String name, String build, Map<String, String> env) {
        String label() {
            return name + " (" + build + (env.isEmpty() ? "" : ", " + env) + ")";
        }
    }

    private static NativePrograms programs;
    private static String skipReason;
    private static Path nvcc;
    private static Path work;
    /**
     * The programs run over unix:// against a backend in the default isolation (a worker process per session, what
     * users get) and over tcp:// against one in mode context: every program takes the default path once, and the
     * 2-core CI does not pay a worker JVM for the second run of each.
     */
    private static BackendProcess backend;
    private static BackendProcess contextBackend;
    private static final Map<String, java.util.concurrent.CompletableFuture<Path>> built = new ConcurrentHashMap<>();
    /**
     * Builds every program ahead, one at a time, in list order, while the programs already built run: nvcc (tens of
     * seconds for CUB and thrust) overlaps the runs instead of adding to them.
     */
    private static java.util.concurrent.ExecutorService builder;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        nvcc = NativePrograms.nvcc();
        skipReason = programs.cannotRun("the runtime-API programs");
        if (skipReason == null && nvcc == null) {
            skipReason = "the runtime-API programs need nvcc: none on the PATH or at /usr/local/cuda/bin/nvcc";
        }
        if (skipReason != null) {
            System.err.println("RuntimeProgramsTest: skipped: " + skipReason);
            return;
        }
        work = Files.createTempDirectory("gpusockets-runtimeprograms");
        builder = java.util.concurrent.Executors.newSingleThreadExecutor(
                Thread.ofPlatform().daemon().name("runtime-programs-nvcc").factory());
        for (Line l : lines("emulated")) {
            building(l);
        }
        backend = BackendProcess.start();
        contextBackend = BackendProcess.start("--isolation", "context");
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (builder != null) {
            builder.shutdownNow();
            builder.awaitTermination(60, java.util.concurrent.TimeUnit.SECONDS);
        }
        if (backend != null) {
            backend.close();
        }
        if (contextBackend != null) {
            contextBackend.close();
        }
        NativePrograms.deleteTree(work);
    }

    static Path runtimeDir() {
        return NativePrograms.locate().tests.resolve("runtime");
    }

    /** The lines of runtime/programs.list for {@code target} ("emulated" or "gpu"). */
    static List<Line> lines(String target) throws IOException {
        List<Line> out = new ArrayList<>();
        for (String raw : Files.readAllLines(runtimeDir().resolve("programs.list"), StandardCharsets.UTF_8)) {
            String s = raw.strip();
            if (s.isEmpty() || s.startsWith("#")) {
                continue;
            }
            String[] words = s.split("\\s+");
            String name = words[0];
            int at = name.indexOf('@');
            if (at >= 0) {
                if (!name.substring(at + 1).equals(target)) {
                    continue;
                }
                name = name.substring(0, at);
            }
            if (words.length < 2 || !List.of("static", "shared", "ptds", "rdc", "cdp").contains(words[1])) {
                throw new IllegalArgumentException("runtime/programs.list: no or an unknown build in: " + s);
            }
            Map<String, String> env = new HashMap<>();
            for (int i = 2; i < words.length; i++) {
                int eq = words[i].indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("runtime/programs.list: not VAR=VALUE: " + words[i] + " in: " + s);
                }
                env.put(words[i].substring(0, eq), words[i].substring(eq + 1));
            }
            out.add(new Line(name, words[1], Map.copyOf(env)));
        }
        return out;
    }

    /** Runs even where nothing can be built: every line names a source and has a golden file. */
    @Test
    void everyListedProgramHasItsSourceAndGolden() throws IOException {
        List<Line> all = lines("emulated");
        assertFalse(all.isEmpty(), "runtime/programs.list lists nothing");
        for (Line l : all) {
            assertTrue(Files.isRegularFile(runtimeDir().resolve(l.name() + ".cu")), () -> "no source runtime/" + l.name() + ".cu");
            if (l.build().equals("rdc")) {
                assertTrue(Files.isRegularFile(runtimeDir().resolve(l.name() + "_lib.cu")), () -> "no runtime/" + l.name() + "_lib.cu");
            }
            assertTrue(Files.isRegularFile(golden(l.name())), () -> "no golden file " + golden(l.name()));
        }
    }

    static Path golden(String name) {
        return NativePrograms.locate().tests.resolve("expected/runtime").resolve(name + ".out");
    }

    @TestFactory
    Stream<DynamicTest> runtimeProgramsPrintTheirGoldenOutput() throws IOException {
        List<Line> all = lines("emulated");
        List<DynamicTest> tests = new ArrayList<>();
        List<String> overTcp = new ArrayList<>();
        for (Line l : all) {
            tests.add(DynamicTest.dynamicTest(l.label() + " over unix", () -> runProgram(l, "unix")));
            if (!overTcp.contains(l.name())) {
                overTcp.add(l.name());
                tests.add(DynamicTest.dynamicTest(l.label() + " over tcp", () -> runProgram(l, "tcp")));
            }
        }
        return tests.stream();
    }

    /** nvcc's command for a line's build (shared by the GPU script's documentation in the README). */
    static List<String> buildCommand(Path nvcc, Line l, Path exe) {
        Path dir = runtimeDir();
        List<String> cmd = new ArrayList<>(List.of(nvcc.toString(), "-arch=sm_90", "-O2", "-o", exe.toString()));
        switch (l.build()) {
            case "shared" -> {
                Path lib64 = nvcc.toAbsolutePath().getParent().resolveSibling("lib64");
                cmd.addAll(List.of("-cudart", "shared", "-Xlinker", "-rpath=" + lib64));
            }
            case "ptds" -> cmd.addAll(List.of("--default-stream", "per-thread"));
            case "rdc" -> cmd.add("-rdc=true");
            case "cdp" -> cmd.addAll(List.of("-rdc=true", "-lcudadevrt"));
            default -> {
            }
        }
        cmd.add(dir.resolve(l.name() + ".cu").toString());
        if (l.build().equals("rdc")) {
            cmd.add(dir.resolve(l.name() + "_lib.cu").toString());
        }
        return cmd;
    }

    /** The line's build, queued on the builder once per program and build. */
    private static java.util.concurrent.CompletableFuture<Path> building(Line l) {
        return built.computeIfAbsent(l.name() + "-" + l.build(), key -> java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            Path exe = work.resolve(key);
            List<String> cmd = buildCommand(nvcc, l, exe);
            NativePrograms.Run r;
            try {
                r = NativePrograms.run(cmd, Map.of(), work, 300);
            } catch (IOException e) {
                throw new AssertionError("cannot run nvcc for " + key + ": " + e, e);
            }
            if (r.exit() != 0) {
                throw new AssertionError("nvcc failed (exit " + r.exit() + "):\n" + String.join(" ", cmd) + "\n" + r.stdout() + r.stderr());
            }
            return exe;
        }, builder));
    }

    private static Path build(Line l) {
        try {
            return building(l).join();
        } catch (java.util.concurrent.CompletionException e) {
            throw e.getCause() instanceof AssertionError a ? a : new AssertionError(e.getCause());
        }
    }

    private static void runProgram(Line l, String scheme) throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Path exe = build(l);
        BackendProcess backend = scheme.equals("tcp") ? contextBackend : RuntimeProgramsTest.backend;
        String server = backend.address(scheme);
        Map<String, String> env = new HashMap<>(l.env());
        env.put("LD_LIBRARY_PATH", programs.libDir.toString());
        env.put("GPUSOCKETS_SERVER", server);
        env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
        env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
        NativePrograms.Run r = NativePrograms.run(List.of(exe.toString()), env, work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("%s over %s: exit %d in %d ms%n", l.label(), scheme, r.exit(), r.millis());
        String context = l.label() + " over " + scheme + ": " + exe + " with GPUSOCKETS_SERVER=" + server
                + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertTrue(backend.alive(), () -> "the backend died while " + l.label() + " ran; its log:\n"
                + String.join("\n", backend.output()) + "\n" + context);
        assertEquals(0, r.exit(), () -> "exit status of " + context);
        assertEquals(Files.readString(golden(l.name()), StandardCharsets.UTF_8), r.stdout(),
                () -> l.label() + " over " + scheme + ": stdout differs from " + golden(l.name()) + "\n--- stderr:\n" + r.stderrTail());
        assertFalse(r.stderr().contains("gpusockets: slot "), () -> l.label() + " called a private-table slot we do not implement:\n"
                + r.stderrTail());
    }
}
