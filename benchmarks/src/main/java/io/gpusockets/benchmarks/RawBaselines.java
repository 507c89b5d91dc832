package io.gpusockets.benchmarks;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * What the transports do without GPUsockets on top: ping-pong of 64 bytes over a plain JDK socket
 * and over a transport's Connection (framed by FrameChannel), and one-way streaming in 1 MiB writes.
 * The far side is a thread of this process.
 */
public final class RawBaselines {
    /** Bytes each way per round trip: a 24-byte frame header and a 40-byte body. */
    public static final int PING_BYTES = 64;
    public static final int STREAM_CHUNK = 1 << 20;
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);

    private RawBaselines() {
    }

    /** Plain JDK SocketChannel ping-pong over TCP loopback (TCP_NODELAY) or a Unix socket in {@code tmpDir}. */
    public static PingPong socketPingPong(String scheme, Path tmpDir) throws IOException {
        return new SocketPingPong(scheme, tmpDir);
    }

    private static final class SocketPingPong implements PingPong {
        private final Path socketFile;
        private final ServerSocketChannel server;
        private final SocketChannel client;
        private final SocketChannel peer;
        private final Thread echo;
        private final ByteBuffer out = ByteBuffer.allocateDirect(PING_BYTES);
        private final ByteBuffer in = ByteBuffer.allocateDirect(PING_BYTES);

        SocketPingPong(String scheme, Path tmpDir) throws IOException {
            boolean tcp = scheme.equals("tcp");
            socketFile = tcp ? null : tmpDir.resolve("jdk-pingpong.sock");
            SocketAddress bind = tcp ? new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)
                    : UnixDomainSocketAddress.of(socketFile);
            server = ServerSocketChannel.open(tcp ? StandardProtocolFamily.INET : StandardProtocolFamily.UNIX).bind(bind);
            client = SocketChannel.open(server.getLocalAddress());
            peer = server.accept();
            if (tcp) {
                client.setOption(StandardSocketOptions.TCP_NODELAY, true);
                peer.setOption(StandardSocketOptions.TCP_NODELAY, true);
            }
            echo = Thread.ofPlatform().daemon().name("bench-socket-echo").start(this::echo);
        }

        private void echo() {
            ByteBuffer b = ByteBuffer.allocateDirect(PING_BYTES);
            try {
                while (true) {
                    b.clear();
                    if (!readFully(peer, b)) {
                        return;
                    }
                    b.flip();
                    while (b.hasRemaining()) {
                        peer.write(b);
                    }
                }
            } catch (IOException ignored) {
                // the client closed: the run is over
            }
        }

        @Override
        public void roundTrips(int n, Histogram into) throws IOException {
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                out.clear();
                while (out.hasRemaining()) {
                    client.write(out);
                }
                in.clear();
                if (!readFully(client, in)) {
                    throw new EOFException("echo side closed");
                }
                long t1 = System.nanoTime();
                if (into != null) {
                    into.recordValue(t1 - t0);
                }
            }
        }

        @Override
        public void close() throws IOException {
            try (server; peer; client) {
                client.shutdownOutput();
                join(echo);
            } finally {
                if (socketFile != null) {
                    Files.deleteIfExists(socketFile);
                }
            }
        }
    }

    private static boolean readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            if (ch.read(b) < 0) {
                return false;
            }
        }
        return true;
    }

    /** 64-byte frames through FrameChannel over a Connection of {@code listen}'s transport, echoed by a thread. */
    public static PingPong framePingPong(TransportUri listen) throws IOException {
        Listener listener = Transports.listen(listen);
        try {
            return new FramePingPong(listener);
        } catch (IOException | RuntimeException e) {
            listener.close();
            throw e;
        }
    }

    private static final class FramePingPong implements PingPong {
        private final Listener listener;
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private final Thread echo;
        private final FrameChannel channel;
        private final ByteBuffer body = ByteBuffer.allocateDirect(PING_BYTES - FrameHeader.BYTES);
        private final ByteBuffer reply = ByteBuffer.allocateDirect(PING_BYTES);
        private long requestId;

        FramePingPong(Listener listener) throws IOException {
            this.listener = listener;
            echo = Thread.ofPlatform().daemon().name("bench-frame-echo").start(this::echo);
            channel = new FrameChannel(Transports.connect(listener.address(), CONNECT_TIMEOUT));
        }

        private void echo() {
            try (FrameChannel ch = new FrameChannel(servedByThisThread(listener.accept()))) {
                ByteBuffer b = ByteBuffer.allocateDirect(PING_BYTES).order(ByteOrder.LITTLE_ENDIAN);
                while (true) {
                    FrameHeader h = ch.readHeader();
                    b.clear().limit(h.length());
                    ch.readBody(b);
                    b.flip();
                    ch.send(h.opcode(), FrameHeader.FLAG_REPLY, h.lane(), h.requestId(), b);
                }
            } catch (EOFException done) {
                // the client closed between frames: the run is over
            } catch (Throwable t) {
                failure.set(t);
            }
        }

        @Override
        public void roundTrips(int n, Histogram into) throws IOException {
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                channel.send(1, 0, 0, requestId++, body.clear());
                FrameHeader r = channel.readHeader();
                reply.clear().limit(r.length());
                channel.readBody(reply);
                long t1 = System.nanoTime();
                if (into != null) {
                    into.recordValue(t1 - t0);
                }
            }
        }

        @Override
        public void close() throws IOException {
            try {
                channel.close();
                join(echo);
                rethrow(failure.get());
            } finally {
                listener.close();
            }
        }
    }

    /**
     * An accepted connection that a platform thread serves from the start, as the backend's sessions are
     * served once their handshake is done ({@link Connection#platformThreadsOnly}): the baselines measure the
     * transport as a session uses it.
     */
    private static Connection servedByThisThread(Connection accepted) throws IOException {
        try {
            accepted.platformThreadsOnly();
            return accepted;
        } catch (IOException | RuntimeException e) {
            accepted.close();
            throw e;
        }
    }

    /**
     * GB/s of {@code chunks} 1 MiB writes over a Connection, timed from the first write to the reader's
     * one-byte acknowledgement of the last (after {@code warmupChunks} untimed).
     */
    public static double stream(TransportUri listen, int warmupChunks, int chunks) throws IOException {
        try (Listener listener = Transports.listen(listen)) {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Thread sink = Thread.ofPlatform().daemon().name("bench-stream-sink").start(() -> {
                try (Connection c = servedByThisThread(listener.accept())) {
                    ByteBuffer count = ByteBuffer.allocateDirect(Integer.BYTES);
                    ByteBuffer chunk = ByteBuffer.allocateDirect(STREAM_CHUNK);
                    while (true) {
                        c.readFully(count.clear());
                        for (int i = count.flip().getInt(); i > 0; i--) {
                            c.readFully(chunk.clear());
                        }
                        c.write(ByteBuffer.allocate(1));
                    }
                } catch (EOFException done) {
                    // the client closed between rounds
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
            double gbs;
            try (Connection c = Transports.connect(listener.address(), CONNECT_TIMEOUT)) {
                ByteBuffer chunk = ByteBuffer.allocateDirect(STREAM_CHUNK);
                for (int i = 0; i < chunk.capacity(); i += Long.BYTES) {
                    chunk.putLong(i, i * 0x9E3779B97F4A7C15L);
                }
                streamRound(c, chunk, warmupChunks);
                long t0 = System.nanoTime();
                streamRound(c, chunk, chunks);
                gbs = (double) chunks * STREAM_CHUNK / (System.nanoTime() - t0);
            }
            join(sink);
            rethrow(failure.get());
            return gbs;
        }
    }

    private static void streamRound(Connection c, ByteBuffer chunk, int chunks) throws IOException {
        c.write(ByteBuffer.allocate(Integer.BYTES).putInt(0, chunks));
        for (int i = 0; i < chunks; i++) {
            c.write(chunk.clear());
        }
        c.readFully(ByteBuffer.allocate(1));
    }

    private static void join(Thread t) {
        try {
            t.join(Duration.ofSeconds(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void rethrow(Throwable t) throws IOException {
        if (t instanceof IOException io) {
            throw io;
        }
        if (t != null) {
            throw new IOException("far side failed: " + t, t);
        }
    }
}
