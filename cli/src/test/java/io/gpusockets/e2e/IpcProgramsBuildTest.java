package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The two-process sharing programs of {@code frontend/native/tests} ({@code ipc_memory}, {@code ipc_shareable}: not in
 * programs.list, see its README) build with the harness's flags ({@code -Wall -Werror}) against our libcuda.so.1, and
 * answer a wrong argument with their usage and exit 2 before any CUDA call. Running them needs a backend that grants
 * sharing; the tests that do run them start their own.
 */
class IpcProgramsBuildTest {
    private final NativePrograms programs = NativePrograms.locate();

    @Test
    void bothProgramsBuildAndCheckTheirArguments(@TempDir Path dir) throws Exception {
        String why = programs.cannotRun("the IPC programs");
        assumeTrue(why == null, why);
        for (String name : List.of("ipc_memory", "ipc_shareable")) {
            Path src = programs.tests.resolve(name + ".c");
            assertTrue(Files.isRegularFile(src), () -> "no " + src);
            Path exe = programs.build(name, dir);
            NativePrograms.Run r = NativePrograms.run(List.of(exe.toString(), "--expect-accepted"),
                    Map.of("LD_LIBRARY_PATH", programs.libDir.toString()), dir, 60);
            assertEquals(2, r.exit(), () -> name + ": " + r.stderrTail());
            assertTrue(r.stderr().contains("usage: " + name + " [--expect-refused]"), () -> name + ": " + r.stderrTail());
            assertEquals("", r.stdout(), name);
        }
    }
}
