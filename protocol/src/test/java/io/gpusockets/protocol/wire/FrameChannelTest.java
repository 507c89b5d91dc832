package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.FramePattern;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.PipeConnection;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

@Timeout(10)
class FrameChannelTest {
    private static final int MAX = 64 << 10;

    private PipeConnection.Pair pipe;
    private CountingConnection counted;
    private FrameChannel sender;
    private FrameChannel receiver;

    @BeforeEach
    void open() throws IOException {
        pipe = PipeConnection.pair();
        counted = new CountingConnection(pipe.right());
        sender = new FrameChannel(pipe.left(), MAX);
        receiver = new FrameChannel(counted, MAX);
    }

    @AfterEach
    void close() {
        pipe.left().close();
        pipe.right().close();
    }

    @Test
    void headerFieldsRoundTripLittleEndian() throws IOException {
        sender.send(0xFFFF0010, FrameHeader.FLAG_REPLY | FrameHeader.FLAG_NO_REPLY, -7, Long.MIN_VALUE + 3,
                ByteBuffer.wrap(new byte[]{1, 2}), ByteBuffer.allocate(0), ByteBuffer.wrap(new byte[]{3}));
        ByteBuffer raw = ByteBuffer.allocate(FrameHeader.BYTES + 3).order(ByteOrder.LITTLE_ENDIAN);
        pipe.right().readFully(raw);
        raw.flip();
        assertEquals(3, raw.getInt(FrameHeader.LENGTH_OFFSET));
        assertEquals(0xFFFF0010, raw.getInt(FrameHeader.OPCODE_OFFSET));
        assertEquals(3, raw.getInt(FrameHeader.FLAGS_OFFSET));
        assertEquals(-7, raw.getInt(FrameHeader.LANE_OFFSET));
        assertEquals(Long.MIN_VALUE + 3, raw.getLong(FrameHeader.REQUEST_ID_OFFSET));
        assertEquals(1, raw.get(24));
        assertEquals(3, raw.get(26));
    }

    @Test
    void twoFramesGoInOneWriteAndReadBackAsTwo() throws IOException {
        CountingConnection out = new CountingConnection(pipe.left());
        FrameChannel twoSender = new FrameChannel(out, MAX);
        twoSender.sendTwo(42, FrameHeader.FLAG_ACKED, new ByteBuffer[] {ByteBuffer.wrap(new byte[] {7, 8, 9})}, Opcodes.DATA, 0,
                new ByteBuffer[] {FramePattern.of(3, 99, 600), ByteBuffer.allocate(0), FramePattern.of(3, 99, 10)}, 3, 99);
        assertEquals(1, out.writes.get());
        FrameHeader call = receiver.readHeader();
        assertEquals(new FrameHeader(3, 42, FrameHeader.FLAG_ACKED, 3, 99), call);
        ByteBuffer body = receiver.readBody(call.length());
        assertEquals(7, body.get(0));
        assertEquals(9, body.get(2));
        FrameHeader data = receiver.readHeader();
        assertEquals(new FrameHeader(610, Opcodes.DATA, 0, 3, 99), data);
        ByteBuffer bytes = receiver.readBody(data.length());
        assertEquals(-1, FramePattern.firstMismatch(bytes.slice(0, 600), 3, 99));
        // and the header buffer a later plain send uses is the first one's again
        twoSender.send(5, 0, 1, 2L, ByteBuffer.wrap(new byte[] {1}));
        assertEquals(new FrameHeader(1, 5, 0, 1, 2L), receiver.readHeader());
    }

    @Test
    void aSecondFrameOverTheMaximumIsRefusedBeforeAnythingIsWritten() {
        CountingConnection out = new CountingConnection(pipe.left());
        FrameChannel twoSender = new FrameChannel(out, MAX);
        assertThrows(IllegalArgumentException.class, () -> twoSender.sendTwo(42, 0, new ByteBuffer[] {ByteBuffer.allocate(8)},
                Opcodes.DATA, 0, new ByteBuffer[] {ByteBuffer.allocate(MAX + 1)}, 1, 1));
        assertEquals(0, out.writes.get());
    }

    @Test
    void frameRoundTripsThroughTheCodec() throws IOException {
        sender.send(42, FrameHeader.FLAG_NO_REPLY, 5, 1L << 40, FramePattern.of(5, 1L << 40, 1000));
        FrameHeader h = receiver.readHeader();
        assertEquals(new FrameHeader(1000, 42, FrameHeader.FLAG_NO_REPLY, 5, 1L << 40), h);
        assertFalse(h.wantsReply());
        assertFalse(h.isReply());
        assertEquals(-1, FramePattern.firstMismatch(receiver.readBody(h.length()), 5, 1L << 40));
    }

