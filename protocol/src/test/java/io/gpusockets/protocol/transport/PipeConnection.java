package io.gpusockets.protocol.transport;

import java.io.EOFException;
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
            int first = 0;
            while (true) {
                while (first < srcs.length && !srcs[first].hasRemaining()) {
                    first++;
                }
                if (first == srcs.length) {
                    return;
                }
                out.write(srcs, first, srcs.length - first);
            }
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public void readFully(ByteBuffer dst) throws IOException {
        int wanted = dst.remaining();
        while (dst.hasRemaining()) {
            if (in.read(dst) < 0) {
                int got = wanted - dst.remaining();
                if (got == 0) {
                    throw new EOFException("peer closed: " + name);
                }
                throw new IOException("peer closed mid-read after " + got + " of " + wanted + " bytes: " + name);
            }
        }
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
