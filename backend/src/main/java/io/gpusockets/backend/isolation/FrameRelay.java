package io.gpusockets.backend.isolation;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * For a connection that cannot be handed to a worker whole (tls://: its keys and record sequence live in the
 * front's TLS engine; vchan://: libxenvchan's grant mappings and event channel belong to the front process):
 * the front relays its frames to and from the worker over a unix socket pair, one thread each way. This costs one extra copy of every byte (and a hop of latency) that
 * the handed-over transports do not pay; the shared window is not offered to such sessions, so bulk data
 * too goes through the relay. What it owns: the two threads and a {@link #CHUNK}-byte buffer each way;
 * when either side ends, both connections close.
 */
final class FrameRelay {
    /** Bodies are relayed in pieces of at most this many bytes: memory per relay stays bounded. */
    static final int CHUNK = 256 << 10;

    private FrameRelay() {
    }

    /** Starts relaying between the frontend's connection and the worker's end of the pair. */
    static void start(long sessionId, Connection frontend, Connection worker) {
        Runnable stop = () -> {
            frontend.close();
            worker.close();
        };
        Thread.ofPlatform().daemon().name("gpusockets-relay-" + sessionId + "-in").start(() -> pump(frontend, worker, stop));
        Thread.ofPlatform().daemon().name("gpusockets-relay-" + sessionId + "-out").start(() -> pump(worker, frontend, stop));
    }

    /** Frames from {@code from} to {@code to}, until either ends. */
    private static void pump(Connection from, Connection to, Runnable stop) {
        FrameChannel in = new FrameChannel(from);
        ByteBuffer header = ByteBuffer.allocateDirect(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer chunk = ByteBuffer.allocateDirect(CHUNK);
        try {
            while (true) {
                FrameHeader h = in.readHeader(); // checks the length against the frame limit
                header.clear();
                header.putInt(h.length()).putInt(h.opcode()).putInt(h.flags()).putInt(h.lane()).putLong(h.requestId()).flip();
                to.write(header);
                int left = h.length();
                while (left > 0) {
                    chunk.clear().limit(Math.min(left, CHUNK));
                    in.readBody(chunk); // through the channel: it may have read this body ahead with the header
                    chunk.flip();
                    to.write(chunk);
                    left -= chunk.limit();
                }
            }
        } catch (IOException | RuntimeException e) {
            stop.run();
        }
    }
}
