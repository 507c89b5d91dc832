package io.gpusockets.transport.ring;

import static io.gpusockets.protocol.transport.ThreadProbes.awaitStall;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.BufferedReader;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The peer is another JVM, killed with SIGKILL mid-stream: it sets no closed flag, so the survivor
 * learns of the death only from the liveness socket, and must within 2 s.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KilledPeerTest {
    private static final long NOTICE_MILLIS = 2_000;

    private Process peer;

    @AfterEach
    void killPeer() {
        if (peer != null) {
            peer.destroyForcibly();
        }
    }

    @Test
    void readerGetsIoExceptionWhenTheWritingPeerIsKilled() throws Exception {
        try (Listener listener = listen("reader"); Connection c = startPeer(listener, "write")) {
            ByteBuffer in = ByteBuffer.allocateDirect(64 << 10);
            for (int i = 0; i < 200; i++) {
                c.readFully(in.clear()); // the peer is streaming
            }
            peer.destroyForcibly();
            long killed = System.nanoTime();
            IOException e = assertThrows(IOException.class, () -> {
                while (true) {
                    c.readFully(in.clear().limit(1000));
                }
            });
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
            assertTrue(took < NOTICE_MILLIS, "noticed the death after " + took + " ms: " + e);
            assertFalse(e instanceof EOFException && e.getMessage().contains("mid-read"), String.valueOf(e));
        }
    }

    @Test
    void blockedWriterGetsIoExceptionWhenTheIdlePeerIsKilled() throws Exception {
        try (Listener listener = listen("writer"); Connection c = startPeer(listener, "idle")) {
            AtomicLong sent = new AtomicLong();
            CompletableFuture<Void> writing = CompletableFuture.runAsync(() -> {
                ByteBuffer chunk = ByteBuffer.allocateDirect(64 << 10);
                try {
                    while (true) {
                        c.write(chunk.clear());
                        sent.addAndGet(chunk.capacity());
                    }
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            awaitStall(sent::get);
            assertFalse(writing.isDone(), "the writer should be blocked on the full ring");
            peer.destroyForcibly();
            long killed = System.nanoTime();
            ExecutionException e = assertThrows(ExecutionException.class, () -> writing.get(10, TimeUnit.SECONDS));
            long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
            assertTrue(took < NOTICE_MILLIS, "noticed the death after " + took + " ms");
            assertTrue(e.getCause().getCause() instanceof IOException, String.valueOf(e.getCause()));
        }
    }

    private static Listener listen(String what) throws IOException {
        return new RingTransport().listen(TransportUri.parse("ring://killed-" + what + "-" + ProcessHandle.current().pid() + "?size=256k"));
    }

    private Connection startPeer(Listener listener, String mode) throws Exception {
        CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                return listener.accept();
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        });
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        peer = new ProcessBuilder(java.toString(), "--enable-native-access=ALL-UNNAMED",
                "-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"),
                "-cp", System.getProperty("java.class.path"), RingPeerProcess.class.getName(),
                listener.address().toString(), mode)
                .redirectErrorStream(true).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(peer.getInputStream()));
        assertEquals("connected", out.readLine(), "peer output");
        return accepted.get(10, TimeUnit.SECONDS);
    }
}
