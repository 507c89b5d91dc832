package io.gpusockets.benchmarks.jmh;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

/**
 * {@link FrameChannel} over an in-memory {@link LoopbackConnection}: one 64-byte frame (24-byte header,
 * 40-byte body, as bench-transports' frame ping-pong) sent, then its header and body read back, on
 * one thread. What FrameChannel adds to a transport's write and read, without the transport.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class FrameChannelBenchmark {
    private static final int BODY = 64 - FrameHeader.BYTES;

    private final FrameChannel channel = new FrameChannel(new LoopbackConnection(4096));
    private final ByteBuffer body = ByteBuffer.allocateDirect(BODY).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer received = ByteBuffer.allocateDirect(BODY).order(ByteOrder.LITTLE_ENDIAN);
    private long requestId;

    @Benchmark
    public FrameHeader writeAndRead64B() throws IOException {
        channel.send(0x100, 0, 1, ++requestId, body.clear());
        FrameHeader h = channel.readHeader();
        channel.readBody(received.clear().limit(h.length()));
        return h;
    }
}
