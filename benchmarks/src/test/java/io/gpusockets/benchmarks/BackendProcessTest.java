package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class BackendProcessTest {
    @Test
    void startsABackendThatServesItsListeningUriAndLogsItsOutput(@TempDir Path dir) throws Exception {
        String unix = "unix://" + dir.resolve("b.sock");
        Path log = dir.resolve("b.log");
        BackendProcess b = new BackendProcess("t", DeviceChoice.EMULATED,
                List.of("--isolation", "context", "--stable-addresses", "--listen", unix), log);
        try (b) {
            assertEquals(List.of(unix), b.listening(1, 120));
            assertTrue(b.await("gpusockets backend: ", 10).contains("isolation context"), b.tail());
            assertTrue(Files.readString(log).contains("listening on " + unix), Files.readString(log));
            try (RemoteCudaDriver cu = RemoteCudaDriver.connect(unix); PrimaryContext pc = PrimaryContext.retain(cu, 0);
                 Arena arena = Arena.ofConfined()) {
                MemorySegment cell = arena.allocate(8);
                assertEquals(0, cu.cuMemAllocManaged(cell, 1 << 20, 1));
                long p = cell.get(JAVA_LONG, 0);
                // --stable-addresses: the session's windows lie in the guest's managed range, far from the JVM's mappings
                long[] range = cu.managedRange();
                assertTrue(range != null && p >= range[0] && p - range[0] < range[1], Long.toHexString(p));
                assertEquals(0, cu.cuMemFree(p));
            }
        }
        assertFalse(b.process.isAlive());
    }

    @Test
    void aBackendThatEndsBeforeItListensFailsWithItsOutput(@TempDir Path dir) throws Exception {
        try (BackendProcess b = new BackendProcess("t", DeviceChoice.EMULATED, List.of("--no-such-option"), null)) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> b.listening(1, 120));
            assertTrue(e.getMessage().contains("ended") && e.getMessage().contains("--no-such-option"), e.getMessage());
        }
    }

    @Test
    void managedBenchRunsItsRemoteModesAgainstABackendProcess(@TempDir Path dir) throws Exception {
        int rc = new CommandLine(new ManagedBench()).setCaseInsensitiveEnumValuesAllowed(true).execute("--sizes", "1", "--rounds", "1", "--workloads", "sixteenth",
                "--out", dir.toString());
        assertEquals(0, rc);
        String md = Files.readString(dir.resolve("managed.md"));
        assertTrue(md.contains("backend in a process of its own") && md.contains("isolation context"), md);
        assertTrue(md.contains("sixteenth"), md);
    }
}
