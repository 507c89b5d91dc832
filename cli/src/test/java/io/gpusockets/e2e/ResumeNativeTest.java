package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.protocol.transport.TransportUri;
import java.net.UnixDomainSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Resume under an unmodified nvcc-built runtime-API program (static cudart, through our libcuda.so.1 with
 * GPUSOCKETS_RESUME=1): {@link ResumeTest}'s cutting proxy drops the unix:// connection at seeded points
 * while it runs; its stdout must equal the golden file, and the backend must have made the same driver
 * calls (launches, copies, allocations, module loads) as in a run without cuts.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class ResumeNativeTest {
    @ParameterizedTest
    @ValueSource(strings = {"streams", "threads"})
    void aRuntimeProgramFinishesRightThroughCuts(String name) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        Path nvcc = NativePrograms.nvcc();
        String skip = programs.cannotRun("the resume native test");
        assumeTrue(skip == null, skip);
        assumeTrue(nvcc != null, "needs nvcc");
        Path work = Files.createTempDirectory("gpusockets-resume-native");
        try {
            RuntimeProgramsTest.Line line = new RuntimeProgramsTest.Line(name, "static", Map.of());
            Path exe = work.resolve(name);
            List<String> cmd = RuntimeProgramsTest.buildCommand(nvcc, line, exe);
            NativePrograms.Run b = NativePrograms.run(cmd, Map.of(), work, 300);
            assertEquals(0, b.exit(), () -> "nvcc: " + b.stdout() + b.stderr());
            String golden = Files.readString(RuntimeProgramsTest.golden(name), StandardCharsets.UTF_8);

            ResumeTest.Counted clean = new ResumeTest.Counted(), cut = new ResumeTest.Counted();
            int cuts = run(programs, exe, work, clean, name, "clean", golden, 1, false);
            assertEquals(0, cuts);
            cuts = run(programs, exe, work, cut, name, "cut", golden, 4242, true);
            assertTrue(cuts >= 1, "the proxy never cut the connection");
            assertEquals(clean.programCalls(), cut.programCalls(), "driver calls without and with " + cuts + " cuts");
            clean.device.close();
            cut.device.close();
        } finally {
            NativePrograms.deleteTree(work);
        }
    }

    /** Runs the program through a proxy (cutting when {@code arm}); returns the cuts; checks its output. */
    private static int run(NativePrograms programs, Path exe, Path work, ResumeTest.Counted device, String name, String tag,
                           String golden, long seed, boolean arm) throws Exception {
        Path dir = Files.createDirectories(work.resolve(tag));
        try (BackendServer server = new BackendServer(DriverHost.initialise(device.driver, "emulated (counted)"),
                BackendSettings.fromSystemProperties())) {
            server.resumeGrace(Duration.ofSeconds(30));
            // threads' eight lanes each wait for a 1 MiB copy: all unacknowledged at a cut, they pass the default
            // bound of 8 MiB (which ends the session, as README says): the bound is not what this test is about
            server.resumeRetainBytes(64L << 20);
            Path sock = dir.resolve("b.sock");
            server.listen(TransportUri.parse("unix://" + sock));
            try (ResumeTest.CuttingProxy proxy = new ResumeTest.CuttingProxy("unix", dir, UnixDomainSocketAddress.of(sock),
                    seed, name.equals("threads") ? 12 << 20 : 4 << 20)) {
                if (arm) {
                    proxy.arm();
                }
                Map<String, String> env = new HashMap<>();
                env.put("LD_LIBRARY_PATH", programs.libDir.toString());
                env.put("GPUSOCKETS_SERVER", proxy.uri);
                env.put("GPUSOCKETS_RESUME", "1");
                env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
                env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
                NativePrograms.Run r = NativePrograms.run(List.of(exe.toString()), env, work, 120);
                proxy.armed = false;
                String context = exe.getFileName() + " (" + tag + ", " + proxy.cuts.get() + " cuts)\n--- stdout:\n" + r.stdout()
                        + "--- stderr:\n" + r.stderrTail();
                assertEquals(0, r.exit(), () -> "exit status of " + context);
                assertEquals(golden, r.stdout(), () -> "stdout of " + context);
                CopyOutStagingTest.awaitNoSessions(server);
                return proxy.cuts.get();
            }
        }
    }
}
