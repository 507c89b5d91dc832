package io.gpusockets.transport.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Producer and consumer threads on a small ring, writes and reads of seeded random sizes (gathering
 * writes, heap and direct buffers), compared by checksum: torn, lost, duplicated or reordered bytes all
 * change it.
 */
class RingStressTest {
    private static final long TOTAL = 48L << 20;

    @ParameterizedTest(name = "seed {0}")
    @ValueSource(longs = {1, 2, 3})
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void everyByteArrivesInOrderUnderRandomSizes(long seed) throws Exception {
        RingTransport transport = new RingTransport();
        TransportUri uri = TransportUri.parse("ring://stress-" + ProcessHandle.current().pid() + "-" + seed + "?size=4k");
        try (Listener listener = transport.listen(uri)) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            try (Connection client = transport.connect(uri, Duration.ofSeconds(5));
                 Connection server = accepted.get(5, TimeUnit.SECONDS)) {
                CompletableFuture<Long> produced = CompletableFuture.supplyAsync(() -> produce(client, seed));
                long consumed = consume(server, seed + 100);
                assertEquals(produced.get(60, TimeUnit.SECONDS), consumed, "checksum");
            }
        }
    }

    private static long produce(Connection c, long seed) {
        Random random = new Random(seed);
        CRC32 crc = new CRC32();
        try {
            for (long sent = 0; sent < TOTAL; ) {
                int parts = 1 + random.nextInt(3);
                ByteBuffer[] srcs = new ByteBuffer[parts];
                for (int i = 0; i < parts; i++) {
                    int size = random.nextInt(4) == 0 ? random.nextInt(20_000) : random.nextInt(200);
                    byte[] b = new byte[(int) Math.min(size, TOTAL - sent)];
                    random.nextBytes(b);
                    crc.update(b);
                    sent += b.length;
                    srcs[i] = random.nextBoolean() ? ByteBuffer.wrap(b) : ByteBuffer.allocateDirect(b.length).put(b).flip();
                }
                c.write(srcs);
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        return crc.getValue();
    }

    private static long consume(Connection c, long seed) throws Exception {
        Random random = new Random(seed);
        CRC32 crc = new CRC32();
        ByteBuffer buffer = ByteBuffer.allocate(30_000);
        for (long received = 0; received < TOTAL; ) {
            int size = (int) Math.min(1 + random.nextInt(random.nextBoolean() ? 100 : 30_000), TOTAL - received);
            c.readFully(buffer.clear().limit(size));
            crc.update(buffer.flip());
            received += size;
        }
        return crc.getValue();
    }
}
