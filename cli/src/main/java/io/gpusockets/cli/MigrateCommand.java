package io.gpusockets.cli;

import io.gpusockets.backend.status.StatusJson;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets migrate SESSION --to URI [--frontend-uri URI]}: asks a running backend, over its admin socket,
 * to move session SESSION to the backend listening at URI while its program runs (that backend started with
 * {@code --accept-migrations}; any isolation mode at either end). The program's frontend then resumes at
 * {@code --frontend-uri}, or URI. {@code gpusockets migrate SESSION SESSION... --to URI} moves sessions that share IPC
 * memory or events together (admin request {@code migrate SESSION,SESSION... URI}; any isolation mode at either end,
 * from isolation process by stop and copy; a summary line per session): one named alone is refused, naming its partners and this command. {@code gpusockets migrate SESSION --hand-over-to ADMIN_SOCKET [--frontend-uri URI]}
 * hands it instead to the backend process on the same host and GPU whose admin socket that is, with no memory copied
 * (its exported allocations mapped there: the admin verb {@code hand-over}; both backends in {@code --isolation
 * context}); the frontend resumes at {@code --frontend-uri}, or the target's first listening address. Several
 * sessions with {@code --hand-over-to}: sessions that share IPC memory or events, handed over together (admin request
 * {@code hand-over SESSION,SESSION... ADMIN_SOCKET}; a summary line per session). Progress and a
 * readable summary (rounds, bytes, the downtime split) go to stderr,
 * the backend's summary (JSON) to stdout. Exit status 0 when moved, 1 when refused or failed (the message says why;
 * the program runs on at the source).
 */
@Command(name = "migrate", mixinStandardHelpOptions = true,
        description = "Move a running session to another backend (started with --accept-migrations) while its program runs.")
