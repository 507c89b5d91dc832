package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Set;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

class BackendCommandOptionsTest {
    @Test
    void allowCidIsRepeatable() {
        BackendCommand command = new BackendCommand();
        new CommandLine(command).setCaseInsensitiveEnumValuesAllowed(true).parseArgs("--allow-cid", "3", "--allow-cid", "4294967294");
        assertEquals(Set.of(3L, 4294967294L), command.allowCids);
    }

    @Test
    void allowCidDefaultsToAny() {
        BackendCommand command = new BackendCommand();
        new CommandLine(command).setCaseInsensitiveEnumValuesAllowed(true).parseArgs();
        assertEquals(Set.of(), command.allowCids);
    }

    @Test
    void tlsOptionsWithoutATlsListenerAreRefused() {
        BackendCommand command = new BackendCommand();
        CommandLine cli = new CommandLine(command).setCaseInsensitiveEnumValuesAllowed(true);
        int exit = cli.setErr(new java.io.PrintWriter(java.io.Writer.nullWriter()))
                .execute("--device", "emulated", "--listen", "tcp://127.0.0.1:0", "--tls-key-store", "/nonexistent/server.p12");
        assertEquals(2, exit, "a usage error, before anything listens");
    }

    @Test
    void aTlsListenerWithoutACertificateIsRefused() {
        BackendCommand command = new BackendCommand();
        CommandLine cli = new CommandLine(command).setCaseInsensitiveEnumValuesAllowed(true);
        java.io.StringWriter err = new java.io.StringWriter();
        int exit = cli.setErr(new java.io.PrintWriter(err)).execute("--device", "emulated", "--listen", "tls://127.0.0.1:0");
        assertEquals(2, exit);
        org.junit.jupiter.api.Assertions.assertTrue(err.toString().contains("--tls-key-store"), err.toString());
    }

    @Test
    void aNegativeMigrationBufferIsRefusedAtStart() {
        java.io.StringWriter err = new java.io.StringWriter();
        int exit = new CommandLine(new BackendCommand()).setCaseInsensitiveEnumValuesAllowed(true)
                .setErr(new java.io.PrintWriter(err)).execute("--device", "emulated", "--accept-migrations",
                        "--migration-buffer", "-1");
        assertEquals(2, exit, "a usage error, before anything listens");
        org.junit.jupiter.api.Assertions.assertTrue(err.toString().contains("--migration-buffer"), err.toString());
    }

    @Test
    void aBadDrainTargetOrTimeoutIsRefusedAtStart() {
        for (String[] args : new String[][] {{"--drain-to", "nowhere"},
                {"--drain-to", "unix:///tmp/b.sock", "--drain-timeout", "0"}}) {
            java.io.StringWriter err = new java.io.StringWriter();
            java.util.List<String> all = new java.util.ArrayList<>(java.util.List.of("--device", "emulated"));
            all.addAll(java.util.List.of(args));
            int exit = new CommandLine(new BackendCommand()).setCaseInsensitiveEnumValuesAllowed(true)
                    .setErr(new java.io.PrintWriter(err)).execute(all.toArray(String[]::new));
            assertEquals(2, exit, "a usage error, before anything listens: " + all);
            org.junit.jupiter.api.Assertions.assertTrue(err.toString().contains("--drain-"), err.toString());
        }
    }

    @Test
    void isolationDefaultsToProcess() {
        BackendCommand command = new BackendCommand();
        new CommandLine(command).setCaseInsensitiveEnumValuesAllowed(true).parseArgs();
        assertEquals(io.gpusockets.backend.isolation.Isolation.PROCESS, command.isolation);
        assertEquals(64, command.maxWorkers);
        assertEquals(1, command.idleWorkers);
    }

    /** Mode process schedules no device time: a tenants file with device-share stops the backend before it serves. */
    @Test
    void aDeviceShareIsRefusedAtStartInTheDefaultMode(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path tenants = dir.resolve("tenants.conf");
        java.nio.file.Files.writeString(tenants, "[tenant a]\nmatch = uid:1000\ndevice-share = 0.5\n");
        java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
        java.io.PrintStream old = System.err;
        int exit;
        try {
            System.setErr(new java.io.PrintStream(err, true, java.nio.charset.StandardCharsets.UTF_8));
            exit = new CommandLine(new BackendCommand()).setCaseInsensitiveEnumValuesAllowed(true)
                    .execute("--device", "emulated", "--listen", "tcp://127.0.0.1:0", "--tenants", tenants.toString());
        } finally {
            System.setErr(old);
        }
        assertEquals(2, exit);
        String said = err.toString(java.nio.charset.StandardCharsets.UTF_8);
        org.junit.jupiter.api.Assertions.assertTrue(said.contains("tenants.conf:1: [tenant a] has device-share = 0.5, which"
                + " isolation mode process (the default) does not schedule") && said.contains("--isolation context"), said);
    }
}
