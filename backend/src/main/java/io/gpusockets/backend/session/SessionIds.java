package io.gpusockets.backend.session;

/**
 * The layout of a session id: unique across a fleet of backends ({@code gpusockets backend --fleet-id N}, issue 22),
 * so that a session checkpointed on one backend can be restored on any other without its id, its handles or its
 * address windows ({@link StableAddresses}) meeting another session's there.
 *
 * <pre>
 *  63      53 52              37 36                                   0
 * +----------+------------------+--------------------------------------+
 * | 0 (11)   | fleet id (16)    | counter (37): 1, 2, 3, ... per backend |
 * +----------+------------------+--------------------------------------+
 * </pre>
 * Fleet id 0 gives the ids a backend always gave (1, 2, 3, ...). Ids stay below 2^53, so that JSON readers that
 * hold numbers as doubles ({@code gpusockets status --json} in JavaScript, jq) read them exactly; 2^37 sessions
 * (137 billion) per backend life are room enough.
 */
public final class SessionIds {
    /** Bits of the counter, below the fleet id. */
    public static final int FLEET_SHIFT = 37;
    /** The largest fleet id. */
    public static final int MAX_FLEET = 0xFFFF;
    /** The largest counter. */
    public static final long MAX_COUNTER = (1L << FLEET_SHIFT) - 1;

    private SessionIds() {
    }

    /** The id of a backend of fleet id {@code fleet}'s {@code counter}-th session. */
    public static long of(int fleet, long counter) {
        if (fleet < 0 || fleet > MAX_FLEET) {
            throw new IllegalArgumentException("fleet=" + fleet + ": must be 0 to " + MAX_FLEET);
        }
        if (counter < 0 || counter > MAX_COUNTER) {
            throw new IllegalArgumentException("counter=" + counter + ": must be 0 to " + MAX_COUNTER);
        }
        return (long) fleet << FLEET_SHIFT | counter;
    }

    /** The fleet id of the backend that issued {@code id} (the bits above the counter, masked to 16). */
    public static int fleet(long id) {
        return (int) (id >>> FLEET_SHIFT) & MAX_FLEET;
    }

    /** The backend's counter in {@code id}. */
    public static long counter(long id) {
        return id & MAX_COUNTER;
    }
}
