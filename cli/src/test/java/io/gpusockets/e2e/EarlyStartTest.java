package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * GPUSOCKETS_EARLY_START=1: libcuda.so.1's constructor starts the JVM and the connection on a thread
 * of its own as the library loads. What must not change (no timings asserted): a program calls CUDA
 * as usual; one that never calls CUDA exits with its own status, at any phase of the start; a missing
 * backend gives cuInit CUDA_ERROR_NO_DEVICE with the usual line; and fork(): a child forked before the
 * program's first CUDA call, early in the start or after it, gets CUDA_ERROR_NO_DEVICE and one line
 * saying why (it cannot use the parent's JVM) instead of hanging, exits normally through exit(), and
 * the parent goes on working. Skipped where the library, gcc or cuda.h is missing.
 */
class EarlyStartTest {
    private static final String PROGRAM = """
            #define _GNU_SOURCE
            #include <cuda.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <sys/wait.h>
            #include <unistd.h>

            /* argv[1]: mode (none, cuda, fork), argv[2]: microseconds to sleep first */
            int main(int argc, char **argv) {
                usleep((useconds_t) atoi(argv[2]));
                if (strcmp(argv[1], "none") == 0) {
                    return 7;
                }
                if (strcmp(argv[1], "fork") == 0) {
                    fflush(stdout);
                    pid_t p = fork();
                    if (p == 0) {
                        printf("child cuInit=%d\\n", cuInit(0));
                        fflush(stdout);
                        exit(0);
                    }
                    int st = 0;
                    waitpid(p, &st, 0);
                    printf("child exit=%d\\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
                }
                CUresult r = cuInit(0);
                int count = -1;
                if (r == CUDA_SUCCESS) {
                    r = cuDeviceGetCount(&count);
                }
                printf("cuInit=%d count=%d\\n", r, count);
                return 0;
            }
            """;

    private static NativePrograms programs;
    private static String skipReason;
    private static Path work;
    private static Path exe;
    private static BackendProcess backend;

    @BeforeAll
    static void setUp() throws Exception {
        programs = NativePrograms.locate();
        skipReason = programs.cannotRun("the early-start program");
        if (skipReason != null) {
            return;
        }
        work = Files.createTempDirectory("gpusockets-early");
        Path src = work.resolve("early.c");
        Files.writeString(src, PROGRAM);
        exe = work.resolve("early");
        NativePrograms.Run gcc = NativePrograms.run(List.of("gcc", "-std=c11", "-O1", "-I" + NativePrograms.CUDA_INCLUDE,
                "-o", exe.toString(), src.toString(), "-L" + programs.libDir, "-l:libcuda.so.1"), Map.of(), work, 120);
        assertEquals(0, gcc.exit(), () -> "gcc failed:\n" + gcc.stderr());
        backend = BackendProcess.start("--isolation", "context");
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

    private static NativePrograms.Run run(String server, String mode, int sleepMicros) throws Exception {
        assumeTrue(skipReason == null, () -> skipReason);
        Map<String, String> env = new HashMap<>(Map.of(
                "LD_LIBRARY_PATH", programs.libDir.toString(),
                "GPUSOCKETS_SERVER", server,
                "GPUSOCKETS_EARLY_START", "1",
                "GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"),
                "GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path")));
        return NativePrograms.run(List.of(exe.toString(), mode, Integer.toString(sleepMicros)), env, work, 60);
    }

    private static String context(NativePrograms.Run r) {
        return "exit " + r.exit() + "\n--- stdout:\n" + r.stdout() + "--- stderr:\n" + r.stderr();
    }

    @Test
    void aProgramCallsCudaAsUsual() throws Exception {
        NativePrograms.Run r = run(backend.unix(), "cuda", 0);
        assertEquals("cuInit=0 count=1\n", r.stdout(), () -> context(r));
        assertEquals(0, r.exit(), () -> context(r));
    }

    @Test
    void aProgramThatNeverCallsCudaExitsWithItsOwnStatusAtAnyPhaseOfTheStart() throws Exception {
        for (int micros : new int[] {0, 1_000, 30_000, 200_000, 1_000_000}) {
            NativePrograms.Run r = run(backend.unix(), "none", micros);
            assertEquals(7, r.exit(), () -> "after " + micros + " us: " + context(r));
            assertEquals("", r.stderr(), () -> "after " + micros + " us: " + context(r));
        }
    }

    @Test
    void aMissingBackendGivesNoDeviceWithTheUsualLine() throws Exception {
        String server = "unix://" + work.resolve("nobody.sock");
        NativePrograms.Run r = run(server, "cuda", 0);
        assertEquals("cuInit=100 count=-1\n", r.stdout(), () -> context(r));
        assertEquals(List.of("gpusockets: cannot connect to " + server + ": No such file or directory; cuInit returns CUDA_ERROR_NO_DEVICE"),
                r.stderr().lines().filter(l -> !l.isBlank()).toList(), () -> context(r));
    }

    @Test
    void aChildForkedBeforeTheFirstCallSaysItCannotUseTheParentsJvm() throws Exception {
        for (int micros : new int[] {0, 50_000, 2_000_000}) {
            NativePrograms.Run r = run(backend.unix(), "fork", micros);
            String c = "fork after " + micros + " us: " + context(r);
            assertEquals("child cuInit=100\nchild exit=0\ncuInit=0 count=1\n", r.stdout(), () -> c);
            assertEquals(0, r.exit(), () -> c);
            List<String> lines = r.stderr().lines().filter(l -> !l.isBlank()).toList();
            assertEquals(1, lines.size(), () -> c);
            assertTrue(lines.getFirst().startsWith("gpusockets: this process was fork()ed from one whose GPUsockets frontend had started early"),
                    () -> c);
        }
    }
}
