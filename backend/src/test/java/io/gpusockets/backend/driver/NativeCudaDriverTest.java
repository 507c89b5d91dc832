package io.gpusockets.backend.driver;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusockets.protocol.api.CuResult;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NativeCudaDriverTest {
    private static final String BOGUS = "/nonexistent/gpusockets-test/libcuda.so.1";

    @TempDir
    Path tmp;

    @Test
    void unavailableForAPathThatDoesNotExist() {
        assertFalse(NativeCudaDriver.available(BOGUS));
    }

    @Test
    void openNamesThePathThatFailedAndWhy() {
        NativeDriverException e = assertThrows(NativeDriverException.class, () -> NativeCudaDriver.open(BOGUS));
        assertTrue(e.getMessage().contains(BOGUS), e.getMessage());
        assertEquals(BOGUS, e.libraryPath());
        assertEquals(NativeDriverException.NO_RESULT, e.result());
        if (!NativeLibrary.isLoaded()) {
            // the loader's own reason (dlerror), not only the JDK's "Cannot open library"
            assertTrue(e.getMessage().contains("No such file or directory"), e.getMessage());
        }
    }

    @Test
    void unavailableByDefaultWhereThereIsNoLibcuda() {
        assumeFalse(libcudaLoadable(), "libcuda.so.1 is on this machine's loader path");
        assertFalse(NativeCudaDriver.available(null));
        NativeDriverException e = assertThrows(NativeDriverException.class, () -> NativeCudaDriver.open(null));
        assertTrue(e.getMessage().startsWith("cannot load libcuda from libcuda.so.1: "), e.getMessage());
        assertTrue(e.getMessage().contains("--libcuda"), "says how to point at the library: " + e.getMessage());
    }

    @Test
    void noDeviceIsReportedByItsCuResultName() throws Exception {
        Path lib = fakeLibcuda("""
                int cuInit(unsigned int flags) { return 100; /* CUDA_ERROR_NO_DEVICE */ }
                """);
        List<String> out = probe(lib);
        assertTrue(out.getFirst().startsWith("FAILED CUDA_ERROR_NO_DEVICE cuInit(0) failed with CUDA_ERROR_NO_DEVICE (100)"),
                String.join("\n", out));
        assertTrue(out.getFirst().contains(lib.toString()), String.join("\n", out));
        assertEquals("AVAILABLE false", out.get(1));
    }

    @Test
    void aLibraryWithoutCuInitIsNotTakenForLibcuda() throws Exception {
        Path lib = fakeLibcuda("int notCuda(void) { return 0; }\n");
        List<String> out = probe(lib);
        assertTrue(out.getFirst().startsWith("FAILED CUDA_ERROR_NOT_FOUND"), String.join("\n", out));
        assertTrue(out.getFirst().contains("is it libcuda?"), String.join("\n", out));
    }

    @Test
    void opensAWorkingLibraryAndDescribesTheDevice() throws Exception {
        Path lib = fakeLibcuda("""
                #include <stdio.h>
                int cuInit(unsigned int flags) { return 0; }
                int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
                int cuDeviceGetCount(int *n) { *n = 2; return 0; }
                int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
                int cuDeviceGetName(char *name, int len, int dev) { snprintf(name, len, "Fake H200"); return 0; }
                """);
        List<String> out = probe(lib);
        assertEquals("OPENED Fake H200 and 1 more (real driver 13000 via " + lib + ")", out.getFirst(), String.join("\n", out));
        assertEquals("AVAILABLE true", out.get(1));
        assertEquals("OTHER false", out.get(2), "one driver library per process");
    }

    @Test
    void realDriverAnswersVersionAndDeviceCount() {
        assumeTrue(NativeCudaDriver.available(null),
                "needs libcuda.so.1 and a GPU (absent here: " + reasonUnavailable() + ")");
        NativeCudaDriver cu = NativeCudaDriver.open(null);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment v = arena.allocate(JAVA_INT);
            assertEquals(CuResult.CUDA_SUCCESS, cu.cuDriverGetVersion(v));
            assertTrue(v.get(JAVA_INT, 0) >= 12000, "driver version " + v.get(JAVA_INT, 0));
            assertEquals(CuResult.CUDA_SUCCESS, cu.cuDeviceGetCount(v));
            assertTrue(v.get(JAVA_INT, 0) >= 1);
            assertEquals(cu.deviceCount(), v.get(JAVA_INT, 0));
        }
        assertTrue(cu.description().contains("real driver"), cu.description());
    }

    private static String reasonUnavailable() {
        try {
            NativeCudaDriver.open(null);
            return "none";
        } catch (RuntimeException e) {
            return e.getMessage();
        }
    }

    private static boolean libcudaLoadable() {
        try (Arena arena = Arena.ofConfined()) {
            SymbolLookup.libraryLookup(NativeLibrary.PATH_DEFAULT, arena);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** Builds a shared library named libcuda.so.1 from C source; skips the test where gcc is missing. */
    private Path fakeLibcuda(String source) throws IOException, InterruptedException {
        Path dir = Files.createDirectories(tmp.resolve("lib"));
        Path c = Files.writeString(tmp.resolve("fake_libcuda.c"), source);
        Path so = dir.resolve("libcuda.so.1");
        Process gcc;
        try {
            gcc = new ProcessBuilder("gcc", "-shared", "-fPIC", "-o", so.toString(), c.toString())
                    .redirectErrorStream(true).start();
        } catch (IOException e) {
            assumeTrue(false, "gcc is needed to build a fake libcuda: " + e.getMessage());
            throw e;
        }
        String log = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(gcc.waitFor(60, TimeUnit.SECONDS) && gcc.exitValue() == 0, log);
        return so;
    }

    /** Runs {@link NativeOpenProbe} in a child JVM, since a loaded library cannot be unloaded. */
    private static List<String> probe(Path lib) throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                NativeOpenProbe.class.getName(), lib.toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "probe timed out: " + out);
        assertEquals(0, p.exitValue(), out);
        return out.lines().toList();
    }
}
