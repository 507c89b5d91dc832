package io.gpusockets.e2e;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** A hand-driven peer that can say anything, for feeding the backend bad input. */
final class RawClient implements AutoCloseable {
    final Connection connection;
    final FrameChannel channel;
    private long requestId = 1;
    /** The session id the backend's WELCOME gave, once {@link #session} has run. */
    long sessionId;

    RawClient(String uri) throws IOException {
        connection = Transports.connect(TransportUri.parse(uri), Duration.ofSeconds(5));
        channel = new FrameChannel(connection);
        FrameHeader h = channel.readHeader();
        if (h.opcode() != Opcodes.SERVER_HELLO) {
            throw new IOException("no SERVER_HELLO: " + h);
        }
        channel.skipBody(h.length());
    }

    /** Sends HELLO with the given version; returns the answer frame's header and body. */
    Frame hello(int version) throws IOException {
        return hello(version, 0);
    }

    /** Sends HELLO asking for {@code features}; returns the answer frame's header and body. */
    Frame hello(int version, int features) throws IOException {
        channel.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(version, features, "raw test client", new byte[0]).encode());
        FrameHeader h = channel.readHeader();
        return new Frame(h, channel.readBody(h.length()));
    }

    static RawClient session(String uri) throws IOException {
        RawClient c = new RawClient(uri);
        Frame f = c.hello(Handshake.PROTOCOL_VERSION);
        if (f.header().opcode() != Opcodes.WELCOME) {
            throw new IOException("not welcomed: " + f.header());
        }
        c.sessionId = Handshake.Welcome.decode(f.body().order(ByteOrder.LITTLE_ENDIAN)).sessionId();
        return c;
    }

    record Frame(FrameHeader header, ByteBuffer body) {
    }

    static ByteBuffer body(int capacity) {
        return ByteBuffer.allocate(capacity).order(ByteOrder.LITTLE_ENDIAN);
    }

    static int opcode(String function) {
        return ApiTable.get().byName(function).opcode();
    }

    /** Sends a call and returns its reply, skipping DATA frames. */
    Frame call(int opcode, ByteBuffer body) throws IOException {
        long id = requestId++;
        channel.send(opcode, 0, 1, id, body.flip());
        while (true) {
            FrameHeader h = channel.readHeader();
            ByteBuffer b = channel.readBody(h.length());
            if (h.isReply() && h.requestId() == id) {
                return new Frame(h, b);
            }
        }
    }

    void writeRaw(byte[] bytes) throws IOException {
        connection.write(ByteBuffer.wrap(bytes));
    }

    /** Whether the backend closes this connection within the time given (reads and drops anything before). */
    boolean closedByPeerWithin(long millis) throws Exception {
        CompletableFuture<Boolean> eof = CompletableFuture.supplyAsync(() -> {
            ByteBuffer b = ByteBuffer.allocate(4096);
            try {
                while (true) {
                    b.clear().limit(1);
                    connection.readFully(b);
                }
            } catch (IOException e) {
                return true;
            }
        });
        try {
            return eof.get(millis, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            return false;
        }
    }

    @Override
    public void close() {
        connection.close();
    }
}
