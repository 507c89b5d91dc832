package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Splits an entry body (comments already removed, line breaks kept) into statements, each with the
 * PTX line it starts on: instructions and directives end at ';', labels at ':', '{' and '}' at a
 * statement's start open and close a scope (dropped: register names are unique in what nvcc emits),
 * {@code .loc}/{@code .section} debug lines end at the line.
 */
final class Statements {
    record Statement(String text, int line, boolean label) {
    }

    private static final Pattern LABEL = Pattern.compile("[A-Za-z_$%][\\w$]*");

    private Statements() {
    }

    private static boolean lineDirective(String body, int i, String name) {
        int end = i + name.length();
        return body.startsWith(name, i) && end < body.length() && Character.isWhitespace(body.charAt(end));
    }

    static List<Statement> split(String body, int firstLine) {
        List<Statement> out = new ArrayList<>();
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
                if (c == '{' || c == '}') {
                    continue;
                }
            }
            if (c == ';') {
                out.add(new Statement(s.toString().trim(), start, false));
                s.setLength(0);
            } else if (c == ':' && (i + 1 >= n || body.charAt(i + 1) != ':') && (i == 0 || body.charAt(i - 1) != ':')
                    && LABEL.matcher(s.toString().trim()).matches()) {
                out.add(new Statement(s.toString().trim(), start, true));
                s.setLength(0);
            } else {
                s.append(c);
            }
        }
        if (!s.toString().isBlank()) {
            out.add(new Statement(s.toString().trim(), start, false));
        }
        return out;
    }
}
