package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
 * <p>Skipped (with the reason) when {@code libcuda.so.1} has not been built, or gcc, nvcc or
 * {@code /usr/local/cuda/include/cuda.h} is missing.
 */
class CudaProgramsTest {
    private static final int PROGRAM_TIMEOUT_SECONDS = 120;

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
    }
}
