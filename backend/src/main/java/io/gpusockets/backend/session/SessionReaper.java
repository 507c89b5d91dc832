package io.gpusockets.backend.session;

import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The release of sessions that ended while a lane was still inside a driver call. A context is
 * destroyed only when no thread is inside the driver on it (on a real driver anything else is a
 * use-after-free), so such a session's release (its contexts, memory and window) waits here, on a
 * thread of its own, until the stuck lane threads return; the session's connection and reader have
 * ended already. Owns the count of those waiting releases: a session whose lane never returns stays
 * counted (its device memory stays held), which is what the status shows as a "zombie".
 */
final class SessionReaper {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** How often a waiting release checks its lanes, and so how late after their return it runs at most. */
    static final long CHECK_MILLIS = 250;
    /** How long a release waits before it says, once, that it is still waiting. */
    static final long LONG_WAIT_MILLIS = 60_000;

    private static final AtomicInteger PENDING = new AtomicInteger();

    private SessionReaper() {
    }

    /** Releases not yet run because a lane of their session is still inside the driver, in this backend. */
    static int pending() {
        return PENDING.get();
    }

    /**
     * Runs {@code release} once every lane {@link Lanes#endAll} found stuck has returned (never, while
     * one stays in the driver).
     */
    static void defer(long sessionId, Lanes lanes, Runnable release) {
        PENDING.incrementAndGet();
        Thread.ofVirtual().name("gpusockets-s" + sessionId + "-reaper").start(() -> {
            long start = System.nanoTime();
            boolean told = false;
            try {
                while (!lanes.awaitStuck(CHECK_MILLIS)) {
                    long waited = (System.nanoTime() - start) / 1_000_000L;
                    if (!told && waited >= LONG_WAIT_MILLIS) {
                        told = true;
                        LOG.log(Level.WARNING, "session " + sessionId + ": a lane is still inside a driver call after "
                                + waited / 1000 + " s; the session's contexts and memory stay held until it returns");
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return; // the process is going: its memory goes with it
            }
            try {
                release.run();
            } finally {
                PENDING.decrementAndGet();
            }
        });
    }
}
