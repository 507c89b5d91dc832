package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * libcuda.so.1's probe (bootstrap.c): where GPUSOCKETS_SERVER names a unix:// socket or a ring:// name
 * whose socket file does not exist, cuInit answers CUDA_ERROR_NO_DEVICE without starting the JVM,
 * printing the frontend's own message. Each case runs a small program twice: as is (the probe answers)
 * and with JAVA_TOOL_OPTIONS set, which turns the probe off (the JVM could be handed other settings), so
 * the frontend connects and fails itself. stdout (every answer before and after the failure: cuInit
 * twice, cuDriverGetVersion, cuGetErrorName, cuDeviceGetCount), the exit status and the one stderr line
 * must be the same; only the program's look at /proc/self/maps (is libjvm.so mapped right after cuInit)
 * differs. No timing is asserted. Also a socket file that exists with no listener (refused): left to the
 * frontend, which says "Connection refused". Skipped where the library, gcc or cuda.h is missing.
 */
class NoBackendProbeTest {
    private static final String PROGRAM = """
            #define _GNU_SOURCE
            #include <cuda.h>
            #include <stdio.h>
            #include <string.h>

            static int jvm_mapped(void) {
                FILE *f = fopen("/proc/self/maps", "r");
                char line[4096];
                int found = 0;
                while (f != NULL && fgets(line, sizeof line, f) != NULL) {
                    found |= strstr(line, "libjvm.so") != NULL;
                }
                if (f != NULL) {
                    fclose(f);
                }
                return found;
            }

            int main(void) {
                CUresult r = cuInit(0);
                printf("cuInit=%d jvm=%s\\n", r, jvm_mapped() ? "yes" : "no");
                int version = 0;
                CUresult v = cuDriverGetVersion(&version);
                printf("cuDriverGetVersion=%d %d\\n", v, version);
                const char *name = NULL;
                CUresult n = cuGetErrorName(r, &name);
                printf("cuGetErrorName=%d %s\\n", n, name ? name : "(null)");
                printf("cuInit again=%d\\n", cuInit(0));
                int count = -1;
                printf("cuDeviceGetCount=%d\\n", cuDeviceGetCount(&count));
                return r;
            }
            """;

    private static NativePrograms programs;
    private static String skipReason;
    private static Path work;
    private static Path exe;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        skipReason = programs.cannotRun("the probe's program");
        if (skipReason != null) {
            return;
        }
        work = Files.createTempDirectory("gpusockets-probe");
        Path src = work.resolve("probe_program.c");
        Files.writeString(src, PROGRAM);
        exe = work.resolve("probe_program");
        NativePrograms.Run gcc = NativePrograms.run(List.of("gcc", "-std=c11", "-O1", "-I" + NativePrograms.CUDA_INCLUDE,
                "-o", exe.toString(), src.toString(), "-L" + programs.libDir, "-l:libcuda.so.1"), Map.of(), work, 120);
        assertEquals(0, gcc.exit(), () -> "gcc failed:\n" + gcc.stderr());
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (work != null) {
            NativePrograms.deleteTree(work);
        }
    }

    private static NativePrograms.Run run(String server, boolean probeOff) throws Exception {
        Map<String, String> env = new HashMap<>(Map.of(
                "LD_LIBRARY_PATH", programs.libDir.toString(),
                "GPUSOCKETS_SERVER", server,
                "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path")));
        if (probeOff) {
            env.put("JAVA_TOOL_OPTIONS", "-Dgpusockets.test.probe=off");
        }
        return NativePrograms.run(List.of(exe.toString()), env, work, 60);
    }

    /** stderr without the JVM's "Picked up JAVA_TOOL_OPTIONS" line. */
    private static List<String> stderrLines(NativePrograms.Run r) {
        return r.stderr().lines().filter(l -> !l.isBlank() && !l.startsWith("Picked up JAVA_TOOL_OPTIONS")).toList();
    }

    private static void sameAsTheFrontend(String server, String expectedLine) throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        NativePrograms.Run probed = run(server, false);
        NativePrograms.Run connected = run(server, true);
        String context = "GPUSOCKETS_SERVER=" + server + "\n--- probed stdout:\n" + probed.stdout() + "--- probed stderr:\n"
                + probed.stderr() + "--- frontend stdout:\n" + connected.stdout() + "--- frontend stderr:\n" + connected.stderr();
        assertTrue(probed.stdout().startsWith("cuInit=100 jvm=no\n"), () -> "the probe did not answer cuInit: " + context);
        assertTrue(connected.stdout().startsWith("cuInit=100 jvm=yes\n"), () -> "the frontend did not answer cuInit: " + context);
        assertEquals(without(connected.stdout()), without(probed.stdout()), () -> "answers differ: " + context);
        assertEquals("""
                cuDriverGetVersion=0 13000
                cuGetErrorName=0 CUDA_ERROR_NO_DEVICE
                cuInit again=100
                cuDeviceGetCount=3
                """, without(probed.stdout()), () -> context);
        assertEquals(100, probed.exit(), () -> context);
        assertEquals(connected.exit(), probed.exit(), () -> context);
        assertEquals(List.of(expectedLine), stderrLines(connected), () -> "the frontend's message: " + context);
        assertEquals(stderrLines(connected), stderrLines(probed), () -> "stderr differs: " + context);
    }

    private static String without(String stdout) {
        return stdout.lines().skip(1).map(l -> l + "\n").collect(Collectors.joining());
    }

    @Test
    void missingUnixSocketAnswersAsTheFrontendWould() throws Exception {
        String server = "unix://" + work.resolve("nobody.sock");
        sameAsTheFrontend(server, "gpusockets: cannot connect to " + server
                + ": No such file or directory; cuInit returns CUDA_ERROR_NO_DEVICE");
    }

    @Test
    void missingRingAnswersAsTheFrontendWould() throws Exception {
        String name = "probe-test-" + ProcessHandle.current().pid();
        sameAsTheFrontend("ring://" + name, "gpusockets: nobody listens on ring://" + name + " (no socket at /tmp/gpusockets-ring-"
                + name + ".sock); cuInit returns CUDA_ERROR_NO_DEVICE");
    }

    @Test
    void socketFileWithoutListenerIsLeftToTheFrontend() throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Path socket = work.resolve("stale.sock");
        try (var ch = java.nio.channels.ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX)) {
            ch.bind(java.net.UnixDomainSocketAddress.of(socket));
        }
        assertTrue(Files.exists(socket), "the stale socket file stays after its channel closes");
        NativePrograms.Run r = run("unix://" + socket, false);
        String context = "stdout:\n" + r.stdout() + "stderr:\n" + r.stderr();
        assertTrue(r.stdout().startsWith("cuInit=100 jvm=yes\n"), () -> context);
        assertEquals(List.of("gpusockets: cannot connect to unix://" + socket + ": Connection refused; cuInit returns CUDA_ERROR_NO_DEVICE"),
                stderrLines(r), () -> context);
    }
}
