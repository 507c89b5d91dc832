package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.ChannelIo;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.transport.unix.UnixPeerUid;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.OptionalInt;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Connection} over a {@link SocketChannel}, TCP or unix: in blocking mode on the connecting end;
 * on the accepting end read and written through the {@link ChannelReactor} until
 * {@link #platformThreadsOnly}, then in blocking mode ({@link ChannelAccess}).
 *
 * <p>Writers are serialized by a lock held across the whole gathering write, so one call's bytes stay
 * together even when the kernel takes them in several pieces. A write that fails part way has torn its
 * unit, so the connection closes: no other writer's frame can follow half a frame.
 *
 * <p>JDK channels are interruptible: interrupting a thread blocked in {@link #write} or
 * {@link #readFully} closes the whole connection, for every lane. Do not interrupt lane threads to
 * cancel a call.
 */
final class SocketConnection implements Connection {
    private final SocketChannel channel;
    private final ChannelAccess io;
    private final PeerInfo peer;
    private final ReentrantLock writeLock = new ReentrantLock();

    private SocketConnection(ChannelAccess io, PeerInfo peer) {
        this.channel = io.channel();
        this.io = io;
        this.peer = peer;
    }

    /** Nagle off: a frame is a whole message, and holding back a small request only adds latency. */
    static SocketConnection tcp(ChannelAccess io) throws IOException {
        io.channel().setOption(StandardSocketOptions.TCP_NODELAY, true);
        String remote = Endpoint.tcpText((InetSocketAddress) io.channel().getRemoteAddress());
        return new SocketConnection(io, PeerInfo.of(remote));
    }

    /** {@code address} is the listener's URI on both ends: an accepted unix peer has no address of its own. */
    static SocketConnection unix(ChannelAccess io, TransportUri address) {
        OptionalInt uid = UnixPeerUid.of(io.channel());
        String who = uid.isPresent() ? "uid " + uid.getAsInt() : "uid unknown";
        return new SocketConnection(io, new PeerInfo(address + " (" + who + ")", uid));
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        writeLock.lock();
        try {
            ChannelIo.writeFully(io, srcs);
        } catch (IOException e) {
            close();
            throw e;
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        ChannelIo.readFully(io, dst, peer.description());
    }

    @Override
    public boolean readsSome() {
        return true;
    }

    /** One read of the channel: it waits for the first byte and takes what has arrived (blocking and reactor mode alike). */
    @Override
    public int readSome(ByteBuffer dst) throws IOException {
        if (!dst.hasRemaining()) {
            throw new IllegalArgumentException("readSome needs room: " + dst);
        }
        return io.read(dst);
    }

    @Override
    public void platformThreadsOnly() throws IOException {
        io.platformThreadsOnly();
    }

    @Override
    public PeerInfo peer() {
        return peer;
    }

    @Override
    public java.util.Optional<SocketChannel> socketChannel() {
        return java.util.Optional.of(channel);
    }

    @Override
    public void close() {
        try {
            io.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
    }

    @Override
    public String toString() {
        return "SocketConnection[" + peer.description() + "]";
    }
}
