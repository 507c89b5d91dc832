package io.gpusockets.backend.session;

/**
 * Bounds that keep one frontend from exhausting the backend; part of {@link BackendSettings}.
 *
 * @param maxLanes        client threads (lanes) per session
 * @param bodyBudget      bytes of received but unprocessed frame bodies per session; the reader stops
 *                        reading (back-pressure on the transport) when it is used up
 * @param maxCallBody     largest body of a call frame (bulk data travels in DATA frames)
 * @param chunkBytes      size of DATA chunks the backend sends
 * @param maxBulkBytes    largest bulk input assembled in memory (module images)
 * @param maxOutBytes     largest generic bytes output (device names and the like)
 * @param asyncAllowed    whether frontends may pipeline async calls
 * @param maxHandles      handles (contexts, modules, functions, streams, events, graphs, ...) a session may hold
 *                        at once; a call that would make one more is refused with CUDA_ERROR_OUT_OF_MEMORY
 *                        before the driver makes it (the tenant's {@code handles} limit may lower it)
 * @param maxStreams      streams a session may hold at once, within {@code maxHandles} (the tenant's
 *                        {@code streams} limit may lower it)
 */
public record SessionLimits(int maxLanes, int bodyBudget, int maxCallBody, int chunkBytes, long maxBulkBytes,
                            int maxOutBytes, boolean asyncAllowed, int maxHandles, int maxStreams) {
    public static final int MAX_HANDLES_DEFAULT = 65_536;
    public static final int MAX_STREAMS_DEFAULT = 8_192;
    public static final SessionLimits DEFAULT =
            new SessionLimits(256, 64 << 20, 64 << 10, 1 << 20, 512L << 20, 1 << 20, true);

    public SessionLimits {
        if (maxLanes < 1 || bodyBudget < (8 << 20) || maxCallBody < 4096 || chunkBytes < 4096
                || maxBulkBytes < chunkBytes || maxOutBytes < 4096 || maxHandles < 1 || maxStreams < 0) {
            throw new IllegalArgumentException("session limits out of range: " + this);
        }
    }

    /** With the default handle and stream caps. */
    public SessionLimits(int maxLanes, int bodyBudget, int maxCallBody, int chunkBytes, long maxBulkBytes,
                         int maxOutBytes, boolean asyncAllowed) {
        this(maxLanes, bodyBudget, maxCallBody, chunkBytes, maxBulkBytes, maxOutBytes, asyncAllowed,
                MAX_HANDLES_DEFAULT, MAX_STREAMS_DEFAULT);
    }

    /** These limits with other handle and stream caps. */
    public SessionLimits withHandleCaps(int handles, int streams) {
        return new SessionLimits(maxLanes, bodyBudget, maxCallBody, chunkBytes, maxBulkBytes, maxOutBytes, asyncAllowed,
                handles, streams);
    }
}
