package io.gpusockets.protocol.transport;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;
import java.util.concurrent.locks.ReentrantLock;

/**
 * An in-memory {@link Connection} over two {@link Pipe}s (one per direction), for codec tests that
 * need no sockets. The kernel pipe buffer (64 KiB on Linux) gives real back-pressure.
 */
public final class PipeConnection implements Connection {
    private final Pipe.SourceChannel in;
    private final Pipe.SinkChannel out;
    private final String name;
    private final ReentrantLock writeLock = new ReentrantLock();

    private PipeConnection(Pipe.SourceChannel in, Pipe.SinkChannel out, String name) {
        this.in = in;
        this.out = out;
        this.name = name;
    }

    /** Two connected ends. */
    public record Pair(PipeConnection left, PipeConnection right) {
    }

    public static Pair pair() throws IOException {
        Pipe leftToRight = Pipe.open();
        Pipe rightToLeft = Pipe.open();
        return new Pair(new PipeConnection(rightToLeft.source(), leftToRight.sink(), "pipe:left"),
                new PipeConnection(leftToRight.source(), rightToLeft.sink(), "pipe:right"));
    }

    @Override
    public void write(ByteBuffer... srcs) throws IOException {
        writeLock.lock();
        try {
            ChannelIo.writeFully(out, srcs);
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        ChannelIo.readFully(in, dst, name);
    }

    @Override
    public PeerInfo peer() {
        return PeerInfo.of(name);
    }

    @Override
    public void close() {
        try {
            in.close();
        } catch (IOException ignored) {
            // nothing left to release
        }
        try {
            out.close();
        } catch (IOException ignored) {
            // nothing left to release
        }
    }
}
