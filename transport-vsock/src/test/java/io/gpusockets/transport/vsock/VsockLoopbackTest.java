package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Real AF_VSOCK end to end through the loopback CID 1 (VMADDR_CID_LOCAL). Runs only where vsock loopback
 * exists; elsewhere each test is skipped with the reason. Never connects to CID 2.
 */
@Timeout(20)
class VsockLoopbackTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(3);
    private final VsockTransport transport = new VsockTransport();

    @BeforeEach
    void requireLoopback() {
        VsockLoopback.require();
    }

    @Test
    void roundTripsBytesAndReportsThePeerCid() throws Exception {
        try (Listener l = transport.listen(TransportUri.parse("vsock://1:0"))) {
            assertTrue(l.address().toString().matches("vsock://1:[0-9]+") && !l.address().toString().endsWith(":4294967295"),
                    l.address().toString());
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return l.accept();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (Connection client = transport.connect(l.address(), TIMEOUT); Connection server = accepted.get()) {
                assertEquals(SockAddr.VMADDR_CID_LOCAL, server.peer().cid().orElseThrow());
                assertEquals(SockAddr.VMADDR_CID_LOCAL, client.peer().cid().orElseThrow());
                client.write(ByteBuffer.wrap(new byte[] {7, 8, 9}));
                ByteBuffer in = ByteBuffer.allocate(3);
                server.readFully(in);
                assertEquals(ByteBuffer.wrap(new byte[] {7, 8, 9}), in.flip());
            }
        }
    }

    @Test
    void connectToAClosedPortFailsNamingTheAddress() throws Exception {
        TransportUri gone;
        try (Listener l = transport.listen(TransportUri.parse("vsock://1:0"))) {
            gone = l.address();
        }
        IOException e = assertThrows(IOException.class, () -> transport.connect(gone, TIMEOUT));
        assertTrue(e.getMessage().contains(gone.toString()), e.getMessage());
    }
}
