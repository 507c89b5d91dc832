package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A reader that stops reading must still learn that its peer went: over the JDK's tcp:// and unix://
 * channels (which cannot tell without reading) and fdunix://, with unread bytes queued ahead of the close.
 */
class PeerHangupTest {
    @ParameterizedTest
    @ValueSource(strings = {"unix", "tcp", "fdunix"})
    void aCloseBehindUnreadBytesIsSeenWithoutReading(String scheme) throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-hangup");
        String where = switch (scheme) {
            case "tcp" -> "tcp://127.0.0.1:0";
            default -> scheme + "://" + dir.resolve("s.sock");
        };
        try (Listener l = Transports.listen(TransportUri.parse(where))) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return l.accept();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            Connection client = Transports.connect(l.address(), Duration.ofSeconds(5));
            try (Connection server = accepted.get(10, TimeUnit.SECONDS)) {
                PeerHangup hangup = new PeerHangup(server);
                client.write(ByteBuffer.allocateDirect(4096));   // never read by the server
                Thread.sleep(100);
                assertFalse(hangup.gone(), "the peer is still there");
                client.close();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                boolean gone = false;
                while (!gone && System.nanoTime() < deadline) {
                    gone = hangup.gone();
                    Thread.sleep(20);
                }
                assertTrue(gone, scheme + ": the peer's close was not seen behind unread bytes");
            }
        }
    }
}
