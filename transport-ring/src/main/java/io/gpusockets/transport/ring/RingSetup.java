package io.gpusockets.transport.ring;

import java.io.EOFException;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * The set-up exchange on the unix socket, both messages native-endian:
 * <pre>
 *   server to client: HELLO (int) | version (int) | capacity (long) | window (long) | path length (int) | path (UTF-8)
 *   client to server: ACK (int), once the client has mapped the file and checked its header
 * </pre>
 * The channel is non-blocking from here on (the liveness probe must not block), so every step waits
 * on a selector against one deadline.
 */
final class RingSetup {
    static final int HELLO = 0x474E_5248; // "HRNG"
    static final int ACK = 0x4B43_4152;   // "RACK"
    private static final int MAX_PATH = 4096;

    /** What the server announces. */
    record Hello(long capacity, long window, Path path) {
    }

    private RingSetup() {
    }

    static void sendHello(SocketChannel channel, long capacity, long window, Path path, long deadline) throws IOException {
        byte[] bytes = path.toString().getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(28 + bytes.length).order(ByteOrder.nativeOrder());
        b.putInt(HELLO).putInt(RingDescriptor.VERSION).putLong(capacity).putLong(window).putInt(bytes.length).put(bytes).flip();
        writeFully(channel, b, deadline);
    }

    static Hello receiveHello(SocketChannel channel, long deadline) throws IOException {
        ByteBuffer fixed = readFully(channel, 16, deadline);
        int magic = fixed.getInt();
        int version = fixed.getInt();
        long capacity = fixed.getLong();
        if (magic != HELLO || version != RingDescriptor.VERSION) {
            throw new IOException("not a ring:// listener or another version: magic=" + Integer.toHexString(magic)
                    + " version=" + version + " (this side speaks version " + RingDescriptor.VERSION + ")");
        }
        ByteBuffer rest = readFully(channel, 12, deadline);
        long window = rest.getLong();
        int length = rest.getInt();
        RingDescriptor.checkCapacity(capacity);
        try {
            RingDescriptor.checkWindow(window);
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage());
        }
        if (length <= 0 || length > MAX_PATH) {
            throw new IOException("bad shared file path length: length=" + length);
        }
        ByteBuffer path = readFully(channel, length, deadline);
        return new Hello(capacity, window, Path.of(StandardCharsets.UTF_8.decode(path).toString()));
    }

    static void sendAck(SocketChannel channel, long deadline) throws IOException {
        writeFully(channel, ByteBuffer.allocate(4).order(ByteOrder.nativeOrder()).putInt(ACK).flip(), deadline);
    }

    static void receiveAck(SocketChannel channel, long deadline) throws IOException {
        int ack = readFully(channel, 4, deadline).getInt();
        if (ack != ACK) {
            throw new IOException("bad acknowledgement from ring:// client: " + Integer.toHexString(ack));
        }
    }

    private static ByteBuffer readFully(SocketChannel channel, int n, long deadline) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(n).order(ByteOrder.nativeOrder());
        try (Selector selector = Selector.open()) {
            channel.register(selector, SelectionKey.OP_READ);
            while (b.hasRemaining()) {
                if (channel.read(b) < 0) {
                    throw new EOFException("peer closed during the ring set-up (refused, e.g. by the uid check?)");
                }
                if (b.hasRemaining()) {
                    await(selector, deadline);
                }
            }
        }
        return b.flip();
    }

    private static void writeFully(SocketChannel channel, ByteBuffer b, long deadline) throws IOException {
        try (Selector selector = Selector.open()) {
            channel.register(selector, SelectionKey.OP_WRITE);
            while (b.hasRemaining()) {
                channel.write(b);
                if (b.hasRemaining()) {
                    await(selector, deadline);
                }
            }
        }
    }

    private static void await(Selector selector, long deadline) throws IOException {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            throw new SocketTimeoutException("ring set-up timed out");
        }
        selector.select(Math.max(1, left / 1_000_000));
        selector.selectedKeys().clear();
    }
}
