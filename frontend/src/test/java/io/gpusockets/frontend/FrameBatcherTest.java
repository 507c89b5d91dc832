package io.gpusockets.frontend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class FrameBatcherTest {

    /** Records each write as one byte array, and the opcodes of the frames in it. */
    private static final class RecordingConnection implements Connection {
        final List<List<Integer>> writes = new CopyOnWriteArrayList<>();

        @Override
        public void write(ByteBuffer... srcs) {
            int total = 0;
            for (ByteBuffer b : srcs) {
                total += b.remaining();
            }
            ByteBuffer all = ByteBuffer.allocate(total).order(ByteOrder.LITTLE_ENDIAN);
            for (ByteBuffer b : srcs) {
                all.put(b);
            }
            all.flip();
            List<Integer> opcodes = new ArrayList<>();
            while (all.hasRemaining()) {
                int length = all.getInt();
                opcodes.add(all.getInt());
                all.position(all.position() + FrameHeader.BYTES - 8 + length);
            }
            writes.add(opcodes);
        }

        @Override
        public void readFully(ByteBuffer dst) {
            throw new UnsupportedOperationException();
        }

        @Override
        public PeerInfo peer() {
            return PeerInfo.of("recorder");
        }

        @Override
        public void close() {
        }
    }

    private static ByteBuffer body(int n) {
        return ByteBuffer.allocate(n);
    }

    @Test
    void smallPipelinedFramesLeaveTogetherAheadOfTheNextWaitedFrame() throws Exception {
        RecordingConnection c = new RecordingConnection();
        try (FrameBatcher b = new FrameBatcher(new FrameChannel(c), TimeUnit.SECONDS.toNanos(10))) {
            for (int op = 1; op <= 3; op++) {
                b.send(op, FrameHeader.FLAG_NO_REPLY, 1, op, body(40));
            }
            assertTrue(c.writes.isEmpty(), "pipelined frames wait: " + c.writes);
            b.send(9, 0, 2, 9, body(8)); // a call that waits for its reply, on another lane
            assertEquals(List.of(List.of(1, 2, 3), List.of(9)), c.writes);
        }
    }

    @Test
    void largeFramesAndRepliedFramesAreNotHeldBack() throws Exception {
        RecordingConnection c = new RecordingConnection();
        try (FrameBatcher b = new FrameBatcher(new FrameChannel(c), TimeUnit.SECONDS.toNanos(10))) {
            b.send(5, FrameHeader.FLAG_NO_REPLY, 1, 1, body(FrameBatcher.MAX_BATCHED_FRAME));
            b.send(6, 0, 1, 2, body(4));
            assertEquals(List.of(List.of(5), List.of(6)), c.writes);
        }
    }

    @Test
    void aFullBatchGoesOutAtOnce() throws Exception {
        RecordingConnection c = new RecordingConnection();
        try (FrameBatcher b = new FrameBatcher(new FrameChannel(c), TimeUnit.SECONDS.toNanos(10))) {
            int frame = FrameHeader.BYTES + 1000;
            int fit = FrameBatcher.CAPACITY / frame;
            for (int i = 0; i <= fit; i++) {
                b.send(7, FrameHeader.FLAG_NO_REPLY, 1, i, body(1000));
            }
            assertEquals(1, c.writes.size());
            assertEquals(fit, c.writes.getFirst().size());
        }
    }

    @Test
    void waitingFramesLeaveAfterTheDelayWithoutAnotherCall() throws Exception {
        RecordingConnection c = new RecordingConnection();
        try (FrameBatcher b = new FrameBatcher(new FrameChannel(c), TimeUnit.MILLISECONDS.toNanos(5))) {
            b.send(3, FrameHeader.FLAG_NO_REPLY, 1, 1, body(16));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (c.writes.isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertEquals(List.of(List.of(3)), c.writes);
        }
    }

    @Test
    void withoutDelayNothingIsBatched() throws Exception {
        RecordingConnection c = new RecordingConnection();
        try (FrameBatcher b = new FrameBatcher(new FrameChannel(c), 0)) {
            b.send(1, FrameHeader.FLAG_NO_REPLY, 1, 1, body(8));
            b.send(2, FrameHeader.FLAG_NO_REPLY, 1, 2, body(8));
            assertEquals(List.of(List.of(1), List.of(2)), c.writes);
        }
    }
}
