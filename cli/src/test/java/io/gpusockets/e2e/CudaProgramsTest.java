package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The CUDA programs of {@code frontend/native/tests/cuda}: kernels of their own in {@code NAME.cu},
 * built here by {@code nvcc -arch=sm_90 -fatbin} (the fatbin holds compute_90 PTX, which the emulated
 * device interprets), host code {@code NAME.c} built by gcc against our {@code libcuda.so.1}. Each
 * runs against one backend process (emulated device) over tcp:// and unix://, must exit 0 and print
 * exactly its golden file ({@code expected/NAME.out}, from the program's own CPU reference).
 *
 * <p>What the device prints ({@code printf}'s device printf, {@code assert}'s assertion message) stays
 * in the backend process: on a GPU it goes to the program's stdout or stderr, through GPUsockets the
 * emulated device prints it on the backend's, and nothing brings it back to the program. Those
 * programs keep it out of their stdout (see their header comments); here it must appear, line for
 * line, in the backend's output while the program runs ({@link #DEVICE_OUTPUT}).
 *
 * <p>Skipped (with the reason) when {@code libcuda.so.1} has not been built, or gcc, nvcc or
 * {@code /usr/local/cuda/include/cuda.h} is missing.
 */
class CudaProgramsTest {
    private static final int PROGRAM_TIMEOUT_SECONDS = 120;

    /** Per program, the lines its kernels print on the device, in order (the backend's output holds them). */
    static final Map<String, List<String>> DEVICE_OUTPUT = Map.of(
            "printf", List.of(
                    "print_lanes: one warp, lanes 1, 5, ..., 29 print",
                    "lane  1: d=-49 u=3000000001 f=0.625000 e=1.234500e+09 s=low x=beef0001 lld=-1000000007 c=B w=[ 0.33]",
                    "lane  5: d=-25 u=3000000005 f=2.625000 e=6.172500e+09 s=low x=beef0005 lld=-5000000035 c=F w=[ 1.67]",
                    "lane  9: d=31 u=3000000009 f=4.625000 e=1.111050e+10 s=low x=beef0009 lld=-9000000063 c=J w=[ 3.00]",
                    "lane 13: d=119 u=3000000013 f=6.625000 e=1.604850e+10 s=low x=beef000d lld=-13000000091 c=N w=[ 4.33]",
                    "lane 17: d=239 u=3000000017 f=8.625000 e=2.098650e+10 s=high x=beef0011 lld=-17000000119 c=R w=[ 5.67]",
                    "lane 21: d=391 u=3000000021 f=10.625000 e=2.592450e+10 s=high x=beef0015 lld=-21000000147 c=V w=[ 7.00]",
                    "lane 25: d=575 u=3000000025 f=12.625000 e=3.086250e+10 s=high x=beef0019 lld=-25000000175 c=Z w=[ 8.33]",
                    "lane 29: d=791 u=3000000029 f=14.625000 e=3.580050e+10 s=high x=beef001d lld=-29000000203 c=^ w=[ 9.67]"),
            "assert", List.of(
                    "assert.cu:12: void check_below(const unsigned int *, unsigned int, unsigned int *, unsigned int): block: [1,0,0], "
                            + "thread: [77,0,0] Assertion `v[i] < limit` failed."));

    private static NativePrograms programs;
    private static String skipReason;
    private static Path nvcc;
    private static Path work;
    private static BackendProcess backend;
    private static final Map<String, Path> fatbins = new ConcurrentHashMap<>();

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        nvcc = NativePrograms.nvcc();
        skipReason = programs.cannotRun("the CUDA programs");
        if (skipReason == null && nvcc == null) {
            skipReason = "the CUDA programs need nvcc to build their kernels: none on the PATH or at /usr/local/cuda/bin/nvcc";
        }
        if (skipReason != null) {
            System.err.println("CudaProgramsTest: skipped: " + skipReason);
            return;
        }
        work = Files.createTempDirectory("gpusockets-cudaprograms");
        backend = BackendProcess.start();
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (backend != null) {
            backend.close();
        }
        NativePrograms.deleteTree(work);
    }

    @TestFactory
    Stream<DynamicNode> cudaProgramsPrintTheirGoldenOutput() throws Exception {
        List<NativePrograms.Entry> entries = programs.entries("emulated").stream()
                .filter(e -> programs.hasOwnKernels(e.name())).toList();
        assertTrue(!entries.isEmpty(), "programs.list names no program of tests/cuda/");
        return Stream.of("tcp", "unix").map(scheme -> DynamicContainer.dynamicContainer("over " + scheme,
                entries.stream().map(e -> DynamicTest.dynamicTest(e.name() + " (" + scheme + ")", () -> runProgram(e, scheme)))));
    }

    private static Path fatbin(String name) {
        return fatbins.computeIfAbsent(name,
                n -> NativePrograms.buildFatbin(nvcc, programs.kernelSource(n), work.resolve(n + ".fatbin"), work));
    }

    private static void runProgram(NativePrograms.Entry e, String scheme) throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Path fatbin = fatbin(e.name());
        Path exe = programs.build(e.name(), work);
        String server = backend.address(scheme);
        List<String> args = programs.arguments(e, fatbin);
        List<String> cmd = Stream.concat(Stream.of(exe.toString()), args.stream()).toList();
        Map<String, String> env = Map.of(
                "LD_LIBRARY_PATH", programs.libDir.toString(),
                "GPUSOCKETS_SERVER", server,
                "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
        int logged = backend.output().size();
        NativePrograms.Run r = NativePrograms.run(cmd, env, work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("%s over %s: exit %d in %d ms%n", e.name(), scheme, r.exit(), r.millis());
        String context = e.name() + " over " + scheme + ": " + exe + " " + String.join(" ", args)
                + " with GPUSOCKETS_SERVER=" + server
                + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertTrue(backend.alive(), () -> "the backend died while " + e.name() + " ran; its log:\n"
                + String.join("\n", backend.output()) + "\n" + context);
        assertEquals(0, r.exit(), () -> "exit status of " + context);
        Path golden = programs.golden(e.name());
        assertTrue(Files.isRegularFile(golden), () -> "no golden file " + golden);
        assertEquals(Files.readString(golden, StandardCharsets.UTF_8), r.stdout(), () -> e.name() + " over " + scheme
                + ": stdout differs from " + golden + "\n--- stderr:\n" + r.stderrTail());
        List<String> device = DEVICE_OUTPUT.get(e.name());
        if (device != null) {
            awaitDeviceOutput(device, logged, e.name() + " over " + scheme);
        }
    }

    /** Waits (5 s at most) until the backend's output from line {@code from} on holds {@code lines} one after another. */
    private static void awaitDeviceOutput(List<String> lines, int from, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        List<String> since;
        do {
            List<String> all = backend.output();
            since = all.subList(from, all.size());
            if (Collections.indexOfSubList(since, lines) >= 0) {
                return;
            }
            Thread.sleep(20);
        } while (System.nanoTime() < deadline);
        throw new AssertionError(what + ": the backend's output does not hold what the device prints:\n" + String.join("\n", lines)
                + "\n--- the backend's output while it ran:\n" + String.join("\n", since));
    }
}
