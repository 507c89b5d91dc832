package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.ByteBuffer;
import java.time.Duration;

/** The peer of {@link KilledPeerTest}, run in its own JVM: {@code URI write|idle}. */
public final class RingPeerProcess {
    private RingPeerProcess() {
    }

    public static void main(String[] args) throws Exception {
        Connection c = new RingTransport().connect(TransportUri.parse(args[0]), Duration.ofSeconds(10));
        System.out.println("connected");
        System.out.flush();
        if (args[1].equals("write")) {
            ByteBuffer chunk = ByteBuffer.allocateDirect(64 << 10);
            while (true) {
                c.write(chunk.clear());
            }
        }
        Thread.sleep(Long.MAX_VALUE);
    }
}
