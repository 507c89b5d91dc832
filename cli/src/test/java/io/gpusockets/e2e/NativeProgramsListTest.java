package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Keeps {@code frontend/native/tests} consistent without building anything, so that it holds where
 * NativeProgramsTest is skipped: every program is listed in programs.list, every listed program has
 * a source, and every one the harness runs has a golden file that ends with PASS.
 */
class NativeProgramsListTest {
    private final NativePrograms programs = NativePrograms.locate();

    @Test
    void everyProgramIsListedAndEveryListedProgramExists() throws Exception {
        Set<String> listed = new TreeSet<>();
        for (String target : List.of("emulated", "gpu")) {
            for (NativePrograms.Entry e : programs.entries(target)) {
                listed.add(e.name());
                assertNotNull(programs.source(e.name()), () -> "programs.list names " + e.name() + ", which has no source");
            }
        }
        Set<String> sources = new TreeSet<>();
        for (Path dir : List.of(programs.tests, programs.cudaDir(), programs.tests.resolve("gpu"))) {
            try (var files = Files.list(dir)) {
                files.map(p -> p.getFileName().toString()).filter(n -> n.endsWith(".c"))
                        .forEach(n -> sources.add(n.substring(0, n.length() - 2)));
            }
        }
        sources.remove("no_backend");   // run by the harness and the script on their own
        assertEquals(sources, listed, "programs in frontend/native/tests (and cuda/, gpu/) vs those in programs.list");
    }

    @Test
    void everyProgramTheHarnessRunsHasAGoldenFileEndingWithPass() throws Exception {
        Set<String> seen = new HashSet<>();
        for (NativePrograms.Entry e : programs.entries("emulated")) {
            assertTrue(seen.add(e.name()), () -> e.name() + " is listed twice for the emulated device");
            Path dir = programs.source(e.name()).getParent();
            assertTrue(dir.equals(programs.tests) || dir.equals(programs.cudaDir()),
                    () -> e.name() + " runs on the emulated device, so its source belongs in tests/ or tests/cuda/, not tests/gpu/");
            Path golden = programs.golden(e.name());
            assertTrue(Files.isRegularFile(golden), () -> "no golden file " + golden);
            String text = Files.readString(golden, StandardCharsets.UTF_8);
            assertTrue(text.endsWith("\nPASS\n"), () -> golden + " does not end with a PASS line");
            if (programs.hasOwnKernels(e.name())) {
                assertTrue(Files.isRegularFile(programs.kernelSource(e.name())),
                        () -> e.name() + " is in tests/cuda/, so its kernels belong in " + programs.kernelSource(e.name()));
                assertTrue(e.args().stream().allMatch(a -> !a.contains("{") || a.equals("{ptx}") || a.equals("{cu}")),
                        () -> e.name() + ": only {ptx} and {cu} exist for tests/cuda/ programs on the emulated device: " + e.args());
            } else {
                assertTrue(e.args().stream().allMatch(a -> !a.contains("{") || a.equals("{ptx}")),
                        () -> e.name() + ": only {ptx} exists on the emulated device: " + e.args());
            }
        }
    }

    @Test
    void goldenFilesBelongToListedPrograms() throws Exception {
        Set<String> emulated = new TreeSet<>();
        programs.entries("emulated").forEach(e -> emulated.add(e.name()));
        try (var files = Files.list(programs.tests.resolve("expected"))) {
            for (Path p : files.toList()) {
                String n = p.getFileName().toString();
                if (n.equals("runtime") && Files.isDirectory(p)) {
                    continue; // the runtime-API programs' goldens, checked by RuntimeProgramsTest
                }
                if (n.endsWith(".out") && Files.isRegularFile(programs.tests.resolve("nvml").resolve(n.substring(0, n.length() - 4) + ".c"))) {
                    continue; // a program of nvml/ (it links libnvidia-ml.so.1), checked by NvmlTest
                }
                assertTrue(n.endsWith(".out") && emulated.contains(n.substring(0, n.length() - 4)),
                        () -> p + " is no golden file of a program the harness runs");
            }
        }
    }
}
