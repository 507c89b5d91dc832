package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(20)
class VsockTransportTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(2);
    private final VsockTransport transport = new VsockTransport();

    @TempDir
    Path dir;

    @Test
    void isFoundByServiceLoaderForBothSchemes() {
        assertTrue(Transports.byScheme().get("vsock") instanceof VsockTransport);
        assertTrue(Transports.byScheme().get("fdunix") instanceof VsockTransport);
    }

    @Test
    void refusesToConnectToTheHostCidWithoutTouchingTheNetwork() {
        IOException e = assertThrows(IOException.class, () -> transport.connect(TransportUri.parse("vsock://2:7070"), TIMEOUT));
        assertTrue(e.getMessage().contains("CID 2") && e.getMessage().contains("vsock://2:7070"), e.getMessage());
        assertTrue(e.getMessage().contains(VsockTransport.ALLOW_HOST_CID_PROP), e.getMessage());
    }

    @Test
    void refusesListenOnlyFormsForConnect() {
        assertThrows(IllegalArgumentException.class, () -> transport.connect(TransportUri.parse("vsock://any:7070"), TIMEOUT));
        assertThrows(IllegalArgumentException.class, () -> transport.connect(TransportUri.parse("vsock://3:0"), TIMEOUT));
    }

    @Test
    void fdunixPeersCarryTheirUidOnBothEnds() throws Exception {
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve("a.sock"));
        try (Listener l = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return l.accept();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (Connection client = transport.connect(uri, TIMEOUT); Connection server = accepted.get()) {
                int ownUid = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
                assertEquals(ownUid, client.peer().uid().orElseThrow());
                assertEquals(ownUid, server.peer().uid().orElseThrow());
                assertTrue(server.peer().description().contains("uid " + ownUid), server.peer().description());
                assertFalse(server.peer().cid().isPresent());
                client.write(ByteBuffer.wrap(new byte[] {1, 2}), ByteBuffer.allocateDirect(1).put((byte) 3).flip());
                ByteBuffer in = ByteBuffer.allocate(3);
                server.readFully(in);
                assertEquals(ByteBuffer.wrap(new byte[] {1, 2, 3}), in.flip());
            }
        }
        assertFalse(Files.exists(dir.resolve("a.sock")), "listener removes its socket file on close");
    }

    @Test
    void replacesAStaleSocketFileButNotALiveOneOrAnOrdinaryFile() throws Exception {
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve("b.sock"));
        try (Listener live = transport.listen(uri)) {
            IOException e = assertThrows(IOException.class, () -> transport.listen(uri));
            assertTrue(e.getMessage().contains("in use"), e.getMessage());
        }
        // a socket file nobody accepts on, as a crashed listener leaves it
        Listener crashed = transport.listen(uri);
        Path kept = dir.resolve("kept");
        Files.move(dir.resolve("b.sock"), kept);
        crashed.close();
        Files.move(kept, dir.resolve("b.sock"));
        transport.listen(uri).close();

        Path plain = Files.writeString(dir.resolve("plain"), "x");
        assertThrows(FileAlreadyExistsException.class, () -> transport.listen(TransportUri.parse("fdunix://" + plain)));
    }

    @Test
    void connectToAMissingSocketNamesTheAddressAndTheReason() {
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve("none.sock"));
        IOException e = assertThrows(IOException.class, () -> transport.connect(uri, TIMEOUT));
        assertTrue(e.getMessage().contains(uri.toString()) && e.getMessage().contains("ENOENT"), e.getMessage());
    }
}
