package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.PipeConnection;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.Opcodes;
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

    static Session session(CudaDriver driver, BackendSettings settings, SharedWindow window, Connection c) {
        return session(driver, settings, window, c, new io.gpusockets.backend.tenant.Tenant("test",
                io.gpusockets.backend.tenant.TenantLimits.UNLIMITED));
    }

    static Session session(CudaDriver driver, BackendSettings settings, SharedWindow window, Connection c,
                           io.gpusockets.backend.tenant.TenantAccount tenant) {
        return new Session(1, new FrameChannel(c), new DriverHost(driver, "test", 1, 13000), settings, "test-peer", true,
                window, null, tenant);
    }

    static Session session(CudaDriver driver) {
        return session(driver, settings(), null, new QuietConnection());
    }

    /** Settings with {@code limits}. */
    static BackendSettings settings(SessionLimits limits) {
        return settings().withLimits(limits);
    }

    /** Limits of {@code lanes} lanes, {@code budget} body bytes, {@code chunk}-byte chunks and {@code maxBulk}-byte bulk inputs. */
    static SessionLimits limits(int lanes, int budget, int chunk, long maxBulk) {
        SessionLimits d = SessionLimits.DEFAULT;
        return new SessionLimits(lanes, budget, d.maxCallBody(), chunk, maxBulk, d.maxOutBytes(), true);
    }

    /**
     * A session served on its own reader thread over an in-memory pipe, and the frontend's end of the
     * pipe ({@link #peer}), through which a test sends the frames a frontend would.
     */
    static final class Served implements AutoCloseable {
        final Session session;
        final FrameChannel peer;
        final PipeEnd backendEnd;
        final Thread reader;

        Served(CudaDriver driver, SessionLimits limits) throws IOException {
            PipeConnection.Pair pair = PipeConnection.pair();
            this.peer = new FrameChannel(pair.left());
            this.backendEnd = new PipeEnd(pair.right());
            this.session = session(driver, settings(limits), null, backendEnd);
            this.reader = Thread.ofPlatform().daemon().name("test-session-reader").start(session::serve);
        }

        /** Sends a call frame awaiting its reply, with a body of little-endian longs. */
        void call(String function, int lane, long requestId, long... args) throws IOException {
            ByteBuffer body = ByteBuffer.allocate(8 * args.length).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            for (long a : args) {
                body.putLong(a);
            }
            peer.send(ApiTable.get().byName(function).opcode(), 0, lane, requestId, body.flip());
        }

        /** Sends a DATA frame of {@code bytes} bytes for request {@code requestId} on {@code lane}. */
        void data(int lane, long requestId, int bytes) throws IOException {
            peer.send(Opcodes.DATA, 0, lane, requestId, ByteBuffer.allocate(bytes));
        }

        /** Whether the session's reader ended within {@code millis}. */
        boolean ended(long millis) throws InterruptedException {
            reader.join(millis);
            return !reader.isAlive();
        }

        @Override
        public void close() throws InterruptedException {
            peer.close();
            backendEnd.close();
            reader.join(30_000);
        }
    }

    /** The backend's end of a pipe; {@link #peerClosed} says what {@link #vanish} made it say, as a transport that can tell would. */
    static final class PipeEnd implements Connection {
        private final PipeConnection pipe;
        volatile boolean peerClosed;

        PipeEnd(PipeConnection pipe) {
            this.pipe = pipe;
        }

        @Override
        public void write(ByteBuffer... srcs) throws IOException {
            pipe.write(srcs);
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            pipe.readFully(dst);
        }

        @Override
        public PeerInfo peer() {
            return pipe.peer();
        }

        @Override
        public boolean peerClosed() {
            return peerClosed;
        }

        @Override
        public void close() {
            pipe.close();
        }
    }

    /** A connection whose reads wait until it is closed, whose writes are dropped, and whose peer can be made to vanish. */
    static class QuietConnection implements Connection {
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
