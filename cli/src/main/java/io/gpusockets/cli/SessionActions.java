package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.status.AdminActions;
import io.gpusockets.backend.status.StatusJson;
import java.nio.file.Path;
import java.util.Locale;

/**
 * The admin socket's checkpoint, restore, migrate and take-over ({@link AdminActions}) as a running backend does them
 * ({@link BackendServer#checkpoint}, {@link BackendServer#restore}, {@link BackendServer#migrate}), each answered
 * with one line of JSON.
 */
final class SessionActions implements AdminActions {
    private final BackendServer server;

    SessionActions(BackendServer server) {
        this.server = server;
    }

    @Override
    public String checkpoint(long session, Path file, boolean stop, Progress progress) throws Exception {
        CheckpointResult r = server.checkpoint(session, file, stop, progress::progress);
        return String.format(Locale.ROOT, "{\"session\":%d,\"file\":%s,\"stopped\":%b,\"bytes\":%d,\"ranges\":%d,"
                        + "\"records\":%d,\"drainMillis\":%.1f,\"writeMillis\":%.1f}", session, json(file), stop,
                r.bytesWritten(), r.allocations(), r.records(), r.drainNanos() / 1e6, r.imageNanos() / 1e6);
    }

    @Override
    public String takeOver(Path socket, String isolation, java.nio.file.attribute.UserPrincipal requester) throws Exception {
        return server.handOffTo(socket, isolation, requester).json();
    }

    @Override
    public String restore(Path file, Progress progress) throws Exception {
        long t0 = System.nanoTime();
        long id = server.restore(file, progress::progress);
        return String.format(Locale.ROOT, "{\"session\":%d,\"file\":%s,\"millis\":%.1f}", id, json(file),
                (System.nanoTime() - t0) / 1e6);
    }

    /**
     * {@code {"session","target","rounds":[{"round","drained","chunks","bytes","sentChunks","sentBytes","hashMillis",
     * "copyMillis"}],"bytes","downtimeMillis","drainMillis","hashMillis","finalCopyMillis","restoreMillis",
     * "switchMillis"}}: each round (the pre-copy ones, then the final one, drained) and the downtime split.
     */
    @Override
    public String migrate(long session, String targetUri, String frontendUri, Progress progress) throws Exception {
        Migration.Result r = server.migrate(session, targetUri, frontendUri, progress::progress);
        StringBuilder b = new StringBuilder(256 + 160 * r.rounds().size());
        b.append("{\"session\":").append(r.sessionId()).append(",\"target\":");
        StatusJson.string(b, r.target()).append(",\"rounds\":[");
        for (int i = 0; i < r.rounds().size(); i++) {
            PreCopy.Round x = r.rounds().get(i);
            b.append(i > 0 ? "," : "").append(String.format(Locale.ROOT, "{\"round\":%d,\"drained\":%b,\"chunks\":%d,"
                            + "\"bytes\":%d,\"sentChunks\":%d,\"sentBytes\":%d,\"hashMillis\":%.1f,\"copyMillis\":%.1f}",
                    x.round(), x.drained(), x.chunks(), x.bytes(), x.sentChunks(), x.sentBytes(), x.hashNanos() / 1e6,
                    x.copyNanos() / 1e6));
        }
        b.append(String.format(Locale.ROOT, "],\"bytes\":%d,\"downtimeMillis\":%.1f,\"drainMillis\":%.1f,"
                        + "\"hashMillis\":%.1f,\"finalCopyMillis\":%.1f,\"restoreMillis\":%.1f,\"switchMillis\":%.1f}",
                r.bytes(), r.downtimeNanos() / 1e6, r.drainNanos() / 1e6, r.hashNanos() / 1e6, r.finalCopyNanos() / 1e6,
                r.restoreNanos() / 1e6, r.switchNanos() / 1e6));
        return b.toString();
    }

    /** The path as a JSON string, quoted and escaped as status writes strings. */
    private static String json(Path file) {
        return StatusJson.string(new StringBuilder(), file.toString()).toString();
    }
}
