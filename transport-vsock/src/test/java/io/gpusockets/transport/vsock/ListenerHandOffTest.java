package io.gpusockets.transport.vsock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/**
 * A JDK listening socket found by its address ({@link DescriptorPassing#findListeningSocket}), duplicated, its
 * channel closed, and served from the copy ({@link DescriptorPassing#adoptListener}), as a backend taken over hands
 * its tcp:// and unix:// listeners on: the socket stays bound through the close, a client that connected before the
 * copy was served is accepted from the backlog, and peers are described as the JDK transports describe them.
 */
class ListenerHandOffTest {
    @Test
    void aTcpListeningSocketFoundByItsAddressServesOnFromItsCopy() throws Exception {
        ServerSocketChannel jdk = ServerSocketChannel.open(StandardProtocolFamily.INET);
        jdk.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        InetSocketAddress bound = (InetSocketAddress) jdk.getLocalAddress();
        OptionalInt fd = DescriptorPassing.findListeningSocket(bound);
        assertTrue(fd.isPresent(), "found " + bound);
        int copy = DescriptorPassing.duplicate(fd.getAsInt());
        jdk.close();
        try (SocketChannel early = SocketChannel.open(bound); // waits in the backlog: nobody accepts now
             Listener l = DescriptorPassing.adoptListener(copy, TransportUri.parse("tcp://127.0.0.1:" + bound.getPort()))) {
            try (Connection c = l.accept()) {
                assertTrue(c.peer().description().startsWith("tcp://127.0.0.1:"), c.peer().description());
                assertEquals("tcp", c.peer().transport());
                roundTrip(early, c);
            }
        }
    }

    @Test
    void aUnixListeningSocketKeepsItsFileAndTellsThePeersUid() throws Exception {
        Path dir = Files.createTempDirectory("listener-hand-off");
        Path path = dir.resolve("l.sock");
        ServerSocketChannel jdk = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        jdk.bind(UnixDomainSocketAddress.of(path));
        OptionalInt fd = DescriptorPassing.findListeningSocket(jdk.getLocalAddress());
        assertTrue(fd.isPresent());
        int copy = DescriptorPassing.duplicate(fd.getAsInt());
        jdk.close(); // a JDK close neither shuts the socket down nor removes its file
        assertTrue(Files.exists(path));
        try (Listener l = DescriptorPassing.adoptListener(copy, TransportUri.parse("unix://" + path));
             SocketChannel client = SocketChannel.open(UnixDomainSocketAddress.of(path));
             Connection c = l.accept()) {
            assertTrue(c.peer().uid().isPresent(), "uid from SO_PEERCRED");
            assertEquals("unix", c.peer().transport());
            roundTrip(client, c);
        } finally {
            Files.deleteIfExists(path);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void noListeningSocketAtAnAddressIsEmptyAndOtherSchemesAreRefused() throws Exception {
        assertTrue(DescriptorPassing.findListeningSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 1)).isEmpty());
        int[] pair = DescriptorPassing.socketPair();
        DescriptorPassing.close(pair[1]);
        assertThrows(IOException.class, () -> DescriptorPassing.adoptListener(pair[0], TransportUri.parse("vsock://1:2")));
    }

    private static void roundTrip(SocketChannel client, Connection server) throws IOException {
        client.write(ByteBuffer.wrap(new byte[] {1, 2, 3}));
        ByteBuffer in = ByteBuffer.allocateDirect(3);
        server.readFully(in);
        assertEquals(2, in.get(1));
        server.write(ByteBuffer.wrap(new byte[] {9}));
        ByteBuffer back = ByteBuffer.allocate(1);
        while (back.hasRemaining()) {
            client.read(back);
        }
        assertEquals(9, back.get(0));
    }
}
