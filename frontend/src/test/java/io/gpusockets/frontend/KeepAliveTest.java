package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import jdk.net.ExtendedSocketOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link BackendConnection#keepAlive}: what a resumable TCP connection is given, and that unix sockets are left alone. */
class KeepAliveTest {

    @Test
    void tcpGetsKeepaliveWithShortTimes() throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
             SocketChannel client = SocketChannel.open(server.getLocalAddress());
             SocketChannel accepted = server.accept()) {
            assertFalse(client.getOption(StandardSocketOptions.SO_KEEPALIVE), "off before, as the JDK opens it");
            BackendConnection.keepAlive(client);
            assertTrue(client.getOption(StandardSocketOptions.SO_KEEPALIVE));
            assertEquals(BackendConnection.KEEPALIVE_IDLE_SECONDS, client.getOption(ExtendedSocketOptions.TCP_KEEPIDLE));
            assertEquals(BackendConnection.KEEPALIVE_INTERVAL_SECONDS, client.getOption(ExtendedSocketOptions.TCP_KEEPINTERVAL));
            assertEquals(BackendConnection.KEEPALIVE_PROBES, client.getOption(ExtendedSocketOptions.TCP_KEEPCOUNT));
            assertFalse(accepted.getOption(StandardSocketOptions.SO_KEEPALIVE), "only the socket given");
        }
    }

    @Test
    void unixSocketsAreLeftAlone(@TempDir Path dir) throws Exception {
        UnixDomainSocketAddress address = UnixDomainSocketAddress.of(dir.resolve("s"));
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX).bind(address);
             SocketChannel client = SocketChannel.open(address);
             SocketChannel accepted = server.accept()) {
            BackendConnection.keepAlive(client); // no exception: nothing to set
            assertFalse(client.supportedOptions().contains(StandardSocketOptions.SO_KEEPALIVE));
            assertTrue(client.isConnected() && accepted.isConnected());
        }
    }
}
