package io.gpusockets.protocol.transport;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ReadableByteChannel;

/**
 * The {@link Connection} contract over blocking JDK channels, for transports built on them: a
 * gathered write of every byte, and a full read with the EOF rules (clean end before the first byte:
 * {@link EOFException}; a cut in the middle: a plain IOException).
 */
public final class ChannelIo {
    private ChannelIo() {
    }

    /** Writes every remaining byte of {@code srcs}, in order (the caller holds the write lock). */
    public static void writeFully(GatheringByteChannel channel, ByteBuffer[] srcs) throws IOException {
        int first = 0;
        while (true) {
            while (first < srcs.length && !srcs[first].hasRemaining()) {
                first++;
            }
            if (first == srcs.length) {
                return;
            }
            channel.write(srcs, first, srcs.length - first);
        }
    }

    /** Fills {@code dst}; {@code peer} names the other end in the exceptions. */
    public static void readFully(ReadableByteChannel channel, ByteBuffer dst, String peer) throws IOException {
        int wanted = dst.remaining();
        while (dst.hasRemaining()) {
            if (channel.read(dst) < 0) {
                int got = wanted - dst.remaining();
                if (got == 0) {
                    throw new EOFException("peer closed: " + peer);
                }
                throw new IOException("peer closed mid-read after " + got + " of " + wanted + " bytes: " + peer);
            }
        }
    }
}