final class MigrateCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "1..64", paramLabel = "SESSION", description = "The session's id, as `gpusockets status` lists"
            + " it; several: sessions that share IPC memory or events, migrated or handed over together.")
    List<Long> sessions;

    @Option(names = "--to", paramLabel = "URI",
            description = "The target backend's listening URI, as the source backend reaches it (tcp://, unix://, tls://...).")
    String to;

    @Option(names = "--hand-over-to", paramLabel = "ADMIN_SOCKET",
            description = "Instead of --to: hand the session(s) to the backend process on this host and GPU whose admin"
                    + " socket this is, with no memory copied (both backends in --isolation context, the target started"
                    + " with --accept-migrations).")
    Path handOverTo;

    @Option(names = "--frontend-uri", paramLabel = "URI",
            description = "Where the program's frontend reaches the target, when not the --to URI (another network).")
    String frontendUri;

    @Option(names = "--socket", paramLabel = "PATH", description = "The source backend's admin socket. Default: $"
            + AdminClient.SOCKET_VARIABLE + ", else " + AdminClient.DEFAULT_SOCKET + ".")
    Path socket;

    @Override
    public Integer call() {
        if ((to == null) == (handOverTo == null)) {
            spec.commandLine().getErr().println("gpusockets migrate: give one of --to URI and --hand-over-to ADMIN_SOCKET");
            return 2;
        }
        String ids = sessions.stream().map(String::valueOf).collect(java.util.stream.Collectors.joining(","));
        if (handOverTo != null) {
            String target = handOverTo.toAbsolutePath().normalize().toString();
            if (!target.chars().allMatch(c -> c > 0x20 && c < 0x7f)
                    || (frontendUri != null && !frontendUri.chars().allMatch(c -> c > 0x20 && c < 0x7f))) {
                spec.commandLine().getErr().println("gpusockets migrate: the socket path and URI must be printable words");
                return 2;
            }
            String request = "hand-over " + ids + " " + target + (frontendUri != null ? " " + frontendUri : "");
            return CheckpointCommand.run(spec, "migrate", AdminClient.socket(socket), request,
                    sessions.size() > 1 ? MigrateCommand::readableHandOverGroup : MigrateCommand::readableHandOver);
        }
        for (String uri : frontendUri == null ? List.of(to) : List.of(to, frontendUri)) {
            if (uri.isEmpty() || !uri.chars().allMatch(c -> c > 0x20 && c < 0x7f)) {
                spec.commandLine().getErr().println("gpusockets migrate: not a URI: '" + uri + "'");
                return 2;
            }
        }
        String request = "migrate " + ids + " " + to + (frontendUri != null ? " " + frontendUri : "");
        return CheckpointCommand.run(spec, "migrate", AdminClient.socket(socket), request,
                sessions.size() > 1 ? MigrateCommand::readableGroup : MigrateCommand::readable);
    }

    /** A group's summary: each session's, as {@link #readable} writes it, one per line. */
    static String readableGroup(String json) {
        return eachSession(json, MigrateCommand::readable);
    }

    /** Each session of a group's answer ({@code json}'s "sessions"), as {@code one} writes it, one per line. */
    @SuppressWarnings("unchecked")
    private static String eachSession(String json, java.util.function.Function<Map<String, Object>, String> one) {
        Map<String, Object> m = (Map<String, Object>) StatusJson.parse(json);
        StringBuilder b = new StringBuilder();
        for (Object o : (List<Object>) m.get("sessions")) {
            b.append(b.isEmpty() ? "" : "\n").append(one.apply((Map<String, Object>) o));
        }
        return b.toString();
    }

    /** The summary as a person reads it: where it went, each round's chunks and MiB, the downtime and its split. */
    @SuppressWarnings("unchecked")
    static String readable(String json) {
        return readable((Map<String, Object>) StatusJson.parse(json));
    }

    @SuppressWarnings("unchecked")
    private static String readable(Map<String, Object> m) {
        StringBuilder b = new StringBuilder();
        b.append("session ").append(m.get("session")).append(" moved to ").append(m.get("target")).append("; rounds:");
        for (Object o : (List<Object>) m.get("rounds")) {
            Map<String, Object> r = (Map<String, Object>) o;
            b.append(String.format(Locale.ROOT, " #%s%s: %s chunks, %.1f MiB;", r.get("round"),
                    Boolean.TRUE.equals(r.get("drained")) ? " (final)" : "", r.get("sentChunks"),
                    number(r.get("sentBytes")) / 1048576.0));
        }
        b.append(String.format(Locale.ROOT, " downtime %.1f ms (drain %.1f, final hash %.1f, final copy %.1f, restore %.1f,"
                        + " switch %.1f)", number(m.get("downtimeMillis")), number(m.get("drainMillis")),
                number(m.get("hashMillis")), number(m.get("finalCopyMillis")), number(m.get("restoreMillis")),
                number(m.get("switchMillis"))));
        return b.toString();
    }

    /** A hand-over's summary: where it went, what was mapped there and copied, the downtime and its split. */
    @SuppressWarnings("unchecked")
    static String readableHandOver(String json) {
        return readableHandOver((Map<String, Object>) StatusJson.parse(json));
    }

    /** A group hand-over's summary: each session's, as {@link #readableHandOver} writes it, one per line. */
    static String readableHandOverGroup(String json) {
        return eachSession(json, MigrateCommand::readableHandOver);
    }

    private static String readableHandOver(Map<String, Object> m) {
        return String.format(Locale.ROOT, "session %s handed over to %s: %s allocations (%.1f MiB) mapped there, %.1f MiB"
                        + " copied; downtime %.1f ms (drain %.1f, export %.1f, image %.1f, restore %.1f, switch %.1f)",
                m.get("session"), m.get("frontend"), m.get("allocations"), number(m.get("handedBytes")) / 1048576.0,
                number(m.get("copiedBytes")) / 1048576.0, number(m.get("downtimeMillis")), number(m.get("drainMillis")),
                number(m.get("exportMillis")), number(m.get("imageMillis")), number(m.get("restoreMillis")),
                number(m.get("switchMillis")));
    }

    private static double number(Object o) {
        return o instanceof Number n ? n.doubleValue() : Double.NaN;
    }
}
