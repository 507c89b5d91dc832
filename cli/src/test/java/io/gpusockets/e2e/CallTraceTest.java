package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * calltrace (frontend/native/tools): the libcuda.so.1 that wraps another one and logs every call.
 * Its thunks must pass every argument on unchanged (integers and floating point, in registers and on
 * the stack), for exported symbols, cuGetProcAddress answers and private-table slots alike; and
 * {@code scripts/calltrace} must trace a real nvcc-built runtime-API program through our library
 * without changing what it prints.
 */
class CallTraceTest {
    @Test
    void thunksPassEveryArgumentOnAndLogEachCall(@TempDir Path dir) throws Exception {
        String noGcc = NativePrograms.gccMissing();
        assumeTrue(noGcc == null, () -> "needs gcc: " + noGcc);
        NativePrograms programs = NativePrograms.locate();
        Path tools = programs.root.resolve("frontend/native/tools");
        Path fake = dir.resolve("libfake.so");
        ok(NativePrograms.run(List.of("gcc", "-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-o", fake.toString(),
                tools.resolve("test/fake_driver.c").toString()), Map.of(), dir, 120), "gcc fake_driver.c");
        ok(NativePrograms.run(List.of(tools.resolve("build.sh").toString(), dir.resolve("lib").toString(), fake.toString()),
                Map.of(), dir, 300), "build.sh");
        Path exe = dir.resolve("calltrace_test");
        ok(NativePrograms.run(List.of("gcc", "-std=c11", "-O2", "-Wall", "-Werror", "-o", exe.toString(),
                tools.resolve("test/calltrace_test.c").toString(), "-ldl"), Map.of(), dir, 120), "gcc calltrace_test.c");
        Path log = dir.resolve("trace.log");
        NativePrograms.Run r = NativePrograms.run(List.of(exe.toString(), fake.toString()), Map.of(
                "LD_LIBRARY_PATH", dir.resolve("lib").toString(),
                "GPUSOCKETS_CALLTRACE_TARGET", fake.toString(),
                "GPUSOCKETS_CALLTRACE_OUT", log.toString()), dir, 60);
        assertEquals(0, r.exit(), () -> "calltrace_test:\n" + r.stdout() + r.stderrTail());
        assertTrue(r.stdout().endsWith("PASS\n"), r::stdout);
        String trace = Files.readString(log, StandardCharsets.UTF_8);
        // each of the three ways in is logged with its arguments, result and what an output pointer holds
        assertEquals(2, count(trace, " cuFakeMany(0x1, 0x2, 0x3, 0x4, 0x5, 0x6) = 584343 |"), trace);
        assertTrue(trace.contains("cuGetProcAddress_v2(cuNoSuchFunction, 12000, 0) = 500 status 1 (none) [calltrace_test]"), trace);
        assertTrue(trace.contains(" cuFakeOut(") && trace.contains("= 0 | a0=[2a000000"), trace);
        assertTrue(trace.contains("cuGetExportTable(0102030405060708090a0b0c0d0e0f10) = 0 first word 0x10 [calltrace_test]"), trace);
        assertTrue(trace.contains(" table 01020304[1](0x7, 0x9, "), trace);
    }

    @Test
    void tracesARuntimeProgramThroughOurLibraryWithoutChangingIt(@TempDir Path dir) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        String cannot = programs.cannotRun("calltrace of a runtime-API program");
        assumeTrue(cannot == null, () -> cannot);
        Path nvcc = NativePrograms.nvcc();
        assumeTrue(nvcc != null, "needs nvcc");
        RuntimeProgramsTest.Line basics = new RuntimeProgramsTest.Line("basics", "static", Map.of());
        Path exe = dir.resolve("basics");
        ok(NativePrograms.run(RuntimeProgramsTest.buildCommand(nvcc, basics, exe), Map.of(), dir, 300), "nvcc basics.cu");
        try (BackendProcess backend = BackendProcess.start()) {
            Map<String, String> env = new HashMap<>();
            env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
            env.put("GPUSOCKETS_CLASSPATH", System.getProperty("java.class.path"));
            Path out = dir.resolve("traces");
            NativePrograms.Run r = NativePrograms.run(List.of(programs.root.resolve("scripts/calltrace").toString(), "--remote-only",
                    "--out", out.toString(), "--server", backend.address("unix"), "--ours", programs.libDir.toString(), "--",
                    exe.toString()), env, dir, 300);
            assertEquals(0, r.exit(), () -> "scripts/calltrace:\n" + r.stdout() + r.stderrTail());
            assertEquals(Files.readString(RuntimeProgramsTest.golden("basics"), StandardCharsets.UTF_8),
                    Files.readString(out.resolve("remote.stdout"), StandardCharsets.UTF_8), "basics under calltrace");
            String calls = Files.readString(out.resolve("remote.calls"), StandardCharsets.UTF_8);
            // cudart's start (every look-up, the private tables, the device queries), then the program's own calls
            assertTrue(count(calls, "cuGetProcAddress_v2(") >= 400, calls);
            // the private tables: their size words and who asked for them
            assertTrue(calls.contains("cuGetExportTable(6bd5fb6c5bf4e74a8987d93912fd9df9) = 0 first word 0x68 [basics]\n"), calls);
            assertTrue(calls.contains("cuGetExportTable(c693336e1121df11a8c368f355d89593) = 0 first word (an address) [basics]\n"), calls);
            assertTrue(calls.contains("\ntable c693336e[2] = 0\n"), calls);
            assertTrue(calls.contains("\ncuLibraryGetKernel = 0\n"), calls);
            assertTrue(calls.contains("\ncuLaunchKernel = 0\n"), calls);
            assertTrue(calls.contains("\ncuDevicePrimaryCtxReset = 0\n"), calls);
            String trace = Files.readString(out.resolve("remote.trace"), StandardCharsets.UTF_8);
            assertTrue(trace.contains("\"_Z9scale_addIiLi7EEvPT_PKS0_S0_i\""), "kernel names are shown as text");
        }
    }

    private static void ok(NativePrograms.Run r, String what) {
        assertEquals(0, r.exit(), () -> what + ":\n" + r.stdout() + r.stderrTail());
    }

    private static int count(String s, String part) {
        int n = 0;
        for (int at = s.indexOf(part); at >= 0; at = s.indexOf(part, at + 1)) {
            n++;
        }
        return n;
    }
}
