package io.gpusockets.cli;

import io.gpusockets.backend.status.StatusJson;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets status}: asks a running backend over its admin socket what it serves, and prints
 * it like nvidia-smi (devices, tenants, one row per session) or, with {@code --json}, as the backend
 * sent it. Exit status 0 when answered, 1 when the socket is missing, refuses or does not answer.
 */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = "Show a running backend's devices, tenants and sessions (read from its --admin-socket).")
final class StatusCommand implements Callable<Integer> {
    /** Where services put the admin socket, and where status looks when neither --socket nor the variable says. */
    static final String DEFAULT_SOCKET = AdminClient.DEFAULT_SOCKET;
    static final String SOCKET_VARIABLE = AdminClient.SOCKET_VARIABLE;
    /** The most an answer may be: far above what any session count gives, well below trouble. */
    static final int MAX_ANSWER = 64 << 20;
    static final int TIMEOUT_SECONDS = 10;

    @Spec
    CommandSpec spec;

    @Option(names = "--socket", paramLabel = "PATH",
            description = "The backend's admin socket. Default: $" + SOCKET_VARIABLE + ", else " + DEFAULT_SOCKET + ".")
    Path socket;

    @Option(names = "--json", description = "Print the backend's answer as JSON (machine-readable).")
    boolean json;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Path path = AdminClient.socket(socket);
        String answer;
        try {
            answer = ask(path, "status");
        } catch (IOException e) {
            err.println("gpusockets status: " + e.getMessage());
            return 1;
        }
        if (answer.startsWith("refused:") || answer.startsWith("error:")) {
            err.println("gpusockets status: the backend " + answer.strip());
            return 1;
        }
        if (json) {
            out.println(answer.strip());
            return 0;
        }
        try {
            out.print(table(StatusJson.parse(answer.strip())));
        } catch (RuntimeException e) {
            err.println("gpusockets status: unreadable answer from " + path + ": " + e.getMessage());
            return 1;
        }
        out.flush();
        return 0;
    }

    /** Sends one request line and reads the answer to its end; IOException with a message a user can act on. */
    static String ask(Path path, String request) throws IOException {
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("gpusockets-status-timeout").factory());
        try (SocketChannel c = AdminClient.connect(path)) {
            timer.schedule(() -> {
                try {
                    c.close();
                } catch (IOException ignored) {
                    // the read fails and says so
                }
            }, TIMEOUT_SECONDS, TimeUnit.SECONDS);
            AdminClient.send(c, request);
            ByteArrayOutputStream answer = new ByteArrayOutputStream();
            ByteBuffer b = ByteBuffer.allocate(64 << 10);
            try {
                while (c.read(b.clear()) >= 0) {
                    answer.write(b.array(), 0, b.position());
                    if (answer.size() > MAX_ANSWER) {
                        throw new IOException("the answer from " + path + " is over " + MAX_ANSWER + " bytes");
                    }
                }
            } catch (java.nio.channels.AsynchronousCloseException e) {
                throw new IOException("no answer from " + path + " within " + TIMEOUT_SECONDS + " s", e);
            }
            if (answer.size() == 0) {
                throw new IOException("the backend on " + path + " closed without answering");
            }
            return answer.toString(StandardCharsets.UTF_8);
        } finally {
            timer.shutdownNow();
        }
    }

    /** The nvidia-smi-like text of a parsed answer. */
    @SuppressWarnings("unchecked")
    static String table(Object parsed) {
        Map<String, Object> s = (Map<String, Object>) parsed;
        StringBuilder b = new StringBuilder();
        List<Object> sessions = list(s.get("sessions"));
        String backend = String.valueOf(s.get("backend"));
        int colon = backend.indexOf(": "); // the driver's name; --json has the whole description
        b.append("gpusockets backend: ").append(colon > 0 ? backend.substring(0, colon) : backend).append(", ").append(sessions.size())
                .append(" session(s), ").append(s.get("connections")).append(" connection(s)");
        if (s.get("shares") != null) { // absent from an older backend's answer
            b.append(", ").append(s.get("shares")).append(" share(s) between sessions");
        }
        b.append("\n\n");
        if (s.get("poisoned") instanceof Map<?, ?> p) {
            b.append("DRIVER POISONED: ").append(p.get("message")).append(" (").append(p.get("call")).append(")\n\n");
        }

        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"DEVICE", "NAME", "MEMORY USED / TOTAL"});
        for (Object o : list(s.get("devices"))) {
            Map<String, Object> d = (Map<String, Object>) o;
            rows.add(new String[] {String.valueOf(d.get("index")), String.valueOf(d.get("name")),
                    bytes(d.get("memoryUsedBytes")) + " / " + bytes(d.get("memoryTotalBytes"))});
        }
        columns(b, rows);

        rows = new ArrayList<>();
        rows.add(new String[] {"TENANT", "SESSIONS", "MEMORY USED / LIMIT", "REJECTIONS"});
        for (Object o : list(s.get("tenants"))) {
            Map<String, Object> t = (Map<String, Object>) o;
            Map<String, Object> rej = (Map<String, Object>) t.getOrDefault("rejections", Map.of());
            StringBuilder r = new StringBuilder();
            rej.forEach((k, v) -> r.append(r.isEmpty() ? "" : ",").append(k).append('=').append(v));
            Object limit = t.get("sessionLimit");
            rows.add(new String[] {String.valueOf(t.get("name")),
                    t.get("sessions") + (limit == null ? "" : " / " + limit),
                    bytes(t.get("memoryUsedBytes")) + " / " + (t.get("memoryLimitBytes") == null ? "unlimited"
                            : bytes(t.get("memoryLimitBytes"))),
                    r.isEmpty() ? "0" : r.toString()});
        }
        b.append('\n');
        columns(b, rows);

        b.append('\n');
        if (sessions.isEmpty()) {
            b.append("No sessions.\n");
            return b.toString();
        }
        rows = new ArrayList<>();
        rows.add(new String[] {"SESSION", "TENANT", "TRANSPORT", "PEER", "MEMORY", "STREAMS", "CALLS/S", "IN/S", "OUT/S", "AGE",
                "STABLE", "STATE"});
        for (Object o : sessions) {
            Map<String, Object> x = (Map<String, Object>) o;
            rows.add(new String[] {String.valueOf(x.get("id")), String.valueOf(x.get("tenant")), String.valueOf(x.get("transport")),
                    String.valueOf(x.get("peer")), bytes(x.get("memoryBytes")), String.valueOf(x.get("streams")),
                    rate(x.get("callsPerSecond")), bytes(x.get("bytesInPerSecond")), bytes(x.get("bytesOutPerSecond")),
                    age(x.get("ageSeconds")), Boolean.TRUE.equals(x.get("stableAddresses")) ? "yes" : "no",
                    x.get("state") instanceof String st ? st : "serving"});
        }
        columns(b, rows);
        return b.toString();
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        return o instanceof List<?> l ? (List<Object>) l : List.of();
    }

    /** Left-aligned columns two spaces apart, the first row as the heading. */
    private static void columns(StringBuilder b, List<String[]> rows) {
        int[] width = new int[rows.getFirst().length];
        for (String[] r : rows) {
            for (int i = 0; i < r.length; i++) {
                width[i] = Math.max(width[i], r[i].length());
            }
        }
        for (String[] r : rows) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < r.length; i++) {
                line.append(r[i]);
                if (i < r.length - 1) {
                    line.append(" ".repeat(width[i] - r[i].length() + 2));
                }
            }
            b.append(line.toString().stripTrailing()).append('\n');
        }
    }

    /** 1536 → "1.5 KiB"; a negative or missing figure → "?". */
    static String bytes(Object v) {
        if (!(v instanceof Number n) || n.doubleValue() < 0) {
            return "?";
        }
        double x = n.doubleValue();
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        int u = 0;
        while (x >= 1024 && u < units.length - 1) {
            x /= 1024;
            u++;
        }
        return u == 0 ? String.format(Locale.ROOT, "%.0f B", x) : String.format(Locale.ROOT, "%.1f %s", x, units[u]);
    }

    private static String rate(Object v) {
        return v instanceof Number n ? String.format(Locale.ROOT, "%.1f", n.doubleValue()) : "?";
    }

    /** Seconds → "42s", "3m07s", "2h05m", "3d04h". */
    static String age(Object v) {
        if (!(v instanceof Number n)) {
            return "?";
        }
        long s = (long) n.doubleValue();
        if (s < 60) {
            return s + "s";
        } else if (s < 3600) {
            return String.format(Locale.ROOT, "%dm%02ds", s / 60, s % 60);
        } else if (s < 86400) {
            return String.format(Locale.ROOT, "%dh%02dm", s / 3600, s % 3600 / 60);
        }
        return String.format(Locale.ROOT, "%dd%02dh", s / 86400, s % 86400 / 3600);
    }
}
