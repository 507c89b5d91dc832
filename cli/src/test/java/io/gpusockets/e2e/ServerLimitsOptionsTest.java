package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The backend's --max-sessions and --idle-timeout options reach the server. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ServerLimitsOptionsTest {

    @Test
    void maxSessionsRefusesTheSecondAndIdleTimeoutEndsTheFirst() throws Exception {
        try (BackendProcess backend = BackendProcess.start("--max-sessions", "1", "--idle-timeout", "1")) {
            try (RawClient first = RawClient.session(backend.unix())) {
                try (RawClient second = new RawClient(backend.tcp())) {
                    RawClient.Frame f = second.hello(Handshake.PROTOCOL_VERSION);
                    assertEquals(Opcodes.REFUSE, f.header().opcode());
                    String reason = Handshake.readString(f.body().order(ByteOrder.LITTLE_ENDIAN));
                    assertTrue(reason.contains("too many sessions"), reason);
                }
                assertTrue(first.closedByPeerWithin(10_000), "the idle session was not ended");
            }
            backend.awaitLog("ended (idle for 1 s", 5000);
        }
    }
}
