package io.gpusockets.protocol.wire;

import io.gpusockets.protocol.transport.Connection;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Frames over a {@link Connection}: writes a header and a body as one unit, reads headers and bodies
 * with the length checked against a maximum before anything is allocated.
 *
 * <p>Any thread may send; one thread at a time reads (a header, then exactly its body).
 */
public final class FrameChannel implements Closeable {
    /** Default largest body: bulk parameters travel in chunks no larger than {@link #DEFAULT_CHUNK}. */
    public static final int DEFAULT_MAX_BODY = 4 << 20;
    public static final int DEFAULT_CHUNK = 1 << 20;

    private static final ThreadLocal<ByteBuffer> WRITE_HEADER =
            ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN));

    private final Connection connection;
    private final int maxBody;
    private final ByteBuffer readHeader = ByteBuffer.allocateDirect(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN);

    public FrameChannel(Connection connection, int maxBody) {
        if (maxBody < 1024) {
            throw new IllegalArgumentException("maxBody too small: maxBody=" + maxBody);
        }
        this.connection = connection;
        this.maxBody = maxBody;
    }

    public FrameChannel(Connection connection) {
        this(connection, DEFAULT_MAX_BODY);
    }

    public Connection connection() {
        return connection;
    }

    public int maxBody() {
        return maxBody;
    }

    /** Sends one frame; the body is every remaining byte of {@code body}. */
    public void send(int opcode, int flags, int lane, long requestId, ByteBuffer... body) throws IOException {
        long length = 0;
        for (ByteBuffer b : body) {
            length += b.remaining();
        }
        if (length > maxBody) {
            throw new IllegalArgumentException("frame body too large: length=" + length + " max=" + maxBody);
        }
        ByteBuffer h = WRITE_HEADER.get().clear();
        h.putInt((int) length).putInt(opcode).putInt(flags).putInt(lane).putLong(requestId).flip();
        ByteBuffer[] all = new ByteBuffer[body.length + 1];
        all[0] = h;
        System.arraycopy(body, 0, all, 1, body.length);
        connection.write(all);
    }

    /** Reads the next header. A length above the maximum is a protocol violation: the caller should close. */
    public FrameHeader readHeader() throws IOException {
        readHeader.clear();
        connection.readFully(readHeader);
        readHeader.flip();
        int length = readHeader.getInt();
        FrameHeader h = new FrameHeader(length, readHeader.getInt(), readHeader.getInt(), readHeader.getInt(),
                readHeader.getLong());
        if (length < 0 || length > maxBody) {
            throw new ProtocolException("frame length out of range: length=" + Integer.toUnsignedString(length)
                    + " max=" + maxBody + " opcode=" + String.format("0x%08x", h.opcode()));
        }
        return h;
    }

    /** Reads exactly {@code dst.remaining()} body bytes. */
    public void readBody(ByteBuffer dst) throws IOException {
        readPromised(dst);
    }

    /** Reads a whole body of {@code length} bytes into a new little-endian heap buffer. */
    public ByteBuffer readBody(int length) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        if (length > 0) {
            readPromised(b);
        }
        return b.flip();
    }

    /** Reads and drops {@code length} body bytes. */
    public void skipBody(int length) throws IOException {
        ByteBuffer scratch = ByteBuffer.allocate(Math.min(length, 64 << 10));
        int left = length;
        while (left > 0) {
            scratch.clear().limit(Math.min(left, scratch.capacity()));
            readPromised(scratch);
            left -= scratch.limit();
        }
    }

    /**
     * Body bytes were promised by a header, so a peer that closes before them cut a frame in two: that
     * is reported as a plain IOException, keeping EOFException for a close between frames.
     */
    private void readPromised(ByteBuffer dst) throws IOException {
        try {
            connection.readFully(dst);
        } catch (EOFException e) {
            throw new IOException("connection closed mid-frame: " + dst.remaining() + " body bytes missing", e);
        }
    }

    @Override
    public void close() {
        connection.close();
    }
}
