package io.gpusockets.protocol.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link FrameChannel}'s read-ahead over a connection that hands over what has arrived
 * ({@link Connection#readsSome}): frames come out whole however the bytes arrive, a small frame takes one
 * read, a large body goes straight to its destination, and the end of the stream keeps its meaning
 * (between frames: EOF; inside a header or body: a cut).
 */
class FrameChannelReadAheadTest {

    /** A connection that hands over the bytes queued for it, at most {@code piece} at a time, counting its reads. */
    private static final class Arrivals implements Connection {
        final Deque<ByteBuffer> queued = new ArrayDeque<>();
        int piece = Integer.MAX_VALUE;
        int readSomes;
        int readFullys;
        long directBytes;
        boolean ended;

        void arrive(ByteBuffer bytes) {
            queued.add(bytes.duplicate());
        }

        @Override
        public boolean readsSome() {
            return true;
        }

        @Override
        public int readSome(ByteBuffer dst) throws IOException {
            readSomes++;
            ByteBuffer b = queued.peek();
            if (b == null) {
                if (ended) {
                    return -1;
                }
                throw new IOException("the test has no more bytes: a read would wait forever");
            }
            int n = Math.min(piece, Math.min(b.remaining(), dst.remaining()));
            dst.put(b.slice(b.position(), n));
            b.position(b.position() + n);
            if (!b.hasRemaining()) {
                queued.poll();
            }
            return n;
        }

        @Override
        public void readFully(ByteBuffer dst) throws IOException {
            readFullys++;
            directBytes += dst.remaining();
            while (dst.hasRemaining()) {
                if (readSome(dst) < 0) {
                    throw new EOFException("ended");
                }
            }
        }

        @Override
        public void write(ByteBuffer... srcs) {
            throw new UnsupportedOperationException();
        }

        @Override
        public PeerInfo peer() {
            return PeerInfo.of("arrivals");
        }

        @Override
        public void close() {
        }
    }

    private static ByteBuffer frame(int opcode, long requestId, byte[] body) {
        ByteBuffer b = ByteBuffer.allocate(FrameHeader.BYTES + body.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(body.length).putInt(opcode).putInt(0).putInt(3).putLong(requestId).put(body);
        return b.flip();
    }

    private static byte[] bytes(int n, int seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void aSmallFramesHeaderAndBodyTakeOneRead() throws IOException {
        Arrivals c = new Arrivals();
        c.arrive(frame(7, 1, bytes(8, 1)));
        FrameChannel ch = new FrameChannel(c);
        FrameHeader h = ch.readHeader();
        ByteBuffer body = ch.readBody(h.length());
        assertEquals(ByteBuffer.wrap(bytes(8, 1)), body);
        assertEquals(1, c.readSomes, "header and body in one read");
        assertEquals(0, ch.readAhead());
    }

    @Test
    void pipelinedSmallFramesAreReadTogetherAndKeptForTheirTurn() throws IOException {
        Arrivals c = new Arrivals();
        ByteBuffer all = ByteBuffer.allocate(10 * (FrameHeader.BYTES + 40));
        for (int i = 0; i < 10; i++) {
            all.put(frame(0x100 + i, i, bytes(40, i)));
        }
        c.arrive(all.flip());
        FrameChannel ch = new FrameChannel(c);
        for (int i = 0; i < 10; i++) {
            FrameHeader h = ch.readHeader();
            assertEquals(0x100 + i, h.opcode());
            assertEquals(i, h.requestId());
            assertEquals(ByteBuffer.wrap(bytes(40, i)), ch.readBody(h.length()));
            assertEquals((9 - i) * (FrameHeader.BYTES + 40), ch.readAhead(), "the frames not yet asked for are held");
        }
        assertEquals(1, c.readSomes, "ten 64-byte frames that arrived together: one read");
    }

    @Test
    void framesComeOutWholeHoweverTheirBytesArrive() throws IOException {
        int[] sizes = {0, 1, 23, 24, 25, 100, FrameChannel.READ_AHEAD - 25, FrameChannel.READ_AHEAD - 24, FrameChannel.READ_AHEAD,
            FrameChannel.READ_AHEAD + 1, 3 * FrameChannel.READ_AHEAD + 7, 70_000};
        for (int piece : new int[] {1, 7, 24, 1000, 4096, Integer.MAX_VALUE}) {
            Arrivals c = new Arrivals();
            c.piece = piece;
            for (int i = 0; i < sizes.length; i++) {
                c.arrive(frame(i, i, bytes(sizes[i], i)));
            }
            c.ended = true;
            FrameChannel ch = new FrameChannel(c);
            for (int i = 0; i < sizes.length; i++) {
                FrameHeader h = ch.readHeader();
                assertEquals(sizes[i], h.length(), "piece " + piece);
                ByteBuffer body = ByteBuffer.allocateDirect(h.length());
                ch.readBody(body);
                assertEquals(ByteBuffer.wrap(bytes(sizes[i], i)), body.flip(), "frame " + i + ", piece " + piece);
            }
            assertInstanceOf(EOFException.class, assertThrows(IOException.class, ch::readHeader), "between frames: EOF");
        }
    }

    @Test
    void aLargeBodyGoesStraightToItsDestinationAfterWhatWasReadAhead() throws IOException {
        Arrivals c = new Arrivals();
        byte[] big = bytes(1 << 20, 9);
        c.arrive(frame(1, 1, big));
        FrameChannel ch = new FrameChannel(c);
        FrameHeader h = ch.readHeader();
        ByteBuffer body = ByteBuffer.allocate(h.length());
        ch.readBody(body);
        assertEquals(ByteBuffer.wrap(big), body.flip());
        assertEquals(1, c.readFullys, "the rest of a large body in one readFully");
        assertTrue(c.directBytes > big.length - FrameChannel.READ_AHEAD, "only what the first read brought went through the buffer: "
                + c.directBytes);
    }

    @Test
    void aPeerThatClosesInsideAHeaderOrBodyCutAFrameNotAClose() throws IOException {
        Arrivals mid = new Arrivals();
        mid.arrive(ByteBuffer.wrap(new byte[10]));
        mid.ended = true;
        IOException header = assertThrows(IOException.class, new FrameChannel(mid)::readHeader);
        assertTrue(!(header instanceof EOFException), "inside a header: " + header);

        Arrivals body = new Arrivals();
        ByteBuffer f = frame(1, 1, bytes(100, 1));
        body.arrive(f.limit(f.limit() - 30));
        body.ended = true;
        FrameChannel ch = new FrameChannel(body);
        FrameHeader h = ch.readHeader();
        IOException cut = assertThrows(IOException.class, () -> ch.readBody(h.length()));
        assertTrue(!(cut instanceof EOFException) && cut.getMessage().contains("mid-frame"), cut.toString());
    }
}
