package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.cli.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import picocli.CommandLine;

/**
 * Checkpoint and restore under an unmodified nvcc-built program (issue 22's CI test): {@code checkpoint_list}
 * builds a linked list of device pointers over 68 allocations (small ones sharing granules, large ones,
 * stream-ordered ones), keeps its head in a {@code __device__} global and walks it by launches and a graph.
 * Stopped at its gate after round 5, its session is checkpointed with {@code gpusockets checkpoint --stop}, the
 * backend process is killed with SIGKILL, a new backend process starts on the same Unix socket and restores the
 * image (with {@code gpusockets restore} over its admin socket once it listens, or {@code gpusockets backend --restore}
 * before it listens), and the program goes on: it reconnects and resumes (GPUSOCKETS_RESUME=1), and
 * its stdout must equal the golden file (an uninterrupted run's) byte for byte, every allocation still device
 * memory at its address. Both isolation modes that hold the session elsewhere than the front run it: context
 * (the session in the backend process) and process, the default (the session in a worker process, which takes the
 * checkpoint; the restoring backend's worker restores it and the front hands the resuming program to it).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class CheckpointNativeTest {
    /** What a CLI command printed and returned. */
    record Result(int exit, String out, String err) {
    }

    static Result cli(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new Main()).setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true));
        int exit = cl.execute(args);
        return new Result(exit, out.toString(), err.toString());
    }

    private static final List<String> STABLE = List.of("-Dgpusockets.backend.stableAddresses=true");

    @ParameterizedTest(name = "isolation {1}, restored by {0}")
    @CsvSource({"gpusockets restore, context", "gpusockets backend --restore, context",
            "gpusockets restore, process", "gpusockets backend --restore, process"})
    void aProgramCheckpointedMidRunFinishesInAnotherBackendProcessAsIfUninterrupted(String how, String isolation) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        Path nvcc = NativePrograms.nvcc();
        String skip = programs.cannotRun("the checkpoint native test");
        assumeTrue(skip == null, skip);
        assumeTrue(nvcc != null, "needs nvcc");
        Path work = Files.createTempDirectory("gpusockets-checkpoint-native");
        BackendProcess first = null, second = null;
        try {
            RuntimeProgramsTest.Line line = new RuntimeProgramsTest.Line("checkpoint_list", "static", Map.of());
            Path exe = work.resolve("checkpoint_list");
            NativePrograms.Run b = NativePrograms.run(RuntimeProgramsTest.buildCommand(nvcc, line, exe), Map.of(), work, 300);
            assertEquals(0, b.exit(), () -> "nvcc: " + b.stdout() + b.stderr());
            String golden = Files.readString(RuntimeProgramsTest.golden("checkpoint_list"), StandardCharsets.UTF_8);

            String[] backendArgs = {"--isolation", isolation, "--resume-grace", "180"};
            first = BackendProcess.startWithStatus(STABLE, backendArgs);
            String uri = first.unix();
            Path gate = work.resolve("gate");
            Map<String, String> env = new HashMap<>();
            env.put("LD_LIBRARY_PATH", programs.libDir.toString());
            env.put("GPUSOCKETS_SERVER", uri);
            env.put("GPUSOCKETS_RESUME", "1");
            env.put("GPUSOCKETS_TEST_GATE", gate.toString());
            env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
            env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
            CompletableFuture<NativePrograms.Run> run = CompletableFuture.supplyAsync(() -> {
                try {
                    return NativePrograms.run(List.of(exe.toString()), env, work, 400);
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            Path ready = Path.of(gate + ".ready");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
            while (!Files.exists(ready) && !run.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertTrue(Files.exists(ready), () -> "the program never reached its gate: " + (run.isDone() ? run.join() : "timed out"));

            List<Map<String, Object>> sessions = StatusTest.list(StatusTest.statusJson(first), "sessions");
            assertEquals(1, sessions.size(), () -> "sessions: " + sessions);
            String id = String.valueOf(sessions.getFirst().get("id"));
            Path image = work.resolve("session.img");
            BackendProcess checkpointing = first;
            Result ck = cli("checkpoint", id, "--to", image.toString(), "--stop", "--socket", first.adminSocket().toString());
            assertEquals(0, ck.exit(), () -> "checkpoint: " + ck.out() + ck.err() + "\nbackend:\n" + String.join("\n", lastLines(checkpointing)));
            assertTrue(Files.size(image) > 12L << 20, "the image holds the four 3 MiB allocations at least");

            // the backend dies as a crash kills it: nothing of the session survives in it
            ProcessHandle.of(first.pid()).orElseThrow().destroyForcibly();
            assertTrue(first.awaitExit(30), "the killed backend did not exit");

            BackendProcess restoring;
            if (how.equals("gpusockets restore")) {
                // a backend that listens first: the program's resumes are refused until the restore, and it asks again
                second = BackendProcess.startWithStatus(STABLE, "--isolation", isolation, "--resume-grace", "180", "--listen", uri);
                restoring = second;
                Result rs = cli("restore", image.toString(), "--socket", second.adminSocket().toString());
                assertEquals(0, rs.exit(), () -> "restore: " + rs.out() + rs.err() + "\nbackend:\n"
                        + String.join("\n", lastLines(restoring)));
                assertTrue(rs.out().contains("\"session\":" + id + ","), () -> "the restored session keeps its id " + id + ": "
                        + rs.out());
            } else {
                second = BackendProcess.startWithStatus(STABLE, "--isolation", isolation, "--resume-grace", "180", "--listen", uri,
                        "--restore", image.toString());
                restoring = second;
                assertTrue(second.output().stream().anyMatch(l -> l.contains("session " + id + " restored from")),
                        () -> "backend:\n" + String.join("\n", lastLines(restoring)));
            }
            Files.createFile(Path.of(gate + ".go"));
            NativePrograms.Run r = run.get(300, TimeUnit.SECONDS);
            String context = "--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderrTail() + "\n--- restoring backend:\n"
                    + String.join("\n", lastLines(restoring));
            assertEquals(0, r.exit(), () -> "exit status\n" + context);
            assertEquals(golden, r.stdout(), () -> "stdout\n" + context);
            assertTrue(r.stdout().contains("allocations at their addresses: 68 of 68"), context);
        } finally {
            if (first != null) {
                first.close();
            }
            if (second != null) {
                second.close();
            }
            NativePrograms.deleteTree(work);
        }
    }

    private static List<String> lastLines(BackendProcess b) {
        List<String> o = b.output();
        return o.subList(Math.max(0, o.size() - 60), o.size());
    }
}
