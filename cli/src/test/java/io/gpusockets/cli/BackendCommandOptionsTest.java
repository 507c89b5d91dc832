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
}
