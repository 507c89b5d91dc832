package io.gpusockets.benchmarks.jmh;

import io.gpusockets.protocol.api.ApiEntries;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.ProtocolException;
import io.gpusockets.protocol.wire.WireValues;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Encoding and decoding one frame (24-byte {@link FrameHeader} + body) in memory, no I/O: a
 * cuLaunchKernel request with 4 kernel parameters through {@link LaunchRequest}, the codec both
 * ends use, and a cuMemAlloc request and reply through the table-driven path (the entry's
 * parameters, {@link WireValues}) that {@code RemoteCudaDriver} and {@code CallDispatcher} use
 * (mirrors of those loops, which sit behind a connection and a session).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class CodecBenchmark {
    private static final ApiFunction LAUNCH = ApiEntries.cuLaunchKernel;
    private static final ApiFunction MEM_ALLOC = ApiEntries.cuMemAlloc;
    /** Kernel parameters of a typical vector add: three device pointers and an element count. */
    private static final long[] PARAM_SIZES = {8, 8, 8, 4};

    private final ByteBuffer frame = ByteBuffer.allocateDirect(4096).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer launchRequest = ByteBuffer.allocateDirect(4096).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer memAllocRequest = ByteBuffer.allocateDirect(256).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer memAllocReply = ByteBuffer.allocateDirect(256).order(ByteOrder.LITTLE_ENDIAN);
    private final Object[] memAllocArgs = new Object[2];
    private Arena arena;
    private MemorySegment[] paramValues;
    /** The program's void*[] of parameter pointers. */
    private MemorySegment kernelParams;
    /** Where the decoder copies the parameters, reused by each decode. */
    private MemorySegment paramScratch;
    private MemorySegment dptrCell;
    private long requestId;

    @Setup
    public void setUp() {
        arena = Arena.ofConfined();
        paramValues = new MemorySegment[PARAM_SIZES.length];
        for (int i = 0; i < PARAM_SIZES.length; i++) {
            paramValues[i] = arena.allocate(PARAM_SIZES[i], 8);
            paramValues[i].fill((byte) (i + 1));
        }
        kernelParams = arena.allocate(ValueLayout.ADDRESS, PARAM_SIZES.length);
        for (int i = 0; i < PARAM_SIZES.length; i++) {
            kernelParams.setAtIndex(ValueLayout.ADDRESS, i, paramValues[i]);
        }
        paramScratch = arena.allocate(4096, 16);
        dptrCell = arena.allocate(ValueLayout.JAVA_LONG);
        dptrCell.set(ValueLayout.JAVA_LONG, 0, 0x7f00_1234_5000L);
        memAllocArgs[0] = dptrCell;
        memAllocArgs[1] = 1L << 20;
        encodeLaunchRequest();
        launchRequest.clear().put(frame).flip();
        encodeMemAllocRequest();
        memAllocRequest.clear().put(frame).flip();
        encodeMemAllocReply();
        memAllocReply.clear().put(frame).flip();
    }

    @TearDown
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public ByteBuffer encodeLaunchRequest() {
        ByteBuffer b = frame.clear().position(FrameHeader.BYTES);
        LaunchRequest.putHeader(b, 0x10L, 4096, 1, 1, 256, 1, 1, 0, 0L);
        LaunchRequest.putKernelParams(b, PARAM_SIZES, kernelParams);
        return putHeader(b, LAUNCH.opcode(), 0);
    }

    @Benchmark
    public long decodeLaunchRequest() throws ProtocolException {
        ByteBuffer b = launchRequest.clear();
        FrameHeader h = readHeader(b);
        LaunchRequest.Header launch = LaunchRequest.readHeader(b);
        MemorySegment params = LaunchRequest.readKernelParams(b, SegmentAllocator.slicingAllocator(paramScratch));
        return h.requestId() + h.length() + launch.function() + launch.gridX() + params.address();
    }

    @Benchmark
    public ByteBuffer encodeMemAllocRequest() {
        ByteBuffer b = frame.clear().position(FrameHeader.BYTES);
        List<ApiParam> params = MEM_ALLOC.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (!p.out()) {
                WireValues.putScalar(b, p.type(), memAllocArgs[i]);
            }
        }
        return putHeader(b, MEM_ALLOC.opcode(), 0);
    }

    @Benchmark
    public void decodeMemAllocRequest(Blackhole bh) {
        ByteBuffer b = memAllocRequest.clear();
        bh.consume(readHeader(b));
        List<ApiParam> params = MEM_ALLOC.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (!p.out()) {
                bh.consume(WireValues.getScalar(b, p.type()));
            }
        }
    }

    @Benchmark
    public ByteBuffer encodeMemAllocReply() {
        ByteBuffer b = frame.clear().position(FrameHeader.BYTES);
        b.putInt(CuResult.CUDA_SUCCESS);
        List<ApiParam> params = MEM_ALLOC.params();
        for (int i = 0; i < params.size(); i++) {
            ApiParam p = params.get(i);
            if (p.out() && p.type() != ParamType.BYTES) {
                WireValues.putOut(b, p.type(), dptrCell);
            }
        }
        return putHeader(b, MEM_ALLOC.opcode(), FrameHeader.FLAG_REPLY);
    }

    @Benchmark
    public long decodeMemAllocReply() {
        ByteBuffer b = memAllocReply.clear();
        FrameHeader h = readHeader(b);
        int result = b.getInt();
        if (result == CuResult.CUDA_SUCCESS) {
            List<ApiParam> params = MEM_ALLOC.params();
            for (int i = 0; i < params.size(); i++) {
                ApiParam p = params.get(i);
                if (p.out() && p.type() != ParamType.BYTES) {
                    WireValues.getOut(b, p.type(), dptrCell);
                }
            }
        }
        return h.requestId() + result + dptrCell.get(ValueLayout.JAVA_LONG, 0);
    }

    /** Fills the header in front of the body written from {@link FrameHeader#BYTES} on; returns the frame, flipped. */
    private ByteBuffer putHeader(ByteBuffer b, int opcode, int flags) {
        int length = b.position() - FrameHeader.BYTES;
        b.putInt(FrameHeader.LENGTH_OFFSET, length).putInt(FrameHeader.OPCODE_OFFSET, opcode)
                .putInt(FrameHeader.FLAGS_OFFSET, flags).putInt(FrameHeader.LANE_OFFSET, 1)
                .putLong(FrameHeader.REQUEST_ID_OFFSET, ++requestId);
        return b.flip();
    }

    private static FrameHeader readHeader(ByteBuffer b) {
        return new FrameHeader(b.getInt(), b.getInt(), b.getInt(), b.getInt(), b.getLong());
    }
}
