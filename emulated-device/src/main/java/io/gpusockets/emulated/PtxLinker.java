package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;

import io.gpusockets.protocol.images.PtxText;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Links the PTX of several translation units (an -rdc program's units, or a JIT link state's
 * inputs) into one PTX module, as nvlink resolves relocatable device code: each {@code .extern}
 * function or variable is bound to the {@code .visible} (or, failing one, the first {@code .weak})
 * definition of that name in another unit, and the unit's extern declaration is dropped; a name
 * defined {@code .visible} twice, or referenced and defined nowhere, fails the link with
 * CUDA_ERROR_INVALID_PTX naming the symbol. Names without linkage (file-static functions and
 * variables, nvcc's {@code $str} strings) are private to their unit: one that another unit also
 * uses is renamed in its own unit ({@code name$uN}). The extern functions the emulated device
 * itself provides (vprintf, malloc, free, __assertfail, and the device runtime's cudaGetParameterBufferV2 and
 * cudaLaunchDeviceV2 that device-side launches call: DeviceLaunches) and {@code .extern .shared} dynamic shared
 * arrays stay declared, once per name.
 *
 * <p>The result is one PTX text: the highest {@code .version} and {@code .target} of the units,
 * then each unit's remaining module-scope statements in unit order. It is meant for
 * {@link PtxModule#parse}, which resolves module-scope names over the whole module (so a definition
 * may follow its use); it is not meant for ptxas.
 */
final class PtxLinker {
    /**
     * One input: its PTX text and a name for messages ("translation unit 2", "input 1 (a.ptx)").
     * An {@code onDemand} unit (a member of a library archive) is linked only when it defines a
     * symbol that the units linked so far reference and nothing else defines, as nvlink takes archive members.
     */
    record Unit(String name, String ptx, boolean onDemand) {
        Unit(String name, String ptx) {
            this(name, ptx, false);
        }
    }

    /** The extern functions the PTX engines run themselves (PtxParser's extern calls). */
    static final Set<String> DEVICE_EXTERNS = Set.of("vprintf", "malloc", "free", "__assertfail", "cudaGraphSetConditional",
            "cudaGetParameterBufferV2", "__cudaCDP2GetParameterBufferV2", "cudaLaunchDeviceV2", "cudaLaunchDeviceV2_ptsz",
            "__cudaCDP2LaunchDeviceV2", "__cudaCDP2LaunchDeviceV2_ptsz", "cudaGetLastError", "__cudaCDP2GetLastError",
            "cudaPeekAtLastError", "__cudaCDP2PeekAtLastError");

    private static final Pattern VERSION = Pattern.compile("(?m)^\\s*\\.version\\s+(\\d+)\\.(\\d+)");
    private static final Pattern TARGET = Pattern.compile("(?m)^\\s*\\.target\\s+([\\w, ]+)");
    private static final Pattern SM = Pattern.compile("sm_(\\d+)");
    private static final Pattern LINE_DIRECTIVE = Pattern.compile("(?m)^[ \\t]*\\.(version|target|address_size|file)\\b.*$");
    private static final Pattern NAMED = Pattern.compile("\\.(?:entry|func)\\s*(?:\\([^)]*\\)\\s*)?([A-Za-z_$%][\\w$%]*)");
    private static final Pattern WORD = Pattern.compile("\\.[A-Za-z_]\\w*|[A-Za-z_$%][\\w$%]*|\\[[^\\]]*]|\\d\\w*|\\S");

    private enum Linkage { EXTERN, VISIBLE, WEAK, INTERNAL }

    /** A module-scope statement ({@code ;}-terminated, or a header with its body) and the symbol it names. */
    private record Statement(String text, String name, Linkage linkage, boolean definition, boolean shared, boolean func) {
    }

    private PtxLinker() {
    }

    /**
     * The units linked into one PTX text.
     *
     * @param skipped a note on images left out of the link (no PTX the device can run), added to the
     *                message of an unresolved reference, or null
     * @throws CudaError CUDA_ERROR_INVALID_PTX for a duplicate definition or an unresolved reference;
     *                   CUDA_ERROR_INVALID_IMAGE for a unit that is not PTX
     */
    static String link(List<Unit> units, String skipped) {
        List<List<Statement>> parsed = new ArrayList<>();
        int version = 0;
        int sm = 0;
        String target = "";
        for (Unit u : units) {
            String text = PtxText.stripComments(u.ptx());
            Matcher v = VERSION.matcher(text);
            if (!v.find()) {
                throw new CudaError(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE,
                        u.name() + " is not PTX text (no .version directive)");
            }
            version = Math.max(version, Integer.parseInt(v.group(1)) * 10 + Integer.parseInt(v.group(2)));
            Matcher t = TARGET.matcher(text);
            if (t.find()) {
                Matcher s = SM.matcher(t.group(1));
                int unitSm = s.find() ? Integer.parseInt(s.group(1)) : 0;
                if (target.isEmpty() || unitSm > sm) {
                    sm = unitSm;
                    target = t.group(1).trim();
                }
            }
            parsed.add(statements(LINE_DIRECTIVE.matcher(text).replaceAll(""), u.name()));
        }

        List<Unit> all = units;
        List<List<Statement>> allParsed = parsed;
        units = new ArrayList<>();
        parsed = new ArrayList<>();
        for (int i : linked(all, allParsed)) {
            units.add(all.get(i));
            parsed.add(allParsed.get(i));
        }

        // Where each name is defined with external linkage: the strong definition, else the first weak one.
        Map<String, Integer> strong = new HashMap<>();
        Map<String, Integer> weak = new HashMap<>();
        for (int i = 0; i < parsed.size(); i++) {
            for (Statement s : parsed.get(i)) {
                if (!s.definition() || s.name() == null) {
                    continue;
                }
                if (s.linkage() == Linkage.VISIBLE) {
                    Integer other = strong.putIfAbsent(s.name(), i);
                    if (other != null && other != i) {
                        throw new CudaError(CUDA_ERROR_INVALID_PTX, "duplicate definition of symbol " + s.name() + ": "
                                + units.get(other).name() + " and " + units.get(i).name() + " both define it .visible");
                    }
                } else if (s.linkage() == Linkage.WEAK) {
                    weak.putIfAbsent(s.name(), i);
                }
            }
        }
        Map<String, Integer> owner = new HashMap<>(weak);
        owner.putAll(strong);

        // Names each unit mentions at module scope, to find the private names that collide.
        List<Set<String>> mentioned = new ArrayList<>();
        for (List<Statement> unit : parsed) {
            Set<String> names = new HashSet<>();
            for (Statement s : unit) {
                if (s.name() != null) {
                    names.add(s.name());
                }
            }
            mentioned.add(names);
        }

        StringBuilder out = new StringBuilder();
        out.append(".version ").append(version / 10).append('.').append(version % 10).append('\n');
        if (!target.isEmpty()) {
            out.append(".target ").append(target).append('\n');
        }
        out.append(".address_size 64\n\n");
        Set<String> declared = new HashSet<>();
        Set<String> keptWeak = new HashSet<>();
        for (int i = 0; i < parsed.size(); i++) {
            Map<String, String> renames = new LinkedHashMap<>();
            for (Statement s : parsed.get(i)) {
                if (s.linkage() == Linkage.INTERNAL && s.name() != null && collides(s.name(), i, mentioned, owner)) {
                    renames.put(s.name(), s.name() + "$u" + (i + 1));
                }
            }
            StringBuilder unit = new StringBuilder();
            for (Statement s : parsed.get(i)) {
                if (!kept(s, i, units, owner, declared, keptWeak, skipped)) {
                    continue;
                }
                unit.append(s.text()).append('\n');
            }
            String text = unit.toString();
            for (Map.Entry<String, String> r : renames.entrySet()) {
                text = Pattern.compile("(?<![\\w$%])" + Pattern.quote(r.getKey()) + "(?![\\w$%])")
                        .matcher(text).replaceAll(Matcher.quoteReplacement(r.getValue()));
            }
            out.append("// ").append(units.get(i).name()).append('\n').append(text).append('\n');
        }
        return out.toString();
    }

    /** Indexes of the units to link: every unit that is not on demand, and each on-demand one that resolves a reference. */
    private static List<Integer> linked(List<Unit> units, List<List<Statement>> parsed) {
        boolean[] in = new boolean[units.size()];
        for (int i = 0; i < in.length; i++) {
            in[i] = !units.get(i).onDemand();
        }
        for (boolean grew = true; grew; ) {
            grew = false;
            Set<String> defined = new HashSet<>();
            Set<String> wanted = new HashSet<>();
            for (int i = 0; i < in.length; i++) {
                if (in[i]) {
                    for (Statement s : parsed.get(i)) {
                        if (s.name() != null && s.definition() && s.linkage() != Linkage.INTERNAL) {
                            defined.add(s.name());
                        } else if (s.name() != null && s.linkage() == Linkage.EXTERN && !s.shared()) {
                            wanted.add(s.name());
                        }
                    }
                }
            }
            wanted.removeAll(defined);
            for (int i = 0; i < in.length && !wanted.isEmpty(); i++) {
                if (!in[i]) {
                    for (Statement s : parsed.get(i)) {
                        if (s.definition() && s.linkage() != Linkage.INTERNAL && wanted.contains(s.name())) {
                            in[i] = true;
                            grew = true;
                            break;
                        }
                    }
                    if (in[i]) {
                        // what it defines is resolved now: a later member defining it too is not pulled in
                        for (Statement s : parsed.get(i)) {
                            if (s.definition() && s.linkage() != Linkage.INTERNAL) {
                                wanted.remove(s.name());
                            }
                        }
                    }
                }
            }
        }
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < in.length; i++) {
            if (in[i]) {
                out.add(i);
            }
        }
        return out;
    }

    private static boolean collides(String name, int unit, List<Set<String>> mentioned, Map<String, Integer> owner) {
        if (owner.containsKey(name)) {
            return true;
        }
        for (int j = 0; j < mentioned.size(); j++) {
            if (j != unit && mentioned.get(j).contains(name)) {
                return true;
            }
        }
        return false;
    }

    /** Whether a statement stays in the linked module; throws for an extern reference nothing defines. */
    private static boolean kept(Statement s, int unit, List<Unit> units, Map<String, Integer> owner, Set<String> declared,
                                Set<String> keptWeak, String skipped) {
        if (s.name() == null) {
            return true;
        }
        switch (s.linkage()) {
            case EXTERN -> {
                if (s.shared() || (s.func() && DEVICE_EXTERNS.contains(s.name()) && !owner.containsKey(s.name()))) {
                    return declared.add((s.shared() ? "shared " : "func ") + s.name());
                }
                if (owner.containsKey(s.name())) {
                    return false;   // bound to the definition in its unit
                }
                throw new CudaError(CUDA_ERROR_INVALID_PTX, "unresolved " + (s.func() ? "extern function " : "extern variable ")
                        + s.name() + " referenced by " + units.get(unit).name() + ": no unit defines it"
                        + (skipped == null ? "" : " (" + skipped + ")"));
            }
            case WEAK -> {
                if (!s.definition()) {
                    return true;
                }
                // The strong definition wins; of weak ones, the first.
                return owner.get(s.name()) == unit && keptWeak.add(s.name());
            }
            default -> {
                return true;
            }
        }
    }

    /** The module-scope statements of PTX text whose comments and line directives are gone. */
    private static List<Statement> statements(String text, String unit) {
        List<Statement> out = new ArrayList<>();
        StringBuilder statement = new StringBuilder();
        int n = text.length();
        for (int i = 0; i < n; i++) {
            char c = text.charAt(i);
            if (c == ';') {
                statement.append(c);
                add(out, statement.toString(), false);
                statement.setLength(0);
            } else if (c == '{') {
                int close = matchingBrace(text, i, unit);
                boolean initializer = statement.indexOf("=") >= 0;
                statement.append(text, i, close + 1);
                i = close;
                if (!initializer) {
                    add(out, statement.toString(), true);
                    statement.setLength(0);
                }
            } else {
                statement.append(c);
            }
        }
        if (!statement.toString().isBlank()) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, unit + ": text after the last statement: " + statement.toString().strip());
        }
        return out;
    }

    private static void add(List<Statement> out, String text, boolean body) {
        String header = body ? text.substring(0, text.indexOf('{')) : text;
        int eq = header.indexOf('=');
        List<String> words = words(eq < 0 ? header : header.substring(0, eq));
        if (words.isEmpty()) {
            return;
        }
        Linkage linkage = words.contains(".extern") ? Linkage.EXTERN : words.contains(".visible") ? Linkage.VISIBLE
                : words.contains(".weak") || words.contains(".common") ? Linkage.WEAK : Linkage.INTERNAL;
        boolean func = words.contains(".func") || words.contains(".entry");
        boolean shared = words.contains(".shared");
        String name = null;
        if (func) {
            Matcher m = NAMED.matcher(header);
            name = m.find() ? m.group(1) : null;
            if (words.contains(".entry") && linkage == Linkage.INTERNAL) {
                linkage = Linkage.VISIBLE;   // kernels are looked up by name: one per module
            }
        } else if (words.contains(".global") || words.contains(".const") || shared) {
            name = variableName(words);
        }
        boolean definition = func ? body : linkage != Linkage.EXTERN;
        out.add(new Statement(text.strip(), name, linkage, definition, shared, func));
    }

    /** The first declared name of a variable declaration (after its state space and type). */
    private static String variableName(List<String> words) {
        for (String w : words) {
            char c = w.charAt(0);
            if (c != '.' && c != '[' && !Character.isDigit(c) && (Character.isLetter(c) || c == '_' || c == '$' || c == '%')) {
                return w;
            }
        }
        return null;
    }

    private static List<String> words(String s) {
        List<String> out = new ArrayList<>();
        Matcher m = WORD.matcher(s);
        while (m.find()) {
            out.add(m.group());
        }
        return out;
    }

    private static int matchingBrace(String text, int open, String unit) {
        int close = PtxText.matchingBrace(text, open);
        if (close < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, unit + ": unbalanced '{' at offset " + open);
        }
        return close;
    }
}
