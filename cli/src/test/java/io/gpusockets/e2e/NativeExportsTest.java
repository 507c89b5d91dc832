package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * libcuda.so.1 exports every symbol the real driver handed out for a cuGetProcAddress request
 * (frontend/native/procaddress/driver580-*-answers.txt, the H200's driver 580) and every cu*
 * function that driver exports (driver580-exports.txt): libraries with a
 * driver loader of their own (cuBLAS, cuFFT) look such names up with dlsym and fail to start when
 * one is missing, whether or not they call it (src/driver_symbols.c).
 */
class NativeExportsTest {
    @Test
    void everySymbolTheRealDriverAnsweredWithIsExported(@TempDir Path dir) throws Exception {
        NativePrograms programs = NativePrograms.locate();
        assumeTrue(Files.isRegularFile(programs.library()), () -> programs.library() + " is not built");
        NativePrograms.Run nm = NativePrograms.run(List.of("nm", "-D", "--defined-only", programs.library().toString()),
                Map.of(), dir, 60);
        assumeTrue(nm.exit() == 0, () -> "nm (binutils) is needed: " + nm.stderrTail());
        Set<String> exported = new TreeSet<>();
        for (String line : nm.stdout().split("\n")) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 3 && (w[1].equals("T") || w[1].equals("W"))) {
                exported.add(w[2]);
            }
        }
        Path answers = programs.root.resolve("frontend/native/procaddress");
        Set<String> driver = new TreeSet<>();
        for (String file : List.of("driver580-typedef-answers.txt", "driver580-cudart13-answers.txt")) {
            for (String line : Files.readAllLines(answers.resolve(file), StandardCharsets.UTF_8)) {
                String[] w = line.trim().split("\\s+");
                if (w.length >= 6 && w[5].startsWith("cu")) {
                    driver.add(w[5]);
                }
            }
        }
        assertTrue(driver.size() > 600, "the recorded answers name " + driver.size() + " symbols");
        // and every function it exports (nm -D on the H200); the cudbg* symbols are cuda-gdb's interface, not the API
        for (String name : Files.readAllLines(answers.resolve("driver580-exports.txt"), StandardCharsets.UTF_8)) {
            if (name.matches("cu[A-Z]\\w*")) {
                driver.add(name);
            }
        }
        Set<String> missing = new TreeSet<>(driver);
        missing.removeAll(exported);
        assertEquals(Set.of(), missing, "symbols of the real driver libcuda.so.1 does not export");
    }
}
