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
 */
public record SessionLimits(int maxLanes, int bodyBudget, int maxCallBody, int chunkBytes, long maxBulkBytes,
                            int maxOutBytes, boolean asyncAllowed) {
    public static final SessionLimits DEFAULT =
            new SessionLimits(256, 64 << 20, 64 << 10, 1 << 20, 512L << 20, 1 << 20, true);

    public SessionLimits {
        if (maxLanes < 1 || bodyBudget < (8 << 20) || maxCallBody < 4096 || chunkBytes < 4096
                || maxBulkBytes < chunkBytes || maxOutBytes < 4096) {
            throw new IllegalArgumentException("session limits out of range: " + this);
        }
    }
}
