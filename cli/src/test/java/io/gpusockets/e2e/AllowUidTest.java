package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code --allow-uid} admits unix peers by the uid the kernel proves; it does not apply to tcp, where
 * no uid is known (tcp relies on the pre-shared key or TLS).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AllowUidTest {
    /** A uid this test never runs as. */
    private static final String OTHER_UID = "54321";

    @Test
    void allowUidChecksUnixPeersAndLeavesTcpPeersToTheirOwnChecks() throws Exception {
        try (BackendProcess backend = BackendProcess.start("--allow-uid", OTHER_UID)) {
            var refused = assertThrows(IOException.class, () -> RemoteCudaDriver.connect(backend.unix()));
            assertTrue(refused.getMessage().contains("is not allowed"), refused.getMessage());
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(backend.tcp())) {
                assertEquals(1, new Cuda(d).deviceCount());
            }
        }
    }
}
