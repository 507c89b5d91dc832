package io.gpusockets.backend.session;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * How many calls use one handle or device range of a session right now, from the check that let
 * them use it until their driver call returned, and whether it is being destroyed. A destroy marks
 * it dying (no call may start using it from then on) and waits until no call uses it
 * ({@link SessionUses#retire}); a check that finds it dying refuses the call. One atomic word, so
 * that the check on a call's fast path is one compare-and-set and its end one decrement.
 */
final class Uses {
    private static final int DYING = 1 << 30;

    private final AtomicInteger state = new AtomicInteger();

    /** Starts a use; false when the object is being destroyed (or was). */
    boolean acquire() {
        while (true) {
            int s = state.get();
            if ((s & DYING) != 0) {
                return false;
            }
            if (state.compareAndSet(s, s + 1)) {
                return true;
            }
        }
    }

    /** Ends a use; true when the object is dying, so that a destroy may be waiting for this. */
    boolean release() {
        return (state.decrementAndGet() & DYING) != 0;
    }

    /** Marks it dying; false when it already was. */
    boolean markDying() {
        while (true) {
            int s = state.get();
            if ((s & DYING) != 0) {
                return false;
            }
            if (state.compareAndSet(s, s | DYING)) {
                return true;
            }
        }
    }

    /** The destroy did not happen: calls may use it again. */
    void revive() {
        state.addAndGet(-DYING);
    }

    /** Whether no call uses it now. */
    boolean idle() {
        return (state.get() & ~DYING) == 0;
    }

    boolean dying() {
        return (state.get() & DYING) != 0;
    }
}
