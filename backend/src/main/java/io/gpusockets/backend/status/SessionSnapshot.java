package io.gpusockets.backend.status;

/**
 * One session as {@code gpusockets status} shows it, at one moment.
 *
 * @param id                the session id (also in the backend's log lines)
 * @param tenant            the tenant's name
 * @param transport         the URI scheme it came in on ("tcp", "unix", "vsock", ...)
 * @param peer              the peer as its transport describes it
 * @param memoryBytes       device memory its allocations hold
 * @param streams           streams it holds
 * @param calls             calls received since it started
 * @param callsPerSecond    calls per second over the last few seconds
 * @param bytesIn           frame bytes received (headers and bodies)
 * @param bytesOut          frame bytes sent
 * @param bytesInPerSecond  received bytes per second over the last few seconds
 * @param bytesOutPerSecond sent bytes per second over the last few seconds
 * @param windowBytes       bulk bytes moved through its shared window (both ways), not counted in bytesIn/Out
 * @param ageSeconds        seconds since it started
 * @param stableAddresses   whether it has address-stable memory (its allocations in address windows of its own;
 *                          a checkpoint needs it)
 * @param state             {@link #SERVING}; {@link #MIGRATING}: being migrated from this backend to another now (issue
 *                          23); {@link #DETACHED}: waiting for its frontend to resume (its connection lost, or restored
 *                          or migrated here and not yet resumed), up to its grace period
 */
public record SessionSnapshot(long id, String tenant, String transport, String peer, long memoryBytes, int streams,
                              long calls, double callsPerSecond, long bytesIn, long bytesOut, double bytesInPerSecond,
                              double bytesOutPerSecond, long windowBytes, double ageSeconds, boolean stableAddresses,
                              String state) {
    public static final String SERVING = "serving";
    public static final String MIGRATING = "migrating";
    public static final String DETACHED = "detached";

    public SessionSnapshot {
        java.util.Objects.requireNonNull(state, "state");
    }

    /** A session serving its frontend. */
    public SessionSnapshot(long id, String tenant, String transport, String peer, long memoryBytes, int streams,
                           long calls, double callsPerSecond, long bytesIn, long bytesOut, double bytesInPerSecond,
                           double bytesOutPerSecond, long windowBytes, double ageSeconds, boolean stableAddresses) {
        this(id, tenant, transport, peer, memoryBytes, streams, calls, callsPerSecond, bytesIn, bytesOut,
                bytesInPerSecond, bytesOutPerSecond, windowBytes, ageSeconds, stableAddresses, SERVING);
    }

    /** Whether it is being migrated from this backend now. */
    public boolean migrating() {
        return MIGRATING.equals(state);
    }

    /** Whether it waits, detached, for its frontend to resume. */
    public boolean detached() {
        return DETACHED.equals(state);
    }

    /** This row, marked as being migrated. */
    public SessionSnapshot asMigrating() {
        return withState(MIGRATING);
    }

    /** This row, marked as detached. */
    public SessionSnapshot asDetached() {
        return withState(DETACHED);
    }

    private SessionSnapshot withState(String state) {
        return new SessionSnapshot(id, tenant, transport, peer, memoryBytes, streams, calls, callsPerSecond, bytesIn,
                bytesOut, bytesInPerSecond, bytesOutPerSecond, windowBytes, ageSeconds, stableAddresses, state);
    }
}
