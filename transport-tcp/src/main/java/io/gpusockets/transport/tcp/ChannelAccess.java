package io.gpusockets.transport.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ByteChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.SocketChannel;

/**
 * How one connection's bytes reach its socket channel. A connecting end's channel is in blocking mode
 * and is read and written directly. An accepted channel starts in non-blocking mode, its reads and
 * writes done by the {@link ChannelReactor} (its handshake may run on a virtual thread, which must never
 * touch the channel itself: see there why), until {@link #platformThreadsOnly}: then it is taken off the
 * reactor, put in blocking mode, and read and written directly, one system call each.
 *
 * <p>The reads and writes keep the channel's own contract: a read returns at least one byte or -1 at the
 * end of the stream, a write at least one byte (in reactor mode as in blocking mode).
 */
final class ChannelAccess implements ByteChannel, GatheringByteChannel {
    private final SocketChannel channel;
    /** The reactor that does this channel's reads and writes, or null once they are direct. */
    private volatile ChannelReactor reactor;

    private ChannelAccess(SocketChannel channel, ChannelReactor reactor) {
        this.channel = channel;
        this.reactor = reactor;
    }

    /** A channel in blocking mode, read and written directly (a connecting end's). */
    static ChannelAccess direct(SocketChannel channel) {
        return new ChannelAccess(channel, null);
    }

    /** An accepted channel: non-blocking, served by the reactor until {@link #platformThreadsOnly}. */
    static ChannelAccess accepted(SocketChannel channel) throws IOException {
        channel.configureBlocking(false);
        return new ChannelAccess(channel, ChannelReactor.get());
    }

    SocketChannel channel() {
        return channel;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        ChannelReactor r = reactor;
        return r == null ? channel.read(dst) : r.read(channel, dst);
    }

    @Override
    public long write(ByteBuffer[] srcs, int offset, int length) throws IOException {
        ChannelReactor r = reactor;
        return r == null ? channel.write(srcs, offset, length) : r.write(channel, srcs, offset, length);
    }

    @Override
    public long write(ByteBuffer[] srcs) throws IOException {
        return write(srcs, 0, srcs.length);
    }

    @Override
    public int write(ByteBuffer src) throws IOException {
        return (int) write(new ByteBuffer[] {src}, 0, 1);
    }

    /**
     * From now on only platform threads read and write: the channel leaves the reactor and goes into
     * blocking mode. No read or write may be in progress. Idempotent.
     */
    synchronized void platformThreadsOnly() throws IOException {
        ChannelReactor r = reactor;
        if (r == null) {
            return;
        }
        r.detach(channel);
        channel.configureBlocking(true);
        reactor = null;
    }

    @Override
    public boolean isOpen() {
        return channel.isOpen();
    }

    /** Closes the channel; a read or write waiting in the reactor fails with an AsynchronousCloseException. */
    @Override
    public void close() throws IOException {
        try {
            channel.close();
        } finally {
            ChannelReactor r = reactor;
            if (r != null) {
                r.closed(channel);
            }
        }
    }
}
