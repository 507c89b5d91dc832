package io.gpusockets.protocol.transport;

import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * A reliable, ordered byte pipe between a frontend and a backend. Framing lives above it
 * ({@link io.gpusockets.protocol.wire.FrameChannel}) so that every transport shares one codec.
 *
 * <p>Threading: any number of threads may call {@link #write}; each call's bytes stay together on the
 * wire. One thread at a time calls {@link #readFully}.
 */
public interface Connection extends Closeable {

    /** Writes every remaining byte of {@code srcs}, in order, as one unit. Blocks while the peer is slow (back-pressure). */
    void write(ByteBuffer... srcs) throws IOException;

    /**
     * Fills {@code dst} completely. Throws {@link java.io.EOFException} when the peer closed cleanly
     * before the first byte, and an {@link IOException} on a cut in the middle or a broken link.
     */
    void readFully(ByteBuffer dst) throws IOException;

    /**
     * Whether {@link #readSome} works: the transport can hand over what has arrived without waiting for
     * more. {@link io.gpusockets.protocol.wire.FrameChannel} then reads ahead, so that a frame's header and
     * body (or several small frames) take one system call instead of one each.
     */
    default boolean readsSome() {
        return false;
    }

    /**
     * Reads what has arrived into {@code dst}, at least one byte (waiting for it) and at most
     * {@code dst.remaining()}: the count, or -1 at the end of the stream. Only where {@link #readsSome};
     * one thread at a time, as {@link #readFully}.
     */
    default int readSome(ByteBuffer dst) throws IOException {
        throw new UnsupportedOperationException("this transport reads only whole requests: " + getClass().getName());
    }

    /** Who is at the other end, as far as the transport can tell. */
    PeerInfo peer();

    /**
     * The window of memory both ends map, where the transport has one (ring://), else empty. It is
     * handed out once: a later call returns empty. Whoever takes it releases it when done with it.
     */
    default java.util.Optional<SharedWindow> takeSharedWindow() {
        return java.util.Optional.empty();
    }

    /**
     * Whether the peer is known to be gone (closed or dead), without reading: for a thread that waits on
     * shared memory rather than on the connection. False when the transport cannot tell.
     */
    default boolean peerClosed() {
        return false;
    }

    /** Whether {@link #takeSharedWindow} would hand out a window now. */
    default boolean hasSharedWindow() {
        return false;
    }

    /**
     * The JDK socket channel under this connection, where that channel alone carries it (tcp://, unix://),
     * so that the backend can hand the socket to a worker process (isolation mode process); else empty.
     * The connection still owns the channel.
     */
    default java.util.Optional<java.nio.channels.SocketChannel> socketChannel() {
        return java.util.Optional.empty();
    }

    /**
     * The JDK socket channel whose close by the peer means this connection's peer is gone, for asking the
     * kernel about it without reading (a TLS connection has one though it cannot be handed over whole);
     * by default {@link #socketChannel}. The connection owns it: nothing may read, write or close it.
     */
    default java.util.Optional<java.nio.channels.SocketChannel> livenessChannel() {
        return socketChannel();
    }

    /**
     * From now on only platform threads read and write this connection: the backend says so once the
     * handshake, which runs on a virtual thread for some transports, is done, before the session's reader
     * (a platform thread) takes over, and before the connection is handed to a worker process. A
     * transport may then let a read or write wait in the kernel, one system call, instead of trying,
     * finding nothing and waiting in a poll, which costs two system calls more per call (about a sixth of
     * a null call over unix:// on a 2-core VM). No read or write may be in progress. No-op by default.
     */
    default void platformThreadsOnly() throws IOException {
    }

    /** Closes both directions; a thread blocked in read or write gets an IOException. Idempotent. */
    @Override
    void close();
}
