package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import java.util.concurrent.Semaphore;

/**
 * The per-session budget of received but unprocessed body bytes: the reader takes a frame's charge
 * before it reads the body and the charge is given back when the frame is done with, so a frontend
 * that sends faster than its calls run stops being read (back-pressure on the transport) instead of
 * filling the backend's memory. Owns the charge rule, computed only here.
 */
final class BodyBudget {
    /** Smallest charge, so that empty frames (and window references) cannot queue without bound. */
    static final int MIN_CHARGE = 64;

    private final Semaphore bytes;
    private final DataBufferPool pool;

    /** {@code bytes}: the budget; {@code pool}: whose buffers a pooled DATA body takes. */
    BodyBudget(int bytes, DataBufferPool pool) {
        this.bytes = new Semaphore(bytes);
        this.pool = pool;
    }

    /**
     * What the body of {@code h} costs. A pooled DATA buffer costs its whole capacity, so that tiny
     * DATA frames cannot pin many chunks; any other body costs its length, at least {@link #MIN_CHARGE}.
     */
    int charge(FrameHeader h) {
        return pool.pools(h) ? pool.bufferBytes() : Math.max(h.length(), MIN_CHARGE);
    }

    /** Takes {@code charge} bytes, waiting while the budget is used up. */
    void acquire(int charge) throws InterruptedException {
        bytes.acquire(charge);
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
