package io.gpusockets.backend.status;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The JSON form of a {@link ServerSnapshot} ({@code gpusockets status --json} and the admin socket's
 * answer), and a small reader for it. Hand-written rather than a JSON library: one fixed shape of
 * numbers and strings, written and read back by this project only. Unlimited limits are written as
 * null; rates are rounded to two decimals.
 *
 * <p>The shape: {@code {"time":MILLIS,"backend":S,"connections":N,"shares":N,"poisoned":null|{"error","sessionId","call",
 * "time","message"},"devices":[{"index","name",
 * "memoryUsedBytes","memoryTotalBytes"}],"tenants":[{"name","memoryUsedBytes","memoryLimitBytes",
 * "sessions","sessionLimit","rejections":{LIMIT:N}}],"sessions":[{"id","tenant","transport","peer",
 * "memoryBytes","streams","calls","callsPerSecond","bytesIn","bytesOut","bytesInPerSecond",
 * "bytesOutPerSecond","windowBytes","ageSeconds","stableAddresses","state"}],"traffic":[{"tenant","transport","calls","bytesIn",
 * "bytesOut"}]}}. A session's state is "serving", "migrating" (being migrated from this backend) or "detached"
 * (waiting for its frontend to resume: {@link SessionSnapshot#state}).
 */
public final class StatusJson {
    private StatusJson() {
    }

    public static String write(ServerSnapshot s) {
        StringBuilder b = new StringBuilder(512 + 320 * s.sessions().size());
        b.append('{');
        field(b, "time", s.timeMillis()).append(',');
        field(b, "backend", s.backend()).append(',');
        field(b, "connections", s.connections()).append(',');
        field(b, "shares", s.shares()).append(',');
        name(b, "poisoned");
        if (s.poisoned() == null) {
            b.append("null,");
        } else {
            ServerSnapshot.Poisoned p = s.poisoned();
            b.append('{');
            field(b, "error", p.error()).append(',');
            field(b, "sessionId", p.sessionId()).append(',');
            field(b, "call", p.call()).append(',');
            field(b, "time", p.timeMillis()).append(',');
            field(b, "message", p.message()).append("},");
        }
        name(b, "devices").append('[');
        for (int i = 0; i < s.devices().size(); i++) {
            ServerSnapshot.Device d = s.devices().get(i);
            b.append(i > 0 ? ",{" : "{");
            field(b, "index", d.index()).append(',');
            field(b, "name", d.name()).append(',');
            field(b, "memoryUsedBytes", d.memoryUsedBytes()).append(',');
            field(b, "memoryTotalBytes", d.memoryTotalBytes()).append('}');
        }
        b.append("],");
        name(b, "tenants").append('[');
        for (int i = 0; i < s.tenants().size(); i++) {
            ServerSnapshot.Tenant t = s.tenants().get(i);
            b.append(i > 0 ? ",{" : "{");
            field(b, "name", t.name()).append(',');
            field(b, "memoryUsedBytes", t.memoryUsedBytes()).append(',');
            name(b, "memoryLimitBytes").append(t.memoryLimitBytes() == Long.MAX_VALUE ? "null" : Long.toString(t.memoryLimitBytes())).append(',');
            field(b, "sessions", t.sessions()).append(',');
            name(b, "sessionLimit").append(t.sessionLimit() == Integer.MAX_VALUE ? "null" : Integer.toString(t.sessionLimit())).append(',');
            name(b, "rejections").append('{');
            boolean first = true;
            for (Map.Entry<String, Long> e : new TreeMap<>(t.rejections()).entrySet()) {
                b.append(first ? "" : ",");
                field(b, e.getKey(), e.getValue());
                first = false;
            }
            b.append("}}");
        }
        b.append("],");
        name(b, "sessions").append('[');
        for (int i = 0; i < s.sessions().size(); i++) {
            SessionSnapshot x = s.sessions().get(i);
            b.append(i > 0 ? ",{" : "{");
            field(b, "id", x.id()).append(',');
            field(b, "tenant", x.tenant()).append(',');
            field(b, "transport", x.transport()).append(',');
            field(b, "peer", x.peer()).append(',');
            field(b, "memoryBytes", x.memoryBytes()).append(',');
            field(b, "streams", x.streams()).append(',');
            field(b, "calls", x.calls()).append(',');
            field(b, "callsPerSecond", x.callsPerSecond()).append(',');
            field(b, "bytesIn", x.bytesIn()).append(',');
            field(b, "bytesOut", x.bytesOut()).append(',');
            field(b, "bytesInPerSecond", x.bytesInPerSecond()).append(',');
            field(b, "bytesOutPerSecond", x.bytesOutPerSecond()).append(',');
            field(b, "windowBytes", x.windowBytes()).append(',');
            field(b, "ageSeconds", x.ageSeconds()).append(',');
            name(b, "stableAddresses").append(x.stableAddresses()).append(',');
            field(b, "state", x.state()).append('}');
        }
        b.append("],");
        name(b, "traffic").append('[');
        for (int i = 0; i < s.traffic().size(); i++) {
            ServerSnapshot.Traffic t = s.traffic().get(i);
            b.append(i > 0 ? ",{" : "{");
            field(b, "tenant", t.tenant()).append(',');
            field(b, "transport", t.transport()).append(',');
            field(b, "calls", t.calls()).append(',');
            field(b, "bytesIn", t.bytesIn()).append(',');
            field(b, "bytesOut", t.bytesOut()).append('}');
        }
        return b.append("]}").toString();
    }

    private static StringBuilder name(StringBuilder b, String name) {
        return string(b, name).append(':');
    }

    private static StringBuilder field(StringBuilder b, String name, long v) {
        return name(b, name).append(v);
    }

    private static StringBuilder field(StringBuilder b, String name, double v) {
        double r = Math.round(v * 100) / 100.0;
        return name(b, name).append(Double.isFinite(r) ? (r == Math.rint(r) ? Long.toString((long) r) : Double.toString(r)) : "null");
    }

    private static StringBuilder field(StringBuilder b, String name, String v) {
        return string(name(b, name), v);
    }

    /** Appends {@code s} as a JSON string (quoted, escaped). */
    public static StringBuilder string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"');
    }

    /**
     * Parses JSON text: objects become {@code Map<String, Object>} (in order), arrays {@code List<Object>},
     * numbers {@code Long} when integral, else {@code Double}; strings, booleans and null as themselves.
     * Throws IllegalArgumentException with the offset of the first error; nesting is capped at 32.
     */
    public static Object parse(String text) {
        Reader r = new Reader(text);
        Object v = r.value(0);
        r.skipSpace();
        if (r.at != text.length()) {
            throw r.error("text after the value");
        }
        return v;
    }

    private static final class Reader {
        private final String s;
        private int at;

        Reader(String s) {
            this.s = s;
        }

        Object value(int depth) {
            if (depth > 32) {
                throw error("nested too deep");
            }
            skipSpace();
            if (at >= s.length()) {
                throw error("unexpected end");
            }
            char c = s.charAt(at);
            switch (c) {
                case '{' -> {
                    at++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    skipSpace();
                    if (peek('}')) {
                        return m;
                    }
                    do {
                        skipSpace();
                        String k = string();
                        skipSpace();
                        expect(':');
                        m.put(k, value(depth + 1));
                        skipSpace();
                    } while (peek(','));
                    expect('}');
                    return m;
                }
                case '[' -> {
                    at++;
                    List<Object> l = new ArrayList<>();
                    skipSpace();
                    if (peek(']')) {
                        return l;
                    }
                    do {
                        l.add(value(depth + 1));
                        skipSpace();
                    } while (peek(','));
                    expect(']');
                    return l;
                }
                case '"' -> {
                    return string();
                }
                default -> {
                    if (s.startsWith("null", at)) {
                        at += 4;
                        return null;
                    } else if (s.startsWith("true", at)) {
                        at += 4;
                        return Boolean.TRUE;
                    } else if (s.startsWith("false", at)) {
                        at += 5;
                        return Boolean.FALSE;
                    }
                    return number();
                }
            }
        }

        private Object number() {
            int start = at;
            while (at < s.length() && "+-0123456789.eE".indexOf(s.charAt(at)) >= 0) {
                at++;
            }
            String n = s.substring(start, at);
            try {
                if (n.matches("-?\\d{1,18}")) {
                    return Long.parseLong(n);
                }
                return Double.parseDouble(n);
            } catch (NumberFormatException e) {
                at = start;
                throw error("not a value");
            }
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                if (at >= s.length()) {
                    throw error("unterminated string");
                }
                char c = s.charAt(at++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (at >= s.length()) {
                    throw error("unterminated string");
                }
                char e = s.charAt(at++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 'r' -> b.append('\r');
                    case 't' -> b.append('\t');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        if (at + 4 > s.length()) {
                            throw error("short \\u escape");
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(at, at + 4), 16));
                        } catch (NumberFormatException x) {
                            throw error("bad \\u escape");
                        }
                        at += 4;
                    }
                    default -> b.append(e);
                }
            }
        }

        void skipSpace() {
            while (at < s.length() && Character.isWhitespace(s.charAt(at))) {
                at++;
            }
        }

        private boolean peek(char c) {
            if (at < s.length() && s.charAt(at) == c) {
                at++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!peek(c)) {
                throw error("expected '" + c + "'");
            }
        }

        IllegalArgumentException error(String what) {
            return new IllegalArgumentException("bad JSON at offset " + at + ": " + what);
        }
    }
}
