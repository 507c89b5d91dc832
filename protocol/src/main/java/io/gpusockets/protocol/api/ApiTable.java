package io.gpusockets.protocol.api;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The parsed API table (cuda-driver.api). The same parser serves the build-time generator and the
 * runtime, so generated code and runtime descriptors cannot disagree.
 */
public final class ApiTable {
    public static final String RESOURCE = "/io/gpusockets/protocol/api/cuda-driver.api";

    private static final Pattern ENTRY = Pattern.compile("^(cu[A-Za-z0-9_]+)\\((.*)\\)\\s*(.*)$");
    private static final Pattern PARAM = Pattern.compile("^(out\\s+)?([a-z0-9]+)(?:\\[([^\\]]*)\\])?\\s+([A-Za-z_][A-Za-z0-9_]*)$");
    private static final Set<String> ATTRIBUTES = Set.of("async", "sync", "local", "custom", "symbols", "critical", "ptds", "ptsz", "quick",
            "area", "codec", "context", "merge", "connects", "guest", "serves", "known", "charge", "checkpoint");

    private static volatile ApiTable instance;

    private final List<ApiFunction> functions;
    private final Map<String, ApiFunction> byName;
    /**
     * Opcode → function as an open-addressed table (linear probing, power-of-two size, at most a
     * quarter full): looked up for every call frame on the backend, so without boxing or hashing objects.
     */
    private final int[] opcodeKeys;
    private final ApiFunction[] opcodeValues;
    private final Map<String, ApiFunction> bySymbol;

    private ApiTable(List<ApiFunction> functions) {
        this.functions = List.copyOf(functions);
        Map<String, ApiFunction> names = new HashMap<>();
        Map<Integer, ApiFunction> ops = new HashMap<>();
        Map<String, ApiFunction> symbols = new HashMap<>();
        for (ApiFunction f : functions) {
            if (names.put(f.name(), f) != null) {
                throw new IllegalArgumentException("duplicate entry: name=" + f.name());
            }
            ApiFunction clash = ops.put(f.opcode(), f);
            if (clash != null) {
                throw new IllegalArgumentException("opcode collision: " + clash.name() + " and " + f.name());
            }
            for (String s : f.exportedSymbols()) {
                if (symbols.put(s, f) != null) {
                    throw new IllegalArgumentException("symbol listed twice: symbol=" + s);
                }
            }
        }
        this.byName = Map.copyOf(names);
        int slots = Integer.highestOneBit(Math.max(ops.size(), 1) * 4 - 1) << 1;
        this.opcodeKeys = new int[slots];
        this.opcodeValues = new ApiFunction[slots];
        for (ApiFunction f : ops.values()) {
            int i = slot(f.opcode());
            while (opcodeValues[i] != null) {
                i = (i + 1) & (slots - 1);
            }
            opcodeKeys[i] = f.opcode();
            opcodeValues[i] = f;
        }
        this.bySymbol = Map.copyOf(symbols);
    }

