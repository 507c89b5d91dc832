package io.gpusockets.backend.status;

import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.session.SessionStats;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;

/**
 * What a session's own counters say of it at one moment ({@link SessionSnapshot}'s figures, without what
 * the server knows of it: id, tenant, transport, peer, age). A process-mode worker sends them to its front
 * once a second ({@link #encode}, {@link #decode}); the front shows them as the worker session's row.
 */
public record SessionFigures(long memoryBytes, int streams, long calls, double callsPerSecond, long bytesIn,
                             long bytesOut, double bytesInPerSecond, double bytesOutPerSecond, long windowBytes,
                             boolean detached) {
    /** Before a worker's first report. */
    public static final SessionFigures NONE = new SessionFigures(0, 0, 0, 0, 0, 0, 0, 0, 0, false);

    /** The figures of {@code s} now; rates as of its last sample. */
    public static SessionFigures of(Session s, long nowNanos) {
        SessionStats.Totals t = s.stats().totals();
        SessionStats.Rates r = s.stats().rates(nowNanos);
        return new SessionFigures(s.memoryBytes(), s.streamCount(), t.calls(), r.calls(), t.bytesIn(), t.bytesOut(),
                r.bytesIn(), r.bytesOut(), s.windowBytes(), s.detached() != null);
    }

    /** The row status shows ({@code detached}: state detached, the session waiting for its frontend to resume). */
    public SessionSnapshot snapshot(long id, String tenant, String transport, String peer, double ageSeconds,
                                    boolean stableAddresses) {
        SessionSnapshot row = new SessionSnapshot(id, tenant, transport, peer, memoryBytes, streams, calls, callsPerSecond,
                bytesIn, bytesOut, bytesInPerSecond, bytesOutPerSecond, windowBytes, ageSeconds, stableAddresses);
        return detached ? row.asDetached() : row;
    }

    public void encode(ByteBuffer b) {
        b.putLong(memoryBytes).putInt(streams).putLong(calls).putDouble(callsPerSecond).putLong(bytesIn).putLong(bytesOut)
                .putDouble(bytesInPerSecond).putDouble(bytesOutPerSecond).putLong(windowBytes).put((byte) (detached ? 1 : 0));
    }

    /**
     * The figures {@link #encode} wrote; a message without the last byte (a worker of an older backend adopted by a
     * take-over) reads as not detached.
     *
     * @throws BufferUnderflowException when {@code b} holds fewer bytes than the figures before that byte
     */
    public static SessionFigures decode(ByteBuffer b) {
        return new SessionFigures(b.getLong(), b.getInt(), b.getLong(), b.getDouble(), b.getLong(), b.getLong(),
                b.getDouble(), b.getDouble(), b.getLong(), b.hasRemaining() && b.get() != 0);
    }
}
