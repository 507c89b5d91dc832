package io.gpusockets.protocol.fuzz;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * A {@link Connection} whose peer sent exactly {@code input} and then closed: reads return its bytes and
 * then end as the contract says (EOFException before a first byte, IOException on a cut mid-read);
 * writes are dropped. For decoder fuzz tests, which need no second thread and no descriptor.
 */
public final class BytesConnection implements Connection {
    private final byte[] input;
    private int position;
    private boolean closed;

    public BytesConnection(byte[] input) {
        this.input = input;
    }

    /** Bytes read so far. */
    public int position() {
        return position;
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        if (closed) {
            throw new IOException("closed");
        }
        for (ByteBuffer b : srcs) {
            b.position(b.limit());
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        if (closed) {
            throw new IOException("closed");
        }
        int want = dst.remaining();
        if (want == 0) {
            return;
        }
        int left = input.length - position;
        if (left == 0) {
            throw new EOFException("peer closed");
        }
        int n = Math.min(want, left);
        dst.put(input, position, n);
        position += n;
        if (n < want) {
            throw new IOException("connection cut: " + (want - n) + " bytes missing");
        }
    }

    @Override
    public PeerInfo peer() {
        return PeerInfo.of("fuzz-bytes");
    }

    @Override
    public void close() {
        closed = true;
    }
}
