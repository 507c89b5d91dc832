package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameChannel;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

/** Sessions over a connection that carries nothing, for tests of the session's parts without a frontend. */
final class SessionTestKit {
    private SessionTestKit() {
    }

    /** Settings as a two-core machine with no properties set has them. */
    static BackendSettings settings() {
        return BackendSettings.fromProperties(new Properties(), 2);
    }

    static Session session(CudaDriver driver, BackendSettings settings, SharedWindow window, QuietConnection c) {
        return session(driver, settings, window, c, new io.gpusockets.backend.tenant.Tenant("test",
                io.gpusockets.backend.tenant.TenantLimits.UNLIMITED));
    }

    static Session session(CudaDriver driver, BackendSettings settings, SharedWindow window, QuietConnection c,
                           io.gpusockets.backend.tenant.TenantAccount tenant) {
        return new Session(1, new FrameChannel(c), new DriverHost(driver, "test", 1, 13000), settings, "test-peer", true,
                window, null, tenant);
    }

    static Session session(CudaDriver driver) {
        return session(driver, settings(), null, new QuietConnection());
    }

    /** A connection whose reads wait until it is closed, whose writes are dropped, and whose peer can be made to vanish. */
    static final class QuietConnection implements Connection {
        private final CountDownLatch closed = new CountDownLatch(1);
        volatile boolean peerClosed;

        @Override
        public void write(ByteBuffer... srcs) throws IOException {
            if (closed.getCount() == 0) {
                throw new IOException("closed");
            }
            for (ByteBuffer b : srcs) {
                b.position(b.limit());
            }
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            try {
                closed.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            throw new EOFException("closed");
        }

        @Override
        public PeerInfo peer() {
            return PeerInfo.of("test-peer");
        }

        @Override
        public boolean peerClosed() {
            return peerClosed;
        }

        @Override
        public void close() {
            closed.countDown();
        }
    }
}
