package io.gpusockets.benchmarks.jmh;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.transport.ring.RingTransport;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;

/** Both ends of one {@code ring://} connection in this process (shared memory under /dev/shm). */
record RingPair(Listener listener, Connection client, Connection server) implements AutoCloseable {
    private static final AtomicInteger NEXT = new AtomicInteger();

    static RingPair open() throws IOException {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse("ring://jmh-" + ProcessHandle.current().pid() + "-" + NEXT.incrementAndGet());
        Listener listener = transport.listen(uri);
        CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                return listener.accept();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        Connection client = transport.connect(uri, Duration.ofSeconds(10));
        return new RingPair(listener, client, accepted.join());
    }

    @Override
    public void close() throws IOException {
        client.close();
        server.close();
        listener.close();
    }
}
