package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The C unit test of libcuda.so.1's private tables (frontend/native/tests/unit/export_tables_test.c,
 * which includes src/export_tables.c with the driver calls stubbed): MD2 against RFC 1319's vectors,
 * the integrity check, context-local storage and its destructors. Needs gcc only.
 */
class ExportTablesUnitTest {
    @Test
    void thePrivateTablesPassTheirCUnitTest(@TempDir Path dir) throws Exception {
        String noGcc = NativePrograms.gccMissing();
        assumeTrue(noGcc == null, () -> "needs gcc: " + noGcc);
        NativePrograms programs = NativePrograms.locate();
        Path src = programs.tests.resolve("unit/export_tables_test.c");
        Path exe = dir.resolve("export_tables_test");
        NativePrograms.Run build = NativePrograms.run(List.of("gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-Wno-unused-parameter",
                "-Wno-unused-function", "-I" + programs.root.resolve("frontend/native/src"), src.toString(), "-o", exe.toString(),
                "-lpthread"), Map.of(), dir, 120);
        assertEquals(0, build.exit(), () -> "gcc: " + build.stdout() + build.stderr());
        NativePrograms.Run r = NativePrograms.run(List.of(exe.toString()), Map.of(), dir, 60);
        assertEquals(0, r.exit(), () -> "export_tables_test:\n" + r.stdout() + r.stderrTail());
        assertTrue(r.stdout().endsWith("PASS\n"), () -> "export_tables_test:\n" + r.stdout());
    }
}
