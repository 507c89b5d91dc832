package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Our libcuda.so.1's cuGetProcAddress answers against the real driver's, recorded on the H200
 * (frontend/native/procaddress: cudart 13.0's 440 requests and every cudaTypedefs.h variant with
 * flags 0 and 2): every request ours answers must get the same ABI variant (a wrong ABI behind a found
 * name breaks a program; a name not forwarded yet is counted, not refused), and every request of
 * cudart's for a name ours implements must be answered (a missing older variant fails cudart, as a
 * missing cuDevicePrimaryCtxReset at 7000 failed cudaDeviceReset). The counts must not drop
 * below what is answered today, so a lookup that stops answering shows.
 */
class ProcAddressAnswersTest {
    /** What the library answered when the answers were recorded: 120 of cudart's requests, 480 typedef requests. */
    private static final int CUDART_ANSWERED = 120;
    private static final int TYPEDEF_ANSWERED = 480;
    private static final Pattern SUMMARY = Pattern.compile("answered (\\d+) same (\\d+) different (\\d+) real-only (\\d+)");

    @Test
    void everyAnsweredRequestGetsTheRealDriversVariant(@TempDir Path dir) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        String why = programs.cannotRun("the cuGetProcAddress check");
        assumeTrue(why == null, why);
        Path answers = programs.root.resolve("frontend/native/procaddress");
        Path exe = dir.resolve("check");
        NativePrograms.Run build = NativePrograms.run(List.of("gcc", "-std=c11", "-O1", "-Wall", "-Werror",
                "-I" + NativePrograms.CUDA_INCLUDE, answers.resolve("check.c").toString(), "-o", exe.toString(),
                "-L" + programs.libDir, "-l:libcuda.so.1", "-ldl", "-Wl,-rpath," + programs.libDir), Map.of(), dir, 120);
        assertEquals(0, build.exit(), () -> "gcc: " + build.stdout() + build.stderr());
        for (String file : List.of("driver580-cudart13-answers.txt", "driver580-typedef-answers.txt")) {
            Path f = answers.resolve(file);
            assertTrue(Files.isRegularFile(f), f.toString());
            // cudart's own requests: a name we implement must be answered at every version it asks
            List<String> cmd = file.contains("cudart") ? List.of(exe.toString(), "--missing-is-error", f.toString())
                    : List.of(exe.toString(), f.toString());
            NativePrograms.Run r = NativePrograms.run(cmd,
                    Map.of("GPUSOCKETS_SERVER", "tcp://127.0.0.1:1"), dir, 60);
            assertEquals(0, r.exit(), () -> file + ": variants differ from the driver's:\n" + r.stdout() + r.stderrTail());
            Matcher m = SUMMARY.matcher(r.stdout());
            assertTrue(m.find(), () -> "no summary: " + r.stdout());
            int answered = Integer.parseInt(m.group(1));
            int floor = file.contains("cudart") ? CUDART_ANSWERED : TYPEDEF_ANSWERED;
            assertTrue(answered >= floor, () -> file + ": " + answered + " requests answered, fewer than the " + floor
                    + " answered when the answers were recorded:\n" + r.stdout());
        }
    }
}
