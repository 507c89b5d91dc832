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
 * <p>Where the connection can hand over what has arrived ({@link Connection#readsSome}: sockets), reads
 * go through a small read-ahead buffer of {@link #READ_AHEAD} bytes, so that a small frame's header and
 * body, or several small frames a peer pipelined, take one system call instead of one per header and one
 * per body (a null call's reply was two reads; a raw socket ping-pong is one). A body at least as long
 * as the buffer is read straight into its destination after what the buffer already holds of it. What
 * the buffer holds is at most {@link #READ_AHEAD} bytes of frames not yet asked for ({@link #readAhead}).
 *
 * <p>Any thread may send; one thread at a time reads (a header, then exactly its body).
 */
public final class FrameChannel implements Closeable {
    /** Default largest body: bulk parameters travel in chunks no larger than {@link #DEFAULT_CHUNK}. */
    public static final int DEFAULT_MAX_BODY = 4 << 20;
    public static final int DEFAULT_CHUNK = 1 << 20;

    /** A sending thread's header buffer: room for the two headers of {@link #sendTwo}; {@link #send} uses the first. */
    private static final ThreadLocal<ByteBuffer> WRITE_HEADER =
            ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(2 * FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN));

    /** Bytes of the read-ahead buffer: room for a header and a small body or several small frames. */
    public static final int READ_AHEAD = 4096;

    private final Connection connection;
    private final int maxBody;
    private final ByteBuffer readHeader = ByteBuffer.allocateDirect(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN);
    /** Bytes read from the connection and not yet taken (read mode), or null where it reads only whole requests. */
    private final ByteBuffer ahead;

    public FrameChannel(Connection connection, int maxBody) {
        if (maxBody < 1024) {
            throw new IllegalArgumentException("maxBody too small: maxBody=" + maxBody);
        }
        this.connection = connection;
        this.maxBody = maxBody;
        this.ahead = connection.readsSome() ? ByteBuffer.allocate(READ_AHEAD).order(ByteOrder.LITTLE_ENDIAN).flip() : null;
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

    /**
     * Sends two frames of one lane and request in one write of the connection (one system call where the transport
     * makes one per write): a call and its bulk data, which the peer then finds together instead of waking twice.
     * Each body is every remaining byte of its buffers, within {@link #maxBody()} as for {@link #send}.
     */
    public void sendTwo(int opcode, int flags, ByteBuffer[] body, int secondOpcode, int secondFlags, ByteBuffer[] secondBody,
                        int lane, long requestId) throws IOException {
        long first = bodyLength(body), second = bodyLength(secondBody);
        ByteBuffer h = WRITE_HEADER.get().clear();
        h.putInt((int) first).putInt(opcode).putInt(flags).putInt(lane).putLong(requestId);
        h.putInt((int) second).putInt(secondOpcode).putInt(secondFlags).putInt(lane).putLong(requestId).flip();
        ByteBuffer[] all = new ByteBuffer[body.length + secondBody.length + 2];
        all[0] = h.slice(0, FrameHeader.BYTES);
        System.arraycopy(body, 0, all, 1, body.length);
        all[body.length + 1] = h.slice(FrameHeader.BYTES, FrameHeader.BYTES);
        System.arraycopy(secondBody, 0, all, body.length + 2, secondBody.length);
        connection.write(all);
    }

    private long bodyLength(ByteBuffer[] body) {
        long length = 0;
        for (ByteBuffer b : body) {
            length += b.remaining();
        }
        if (length > maxBody) {
            throw new IllegalArgumentException("frame body too large: length=" + length + " max=" + maxBody);
        }
        return length;
    }

    /**
     * Bytes read from the connection ahead of the frames asked for so far: 0 between frames whose sender
     * waits for an answer. A connection handed to another reader (a worker process) must have none.
     */
    public int readAhead() {
        return ahead == null ? 0 : ahead.remaining();
    }

    /** Reads the next header. A length above the maximum is a protocol violation: the caller should close. */
    public FrameHeader readHeader() throws IOException {
        readHeader.clear();
        if (ahead == null) {
            connection.readFully(readHeader);
        } else {
            fillAhead(FrameHeader.BYTES);
            readHeader.put(readHeader.position(), ahead, ahead.position(), FrameHeader.BYTES);
            ahead.position(ahead.position() + FrameHeader.BYTES);
            readHeader.position(FrameHeader.BYTES);
        }
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
        if (ahead != null) {
            takeAhead(dst);
            if (!dst.hasRemaining()) {
                return;
            }
            if (dst.remaining() < ahead.capacity()) {
                // a short rest: read ahead (it may bring the next frames too) and take it from there
                while (dst.hasRemaining()) {
                    if (readMore() < 0) {
                        throw new IOException("connection closed mid-frame: " + dst.remaining() + " body bytes missing");
                    }
                    takeAhead(dst);
                }
                return;
            }
        }
        try {
            connection.readFully(dst);
        } catch (EOFException e) {
            throw new IOException("connection closed mid-frame: " + dst.remaining() + " body bytes missing", e);
        }
    }

    /** Moves what the read-ahead buffer holds, up to what {@code dst} has room for, into {@code dst}. */
    private void takeAhead(ByteBuffer dst) {
        int n = Math.min(ahead.remaining(), dst.remaining());
        if (n > 0) {
            dst.put(dst.position(), ahead, ahead.position(), n);
            dst.position(dst.position() + n);
            ahead.position(ahead.position() + n);
        }
    }

    /** Reads until the read-ahead buffer holds at least {@code n} bytes; the end of the stream as for a header. */
    private void fillAhead(int n) throws IOException {
        while (ahead.remaining() < n) {
            int had = ahead.remaining();
            if (readMore() < 0) {
                if (had == 0) {
                    throw new EOFException("peer closed: " + connection.peer().description());
                }
                throw new IOException("peer closed mid-read after " + had + " of " + n + " bytes: "
                        + connection.peer().description());
            }
        }
    }

    /** One read of what has arrived into the read-ahead buffer, after what it holds: the count, -1 at the end. */
    private int readMore() throws IOException {
        ahead.compact();
        try {
            return connection.readSome(ahead);
        } finally {
            ahead.flip();
        }
    }

    @Override
    public void close() {
        connection.close();
    }
}
