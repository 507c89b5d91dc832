package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Registers a nested scope declares again under a name an enclosing scope already has: the inner
 * one is another register (PTX scoping), so inside its scope the name is rewritten to one of its
 * own ({@code %p1} in scope 3 becomes {@code %p1$3}) before the statements are parsed. nvcc emits
 * such blocks for inline PTX, e.g. {@code { .reg .pred %p1; setp...; bar.red.popc.u32 %r, 0, %p1; }}
 * inside a body whose own {@code %p<N>} includes %p1; without this the block would overwrite the
 * outer %p1. Names declared only in sibling scopes (nvcc's temp_param_reg of each call sequence) are
 * not shadowing and keep one register.
 */
final class Shadowing {
    /** A {@code .reg} name: a plain one, or a {@code %r<N>} range (prefix, count). */
    private record Declared(String name, String prefix, long count) {
        boolean covers(String n) {
            if (prefix == null) {
                return name.equals(n);
            }
            if (!n.startsWith(prefix) || n.length() == prefix.length() || n.length() > prefix.length() + 18) {
                return false;
            }
            String digits = n.substring(prefix.length());
            if (!digits.chars().allMatch(Character::isDigit) || digits.length() > 1 && digits.charAt(0) == '0') {
                return false;
            }
            return Long.parseLong(digits) < count;
        }
    }

    private static final Pattern RANGE = Pattern.compile("(.+)<(\\d{1,18})>");
    private static final Pattern NAME_CHARS = Pattern.compile("[A-Za-z0-9_$]");

    private Shadowing() {
    }

    /** The statements with every shadowing register renamed inside its scope. */
    static List<Statements.Statement> rename(Statements.Split split) {
        List<Integer> parents = split.parents();
        int scopes = parents.size();
        List<List<Declared>> declared = new ArrayList<>();
        for (int k = 0; k < scopes; k++) {
            declared.add(new ArrayList<>());
        }
        for (Statements.Statement s : split.statements()) {
            if (!s.label() && s.text().startsWith(".reg")) {
                declared.get(s.scope()).addAll(names(s.text()));
            }
        }
        // scope k's renames: a plain name it declares that an enclosing scope declares too
        List<Map<String, String>> renames = new ArrayList<>();
        boolean any = false;
        for (int k = 0; k < scopes; k++) {
            Map<String, String> r = new HashMap<>();
            for (Declared d : declared.get(k)) {
                if (d.prefix() == null && k > 0 && declaredAbove(d.name(), parents.get(k), parents, declared)) {
                    r.put(d.name(), d.name() + "$" + k);
                    any = true;
                }
            }
            renames.add(r);
        }
        if (!any) {
            return split.statements();
        }
        List<Statements.Statement> out = new ArrayList<>();
        for (Statements.Statement s : split.statements()) {
            String text = s.text();
            // innermost scope first: a name it renamed no longer matches an enclosing scope's rename
            for (int k = s.scope(); k >= 0; k = parents.get(k)) {
                for (Map.Entry<String, String> e : renames.get(k).entrySet()) {
                    text = replaceName(text, e.getKey(), e.getValue());
                }
            }
            out.add(new Statements.Statement(text, s.line(), s.label(), s.scope()));
        }
        return out;
    }

    private static boolean declaredAbove(String name, int scope, List<Integer> parents, List<List<Declared>> declared) {
        for (int k = scope; k >= 0; k = parents.get(k)) {
            for (Declared d : declared.get(k)) {
                if (d.covers(name)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Replaces whole-name occurrences of {@code name} (not a prefix of a longer name). */
    private static String replaceName(String text, String name, String with) {
        StringBuilder b = new StringBuilder();
        int from = 0;
        int i;
        while ((i = text.indexOf(name, from)) >= 0) {
            int end = i + name.length();
            boolean startOk = i == 0 || !NAME_CHARS.matcher(String.valueOf(text.charAt(i - 1))).matches()
                    && text.charAt(i - 1) != '%';
            boolean endOk = end == text.length() || !NAME_CHARS.matcher(String.valueOf(text.charAt(end))).matches();
            b.append(text, from, i).append(startOk && endOk ? with : name);
            from = end;
        }
        return b.append(text.substring(from)).toString();
    }

    /** The names a {@code .reg .type a, b<4>, c;} statement declares. */
    private static List<Declared> names(String statement) {
        List<Declared> out = new ArrayList<>();
        String[] tokens = statement.replace(",", " ").trim().split("\\s+");
        for (int i = 1; i < tokens.length; i++) {
            String t = tokens[i];
            if (t.startsWith(".")) {
                continue;   // the type, .v2/.v4
            }
            Matcher m = RANGE.matcher(t);
            out.add(m.matches() ? new Declared(t, m.group(1), Long.parseLong(m.group(2))) : new Declared(t, null, 0));
        }
        return out;
    }
}
