package io.gpusockets.backend.session;

/**
 * Whether one handle or device range of a session is being destroyed. A destroy marks it dying
 * (under the session's destroy lock) before it waits for the calls that use it; a call publishes
 * what it uses in its lane's {@link UseSlot} and then reads this mark, refusing what is dying. Both
 * are volatile, so of a call starting to use it and a destroy marking it, at least one sees the
 * other: the call its mark, or the destroy the call's use ({@link SessionUses#retire}).
 */
final class Uses {
    private volatile boolean dying;

    /** Marks it dying; false when it already was (destroyed by an earlier destroy). */
    boolean markDying() {
        if (dying) {
            return false;
        }
        dying = true;
        return true;
    }

    /** The destroy did not happen: calls may use it again. */
    void revive() {
        dying = false;
    }

    boolean dying() {
        return dying;
    }
}
