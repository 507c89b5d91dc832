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
}
