package io.gpusockets.protocol.images;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * PTX text at module scope: comments removed, the line directives dropped, and what is left cut into
 * statements (up to a {@code ;}) and blocks (a header such as {@code .entry k(...)} followed by its
 * {@code {...}} body). An initializer's braces ({@code = {1, 2}}) stay inside its statement. The emulated
 * device's module parser walks a module this way, and so does {@link PtxVariables} for the backend.
 */
public final class PtxText {
    /** Largest PTX text read (a fatbin entry's, a -G cubin's, a file's). */
    public static final long MAX_PTX = 64L << 20;

    private static final Pattern LINE_DIRECTIVE = Pattern.compile("(?m)^[ \\t]*\\.(version|target|address_size|file)\\b.*$");
    private static final Pattern TOKEN = Pattern.compile("\\.[A-Za-z_][\\w]*|[A-Za-z_$%][\\w$%]*|\\d+|\\[\\s*\\d*\\s*]|[(),]");

    /** What {@link #scan} finds, in the order of the text. */
    public interface Visitor {
        /** A module-scope statement, without its {@code ;}; {@code line}: where it starts. */
        void statement(String text, int line);

        /** A declaration with a body: its header and the body, braces included; {@code line}: of the opening brace. */
        void block(String header, String body, int line);
    }

    private PtxText() {
    }

    /**
     * Walks {@code text} (comments already removed by {@link #stripComments}) at module scope.
     *
     * @throws ImageError CUDA_ERROR_INVALID_PTX for a '{' without its '}'
     */
    public static void scan(String text, Visitor visitor) {
        // These module directives end at the line, not at ';': drop them before splitting statements.
        String t = LINE_DIRECTIVE.matcher(text).replaceAll("");
        StringBuilder statement = new StringBuilder();
        int n = t.length();
        int line = 1;
        int statementLine = 1;
        boolean started = false;
        for (int i = 0; i < n; i++) {
            char c = t.charAt(i);
            if (c == '\n') {
                line++;
            } else if (!started && !Character.isWhitespace(c)) {
                started = true;
                statementLine = line;
            }
            if (c == ';') {
                visitor.statement(statement.toString(), statementLine);
                statement.setLength(0);
                started = false;
            } else if (c == '{') {
                int close = matchingBrace(t, i);
                if (close < 0) {
                    throw new ImageError(CUDA_ERROR_INVALID_PTX, "unbalanced '{' at offset " + i);
                }
                if (statement.indexOf("=") >= 0) {
                    statement.append(t, i, close + 1);   // an initializer list, the statement goes on
                } else {
                    visitor.block(statement.toString(), t.substring(i, close + 1), line);
                    statement.setLength(0);
                    started = false;
                }
                for (int k = i; k <= close; k++) {
                    line += t.charAt(k) == '\n' ? 1 : 0;
                }
                i = close;
            } else {
                statement.append(c);
            }
        }
    }

    /** Where the '}' that closes the '{' at {@code open} is, or -1 when there is none. */
    public static int matchingBrace(String text, int open) {
        int depth = 0;
        for (int i = open; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '{') {
                depth++;
            } else if (c == '}' && --depth == 0) {
                return i;
            }
        }
        return -1;
    }

    /** Removes // and block comments, leaving quoted strings (.file paths) intact and the line count unchanged. */
    public static String stripComments(String s) {
        StringBuilder out = new StringBuilder(s.length());
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '"') {
                int end = s.indexOf('"', i + 1);
                end = end < 0 ? n - 1 : end;
                out.append(s, i, end + 1);
                i = end;
            } else if (c == '/' && i + 1 < n && s.charAt(i + 1) == '/') {
                int end = s.indexOf('\n', i);
                i = (end < 0 ? n : end) - 1;
            } else if (c == '/' && i + 1 < n && s.charAt(i + 1) == '*') {
                int end = s.indexOf("*/", i + 2);
                int stop = end < 0 ? n : end + 2;
                out.append(' ');
                for (int k = i; k < stop; k++) {
                    if (s.charAt(k) == '\n') {
                        out.append('\n');   // keep line numbers for the interpreter's messages
                    }
                }
                i = stop - 1;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    /** The words of a declaration: directives ({@code .global}), names, numbers, {@code [N]}, parentheses and commas. */
    public static List<String> tokens(String s) {
        List<String> out = new ArrayList<>();
        Matcher m = TOKEN.matcher(s);
        while (m.find()) {
            out.add(m.group());
        }
        return out;
    }
}
