package io.gpusockets.transport.unix;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.transport.tcp.SocketTransport;
import java.io.IOException;
import java.net.BindException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(30)
class UnixTransportTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);

    private final SocketTransport transport = new SocketTransport();

    @TempDir
    Path dir;

    @Test
    void bothEndsReportThePeerUidFromSoPeercred() throws IOException {
        int ourUid = (Integer) Files.getAttribute(Files.createFile(dir.resolve("owned-by-us")), "unix:uid");
        TransportUri uri = uri("uid.sock");
        try (Listener listener = transport.listen(uri);
             Connection client = transport.connect(uri, TIMEOUT);
             Connection server = listener.accept()) {
            assertEquals(ourUid, server.peer().uid().orElseThrow(), server.peer().toString());
            assertEquals(ourUid, client.peer().uid().orElseThrow(), client.peer().toString());
            assertEquals(uri + " (uid " + ourUid + ")", server.peer().description());
        }
    }

    @Test
    void listenerAddressIsTheUriAsGiven() throws IOException {
        TransportUri uri = uri("as-given.sock");
        try (Listener listener = transport.listen(uri)) {
            assertEquals(uri, listener.address());
        }
    }

    @Test
    void closingTheListenerDeletesItsSocketFile() throws IOException {
        TransportUri uri = uri("deleted.sock");
        Listener listener = transport.listen(uri);
        assertTrue(Files.exists(Path.of(uri.path())));
        listener.close();
        assertFalse(Files.exists(Path.of(uri.path())));
    }

    @Test
    void staleSocketFileFromADeadListenerIsReplaced() throws IOException {
        TransportUri uri = uri("stale.sock");
        try (ServerSocketChannel dead = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            dead.bind(UnixDomainSocketAddress.of(uri.path()));
        }
        assertTrue(Files.exists(Path.of(uri.path())), "the JDK leaves the socket file behind on close");
        try (Listener listener = transport.listen(uri);
             Connection client = transport.connect(uri, TIMEOUT);
             Connection server = listener.accept()) {
            assertEquals(client.peer().uid(), server.peer().uid());
        }
    }

    @Test
    void liveListenerIsNotTakenOver() throws IOException {
        TransportUri uri = uri("live.sock");
        try (Listener first = transport.listen(uri)) {
            BindException e = assertThrows(BindException.class, () -> transport.listen(uri).close());
            assertTrue(e.getMessage().contains(uri.toString()), e.getMessage());
            try (Connection client = transport.connect(uri, TIMEOUT); Connection server = first.accept()) {
                assertEquals(client.peer().uid(), server.peer().uid(), "the first listener still serves");
            }
        }
    }

    @Test
    void fileThatIsNotASocketIsLeftAlone() throws IOException {
        TransportUri uri = uri("precious.txt");
        Files.writeString(Path.of(uri.path()), "keep me");
        assertThrows(FileAlreadyExistsException.class, () -> transport.listen(uri).close());
        assertEquals("keep me", Files.readString(Path.of(uri.path())));
    }

    @Test
    void closeLeavesASocketFileThatANewerListenerBound() throws IOException {
        TransportUri uri = uri("replaced.sock");
        Listener old = transport.listen(uri);
        Files.delete(Path.of(uri.path()));
        try (Listener newer = transport.listen(uri)) {
            old.close();
            assertTrue(Files.exists(Path.of(uri.path())), "closing the old listener removed the newer one's file");
            try (Connection client = transport.connect(uri, TIMEOUT); Connection server = newer.accept()) {
                assertEquals(client.peer().uid(), server.peer().uid(), "the newer listener serves");
            }
        }
    }

    @Test
    void connectToMissingSocketFailsNamingTheUri() {
        TransportUri uri = uri("nobody.sock");
        IOException e = assertThrows(IOException.class, () -> transport.connect(uri, TIMEOUT));
        assertTrue(e.getMessage().contains(uri.toString()), e.getMessage());
    }

    /** Linux answers EAGAIN at once when the backlog is full (see TimedConnect): prompt, named, no hang. */
    @Test
    void connectToAFullBacklogFailsPromptlyNamingTheUri() throws IOException {
        TransportUri uri = uri("full.sock");
        try (ServerSocketChannel deaf = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            deaf.bind(UnixDomainSocketAddress.of(uri.path()), 1);
            try (SocketChannel a = SocketChannel.open(deaf.getLocalAddress());
                 SocketChannel b = SocketChannel.open(deaf.getLocalAddress())) {
                assertTrue(a.isConnected() && b.isConnected(), "backlog of 1 holds two pending connections");
                long start = System.nanoTime();
                IOException e = assertThrows(IOException.class, () -> transport.connect(uri, TIMEOUT));
                assertTrue(System.nanoTime() - start < TIMEOUT.toNanos(), "waited past the timeout");
                assertTrue(e.getMessage().contains(uri.toString()), e.getMessage());
            }
        }
    }

    private TransportUri uri(String name) {
        return TransportUri.parse("unix://" + dir.resolve(name));
    }
}
