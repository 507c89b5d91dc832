package io.gpusockets.transport.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TestCertificates;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An accepted connection whose handshake ran on a virtual thread waits, once served by platform threads
 * ({@link Connection#platformThreadsOnly}), in a blocking read in the kernel, not in a poll after a read
 * that found nothing: the JDK puts a channel a virtual thread touched in non-blocking mode for good, which
 * cost every call of a session two more system calls ({@link ChannelReactor}). Where a thread waits is
 * read from its stack: the JDK's blocking-mode read of a forced non-blocking socket parks in
 * {@code sun.nio.ch.Net.poll}; a real blocking read waits in the read itself.
 */
@Timeout(30)
class ServedChannelModeTest {
    @TempDir
    Path dir;

    private TransportUri uri(String scheme) {
        return TransportUri.parse(scheme.equals("unix") ? "unix://" + dir.resolve("s.sock") : "tcp://127.0.0.1:0");
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "unix"})
    void aServedAcceptedEndWaitsInABlockingRead(String scheme) throws Exception {
        SocketTransport transport = new SocketTransport();
        try (Listener listener = transport.listen(uri(scheme));
             Connection client = transport.connect(listener.address(), Duration.ofSeconds(5));
             Connection server = listener.accept()) {
            // the handshake: a read and a write on a virtual thread, then the hand-over to platform threads
            handshakeOnAVirtualThread(server, client);
            assertServedReadBlocksInTheKernel(server, client);
        }
    }

    @Test
    void aServedTlsEndWaitsInABlockingRead() throws Exception {
        TestCertificates certs = TestCertificates.get();
        TlsTransport transport = new TlsTransport();
        try (Listener listener = transport.listen(TransportUri.parse("tls://127.0.0.1:0"), certs.serverOptions(false, false))) {
            // the client's connect runs the TLS handshake, which needs the server end accepted meanwhile
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (Connection client = transport.connect(listener.address(), Duration.ofSeconds(20), certs.clientOptions(null));
                 Connection server = accepted.get(20, TimeUnit.SECONDS)) {
                handshakeOnAVirtualThread(server, client);
                assertServedReadBlocksInTheKernel(server, client);
            }
        }
    }

    /**
     * The JDK behaviour the reactor works around, so that the check above is known to tell the two apart:
     * a channel a virtual thread has read waits in a poll when a platform thread reads it later.
     */
    @Test
    void aChannelAVirtualThreadReadWaitsInAPollOnPlatformThreads() throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
             SocketChannel client = SocketChannel.open(server.getLocalAddress());
             SocketChannel accepted = server.accept()) {
            client.write(ByteBuffer.wrap(new byte[] {1}));
            Thread v = Thread.ofVirtual().start(() -> {
                try {
                    accepted.read(ByteBuffer.allocate(1));
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            v.join();
            CompletableFuture<Void> read = new CompletableFuture<>();
            Thread reader = Thread.ofPlatform().daemon().start(() -> {
                try {
                    accepted.read(ByteBuffer.allocate(1));
                    read.complete(null);
                } catch (IOException e) {
                    read.completeExceptionally(e);
                }
            });
            List<String> frames = waitingFrames(reader);
            assertTrue(frames.stream().anyMatch(f -> f.equals("sun.nio.ch.Net.poll")),
                    "a platform read of a channel a virtual thread used should wait in Net.poll: " + frames);
            client.write(ByteBuffer.wrap(new byte[] {2}));
            read.get(5, TimeUnit.SECONDS);
        }
    }

    /** A read and a write of the accepting end on a virtual thread, then its hand-over to platform threads. */
    private static void handshakeOnAVirtualThread(Connection server, Connection client) throws Exception {
        CompletableFuture<Void> done = new CompletableFuture<>();
        Thread.ofVirtual().start(() -> {
            try {
                server.readFully(ByteBuffer.allocate(4));
                server.write(ByteBuffer.wrap(new byte[] {5, 6, 7, 8}));
                server.platformThreadsOnly();
                done.complete(null);
            } catch (IOException | RuntimeException e) {
                done.completeExceptionally(e);
            }
        });
        client.write(ByteBuffer.wrap(new byte[] {1, 2, 3, 4}));
        client.readFully(ByteBuffer.allocate(4));
        done.get(20, TimeUnit.SECONDS);
    }

    private static void assertServedReadBlocksInTheKernel(Connection server, Connection client) throws Exception {
        ByteBuffer got = ByteBuffer.allocate(3);
        CompletableFuture<Void> read = new CompletableFuture<>();
        Thread reader = Thread.ofPlatform().daemon().start(() -> {
            try {
                server.readFully(got);
                read.complete(null);
            } catch (IOException e) {
                read.completeExceptionally(e);
            }
        });
        List<String> frames = waitingFrames(reader);
        assertFalse(frames.stream().anyMatch(f -> f.equals("sun.nio.ch.Net.poll")),
                "a served connection's platform read should not wait in a poll: " + frames);
        assertFalse(frames.stream().anyMatch(f -> f.startsWith(ChannelReactor.class.getName())),
                "a served connection's read should not go through the reactor: " + frames);
        client.write(ByteBuffer.wrap(new byte[] {9, 10, 11}));
        read.get(5, TimeUnit.SECONDS);
        assertArrayEquals(new byte[] {9, 10, 11}, got.array());
    }

    /**
     * The frames of {@code t} once it waits in a read of the JDK's socket code (or our reactor), as
     * "class.method" strings; fails after 5 s.
     */
    private static List<String> waitingFrames(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            List<String> frames = Arrays.stream(t.getStackTrace()).map(f -> f.getClassName() + "." + f.getMethodName()).toList();
            if (frames.stream().anyMatch(f -> f.equals("sun.nio.ch.Net.poll") || f.endsWith(".read0")
                    || f.startsWith("java.util.concurrent.CompletableFuture"))) {
                return frames;
            }
            Thread.sleep(10);
        }
        throw new AssertionError("the reader never waited: " + Arrays.toString(t.getStackTrace()));
    }
}
