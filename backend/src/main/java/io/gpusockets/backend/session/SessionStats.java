package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * What one session has done, for {@code gpusockets status} and the metrics: calls and frame bytes
 * each way since it started, and their rates over the last few seconds. Owned by its {@link Session};
 * read by any thread without the session's locks.
 *
 * <p>Cost on the hot path: the session's one reader thread adds to two counters with plain-release
 * stores (a single writer needs no atomic add); replies, sent from any lane, go to a {@link LongAdder}.
 * Rates come from samples the server takes once a second ({@link #sample}), kept for {@value #WINDOW}
 * of them, so a rate is never older than that window and costs nothing between samples.
 */
public final class SessionStats {
    /** Samples kept: the window rates are measured over, in sample periods (the server samples once a second). */
    static final int WINDOW = 5;

    /** Counters at one moment. */
    public record Totals(long calls, long bytesIn, long bytesOut) {
    }

    /** Per-second rates over the recent window. */
    public record Rates(double calls, double bytesIn, double bytesOut) {
    }

    private final long startNanos;
    private final long startMillis;
    /** Written only by the session's reader thread. */
    private final AtomicLong calls = new AtomicLong();
    private final AtomicLong bytesIn = new AtomicLong();
    private final LongAdder bytesOut = new LongAdder();
    private volatile String transport = "unknown";

    private final long[] sampleNanos = new long[WINDOW];
    private final long[] sampleCalls = new long[WINDOW];
    private final long[] sampleIn = new long[WINDOW];
    private final long[] sampleOut = new long[WINDOW];
    private int samples;
    private int next;

    public SessionStats() {
        this(System.nanoTime(), System.currentTimeMillis());
    }

    SessionStats(long startNanos, long startMillis) {
        this.startNanos = startNanos;
        this.startMillis = startMillis;
    }

    /** A frame was read (on the session's reader thread only): its bytes, and a call unless it is a control frame. */
    private final AtomicLong resumes = new AtomicLong();

    /** The session resumed on a new connection. */
    void resumed() {
        resumes.incrementAndGet();
    }

    /** Times the session resumed on a new connection after losing one. */
    public long resumes() {
        return resumes.get();
    }

    void frameIn(FrameHeader h) {
        bytesIn.setRelease(bytesIn.getPlain() + FrameHeader.BYTES + h.length());
        if (!Opcodes.isControl(h.opcode())) {
            calls.setRelease(calls.getPlain() + 1);
        }
    }

    /** A frame with {@code bodyBytes} of body was sent (any thread). */
    void frameOut(long bodyBytes) {
        bytesOut.add(FrameHeader.BYTES + bodyBytes);
    }

    /** The body bytes of a frame made of these buffers: every remaining byte of each. */
    static long bodyBytes(java.nio.ByteBuffer... body) {
        long n = 0;
        for (java.nio.ByteBuffer b : body) {
            n += b.remaining();
        }
        return n;
    }

    /** The URI scheme the session came in on ("tcp", "unix", ...), set once by the server. */
    public void transport(String scheme) {
        this.transport = scheme == null || scheme.isEmpty() ? "unknown" : scheme;
    }

    public String transport() {
        return transport;
    }

    /** When the session started, in epoch milliseconds. */
    public long startMillis() {
        return startMillis;
    }

    /** Seconds since the session started. */
    public double ageSeconds(long nowNanos) {
        return Math.max(0, nowNanos - startNanos) / 1e9;
    }

    public Totals totals() {
        return new Totals(calls.getAcquire(), bytesIn.getAcquire(), bytesOut.sum());
    }

    /** Records the counters as of {@code nowNanos} (System.nanoTime); the oldest of {@value #WINDOW} is dropped. */
    public synchronized void sample(long nowNanos) {
        Totals t = totals();
        sampleNanos[next] = nowNanos;
        sampleCalls[next] = t.calls();
        sampleIn[next] = t.bytesIn();
        sampleOut[next] = t.bytesOut();
        next = (next + 1) % WINDOW;
        samples = Math.min(samples + 1, WINDOW);
    }

    /**
     * Rates from the oldest sample kept to the counters now, or from the session's start while fewer than
     * {@value #WINDOW} samples are kept; zero over an interval too short to measure.
     */
    public synchronized Rates rates(long nowNanos) {
        long t0 = startNanos;
        long c0 = 0;
        long i0 = 0;
        long o0 = 0;
        if (samples == WINDOW) {
            t0 = sampleNanos[next]; // the oldest kept
            c0 = sampleCalls[next];
            i0 = sampleIn[next];
            o0 = sampleOut[next];
        }
        Totals t = totals();
        double seconds = (nowNanos - t0) / 1e9;
        if (seconds < 1e-3) {
            return new Rates(0, 0, 0);
        }
        return new Rates((t.calls() - c0) / seconds, (t.bytesIn() - i0) / seconds, (t.bytesOut() - o0) / seconds);
    }
}