    /** The table shipped in the protocol jar. */
    public static ApiTable get() {
        ApiTable t = instance;
        if (t == null) {
            try (InputStream in = ApiTable.class.getResourceAsStream(RESOURCE)) {
                if (in == null) {
                    throw new IllegalStateException("API table resource missing: " + RESOURCE);
                }
                instance = t = parse(new String(in.readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return t;
    }

    public List<ApiFunction> functions() {
        return functions;
    }

    public ApiFunction byName(String name) {
        return byName.get(name);
    }

    /** The function with this wire opcode, or null. */
    public ApiFunction byOpcode(int opcode) {
        int mask = opcodeKeys.length - 1;
        for (int i = slot(opcode); ; i = (i + 1) & mask) {
            ApiFunction f = opcodeValues[i];
            if (f == null || opcodeKeys[i] == opcode) {
                return f;
            }
        }
    }

    private int slot(int opcode) {
        int h = opcode * 0x9E3779B9; // spread the name-derived bits over the low ones
        return (h ^ (h >>> 16)) & (opcodeKeys.length - 1);
    }

    public ApiFunction bySymbol(String symbol) {
        return bySymbol.get(symbol);
    }

    /** Parses table text; errors name the line. */
    public static ApiTable parse(String text) {
        List<ApiFunction> functions = new ArrayList<>();
        String[] lines = text.split("\n");
        for (int n = 0; n < lines.length; n++) {
            String line = lines[n].strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            try {
                functions.add(parseEntry(functions.size(), line));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("cuda-driver.api line " + (n + 1) + ": " + e.getMessage(), e);
            }
        }
        return new ApiTable(functions);
    }

    private static ApiFunction parseEntry(int index, String line) {
        Matcher m = ENTRY.matcher(line);
        if (!m.matches()) {
            throw new IllegalArgumentException("expected name(params) attributes: " + line);
        }
        String name = m.group(1);
        List<String> texts = new ArrayList<>();
        String paramText = m.group(2).strip();
        if (!paramText.isEmpty()) {
            for (String p : paramText.split(",")) {
                texts.add(p.strip());
            }
        }
        List<Matcher> matched = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (String t : texts) {
            Matcher pm = PARAM.matcher(t);
            if (!pm.matches()) {
                throw new IllegalArgumentException("bad parameter: " + t);
            }
            matched.add(pm);
            names.add(pm.group(4));
        }
        List<ApiParam> params = new ArrayList<>();
        for (int i = 0; i < matched.size(); i++) {
            params.add(parseParam(name, i, matched.get(i), names));
        }
        List<String> symbols = List.of(name);
        boolean async = false, sync = false, customFrontend = false, customBackend = false, local = false;
        boolean critical = false, quick = false, connects = false, guest = false, known = false;
        Map<String, Integer> since = new LinkedHashMap<>();
        String perThread = "";
        String serves = name;
        int servesSince = -1;
        String area = "";
        WireCodec codec = WireCodec.GENERIC;
        ContextRule context = ContextRule.NONE;
        MergeRule merge = MergeRule.NONE;
        ChargeRule charge = ChargeRule.NONE;
        boolean chargeGiven = false;
        CheckpointRule checkpoint = CheckpointRule.NONE;
        for (String attr : m.group(3).strip().split("\\s+")) {
            if (attr.isEmpty()) {
                continue;
            }
            String key = attr.contains("=") ? attr.substring(0, attr.indexOf('=')) : attr;
            String value = attr.contains("=") ? attr.substring(attr.indexOf('=') + 1) : "";
            if (!ATTRIBUTES.contains(key)) {
                throw new IllegalArgumentException("unknown attribute: " + attr);
            }
            switch (key) {
                case "async" -> async = true;
                case "sync" -> sync = true;
                case "local" -> local = true;
                case "critical" -> critical = true;
                case "connects" -> connects = true;
                case "guest" -> guest = true;
                case "known" -> known = true;
                case "symbols" -> {
                    List<String> exported = new ArrayList<>();
                    for (String sym : value.split(",")) {
                        int at = sym.indexOf('@');
                        String symName = at < 0 ? sym : sym.substring(0, at);
                        exported.add(symName);
                        since.put(symName, at < 0 ? 0 : Integer.parseInt(sym.substring(at + 1)));
                    }
                    symbols = List.copyOf(exported);
                }
                case "ptds", "ptsz" -> perThread = "_" + key;
                case "serves" -> {
                    int at = value.indexOf('@');
                    if (at <= 0 || !value.startsWith("cu")) {
                        throw new IllegalArgumentException("serves= takes NAME@VERSION: " + attr);
                    }
                    serves = value.substring(0, at);
                    servesSince = Integer.parseInt(value.substring(at + 1));
                }
                case "quick" -> quick = true;
                case "custom" -> {
                    if (value.equals("frontend")) {
                        customFrontend = true;
                    } else if (value.equals("backend")) {
                        customBackend = true;
                    } else {
                        throw new IllegalArgumentException("custom= takes frontend or backend: " + attr);
                    }
                }
                case "area" -> {
                    if (!AREA.matcher(value).matches()) {
                        throw new IllegalArgumentException("area= takes a lower-case name: " + attr);
                    }
                    area = value;
                }
                case "codec" -> codec = WireCodec.parse(value);
                case "context" -> context = ContextRule.parse(value);
                case "merge" -> merge = MergeRule.parse(value);
                case "charge" -> {
                    charge = ChargeRule.parse(value);
                    chargeGiven = true;
                }
                case "checkpoint" -> checkpoint = CheckpointRule.parse(value);
                default -> throw new AssertionError(key);
            }
        }
        if (servesSince >= 0) {
            // an ABI variant with a signature of its own: its symbols answer the older name's requests
            for (String s : symbols) {
                since.putIfAbsent(s, servesSince);
                if (since.get(s) == 0) {
                    since.put(s, servesSince);
                }
            }
            if (!perThread.isEmpty()) {
                // its per-thread variant too (cuStreamGetCtx_v2_ptsz answers cuStreamGetCtx from 12050 on only)
                since.putIfAbsent(symbols.getFirst() + perThread, servesSince);
            }
        }
        ApiFunction f = new ApiFunction(index, name, ApiFunction.opcodeFor(name), symbols, List.copyOf(params), async,
                sync, customFrontend, customBackend, local, critical, Map.copyOf(since), perThread, quick, area, codec,
                context, merge, connects, guest, serves, known, charge, checkpoint);
        check(f);
        checkCharge(f, chargeGiven);
        return f;
    }

    private static final Pattern AREA = Pattern.compile("[a-z]+");
    private static final Set<String> FLAGS = Set.of("nullable", "destroy", "free", "optional", "byvalue");
    private static final Set<String> KEYED = Set.of("range", "rows", "pitch", "alloc", "global", "owner", "known");
    /** At most this many values in one known= list. */
    public static final int MAX_KNOWN_VALUES = 1024;

    /** One parameter; {@code names} are all the entry's parameter names, which its expressions may use. */
    private static ApiParam parseParam(String function, int index, Matcher m, List<String> names) {
        String text = m.group(0);
        ParamType type;
        try {
            type = ParamType.valueOf(m.group(2).toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown type: " + m.group(2) + " in " + text);
        }
        boolean out = m.group(1) != null;
        Map<String, String> mods = new LinkedHashMap<>();
        String length = null;
        if (m.group(3) != null) {
            for (String mod : m.group(3).split(";")) {
                mod = mod.strip();
                int eq = mod.indexOf('=');
                String key = eq < 0 ? mod : mod.substring(0, eq);
                if (eq < 0 && !FLAGS.contains(key)) {
                    if (type != ParamType.BYTES || length != null) {
                        throw new IllegalArgumentException(function + ": unknown modifier " + key + " in " + text);
                    }
                    length = key;
                    continue;
                }
                if (eq >= 0 && !KEYED.contains(key) || eq < 0 && !FLAGS.contains(key)) {
                    throw new IllegalArgumentException(function + ": unknown modifier " + mod + " in " + text);
                }
                mods.put(key, eq < 0 ? "" : mod.substring(eq + 1));
            }
        }
        if (type == ParamType.BYTES && length == null) {
            throw new IllegalArgumentException(function + ": bytes parameter needs a length: " + m.group(4));
        }
        boolean dptrIn = type == ParamType.DPTR && !out;
        boolean dptrOut = type == ParamType.DPTR && out;
        boolean handle = type.isHandle();
        only(function, text, mods, "range", dptrIn);
        only(function, text, mods, "rows", dptrIn);
        only(function, text, mods, "pitch", dptrIn);
        only(function, text, mods, "free", dptrIn);
        only(function, text, mods, "alloc", dptrOut);
        only(function, text, mods, "global", dptrOut);
        only(function, text, mods, "owner", handle && out);
        only(function, text, mods, "destroy", handle && !out);
        only(function, text, mods, "nullable", !out && (handle || type == ParamType.BYTES));
        only(function, text, mods, "optional", out);
        only(function, text, mods, "byvalue", !out && type == ParamType.BYTES && length != null && length.matches("[0-9]+")
                && !mods.containsKey("nullable"));
        only(function, text, mods, "known", !out && (type == ParamType.I32 || type == ParamType.U32));
        if (mods.containsKey("rows") != mods.containsKey("pitch") || (mods.containsKey("rows") && !mods.containsKey("range"))) {
            throw new IllegalArgumentException(function + ": rows= and pitch= go together, with range=: " + m.group(4));
        }
        int owner = -1;
        if (mods.containsKey("owner")) {
            owner = names.indexOf(mods.get("owner"));
            if (owner < 0) {
                throw new IllegalArgumentException(function + ": owner names no parameter: " + mods.get("owner"));
            }
        }
        return new ApiParam(m.group(4), index, out, type, expr(function, length, names), expr(function, mods.get("range"), names),
                expr(function, mods.get("rows"), names), expr(function, mods.get("pitch"), names),
                expr(function, mods.get("alloc"), names), expr(function, mods.get("global"), names), owner,
                mods.containsKey("nullable"), mods.containsKey("destroy"), mods.containsKey("free"),
                mods.containsKey("optional"), knownValues(function, mods.get("known")), mods.containsKey("byvalue"));
    }

    /** A known= list: values N and ranges N..M (both ends included), separated by '|'. */
    private static List<Integer> knownValues(String function, String text) {
        if (text == null) {
            return List.of();
        }
        List<Integer> values = new ArrayList<>();
        try {
            for (String part : text.split("\\|")) {
                int dots = part.indexOf("..");
                int from = Integer.parseInt(dots < 0 ? part : part.substring(0, dots));
                int to = dots < 0 ? from : Integer.parseInt(part.substring(dots + 2));
                if (to < from || (long) values.size() + to - from + 1 > MAX_KNOWN_VALUES) {
                    throw new IllegalArgumentException(function + ": known= range empty or over " + MAX_KNOWN_VALUES + " values: " + part);
                }
                for (long v = from; v <= to; v++) {
                    values.add((int) v);
                }
            }
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(function + ": known= takes N and N..M separated by |: " + text);
        }
        return List.copyOf(values);
    }

    private static void only(String function, String text, Map<String, String> mods, String key, boolean allowed) {
        if (mods.containsKey(key) && !allowed) {
            throw new IllegalArgumentException(function + ": modifier " + key + " does not apply to " + text);
        }
    }

    private static Expr expr(String function, String text, List<String> names) {
        if (text == null) {
            return null;
        }
        try {
            return Expr.parse(text, names);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(function + ": " + e.getMessage(), e);
        }
    }

    /** Checks that generic code can marshal the entry and that its hand-written parts have a home. */
    private static void check(ApiFunction f) {
        if (f.checkpoint() != CheckpointRule.NONE && (!f.codec().readsLikeGeneric() || f.local() || f.guest())) {
            throw new IllegalArgumentException(f.name() + ": checkpoint= needs an entry the backend receives and decodes "
                    + "generically (no codec=, or one that reads like it: pool-attribute, graph; not local or guest): its target"
                    + " and key are read off the request");
        }
        if (f.checkpoint() != CheckpointRule.NONE && f.codec() == WireCodec.GRAPH
                && f.params().stream().anyMatch(p -> !p.out() && !p.type().isHandle() && p.type() != ParamType.PTR)) {
            throw new IllegalArgumentException(f.name() + ": checkpoint= on a codec=graph entry needs handle inputs then"
                    + " ptr ones (the request starts with the handles; the rest is read by hand)");
        }
        if (f.checkpoint() != CheckpointRule.NONE && f.params().stream().anyMatch(p -> p.out() && p.type().isHandle())) {
            throw new IllegalArgumentException(f.name() + ": checkpoint= is for setters; an entry that makes handles is "
                    + "recorded for that already");
        }
        boolean hand = f.customFrontend() || f.customBackend() || f.local();
        if (hand && f.area().isEmpty()) {
            throw new IllegalArgumentException(f.name() + ": custom and local entries need area=NAME, the API area "
                    + "whose handler class holds the hand-written code");
        }
        if (!hand && !f.area().isEmpty()) {
            throw new IllegalArgumentException(f.name() + ": area= names the handler of a custom or local entry");
        }
        if (f.guest() && (!f.customFrontend() || f.customBackend())) {
            throw new IllegalArgumentException(f.name() + ": guest entries are custom=frontend and never reach a backend handler");
        }
        if (f.codec() != WireCodec.GENERIC && !(f.customFrontend() && f.customBackend())) {
            throw new IllegalArgumentException(f.name() + ": codec= is written by the frontend and read by the backend: "
                    + "it needs custom=frontend and custom=backend");
        }
        for (ApiParam p : f.params()) {
            boolean genericUnmarshallable = p.type() == ParamType.PTR || p.type() == ParamType.HOSTPTR;
            if (genericUnmarshallable && !f.customFrontend() && !f.local()) {
                throw new IllegalArgumentException(f.name() + ": parameter " + p.name() + " of type "
                        + p.type() + " needs custom=frontend or local");
            }
            if (genericUnmarshallable && f.customBackend() && f.codec() == WireCodec.GENERIC && !p.out()) {
                throw new IllegalArgumentException(f.name() + ": parameter " + p.name() + " of type " + p.type()
                        + " cannot be decoded for a backend handler: give the entry a codec=");
            }
        }
        for (ApiParam p : f.params()) {
            // a quick call may run on the session's reader thread, which would wait for its own DATA frames
            if (f.quick() && !p.out() && p.type().isBulk() && !f.local()) {
                throw new IllegalArgumentException(f.name() + ": a quick entry cannot take a bulk input (" + p.name()
                        + "): the reader thread that runs it would wait for DATA frames only it can read");
            }
        }
        checkKnown(f);
        switch (f.context()) {
            case CREATE, POP, GET -> requireParam(f, true, ParamType.CTX);
            case PUSH, SET -> requireParam(f, false, ParamType.CTX);
            case DESTROY -> {
                if (f.params().isEmpty() || f.params().getFirst().type() != ParamType.CTX || !f.params().getFirst().destroy()) {
                    throw new IllegalArgumentException(f.name() + ": context=destroy needs ctx[destroy] as its first parameter");
                }
            }
            case RELEASE, RESET -> requireParam(f, false, ParamType.DEV);
            case NONE -> {
            }
        }
        if ((f.merge() == MergeRule.LOWEST || f.merge() == MergeRule.SUM)
                && (f.params().size() != 1 || !f.params().getFirst().out() || f.params().getFirst().type() != ParamType.I32)) {
            throw new IllegalArgumentException(f.name() + ": merge=" + f.merge().name().toLowerCase(Locale.ROOT)
                    + " needs one out i32 parameter");
        }
    }

    /**
     * An entry that looks as if it allocates device memory must say what it charges ({@link ChargeRule#allocationSign}),
     * and a rule must find in the entry what it reads.
     */
    private static void checkCharge(ApiFunction f, boolean given) {
        String sign = ChargeRule.allocationSign(f);
        if (sign != null && !given) {
            throw new IllegalArgumentException(f.name() + ": " + sign + ", which makes the driver allocate device memory: "
                    + "say what the tenant is charged (charge=RULE), or charge=none if it allocates nothing");
        }
        ChargeRule r = f.charge();
        if (r == ChargeRule.NONE) {
            return;
        }
        if (!ChargeRule.reachesBackend(f)) {
            throw new IllegalArgumentException(f.name() + ": charge= on an entry that never reaches the backend as itself");
        }
        if (!r.generic() && !f.customBackend()) {
            throw new IllegalArgumentException(f.name() + ": charge=" + r.attribute() + " is charged by a custom=backend handler");
        }
        boolean fits = switch (r) {
            case ALLOC, PITCH -> f.params().stream().anyMatch(p -> p.out() && p.alloc() != null);
            case ARRAY -> has(f, true, ParamType.ARRAY) && has(f, false, ParamType.BYTES);
            case MIPMAP -> has(f, true, ParamType.MIPMAP) && has(f, false, ParamType.BYTES) && has(f, false, ParamType.U32);
            case MODULE -> has(f, true, ParamType.MOD) && has(f, false, ParamType.IMAGE);
            case LIBRARY -> has(f, true, ParamType.LIB) && has(f, false, ParamType.IMAGE);
            case LIMIT -> f.params().size() == 2 && f.params().get(0).type() == ParamType.I32
                    && f.params().get(1).type() == ParamType.SIZE;
            case CONTEXT -> has(f, true, ParamType.CTX) && has(f, false, ParamType.DEV);
            case VMM -> has(f, true, ParamType.MEMH);
            case INFO -> f.params().size() == 2 && f.params().stream().allMatch(p -> p.out() && p.type() == ParamType.SIZE);
            case NONE -> true;
        };
        if (!fits) {
            throw new IllegalArgumentException(f.name() + ": charge=" + r.attribute() + " does not fit its parameters");
        }
    }

    private static boolean has(ApiFunction f, boolean out, ParamType type) {
        return f.params().stream().anyMatch(p -> p.out() == out && p.type() == type);
    }

    /**
     * A known entry is a pure query a frontend can ask in advance: generic on both ends, no effect on
     * contexts, lanes or latched errors, no handle or device-pointer outputs, and every input a device
     * (asked for each device) or a value with its known= list. known= belongs on known entries only.
     */
    private static void checkKnown(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (!p.known().isEmpty() && !f.known()) {
                throw new IllegalArgumentException(f.name() + ": known= on " + p.name() + " needs the entry attribute known");
            }
        }
        if (!f.known()) {
            return;
        }
        if (f.customFrontend() || f.customBackend() || f.local() || f.async() || f.sync()
                || f.context() != ContextRule.NONE || f.codec() != WireCodec.GENERIC) {
            throw new IllegalArgumentException(f.name() + ": known entries are generic queries without async, sync, "
                    + "custom, local, codec= or context=");
        }
        for (ApiParam p : f.params()) {
            if (p.out() ? p.type().isHandle() || p.type() == ParamType.DPTR
                    : p.type() != ParamType.DEV && p.known().isEmpty()) {
                throw new IllegalArgumentException(f.name() + ": a known entry's inputs are dev or carry known=, and it "
                        + "returns no handle or device pointer: " + p.name());
            }
        }
    }

    private static void requireParam(ApiFunction f, boolean out, ParamType type) {
        for (ApiParam p : f.params()) {
            if (p.out() == out && p.type() == type) {
                return;
            }
        }
        throw new IllegalArgumentException(f.name() + ": context=" + f.context().name().toLowerCase(Locale.ROOT)
                + " needs " + (out ? "an out " : "a ") + type.name().toLowerCase(Locale.ROOT) + " parameter");
    }
}
