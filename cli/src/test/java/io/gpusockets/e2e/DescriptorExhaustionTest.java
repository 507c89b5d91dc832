package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.net.InetSocketAddress;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A backend that runs out of file descriptors (accept fails with EMFILE) keeps its accept loop: once
 * the descriptors are free again, a frontend is served.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DescriptorExhaustionTest {
    /** Low enough to run out quickly, high enough for the JVM to start and load what it needs. */
    private static final int DESCRIPTOR_LIMIT = 256;

    @Test
    void acceptSurvivesRunningOutOfDescriptors() throws Exception {
        try (BackendProcess backend = BackendProcess.startWithDescriptorLimit(DESCRIPTOR_LIMIT)) {
            // one served frontend first, so that every class a session needs is loaded while descriptors last
            assertEquals(1, deviceCount(backend.tcp()));
            TransportUri uri = TransportUri.parse(backend.tcp());
            InetSocketAddress address = new InetSocketAddress(uri.host(), uri.port());
            List<SocketChannel> idle = new ArrayList<>();
            try {
                // more connections than the backend has descriptors left: it accepts until it has none
                long spare = DESCRIPTOR_LIMIT - backend.openDescriptors();
                for (int i = 0; i < spare + 40; i++) {
                    idle.add(SocketChannel.open(address));
                }
                backend.awaitLog("Too many open files", 20_000);
            } finally {
                for (SocketChannel c : idle) {
                    c.close();
                }
            }
            assertTrue(backend.alive(), "backend process died");
            CompletableFuture<Integer> served = CompletableFuture.supplyAsync(() -> {
                try {
                    return deviceCount(backend.tcp());
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            assertEquals(1, served.get(30, TimeUnit.SECONDS), "a frontend is served once descriptors are free again");
        }
    }

    private static int deviceCount(String uri) throws Exception {
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            return new Cuda(d).deviceCount();
        }
    }
}
