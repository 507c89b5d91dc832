package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code gpusockets run} in its own JVM, as the launchers start it, so the program's stdio is really inherited. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RunCommandTest {
    @TempDir
    Path libdir;

    private record Result(int exitCode, String stdout, String stderr) {
    }

    /** Runs the CLI with {@code -Dgpusockets.libdir=libdir} unless {@code libdirProperty} is false. */
    private Result cli(boolean libdirProperty, String ldLibraryPath, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path")));
        if (libdirProperty) {
            cmd.add("-D" + RunCommand.LIBDIR_PROPERTY + "=" + libdir);
        }
        cmd.add(Main.class.getName());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().remove("GPUSOCKETS_SERVER");
        if (ldLibraryPath == null) {
            pb.environment().remove("LD_LIBRARY_PATH");
        } else {
            pb.environment().put("LD_LIBRARY_PATH", ldLibraryPath);
        }
        Path err = Files.createTempFile(libdir, "stderr", ".txt");
        Process p = pb.redirectError(err.toFile()).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the CLI did not exit");
        return new Result(p.exitValue(), out, Files.readString(err));
    }

    private void fakeLibcuda() throws IOException {
        Files.writeString(libdir.resolve("libcuda.so.1"), "not a library: /bin/sh never loads it");
    }

    @Test
    void givesTheProgramTheFrontendsEnvironment() throws Exception {
        fakeLibcuda();
        Result r = cli(true, "/opt/other/lib", "run", "--server", "tcp://gpu-host:7070", "--",
                "/bin/sh", "-c", "echo $GPUSOCKETS_SERVER; echo $LD_LIBRARY_PATH; echo $GPUSOCKETS_JAVA_HOME; "
                        + "echo $GPUSOCKETS_CLASSPATH");
        assertEquals(0, r.exitCode(), r.stderr());
        List<String> lines = r.stdout().lines().toList();
        assertEquals("tcp://gpu-host:7070", lines.get(0));
        assertEquals(libdir + ":/opt/other/lib", lines.get(1));
        assertEquals(System.getProperty("java.home"), lines.get(2));
        assertTrue(lines.get(3).contains("gpusockets-frontend") || lines.get(3).contains("frontend/target/classes"),
                "the class path holds the frontend: " + lines.get(3));
    }

    @Test
    void passesProgramOptionsThroughWithoutDoubleDash() throws Exception {
        fakeLibcuda();
        Result r = cli(true, null, "run", "--server", "unix:///run/gpusockets.sock",
                "/bin/sh", "-c", "echo \"$1|$LD_LIBRARY_PATH\"", "sh", "--server");
        assertEquals(0, r.exitCode(), r.stderr());
        assertEquals("--server|" + libdir, r.stdout().strip());
    }

    @Test
    void exitsWithTheProgramsExitCode() throws Exception {
        fakeLibcuda();
        assertEquals(7, cli(true, null, "run", "--server", "tcp://h:1", "--", "/bin/sh", "-c", "exit 7").exitCode());
        assertEquals(0, cli(true, null, "run", "--server", "tcp://h:1", "--", "/bin/true").exitCode());
    }

    @Test
    void saysSoWhenTheProgramCannotBeStarted() throws Exception {
        fakeLibcuda();
        Result r = cli(true, null, "run", "--server", "tcp://h:1", "--", "/no/such/program");
        assertEquals(127, r.exitCode());
        assertTrue(r.stderr().contains("cannot start /no/such/program"), r.stderr());
    }

    @Test
    void refusesClearlyWhenLibcudaIsMissing() throws Exception {
        Result r = cli(true, null, "run", "--server", "tcp://h:1", "--", "/bin/true");
        assertEquals(2, r.exitCode());
        assertTrue(r.stderr().contains(libdir.resolve("libcuda.so.1") + " missing"), r.stderr());

        r = cli(false, null, "run", "--server", "tcp://h:1", "--", "/bin/true");
        assertEquals(2, r.exitCode());
        assertTrue(r.stderr().contains(RunCommand.LIBDIR_PROPERTY), r.stderr());
    }

    @Test
    void needsAServerAndAProgram() throws Exception {
        fakeLibcuda();
        assertEquals(2, cli(true, null, "run", "/bin/true").exitCode(), "no --server");
        assertEquals(2, cli(true, null, "run", "--server", "tcp://h:1").exitCode(), "no program");
    }
}
