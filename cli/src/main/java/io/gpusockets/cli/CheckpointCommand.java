package io.gpusockets.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets checkpoint SESSION --to FILE [--stop]}: asks a running backend, over its admin socket, to
 * write session SESSION's GPU state to FILE (written by the backend, as its user, on its host); with
 * {@code --stop} the session stays frozen afterwards, for a restore elsewhere. {@code gpusockets checkpoint SESSION
 * SESSION... --to DIR}: sessions that share IPC memory, checkpointed together, each to {@code DIR/session-ID.ckpt}
 * (the folder must exist), for {@code gpusockets restore DIR/session-*.ckpt}. Progress goes to stderr, the
 * backend's summary (JSON) to stdout. Exit status 0 when written, 1 when refused or failed (the message says
 * what could not be captured or written).
 */
@Command(name = "checkpoint", mixinStandardHelpOptions = true,
        description = "Write a session's GPU state to a file (on the backend's host), for `gpusockets restore`.")
final class CheckpointCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "1..64", paramLabel = "SESSION", description = "The session's id, as `gpusockets status` lists"
            + " it; several: sessions that share IPC memory, checkpointed together (each to DIR/session-ID.ckpt).")
    java.util.List<Long> sessions;

    @Option(names = "--to", required = true, paramLabel = "FILE|DIR",
            description = "The image file the backend writes, or with several sessions the folder it writes their images"
                    + " in (a relative path is taken from this directory).")
    Path to;

    @Option(names = "--stop", description = "Leave the session frozen afterwards (to restore it in another backend).")
    boolean stop;

    @Option(names = "--socket", paramLabel = "PATH", description = "The backend's admin socket. Default: $"
            + AdminClient.SOCKET_VARIABLE + ", else " + AdminClient.DEFAULT_SOCKET + ".")
    Path socket;

    @Override
    public Integer call() {
        Path target = to.toAbsolutePath().normalize();
        String files = target.toString();
        if (sessions.size() > 1) {
            java.util.List<String> each = new java.util.ArrayList<>();
            for (long id : sessions) {
                each.add(target.resolve("session-" + id + ".ckpt").toString());
            }
            files = String.join("\t", each);
        }
        String request = "checkpoint " + sessions.stream().map(String::valueOf).collect(java.util.stream.Collectors.joining(","))
                + (stop ? " stop " : " ") + files;
        return run(spec, "checkpoint", AdminClient.socket(socket), request);
    }

    /** Sends {@code request}, shows its progress on stderr, prints its summary; the exit status. */
    static int run(CommandSpec spec, String verb, Path socket, String request) {
        return run(spec, verb, socket, request, json -> null);
    }

    /**
     * As {@link #run(CommandSpec, String, Path, String)}; {@code readable} turns the summary (JSON) into a line for
     * stderr, or null for none.
     */
    static int run(CommandSpec spec, String verb, Path socket, String request,
                   java.util.function.Function<String, String> readable) {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        String answer;
        String[] lastStage = {""};
        long[] lastPrint = {0};
        try {
            answer = AdminClient.stream(socket, request, p -> {
                // a line per stage, then at most two a second, and the stage's end
                String stage = p.split(" ", 2)[0];
                String[] w = p.split(" ");
                boolean end = w.length == 3 && w[1].equals(w[2]);
                long now = System.nanoTime();
                if (stage.equals(lastStage[0]) && !end && now - lastPrint[0] < 500_000_000L) {
                    return;
                }
                lastStage[0] = stage;
                lastPrint[0] = now;
                err.println("gpusockets " + verb + ": " + describe(p));
                err.flush();
            });
        } catch (IOException e) {
            err.println("gpusockets " + verb + ": " + e.getMessage());
            return 1;
        }
        if (answer.startsWith("ok ")) {
            String line = null;
            try {
                line = readable.apply(answer.substring(3));
            } catch (RuntimeException e) {
                // a summary this client cannot read: the JSON on stdout still says it all
            }
            if (line != null) {
                err.println("gpusockets " + verb + ": " + line);
                err.flush();
            }
            out.println(answer.substring(3));
            out.flush();
            return 0;
        }
        err.println("gpusockets " + verb + ": the backend answered: " + answer.strip());
        return 1;
    }

    /** "STAGE DONE TOTAL" as a person reads it: the contents' bytes in MiB. */
    static String describe(String progress) {
        String[] w = progress.split(" ");
        if (w.length != 3) {
            return progress;
        }
        try {
            long done = Long.parseLong(w[1]);
            long total = Long.parseLong(w[2]);
            String stage = w[0].replace('_', ' ');
            if (stage.equals("contents")) {
                return String.format(java.util.Locale.ROOT, "%s %.1f / %.1f MiB%s", stage,
                        done / 1048576.0, total / 1048576.0, total > 0 ? String.format(java.util.Locale.ROOT, " (%d%%)", done * 100 / total) : "");
            }
            return total > 0 ? stage + " " + done + " / " + total : stage + " " + done;
        } catch (NumberFormatException e) {
            return progress;
        }
    }
}
