package io.gpusockets.benchmarks.jmh;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A 64-byte round trip between two threads over one {@code ring://} connection: the benchmark
 * thread writes to the client end and reads the echo; a platform thread started at setup echoes on
 * the server end.
 *
 * <p>Not a JMH {@code @Group} of ping and pong methods: JMH stops group threads independently, and
 * with blocking reads on both sides one of them can be left waiting for a message its peer, already
 * stopped, will never send (the end-of-iteration warm-down does not pair the calls up). The echo
 * thread is stopped by closing the connection at tear-down.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class RingPingPongBenchmark {
    private static final int SIZE = 64;

    private RingPair pair;
    private Thread echo;
    private final ByteBuffer ping = ByteBuffer.allocateDirect(SIZE);

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        pair = RingPair.open();
        echo = Thread.ofPlatform().name("ring-echo").daemon().start(() -> {
            ByteBuffer b = ByteBuffer.allocateDirect(SIZE);
            try {
                while (true) {
                    pair.server().readFully(b.clear());
                    pair.server().write(b.flip());
                }
            } catch (IOException closed) {
                // tear-down closed the connection
            }
        });
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException, InterruptedException {
        pair.close();
        echo.join(5_000);
    }

    @Benchmark
    public ByteBuffer roundTrip64B() throws IOException {
        pair.client().write(ping.clear());
        pair.client().readFully(ping.clear());
        return ping;
    }
}
