package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Splits an entry body (comments already removed, line breaks kept) into statements, each with the
 * PTX line it starts on and the scope it is in: instructions and directives end at ';', labels at
 * ':', '{' and '}' at a statement's start open and close a scope (each scope gets a number, 0 the
 * body's; {@code parents} maps each to the one it is in), {@code .loc}/{@code .section} debug lines
 * end at the line.
 */
final class Statements {
    record Statement(String text, int line, boolean label, int scope) {
    }

    /** The scopes of a split body: parent[k] is scope k's enclosing scope (parent[0] = -1). */
    record Split(List<Statement> statements, List<Integer> parents) {
    }

    private static final Pattern LABEL = Pattern.compile("[A-Za-z_$%][\\w$]*");

    private Statements() {
    }

    private static boolean lineDirective(String body, int i, String name) {
        int end = i + name.length();
        return body.startsWith(name, i) && end < body.length() && Character.isWhitespace(body.charAt(end));
    }

    static Split scoped(String body, int firstLine) {
        List<Statement> out = new ArrayList<>();
        List<Integer> parents = new ArrayList<>(List.of(-1));
        java.util.ArrayDeque<Integer> open = new java.util.ArrayDeque<>(List.of(0));
        StringBuilder s = new StringBuilder();
        int line = firstLine;
        int start = line;
        int n = body.length();
        for (int i = 0; i < n; i++) {
            char c = body.charAt(i);
            if (c == '\n') {
                line++;
            }
            boolean blank = s.toString().isBlank();
            if (blank && !Character.isWhitespace(c)) {
                start = line;
                s.setLength(0);
                if (lineDirective(body, i, ".loc") || lineDirective(body, i, ".section")) {
                    int end = body.indexOf('\n', i);
                    i = (end < 0 ? n : end) - 1;
                    continue;
                }
                if (c == '{') {
                    parents.add(open.peek());
                    open.push(parents.size() - 1);
                    continue;
                }
                if (c == '}') {
                    if (open.size() > 1) {
                        open.pop();
                    }
                    continue;
                }
            }
            if (c == ';') {
                out.add(new Statement(s.toString().trim(), start, false, open.peek()));
                s.setLength(0);
            } else if (c == ':' && (i + 1 >= n || body.charAt(i + 1) != ':') && (i == 0 || body.charAt(i - 1) != ':')
                    && LABEL.matcher(s.toString().trim()).matches()) {
                out.add(new Statement(s.toString().trim(), start, true, open.peek()));
                s.setLength(0);
            } else {
                s.append(c);
            }
        }
        if (!s.toString().isBlank()) {
            out.add(new Statement(s.toString().trim(), start, false, open.peek()));
        }
        return new Split(out, parents);
    }
}
