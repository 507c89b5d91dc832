package io.gpusockets.protocol.api;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
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
    private static final Pattern NAME_TERM = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    private static final Set<String> ATTRIBUTES = Set.of("async", "sync", "local", "custom", "symbols", "critical", "ptds", "ptsz", "quick");

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
        List<ApiParam> params = new ArrayList<>();
        String paramText = m.group(2).strip();
        if (!paramText.isEmpty()) {
            for (String p : paramText.split(",")) {
                params.add(parseParam(p.strip()));
            }
        }
        List<String> symbols = List.of(name);
        boolean async = false, sync = false, customFrontend = false, customBackend = false, local = false;
        boolean critical = false;
        Map<String, Integer> since = new LinkedHashMap<>();
        String perThread = "";
        boolean quick = false;
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
                case "symbols" -> {
                    List<String> names = new ArrayList<>();
                    for (String sym : value.split(",")) {
                        int at = sym.indexOf('@');
                        String symName = at < 0 ? sym : sym.substring(0, at);
                        names.add(symName);
                        since.put(symName, at < 0 ? 0 : Integer.parseInt(sym.substring(at + 1)));
                    }
                    symbols = List.copyOf(names);
                }
                case "ptds", "ptsz" -> perThread = "_" + key;
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
                default -> throw new AssertionError(key);
            }
        }
        ApiFunction f = new ApiFunction(index, name, ApiFunction.opcodeFor(name), symbols, List.copyOf(params), async,
                sync, customFrontend, customBackend, local, critical, Map.copyOf(since), perThread, quick);
        check(f);
        return f;
    }

    private static ApiParam parseParam(String text) {
        Matcher m = PARAM.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException("bad parameter: " + text);
        }
        ParamType type;
        try {
            type = ParamType.valueOf(m.group(2).toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown type: " + m.group(2) + " in " + text);
        }
        Map<String, String> modifiers = new LinkedHashMap<>();
        if (m.group(3) != null) {
            for (String mod : m.group(3).split(";")) {
                mod = mod.strip();
                int eq = mod.indexOf('=');
                modifiers.put(eq < 0 ? mod : mod.substring(0, eq), eq < 0 ? "" : mod.substring(eq + 1));
            }
        }
        return new ApiParam(m.group(4), m.group(1) != null, type, Collections.unmodifiableMap(modifiers));
    }

    /** Checks that every expression names a parameter and that generic code can marshal the entry. */
    private static void check(ApiFunction f) {
        for (ApiParam p : f.params()) {
            for (Map.Entry<String, String> e : p.modifiers().entrySet()) {
                String expr = e.getValue().isEmpty() ? null : e.getValue();
                if (e.getKey().equals("owner")) {
                    if (f.param(expr) == null) {
                        throw new IllegalArgumentException(f.name() + ": owner names no parameter: " + expr);
                    }
                    continue;
                }
                if (expr == null && p.type() == ParamType.BYTES && e.getKey().equals(p.lengthExpression())) {
                    expr = e.getKey();
                }
                if (expr != null) {
                    Matcher names = NAME_TERM.matcher(expr);
                    while (names.find()) {
                        if (f.param(names.group()) == null) {
                            throw new IllegalArgumentException(f.name() + ": expression names no parameter: " + expr);
                        }
                    }
                }
            }
            if (p.has("rows") != p.has("pitch") || (p.has("rows") && !p.has("range"))) {
                throw new IllegalArgumentException(f.name() + ": rows= and pitch= go together, with range=: " + p.name());
            }
            if (p.type() == ParamType.BYTES && p.lengthExpression() == null) {
                throw new IllegalArgumentException(f.name() + ": bytes parameter needs a length: " + p.name());
            }
            boolean genericUnmarshallable = p.type() == ParamType.PTR || p.type() == ParamType.HOSTPTR;
            if (genericUnmarshallable && !f.customFrontend() && !f.local()) {
                throw new IllegalArgumentException(f.name() + ": parameter " + p.name() + " of type "
                        + p.type() + " needs custom=frontend or local");
            }
        }
    }
}
