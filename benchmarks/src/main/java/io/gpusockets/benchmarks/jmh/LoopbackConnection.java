package io.gpusockets.benchmarks.jmh;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * An in-memory {@link Connection} for one thread: what it writes it reads back, in order, from one
 * direct buffer. Lets a benchmark time the frame codec and {@code FrameChannel}'s bookkeeping without
 * a transport; the buffer is compacted when a write would not fit.
 */
final class LoopbackConnection implements Connection {
    private static final PeerInfo PEER = PeerInfo.of("loopback");

    private final ByteBuffer bytes;

    LoopbackConnection(int capacity) {
        // written at position, read from 0 after flip; kept in write mode between calls
        bytes = ByteBuffer.allocateDirect(capacity);
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        for (ByteBuffer src : srcs) {
            if (src.remaining() > bytes.remaining()) {
                throw new IOException("loopback full: capacity=" + bytes.capacity() + " need=" + src.remaining());
            }
            bytes.put(src);
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        bytes.flip();
        try {
            if (bytes.remaining() < dst.remaining()) {
                throw new EOFException("loopback empty: have=" + bytes.remaining() + " want=" + dst.remaining());
            }
            int n = dst.remaining();
            dst.put(dst.position(), bytes, bytes.position(), n);
            dst.position(dst.position() + n);
            bytes.position(bytes.position() + n);
        } finally {
            bytes.compact();
        }
    }

    @Override
    public PeerInfo peer() {
        return PEER;
    }

    @Override
    public void close() {
    }
}
