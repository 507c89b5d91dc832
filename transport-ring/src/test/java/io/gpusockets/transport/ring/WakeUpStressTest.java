package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The waiter-flag protocol of {@link Doorbell} under a strategy that never spins and sleeps for an hour: every
 * wait is a futex sleep that only the other side's FUTEX_WAKE ends, so a single lost wake-up (a publish that
 * missed the raised flag) hangs the test until its timeout, instead of costing a short timeout's latency.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class WakeUpStressTest {
    private static final long HOUR = TimeUnit.HOURS.toNanos(1);
    private static int next;

    @Test
    void pingPongWithNoSpinLosesNoWakeUp() throws Exception {
        withConnection("pp", "?size=4k", (client, server) -> {
            int rounds = 20_000;
            CompletableFuture<Void> echo = CompletableFuture.runAsync(() -> {
                ByteBuffer b = ByteBuffer.allocateDirect(64);
                try {
                    for (int i = 0; i < rounds; i++) {
                        server.readFully(b.clear());
                        server.write(b.flip());
                    }
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }, Thread.ofPlatform()::start);
            ByteBuffer b = ByteBuffer.allocateDirect(64);
            for (int i = 0; i < rounds; i++) {
                b.clear().putLong(0, i);
                client.write(b);
                client.readFully(b.clear());
                assertEquals(i, b.getLong(0), "echo of round " + i);
            }
            echo.get(60, TimeUnit.SECONDS);
        });
    }

    @Test
    void streamThroughATinyRingWithNoSpinLosesNoWakeUp() throws Exception {
        // 4 KiB rings and writes of up to 10 KiB: the writer sleeps on a full ring as often as the reader on an empty one
        withConnection("stream", "?size=4k", (client, server) -> {
            long total = 16L << 20;
            CompletableFuture<Long> produced = CompletableFuture.supplyAsync(() -> {
                long sum = 0;
                java.util.Random random = new java.util.Random(7);
                try {
                    for (long sent = 0; sent < total; ) {
                        byte[] piece = new byte[(int) Math.min(1 + random.nextInt(10_000), total - sent)];
                        random.nextBytes(piece);
                        for (byte x : piece) {
                            sum = sum * 31 + x;
                        }
                        client.write(ByteBuffer.wrap(piece));
                        sent += piece.length;
                    }
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
                return sum;
            }, Thread.ofPlatform()::start);
            long sum = 0;
            java.util.Random random = new java.util.Random(8);
            ByteBuffer b = ByteBuffer.allocate(10_000);
            for (long got = 0; got < total; ) {
                b.clear().limit((int) Math.min(1 + random.nextInt(10_000), total - got));
                server.readFully(b);
                for (int i = 0; i < b.limit(); i++) {
                    sum = sum * 31 + b.get(i);
                }
                got += b.limit();
            }
            assertEquals(produced.get(60, TimeUnit.SECONDS), sum, "checksum");
        });
    }

    @Test
    void spinPropertyIsCheckedAndDefaults() {
        String before = System.getProperty(BackoffIdleStrategy.SPIN_MICROS_PROP);
        try {
            System.clearProperty(BackoffIdleStrategy.SPIN_MICROS_PROP);
            assertEquals(BackoffIdleStrategy.DEFAULT_SPIN_NANOS, BackoffIdleStrategy.spinNanosFromProperties());
            System.setProperty(BackoffIdleStrategy.SPIN_MICROS_PROP, "0");
            assertEquals(0, BackoffIdleStrategy.spinNanosFromProperties());
            System.setProperty(BackoffIdleStrategy.SPIN_MICROS_PROP, "7");
            assertEquals(7_000, BackoffIdleStrategy.spinNanosFromProperties());
            for (String bad : new String[] {"-1", "1001", "fast"}) {
                System.setProperty(BackoffIdleStrategy.SPIN_MICROS_PROP, bad);
                assertThrows(IllegalArgumentException.class, BackoffIdleStrategy::spinNanosFromProperties, bad);
            }
            assertThrows(IllegalArgumentException.class, () -> new BackoffIdleStrategy(-1, HOUR, 1_000));
        } finally {
            if (before == null) {
                System.clearProperty(BackoffIdleStrategy.SPIN_MICROS_PROP);
            } else {
                System.setProperty(BackoffIdleStrategy.SPIN_MICROS_PROP, before);
            }
        }
    }

    @Test
    void loadavgRunnableCountAndCpuListsAreParsed() {
        assertEquals(3, CpuPressure.parseRunnable("0.28 1.05 1.68 3/178 12345\n"));
        assertEquals(12, CpuPressure.parseRunnable("8.37 5.94 3.60 12/261 23413"));
        assertThrows(IllegalArgumentException.class, () -> CpuPressure.parseRunnable("garbage"));
        assertEquals(2, CpuPressure.parseCpuList("0-1\n"));
        assertEquals(7, CpuPressure.parseCpuList("0-3,8,10-11"));
        assertEquals(1, CpuPressure.parseCpuList("0"));
        assertThrows(IllegalArgumentException.class, () -> CpuPressure.parseCpuList("3-1"));
        assertThrows(NumberFormatException.class, () -> CpuPressure.parseCpuList("x"));
    }

    private interface Body {
        void run(Connection client, Connection server) throws Exception;
    }

    private static void withConnection(String name, String query, Body body) throws Exception {
        RingTransport transport = new RingTransport(() -> new BackoffIdleStrategy(0, HOUR, 1_000_000));
        TransportUri uri = TransportUri.parse("ring://wake-" + name + "-" + ProcessHandle.current().pid() + "-" + next++ + query);
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5));
                 Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                body.run(client, server);
            }
        }
    }
}
