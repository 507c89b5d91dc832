package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What a peer does (or does not do) during the ring's set-up never holds up accept for other peers. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RingSetUpTest {

    @Test
    void peersThatNeverAcknowledgeDoNotDelayTheNextClient() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse("ring://setup-" + ProcessHandle.current().pid() + "?size=64k");
        List<SocketChannel> silent = new ArrayList<>();
        try (Listener listener = transport.listen(uri)) {
            // each of these would hold a set-up done on the accept thread for its whole 5 s deadline
            for (int i = 0; i < 4; i++) {
                silent.add(SocketChannel.open(UnixDomainSocketAddress.of(RingAddress.of(uri).socket())));
            }
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            // 3 s is far more than a set-up takes, and far less than the silent peers' deadlines added up
            try (Connection client = transport.connect(uri, Duration.ofSeconds(3));
                 Connection server = accepted.get(3, TimeUnit.SECONDS)) {
                client.write(ByteBuffer.allocate(8).putLong(0, 42));
                ByteBuffer got = ByteBuffer.allocate(8);
                server.readFully(got);
                assertEquals(42, got.getLong(0));
            }
        } finally {
            for (SocketChannel c : silent) {
                c.close();
            }
        }
    }
}