    @Test
    void bodyOfExactlyMaxIsAccepted() throws Exception {
        Thread writer = Thread.ofVirtual().start(() -> {
            try {
                sender.send(1, 0, 0, 0, FramePattern.of(0, 0, MAX));
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        });
        FrameHeader h = receiver.readHeader();
        assertEquals(MAX, h.length());
        assertEquals(-1, FramePattern.firstMismatch(receiver.readBody(h.length()), 0, 0));
        writer.join();
    }

    @ParameterizedTest(name = "length {0}")
    @ValueSource(ints = {MAX + 1, Integer.MAX_VALUE, -1, Integer.MIN_VALUE})
    void outOfRangeLengthIsRejectedBeforeTheBodyIsTouched(int length) throws IOException {
        pipe.left().write(header(length, 0x1234), ByteBuffer.allocate(16));
        ProtocolException e = assertThrows(ProtocolException.class, receiver::readHeader);
        assertTrue(e.getMessage().contains("length=" + Integer.toUnsignedString(length)), e.getMessage());
        assertTrue(e.getMessage().contains("max=" + MAX), e.getMessage());
        assertEquals(FrameHeader.BYTES, counted.bytesRead.get(), "read past the header of a rejected frame");
    }

    @Test
    void sendRefusesBodiesOverTheMaximumAndWritesNothing() throws IOException {
        assertThrows(IllegalArgumentException.class,
                () -> sender.send(1, 0, 0, 0, ByteBuffer.allocate(MAX), ByteBuffer.allocate(1)));
        sender.send(2, 0, 0, 9);
        assertEquals(new FrameHeader(0, 2, 0, 0, 9), receiver.readHeader());
    }

    @Test
    void maximumBelowOneKiBIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new FrameChannel(pipe.left(), 1023));
        assertEquals(FrameChannel.DEFAULT_MAX_BODY, new FrameChannel(pipe.left()).maxBody());
    }

    @Test
    void skipBodyLandsOnTheNextFrame() throws Exception {
        Thread writer = Thread.ofVirtual().start(() -> {
            try {
                sender.send(1, 0, 1, 1, FramePattern.of(1, 1, 50_000));
                sender.send(2, 0, 2, 2, FramePattern.of(2, 2, 10));
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        });
        receiver.skipBody(receiver.readHeader().length());
        FrameHeader second = receiver.readHeader();
        assertEquals(2, second.opcode());
        assertEquals(-1, FramePattern.firstMismatch(receiver.readBody(second.length()), 2, 2));
        writer.join();
    }

    @Test
    void closeBetweenFramesIsEof() throws IOException {
        sender.send(1, 0, 0, 0);
        pipe.left().close();
        receiver.readHeader();
        assertThrows(EOFException.class, receiver::readHeader);
    }

    @Test
    void closeInsideHeaderIsACutNotEof() throws IOException {
        pipe.left().write(ByteBuffer.allocate(10));
        pipe.left().close();
        IOException e = assertThrows(IOException.class, receiver::readHeader);
        assertFalse(e instanceof EOFException, e.toString());
    }

    @Test
    void closeBetweenHeaderAndBodyIsACutNotEof() throws IOException {
        pipe.left().write(header(100, 1));
        pipe.left().close();
        int length = receiver.readHeader().length();
        IOException e = assertThrows(IOException.class, () -> receiver.readBody(length));
        assertFalse(e instanceof EOFException, e.toString());
        assertInstanceOf(EOFException.class, e.getCause());
    }

    @Test
    void closeInsideBodyIsACutForEveryReadStyle() throws IOException {
        pipe.left().write(header(100, 1), ByteBuffer.allocate(40));
        pipe.left().close();
        receiver.readHeader();
        IOException e = assertThrows(IOException.class, () -> receiver.skipBody(100));
        assertFalse(e instanceof EOFException, e.toString());
    }

    private static ByteBuffer header(int length, int opcode) {
        return ByteBuffer.allocate(FrameHeader.BYTES).order(ByteOrder.LITTLE_ENDIAN)
                .putInt(length).putInt(opcode).putInt(0).putInt(0).putLong(0).flip();
    }

    /** Counts what the codec reads, to prove a rejected header is not followed by a body read. */
    private static final class CountingConnection implements Connection {
        final AtomicLong bytesRead = new AtomicLong();
        final AtomicLong writes = new AtomicLong();
        private final Connection inner;

        CountingConnection(Connection inner) {
            this.inner = inner;
        }

        @Override
        public void write(ByteBuffer... srcs) throws IOException {
            writes.incrementAndGet();
            inner.write(srcs);
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            int before = dst.remaining();
            try {
                inner.readFully(dst);
            } finally {
                bytesRead.addAndGet(before - dst.remaining());
            }
        }

        @Override
        public PeerInfo peer() {
            return inner.peer();
        }

        @Override
        public void close() {
            inner.close();
        }
    }
}
