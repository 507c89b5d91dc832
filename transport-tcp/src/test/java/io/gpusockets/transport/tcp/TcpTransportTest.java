package io.gpusockets.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(30)
class TcpTransportTest {
    private final SocketTransport transport = new SocketTransport();

    @Test
    void listenerOnPortZeroReportsTheRealPort() throws IOException {
        try (Listener listener = transport.listen(TransportUri.parse("tcp://127.0.0.1:0"))) {
            TransportUri address = listener.address();
            assertEquals("tcp", address.scheme());
            assertEquals("127.0.0.1", address.host());
            assertNotEquals(0, address.port());
            try (Connection c = transport.connect(address, Duration.ofSeconds(5)); Connection s = listener.accept()) {
                assertEquals("tcp://127.0.0.1:" + address.port(), c.peer().description());
                assertTrue(s.peer().description().startsWith("tcp://127.0.0.1:"), s.peer().description());
                assertTrue(c.peer().uid().isEmpty(), "TCP cannot prove a uid");
            }
        }
    }

    @Test
    void ipv6LoopbackAddressKeepsItsBrackets() throws IOException {
        Listener listener;
        try {
            listener = transport.listen(TransportUri.parse("tcp://[::1]:0"));
        } catch (IOException noIpv6) {
            return; // the host has no IPv6 loopback; nothing to check
        }
        try (listener; Connection c = transport.connect(listener.address(), Duration.ofSeconds(5))) {
            assertTrue(listener.address().rest().startsWith("[::1]:"), listener.address().toString());
            assertTrue(c.peer().description().startsWith("tcp://[0:0:0:0:0:0:0:1]:")
                    || c.peer().description().startsWith("tcp://[::1]:"), c.peer().description());
        }
    }

    @Test
    void secondListenerOnABoundPortFailsNamingTheAddress() throws IOException {
        try (Listener first = transport.listen(TransportUri.parse("tcp://127.0.0.1:0"))) {
            IOException e = assertThrows(IOException.class, () -> transport.listen(first.address()).close());
            assertTrue(e.getMessage().contains(first.address().toString()), e.getMessage());
        }
    }

    /**
     * A listener that never accepts and has a backlog of 1: once its queue is full Linux drops further
     * SYNs, so a connect hangs in the kernel and only our deadline ends it.
     */
    @Test
    @Timeout(10)
    void connectGivesUpAtTheTimeoutWhenTheListenerNeverAnswers() throws IOException {
        try (ServerSocketChannel deaf = ServerSocketChannel.open()) {
            deaf.bind(new InetSocketAddress("127.0.0.1", 0), 1);
            TransportUri uri = TransportUri.parse("tcp://127.0.0.1:" + ((InetSocketAddress) deaf.getLocalAddress()).getPort());
            Duration timeout = Duration.ofMillis(300);
            List<Connection> queued = new ArrayList<>();
            try {
                for (int attempt = 0; attempt < 16; attempt++) {
                    long start = System.nanoTime();
                    try {
                        queued.add(transport.connect(uri, timeout));
                    } catch (SocketTimeoutException e) {
                        Duration took = Duration.ofNanos(System.nanoTime() - start);
                        assertTrue(took.compareTo(timeout) >= 0, "gave up early: " + took);
                        assertTrue(took.compareTo(timeout.plusSeconds(2)) < 0, "gave up late: " + took);
                        assertTrue(e.getMessage().contains(uri.toString()), e.getMessage());
                        return;
                    }
                }
                fail("16 connects to a listener with backlog 1 all succeeded; no timeout observed");
            } finally {
                queued.forEach(Connection::close);
            }
        }
    }

    @Test
    void connectingToPortZeroIsRefusedAsAUsageError() {
        assertThrows(IllegalArgumentException.class,
                () -> transport.connect(TransportUri.parse("tcp://127.0.0.1:0"), Duration.ofSeconds(1)));
    }

    @Test
    void schemesOtherThanTcpAndUnixAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> transport.listen(TransportUri.parse("vsock://any:5000")));
    }
}
