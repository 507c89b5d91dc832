package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class RingConnectionTest {
    private static int next;

    @Test
    void sleepingPlatformReaderIsWokenByTheWriterNotByItsTimeout() throws Exception {
        // a 10 s futex bound: only FUTEX_WAKE behind the waiter flag can make the read prompt
        RingTransport transport = new RingTransport(() -> new BackoffIdleStrategy(10, TimeUnit.SECONDS.toNanos(10), 1_000_000));
        TransportUri uri = uri("wake");
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = accept(listener);
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5)); Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                for (int round = 0; round < 3; round++) {
                    CompletableFuture<Long> reading = CompletableFuture.supplyAsync(() -> {
                        try {
                            server.readFully(ByteBuffer.allocate(8));
                            return System.nanoTime();
                        } catch (IOException e) {
                            throw new RuntimeException(e);
                        }
                    }, Thread.ofPlatform()::start);
                    Thread.sleep(200); // the reader is asleep in the futex by now
                    long sent = System.nanoTime();
                    client.write(ByteBuffer.allocate(8));
                    long latency = reading.get(5, TimeUnit.SECONDS) - sent;
                    assertTrue(latency < TimeUnit.MILLISECONDS.toNanos(500), "woken after " + latency / 1_000_000 + " ms");
                }
            }
        }
    }

    @Test
    void bothSidesSeeOneSharedWindowHandedOutOnceAndUsableUntilReleased() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse(uri("window") + "&window=64k");
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = accept(listener);
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5)); Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                var clientWindow = client.takeSharedWindow().orElseThrow();
                var serverWindow = server.takeSharedWindow().orElseThrow();
                assertTrue(client.takeSharedWindow().isEmpty(), "handed out once");
                assertEquals(64 << 10, clientWindow.segment().byteSize());
                assertEquals(64 << 10, serverWindow.segment().byteSize());
                clientWindow.segment().set(java.lang.foreign.ValueLayout.JAVA_LONG, 4096, 0x1122334455667788L);
                assertEquals(0x1122334455667788L, serverWindow.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 4096));
                // The window does not share bytes with the rings: traffic leaves it alone.
                client.write(ByteBuffer.allocate(60_000));
                server.readFully(ByteBuffer.allocate(60_000));
                assertEquals(0x1122334455667788L, serverWindow.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 4096));
                server.close();
                // Closing the connection leaves a taken window mapped for its user...
                assertEquals(0x1122334455667788L, serverWindow.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 4096));
                serverWindow.release();
                serverWindow.release();
                // ...until released.
                assertThrows(IllegalStateException.class,
                        () -> serverWindow.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 4096));
                clientWindow.release();
            }
        }
    }

    @Test
    void windowZeroMeansNoWindow() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse(uri("nowindow") + "&window=0");
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = accept(listener);
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5)); Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                assertTrue(client.takeSharedWindow().isEmpty());
                assertTrue(server.takeSharedWindow().isEmpty());
            }
        }
    }

    @Test
    void sharedFileIsUnlinkedOnceBothSidesMappedIt() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = uri("unlink");
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = accept(listener);
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5)); Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                for (Path dir : new Path[] {Path.of("/dev/shm"), Path.of(System.getProperty("java.io.tmpdir"))}) {
                    if (Files.isDirectory(dir)) {
                        try (Stream<Path> files = Files.list(dir)) {
                            assertEquals(0, files.filter(p -> p.getFileName().toString()
                                    .startsWith("gpusockets-ring-" + RingAddress.of(uri).name() + "-")).count(), "left in " + dir);
                        }
                    }
                }
                byte[] hello = {1, 2, 3};
                client.write(ByteBuffer.wrap(hello));
                ByteBuffer in = ByteBuffer.allocate(3);
                server.readFully(in);
                assertArrayEquals(hello, in.array());
            }
        }
    }

    @Test
    void aPeerOfAnotherUidIsRefused() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = uri("uid");
        try (Listener listener = transport.listen(uri)) {
            int other = PeerCredentials.OWN_UID.orElse(0) + 1;
            System.setProperty(PeerCredentials.PEER_UID_PROP_NAME, String.valueOf(other));
            try {
                IOException e = assertThrows(IOException.class, () -> transport.connect(uri, Duration.ofSeconds(2)).close());
                assertTrue(e.getMessage().contains("not admitted"), String.valueOf(e));
            } finally {
                System.clearProperty(PeerCredentials.PEER_UID_PROP_NAME);
            }
        }
    }

    @Test
    void listeningTwiceOnOneNameFails() throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = uri("twice");
        try (Listener listener = transport.listen(uri)) {
            assertThrows(IOException.class, () -> transport.listen(uri).close());
        }
    }

    private static TransportUri uri(String what) {
        return TransportUri.parse("ring://conn-" + what + "-" + ProcessHandle.current().pid() + "-" + (next++) + "?size=64k");
    }

    private static CompletableFuture<Connection> accept(Listener listener) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return listener.accept();
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        });
    }
}
