package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import java.io.IOException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * The per-session budget of received but unprocessed body bytes: the reader takes a frame's charge
 * before it reads the body and the charge is given back when the frame is done with, so a frontend
 * that sends faster than its calls run stops being read (back-pressure on the transport) instead of
 * filling the backend's memory. Owns the charge rule, computed only here: a frame is charged the
 * memory its body really takes.
 *
 * <p>A reader waiting for budget is not reading, so it would not see its peer go: it waits in slices
 * of {@link #SLICE_MILLIS}, and gives up with an IOException once the session has ended or the
 * transport knows the peer is gone ({@code gone}). A session whose lanes are blocked (a gate never
 * answered, a wait never satisfied) then still ends when its peer does.
 */
final class BodyBudget {
    /** Smallest charge, so that empty frames (and window references) cannot queue without bound. */
    static final int MIN_CHARGE = 64;
    /** How long a wait for budget goes before it looks again whether the peer is still there. */
    static final long SLICE_MILLIS = 100;

    private final int total;
    private final Semaphore bytes;
    private final DataBufferPool pool;
    private final BooleanSupplier gone;

    /** {@code bytes}: the budget; {@code pool}: whose buffers a pooled DATA body takes; a budget whose peer never goes. */
    BodyBudget(int bytes, DataBufferPool pool) {
        this(bytes, pool, () -> false);
    }

    /** {@code gone}: true once the session has ended or its peer is known to be gone. */
    BodyBudget(int bytes, DataBufferPool pool, BooleanSupplier gone) {
        this.total = bytes;
        this.bytes = new Semaphore(bytes);
        this.pool = pool;
        this.gone = gone;
    }

    /**
     * What the body of {@code h} costs: a pooled DATA buffer its capacity (at most twice the frame's
     * length, at least {@link DataBufferPool#MIN_BUFFER}); any other body its length, at least
     * {@link #MIN_CHARGE}.
     */
    int charge(FrameHeader h) {
        return pool.pools(h) ? pool.capacityFor(h.length()) : Math.max(h.length(), MIN_CHARGE);
    }

    /**
     * Takes {@code charge} bytes, waiting while the budget is used up; an IOException once the peer is
     * gone or the session ended while waiting.
     */
    void acquire(int charge) throws InterruptedException, IOException {
        while (!bytes.tryAcquire(charge, SLICE_MILLIS, TimeUnit.MILLISECONDS)) {
            if (gone.getAsBoolean()) {
                throw new IOException("peer gone while its frames waited for lanes to take them (body budget of "
                        + total + " bytes used up)");
            }
        }
    }

    /** Gives back what {@link #acquire} took (0 is a no-op). */
    void release(int charge) {
        if (charge > 0) {
            bytes.release(charge);
        }
    }

    /** Bytes left, for tests. */
    int available() {
        return bytes.availablePermits();
    }
}
