package io.gpusockets.benchmarks.jmh;

import io.gpusockets.transport.ring.RingDescriptor;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The ring transport on one thread, so that no wait or wake-up is timed: {@code size} bytes written,
 * then read back.
 *
 * <ul>
 *   <li>{@code byteRing}: the bare {@code ByteRing} (one direction, 4 MiB, production piece size
 *   {@code min(capacity/4, 256 KiB)}, so 1 MiB travels as 4 records) in memory from an {@link Arena}.
 *   {@code ByteRing} is package-private in transport-ring; it is reached through method handles,
 *   which the JIT folds like direct calls since they sit in {@code static final} fields.</li>
 *   <li>{@code ringConnection}: the same through a {@code ring://} connection's public
 *   {@code Connection} (locks, close checks, liveness), client to server, default 4 MiB rings.</li>
 * </ul>
 *
 * <p>GB/s at 1 MiB is {@code 1,048,576 / (ns/op)}: bytes written and read once each per op.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class RingBenchmark {
    private static final long CAPACITY = 4 << 20;
    private static final MethodHandle NEW_RING;
    private static final MethodHandle WRITE;
    private static final MethodHandle READ;

    static {
        try {
            Class<?> ring = Class.forName("io.gpusockets.transport.ring.ByteRing");
            MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(ring, MethodHandles.lookup());
            NEW_RING = lookup.findConstructor(ring, MethodType.methodType(void.class, MemorySegment.class, int.class,
                    MemorySegment.class)).asType(MethodType.methodType(Object.class, MemorySegment.class, int.class,
                    MemorySegment.class));
            WRITE = lookup.findVirtual(ring, "write", MethodType.methodType(long.class, ByteBuffer[].class))
                    .asType(MethodType.methodType(long.class, Object.class, ByteBuffer[].class));
            READ = lookup.findVirtual(ring, "read", MethodType.methodType(int.class, ByteBuffer.class))
                    .asType(MethodType.methodType(int.class, Object.class, ByteBuffer.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @Param({"64", "1048576"})
    public int size;

    private Arena arena;
    private Object producer;
    private Object consumer;
    private RingPair pair;
    private ByteBuffer out;
    private ByteBuffer[] outs;
    private ByteBuffer in;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        arena = Arena.ofShared();
        MemorySegment meta = arena.allocate(RingDescriptor.META_BYTES, 4096);
        MemorySegment data = arena.allocate(CAPACITY, 4096);
        producer = (Object) NEW_RING.invokeExact(meta, RingDescriptor.CLIENT_TO_SERVER, data);
        consumer = (Object) NEW_RING.invokeExact(meta, RingDescriptor.CLIENT_TO_SERVER, data);
        pair = RingPair.open();
        out = ByteBuffer.allocateDirect(size);
        outs = new ByteBuffer[] {out};
        in = ByteBuffer.allocateDirect(size);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        pair.close();
        arena.close();
    }

    @Benchmark
    public int byteRing() throws Throwable {
        out.clear();
        long written = (long) WRITE.invokeExact(producer, outs);
        in.clear();
        int read = 0;
        while (read < written) {
            int n = (int) READ.invokeExact(consumer, in);
            if (n <= 0) {
                throw new IllegalStateException("ring read: n=" + n + " read=" + read + " written=" + written);
            }
            read += n;
        }
        return read;
    }

    @Benchmark
    public ByteBuffer ringConnection() throws IOException {
        pair.client().write(out.clear());
        pair.server().readFully(in.clear());
        return in;
    }
}
