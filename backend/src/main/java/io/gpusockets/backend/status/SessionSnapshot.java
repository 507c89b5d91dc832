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
 * @param migrating         whether it is being migrated from this backend to another now (issue 23)
 */
public record SessionSnapshot(long id, String tenant, String transport, String peer, long memoryBytes, int streams,
                              long calls, double callsPerSecond, long bytesIn, long bytesOut, double bytesInPerSecond,
                              double bytesOutPerSecond, long windowBytes, double ageSeconds, boolean stableAddresses,
                              boolean migrating) {
    /** A session not being migrated. */
    public SessionSnapshot(long id, String tenant, String transport, String peer, long memoryBytes, int streams,
                           long calls, double callsPerSecond, long bytesIn, long bytesOut, double bytesInPerSecond,
                           double bytesOutPerSecond, long windowBytes, double ageSeconds, boolean stableAddresses) {
        this(id, tenant, transport, peer, memoryBytes, streams, calls, callsPerSecond, bytesIn, bytesOut,
                bytesInPerSecond, bytesOutPerSecond, windowBytes, ageSeconds, stableAddresses, false);
    }

    /** This row, marked as being migrated. */
    public SessionSnapshot asMigrating() {
        return new SessionSnapshot(id, tenant, transport, peer, memoryBytes, streams, calls, callsPerSecond, bytesIn,
                bytesOut, bytesInPerSecond, bytesOutPerSecond, windowBytes, ageSeconds, stableAddresses, true);
    }
}
