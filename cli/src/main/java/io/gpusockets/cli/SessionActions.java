package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.HandOver;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.status.AdminActions;
import io.gpusockets.backend.status.StatusJson;
import java.nio.file.Path;
import java.util.Locale;

/**
 * The admin socket's checkpoint, restore, migrate, hand-over and take-over ({@link AdminActions}) as a running backend
 * does them ({@link BackendServer#checkpoint}, {@link BackendServer#restore}, {@link BackendServer#migrate},
 * {@link BackendServer#handOver}, {@link BackendServer#receiveHandOver}, {@link BackendServer#takeOver}), each answered
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

    /** {@code {"sessions":[CHECKPOINT_ANSWER...]}}: one per session, as {@link #checkpoint} answers. */
    @Override
    public String checkpointGroup(java.util.List<Long> sessions, java.util.List<Path> files, boolean stop,
                                  Progress progress) throws Exception {
        java.util.List<CheckpointResult> results = server.checkpointGroup(sessions, files, stop, progress::progress);
        StringBuilder b = new StringBuilder("{\"sessions\":[");
        for (int i = 0; i < results.size(); i++) {
            CheckpointResult r = results.get(i);
            b.append(i > 0 ? "," : "").append(String.format(Locale.ROOT, "{\"session\":%d,\"file\":%s,\"stopped\":%b,"
                            + "\"bytes\":%d,\"ranges\":%d,\"records\":%d,\"drainMillis\":%.1f,\"writeMillis\":%.1f}",
                    sessions.get(i), json(files.get(i)), stop, r.bytesWritten(), r.allocations(), r.records(),
                    r.drainNanos() / 1e6, r.imageNanos() / 1e6));
        }
        return b.append("]}").toString();
    }

    /** {@code {"sessions":[ID...],"files":[FILE...],"millis"}}. */
    @Override
    public String restoreGroup(java.util.List<Path> files, Progress progress) throws Exception {
        long t0 = System.nanoTime();
        java.util.List<Long> ids = server.restoreGroup(files, progress::progress);
        StringBuilder b = new StringBuilder("{\"sessions\":").append(ids.toString().replace(" ", "")).append(",\"files\":[");
        for (int i = 0; i < files.size(); i++) {
            b.append(i > 0 ? "," : "").append(json(files.get(i)));
        }
        return b.append(String.format(Locale.ROOT, "],\"millis\":%.1f}", (System.nanoTime() - t0) / 1e6)).toString();
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
     * "switchMillis","imageMemoryBytes"}}: each round (the pre-copy ones, then the final one, drained), the downtime
     * split, and the memory contents the target's image carried (0: it landed all of it as it came; -1: not said).
     */
    @Override
    public String migrate(long session, String targetUri, String frontendUri, Progress progress) throws Exception {
        return json(server.migrate(session, targetUri, frontendUri, progress::progress));
    }

    /** {@code {"sessions":[MIGRATE_ANSWER...]}}: one per session, as {@link #migrate} answers, the stop shared. */
    @Override
    public String migrateGroup(java.util.List<Long> sessions, String targetUri, String frontendUri, Progress progress)
            throws Exception {
        java.util.List<Migration.Result> results = server.migrateGroup(sessions, targetUri, frontendUri, progress::progress);
        StringBuilder b = new StringBuilder("{\"sessions\":[");
        for (int i = 0; i < results.size(); i++) {
            b.append(i > 0 ? "," : "").append(json(results.get(i)));
        }
        return b.append("]}").toString();
    }

    private static String json(Migration.Result r) {
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
                        + "\"hashMillis\":%.1f,\"finalCopyMillis\":%.1f,\"restoreMillis\":%.1f,\"switchMillis\":%.1f,"
                        + "\"imageMemoryBytes\":%d}",
                r.bytes(), r.downtimeNanos() / 1e6, r.drainNanos() / 1e6, r.hashNanos() / 1e6, r.finalCopyNanos() / 1e6,
                r.restoreNanos() / 1e6, r.switchNanos() / 1e6, r.imageMemoryBytes()));
        return b.toString();
    }

    /**
     * The source's side of a hand-over on one host ({@link BackendServer#handOver}): listens on an {@code fdunix://}
     * socket in a fresh folder only this user can enter, asks the target backend on its admin socket to
     * {@code receive-hand-over} from there, hands the session over on the connection it makes, and answers
     * {@code {"session","frontend","allocations","handedBytes","copiedBytes","imageBytes","downtimeMillis",
     * "drainMillis","exportMillis","imageMillis","restoreMillis","switchMillis","target":TARGET_ANSWER}}. A target
     * that refuses (or never connects) fails it before the session is drained.
     */
    @Override
    public String handOver(long session, Path targetAdmin, String frontendUri, Progress progress) throws Exception {
        return handOver(targetAdmin, frontendUri, c -> java.util.List.of(server.handOver(session, c, frontendUri,
                progress::progress)), (results, target) -> json(results.getFirst(), target));
    }

    /**
     * {@link #handOver} of sessions that share IPC memory or events, together ({@link BackendServer#handOverGroup});
     * answers {@code {"sessions":[...],"target":TARGET_ANSWER}}, one object per session as {@link #handOver} answers
     * (without {@code target}).
     */
    @Override
    public String handOverGroup(java.util.List<Long> sessions, Path targetAdmin, String frontendUri, Progress progress)
            throws Exception {
        return handOver(targetAdmin, frontendUri, c -> server.handOverGroup(sessions, c, frontendUri, progress::progress),
                (results, target) -> {
                    StringBuilder b = new StringBuilder("{\"sessions\":[");
                    for (int i = 0; i < results.size(); i++) {
                        b.append(i > 0 ? "," : "").append(json(results.get(i), null));
                    }
                    return b.append("],\"target\":").append(target).append('}').toString();
                });
    }

    /** What hands over on the connection the target made. */
    @FunctionalInterface
    private interface HandingOver {
        java.util.List<HandOver.Result> run(Connection c) throws Exception;
    }

    /** The source's side of {@link #handOver} and {@link #handOverGroup}; {@code answer} makes the JSON answer. */
    private static String handOver(Path targetAdmin, String frontendUri, HandingOver work,
                                   java.util.function.BiFunction<java.util.List<HandOver.Result>, String, String> answer)
            throws Exception {
        Path dir = java.nio.file.Files.createTempDirectory("gpusockets-handover",
                java.nio.file.attribute.PosixFilePermissions.asFileAttribute(
                        java.nio.file.attribute.PosixFilePermissions.fromString("rwx------")));
        Path socket = dir.resolve("s");
        try (Listener listener = Transports.listen(TransportUri.parse("fdunix://" + socket));
             java.nio.channels.SocketChannel admin = java.nio.channels.SocketChannel.open(
                     java.net.UnixDomainSocketAddress.of(targetAdmin))) {
            write(admin, "receive-hand-over " + socket + (frontendUri != null ? " " + frontendUri : "") + "\n");
            java.util.concurrent.CompletableFuture<String> answered = new java.util.concurrent.CompletableFuture<>();
            Thread.ofVirtual().start(() -> {
                String line = null;
                try {
                    line = lastLine(admin);
                    answered.complete(line);
                } catch (java.io.IOException | RuntimeException e) {
                    answered.complete("error: " + e.getMessage());
                }
                if (line == null || !line.startsWith("ok ")) {
                    listener.close(); // a refusal: the accept below ends
                }
            });
            Connection c;
            try {
                c = listener.accept();
            } catch (java.io.IOException e) {
                throw new IllegalStateException("the target backend at " + targetAdmin + " did not take the hand-over: "
                        + answered.get(10, java.util.concurrent.TimeUnit.SECONDS));
            }
            java.util.List<HandOver.Result> r;
            try (c) {
                r = work.run(c);
            }
            String target = answered.get();
            return answer.apply(r, target.startsWith("ok ") ? target.substring(3)
                    : StatusJson.string(new StringBuilder(), target).toString());
        } finally {
            java.nio.file.Files.deleteIfExists(socket);
            java.nio.file.Files.deleteIfExists(dir);
        }
    }

    /** One hand-over's result as JSON; {@code target}: the target's answer (JSON), or null for none. */
    private static String json(HandOver.Result r, String target) {
        return String.format(Locale.ROOT, "{\"session\":%d,\"frontend\":%s,\"allocations\":%d,\"handedBytes\":%d,"
                        + "\"copiedBytes\":%d,\"imageBytes\":%d,\"downtimeMillis\":%.1f,\"drainMillis\":%.1f,"
                        + "\"exportMillis\":%.1f,\"imageMillis\":%.1f,\"restoreMillis\":%.1f,\"switchMillis\":%.1f%s}",
                r.sessionId(), StatusJson.string(new StringBuilder(), r.frontendUri()), r.handles(), r.handedBytes(),
                r.copiedBytes(), r.imageBytes(), r.downtimeNanos() / 1e6, r.drainNanos() / 1e6, r.exportNanos() / 1e6,
                r.imageNanos() / 1e6, r.restoreNanos() / 1e6, r.switchNanos() / 1e6,
                target == null ? "" : ",\"target\":" + target);
    }

    /**
     * The target's side: connects to the source's socket and receives the session, or the sessions handed over
     * together ({@link BackendServer#receiveHandOvers}); answers {@code {"session","sessions":[...],"millis"}}
     * ({@code session} the first).
     */
    @Override
    public String receiveHandOver(Path sourceSocket, String frontendUri, Progress progress) throws Exception {
        long t0 = System.nanoTime();
        try (Connection c = Transports.connect(TransportUri.parse("fdunix://" + sourceSocket),
                java.time.Duration.ofSeconds(10))) {
            java.util.List<Long> ids = server.receiveHandOvers(c, frontendUri);
            return String.format(Locale.ROOT, "{\"session\":%d,\"sessions\":%s,\"millis\":%.1f}", ids.getFirst(),
                    ids.toString().replace(" ", ""), (System.nanoTime() - t0) / 1e6);
        }
    }

    private static void write(java.nio.channels.SocketChannel c, String s) throws java.io.IOException {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    /** The admin answer's last line (progress lines before it are skipped), bounded. */
    private static String lastLine(java.nio.channels.SocketChannel c) throws java.io.IOException {
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(
                java.nio.channels.Channels.newInputStream(c), java.nio.charset.StandardCharsets.UTF_8));
        String last = null;
        for (String line; (line = in.readLine()) != null; ) {
            if (line.length() > 65536) {
                throw new java.io.IOException("the target's admin answer has a line of " + line.length() + " characters");
            }
            if (!line.startsWith("progress ")) {
                last = line;
            }
        }
        if (last == null) {
            throw new java.io.IOException("the target's admin socket closed without an answer");
        }
        return last;
    }

    /** The path as a JSON string, quoted and escaped as status writes strings. */
    private static String json(Path file) {
        return StatusJson.string(new StringBuilder(), file.toString()).toString();
    }
}
