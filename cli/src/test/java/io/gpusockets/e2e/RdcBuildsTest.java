package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The runtime test program rdc.cu + rdc_lib.cu in -rdc builds besides RuntimeProgramsTest's
 * {@code -arch=sm_90}, run with our libcuda.so.1 against a backend on the emulated device, which
 * must link the translation units' PTX (ModuleImage, PtxLinker): a PTX-only build (the device-linked
 * fatbin is empty, the units' PTX and cudadevrt's images come in the prelinked fatbins) and a build
 * with both SASS and PTX of each unit. Each run must print rdc's golden output (the H200's).
 * Skipped, saying why, without nvcc or a built libcuda.so.1.
 */
class RdcBuildsTest {
    private static NativePrograms programs;
    private static String skipReason;
    private static Path nvcc;
    private static Path work;
    private static BackendProcess backend;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        nvcc = NativePrograms.nvcc();
        skipReason = programs.cannotRun("the -rdc builds");
        if (skipReason == null && nvcc == null) {
            skipReason = "the -rdc builds need nvcc: none on the PATH or at /usr/local/cuda/bin/nvcc";
        }
        if (skipReason == null) {
            work = Files.createTempDirectory("gpusockets-rdcbuilds");
            backend = BackendProcess.start();
        }
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (backend != null) {
            backend.close();
        }
        if (work != null) {
            NativePrograms.deleteTree(work);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"-gencode arch=compute_90,code=compute_90", "-gencode arch=compute_90,code=[sm_90,compute_90]"})
    void rdcPrintsItsGoldenOutput(String gencode) throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Path dir = RuntimeProgramsTest.runtimeDir();
        Path exe = work.resolve("rdc-" + Integer.toHexString(gencode.hashCode()));
        List<String> cmd = new ArrayList<>(List.of(nvcc.toString(), "-O2", "-rdc=true"));
        cmd.addAll(List.of(gencode.split(" ")));
        cmd.addAll(List.of("-o", exe.toString(), dir.resolve("rdc.cu").toString(), dir.resolve("rdc_lib.cu").toString()));
        NativePrograms.Run built = NativePrograms.run(cmd, Map.of(), work, 300);
        assertEquals(0, built.exit(), () -> String.join(" ", cmd) + "\n" + built.stdout() + built.stderr());
        Map<String, String> env = new HashMap<>();
        env.put("LD_LIBRARY_PATH", programs.libDir.toString());
        env.put("GPUSOCKETS_SERVER", backend.address("unix"));
        env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
        env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
        NativePrograms.Run r = NativePrograms.run(List.of(exe.toString()), env, work, 180);
        String context = gencode + ": " + String.join(" ", cmd) + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail();
        assertTrue(backend.alive(), () -> "the backend died; its log:\n" + String.join("\n", backend.output()) + "\n" + context);
        assertEquals(0, r.exit(), () -> "exit status of " + context);
        assertEquals(Files.readString(RuntimeProgramsTest.golden("rdc"), StandardCharsets.UTF_8), r.stdout(), context);
    }
}
