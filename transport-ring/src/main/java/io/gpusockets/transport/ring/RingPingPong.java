package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;

/**
 * A micro-measurement, not a test: 64-byte ping-pong latency and 1 MiB streaming throughput between two
 * threads of this process over one {@code ring://} connection. The numbers depend on the machine, its
 * load and core placement; a benchmark harness can call {@link #pingPong} and {@link #stream} directly.
 *
 * <p>Usage: {@code java --enable-native-access=ALL-UNNAMED -cp ... io.gpusockets.transport.ring.RingPingPong}
 */
public final class RingPingPong {
    private RingPingPong() {
    }

    /** Round-trip times in nanoseconds of {@code rounds} ping-pongs of {@code size} bytes, after a warm-up. */
    public static long[] pingPong(Connection client, Connection server, int size, int warmup, int rounds) throws Exception {
        CompletableFuture<Void> echo = CompletableFuture.runAsync(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(size);
            try {
                for (int i = 0; i < warmup + rounds; i++) {
                    server.readFully(b.clear());
                    server.write(b.flip());
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, Thread.ofPlatform().name("pong")::start);
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        long[] rtt = new long[rounds];
        for (int i = 0; i < warmup + rounds; i++) {
            long start = System.nanoTime();
            client.write(b.clear());
            client.readFully(b.clear());
            if (i >= warmup) {
                rtt[i - warmup] = System.nanoTime() - start;
            }
        }
        echo.join();
        return rtt;
    }

    /** Bytes per second streaming {@code total} bytes in writes of {@code chunk} from client to server. */
    public static double stream(Connection client, Connection server, int chunk, long total) throws Exception {
        CompletableFuture<Void> sink = CompletableFuture.runAsync(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(chunk);
            try {
                for (long got = 0; got < total; got += chunk) {
                    server.readFully(b.clear());
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, Thread.ofPlatform().name("sink")::start);
        ByteBuffer b = ByteBuffer.allocateDirect(chunk);
        long start = System.nanoTime();
        for (long sent = 0; sent < total; sent += chunk) {
            client.write(b.clear());
        }
        sink.join();
        return total * 1e9 / (System.nanoTime() - start);
    }

    public static void main(String[] args) throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse("ring://pingpong-" + ProcessHandle.current().pid()
                + (args.length > 0 ? "?size=" + args[0] : ""));
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5)); Connection server = accepted.join()) {
                long[] rtt = pingPong(client, server, 64, 200_000, 1_000_000);
                Arrays.sort(rtt);
                System.out.printf(Locale.ROOT, "ping-pong 64 B: round trip p50 %.2f us, p99 %.2f us, p99.9 %.2f us (one way ~ p50/2 = %.2f us)%n",
                        rtt[rtt.length / 2] / 1e3, rtt[rtt.length * 99 / 100] / 1e3, rtt[rtt.length * 999 / 1000] / 1e3,
                        rtt[rtt.length / 2] / 2e3);
                stream(client, server, 1 << 20, 2L << 30);
                double bps = stream(client, server, 1 << 20, 8L << 30);
                System.out.printf(Locale.ROOT, "stream 1 MiB writes: %.2f GB/s (%.2f GiB/s)%n", bps / 1e9, bps / (1L << 30));
            }
        }
    }
}
