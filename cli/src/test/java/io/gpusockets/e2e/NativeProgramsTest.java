package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The C programs of {@code frontend/native/tests}, built by gcc against our {@code libcuda.so.1}
 * and run as unmodified CUDA programs against one backend process (emulated device), over tcp://
 * and over unix://. Each must exit 0 and print exactly its golden file
 * ({@code frontend/native/tests/expected/NAME.out}, ending with PASS). {@code no_backend} runs
 * against a closed port and a missing socket: cuInit must fail with CUDA_ERROR_NO_DEVICE within
 * 5 s, with one line on stderr naming the address. The programs of {@code tests/cuda/}, whose
 * kernels nvcc builds, run in {@link CudaProgramsTest}.
 *
 * <p>Skipped (with the reason) when {@code frontend/target/native/libcuda.so.1} has not been built,
 * or gcc or {@code /usr/local/cuda/include/cuda.h} is missing.
 */
class NativeProgramsTest {
    private static final int PROGRAM_TIMEOUT_SECONDS = 60;
    private static final int NO_BACKEND_CONNECT_TIMEOUT_MS = 1000;
    private static final long NO_BACKEND_LIMIT_MS = 5000;

    private static NativePrograms programs;
    /** Why the programs cannot run here, or null. Each test is skipped with it (so the reason shows per test). */
    private static String skipReason;
    private static Path work;
    /**
     * The programs run over unix:// against a backend in the default isolation (a worker process per session, what
     * users get) and over tcp:// against one in mode context: every program takes the default path once, and the
     * 2-core CI does not pay a worker JVM for the second run of each.
     */
    private static BackendProcess backend;
    private static BackendProcess contextBackend;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        skipReason = programs.cannotRun("the C programs");
        if (skipReason != null) {
            System.err.println("NativeProgramsTest: skipped: " + skipReason);
            return;
        }
        work = Files.createTempDirectory("gpusockets-cprograms");
        backend = BackendProcess.start();
        contextBackend = BackendProcess.start("--isolation", "context");
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (backend != null) {
            backend.close();
        }
        if (contextBackend != null) {
            contextBackend.close();
        }
        NativePrograms.deleteTree(work);
    }

    private static void assumeRunnable() {
        assumeTrue(skipReason == null, () -> skipReason);
    }

    /** The variables that make a program use our library and the test's backend. */
    private static Map<String, String> environment(String server) {
        return Map.of(
                "LD_LIBRARY_PATH", programs.libDir.toString(),
                "GPUSOCKETS_SERVER", server,
                "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
    }

    @TestFactory
    Stream<DynamicNode> programsPrintTheirGoldenOutput() throws Exception {
        // tests/cuda/ programs (kernels of their own, built by nvcc) run in CudaProgramsTest
        List<NativePrograms.Entry> entries = programs.entries("emulated").stream()
                .filter(e -> !programs.hasOwnKernels(e.name())).toList();
        return Stream.of("tcp", "unix").map(scheme -> DynamicContainer.dynamicContainer("over " + scheme,
                entries.stream().map(e -> DynamicTest.dynamicTest(e.name() + " (" + scheme + ")", () -> runProgram(e, scheme)))));
    }

    private static void runProgram(NativePrograms.Entry e, String scheme) throws Exception {
        assumeRunnable();
        Path exe = programs.build(e.name(), work);
        BackendProcess backend = scheme.equals("tcp") ? contextBackend : NativeProgramsTest.backend;
        String server = backend.address(scheme);
        List<String> cmd = Stream.concat(Stream.of(exe.toString()), programs.arguments(e).stream()).toList();
        NativePrograms.Run r = NativePrograms.run(cmd, environment(server), work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("%s over %s: exit %d in %d ms%n", e.name(), scheme, r.exit(), r.millis());
        String context = e.name() + " over " + scheme + ": " + exe + " " + String.join(" ", programs.arguments(e))
                + " with GPUSOCKETS_SERVER=" + server
                + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertTrue(backend.alive(), () -> "the backend died while " + e.name() + " ran; its log:\n"
                + String.join("\n", backend.output()) + "\n" + context);
        assertEquals(0, r.exit(), () -> "exit status of " + context);
        assertTrue(r.stdout().endsWith("PASS\n"), () -> "stdout does not end with PASS: " + context);
        Path golden = programs.golden(e.name());
        assertTrue(Files.isRegularFile(golden), () -> "no golden file " + golden);
        assertEquals(Files.readString(golden, StandardCharsets.UTF_8), r.stdout(), () -> e.name() + " over " + scheme
                + ": stdout differs from " + golden + "\n--- stderr:\n" + r.stderrTail());
    }

    @TestFactory
    Stream<DynamicTest> withoutABackendCuInitFailsFastSayingWhy() {
        return NativePrograms.noBackendCases("no_backend", NativeProgramsTest::assumeRunnable, work, NativeProgramsTest::noBackend);
    }

    private static void noBackend(String server, String mention) throws Exception {
        Path exe = programs.build("no_backend", work);
        Map<String, String> env = new java.util.HashMap<>(environment(server));
        env.put("GPUSOCKETS_CONNECT_TIMEOUT_MS", Integer.toString(NO_BACKEND_CONNECT_TIMEOUT_MS));
        NativePrograms.Run r = NativePrograms.run(List.of(exe.toString()), env, work, PROGRAM_TIMEOUT_SECONDS);
        System.out.printf("no_backend with %s: exit %d in %d ms%n", server, r.exit(), r.millis());
        String context = "no_backend with GPUSOCKETS_SERVER=" + server + " GPUSOCKETS_CONNECT_TIMEOUT_MS="
                + NO_BACKEND_CONNECT_TIMEOUT_MS + " (" + r.millis() + " ms)\n--- stdout:\n" + r.stdout() + "--- stderr:\n"
                + r.stderrTail();
        assertEquals("cuInit: CUDA_ERROR_NO_DEVICE\n", r.stdout(), () -> "cuInit's result: " + context);
        assertEquals(100, r.exit(), () -> "exit status (the CUresult): " + context);
        assertTrue(r.millis() < NO_BACKEND_LIMIT_MS, () -> "took over " + NO_BACKEND_LIMIT_MS + " ms: " + context);
        List<String> lines = r.stderr().lines().filter(l -> !l.isBlank()).toList();
        assertEquals(1, lines.size(), () -> "stderr should hold exactly one line saying why: " + context);
        assertTrue(lines.getFirst().contains(mention), () -> "the stderr line does not name " + mention + ": " + context);
    }
}
