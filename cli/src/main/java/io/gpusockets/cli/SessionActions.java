package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.status.AdminActions;
import io.gpusockets.backend.status.StatusJson;
import java.nio.file.Path;
import java.util.Locale;

/**
 * The admin socket's checkpoint and restore ({@link AdminActions}) as a running backend does them
 * ({@link BackendServer#checkpoint}, {@link BackendServer#restore}), each answered with one line of JSON.
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
    public String restore(Path file, Progress progress) throws Exception {
        long t0 = System.nanoTime();
        long id = server.restore(file, progress::progress);
        return String.format(Locale.ROOT, "{\"session\":%d,\"file\":%s,\"millis\":%.1f}", id, json(file),
                (System.nanoTime() - t0) / 1e6);
    }

    /** The path as a JSON string, quoted and escaped as status writes strings. */
    private static String json(Path file) {
        return StatusJson.string(new StringBuilder(), file.toString()).toString();
    }
}
