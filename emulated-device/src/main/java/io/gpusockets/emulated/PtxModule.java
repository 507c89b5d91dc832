package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the emulated device needs from a PTX module: each {@code .entry} with its parameter layout,
 * and each module-scope {@code .global}/{@code .const} variable with its size and initial bytes.
 * Entry bodies are kept as text for the PTX engines, which parse one at its first launch.
 *
 * <p>Parameter layout follows the CUDA ABI: each parameter starts at the next offset that is a
 * multiple of its own alignment ({@code .align N} if given, else its element size), which is what
 * cuFuncGetParamInfo reports on a real device and where {@code extra}-style launches put the bytes.
 */
final class PtxModule {
    /** One kernel parameter: {@code size} bytes at {@code offset} in the parameter buffer. */
    record Param(String name, long offset, long size, long alignment) {
    }

    /** A kernel. {@code maxThreadsPerBlock} comes from {@code .maxntid}/{@code .reqntid}, else the device limit. */
    record Entry(String name, List<Param> params, int maxThreadsPerBlock) {
        /** Bytes of the packed parameter buffer (end of the last parameter). */
        long paramBufferSize() {
            if (params.isEmpty()) {
                return 0;
            }
            Param last = params.getLast();
            return last.offset() + last.size();
        }
    }

    /** A module-scope variable. {@code initial} holds its initializer's bytes, or is empty (zero-filled). */
    record Global(String name, long size, long alignment, byte[] initial) {
    }

    /** Source text (comments removed, lines kept) of an entry body or a module-scope {@code .shared} declaration. */
    record Source(String text, int line) {
    }

    /** A {@code .func} definition: its return and parameter lists (each parameter's name, size, alignment) and body. */
    record Func(String name, List<Param> returns, List<Param> params, Source body) {
    }

    private static final Pattern VERSION = Pattern.compile("(?m)^\\s*\\.version\\s+(\\d+)\\.(\\d+)");
    private static final Pattern TARGET = Pattern.compile("(?m)^\\s*\\.target\\s+([\\w, ]+)");
    private static final Pattern LINE_DIRECTIVE = Pattern.compile("(?m)^[ \\t]*\\.(version|target|address_size|file)\\b.*$");
    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+([A-Za-z_$%][\\w$%]*)\\s*");
    private static final Pattern FUNC = Pattern.compile("\\.func\\s*(?:\\([^)]*\\)\\s*)?([A-Za-z_$%][\\w$%]*)\\s*");
    private static final Pattern THREAD_LIMIT = Pattern.compile("\\.(maxntid|reqntid)\\s+(\\d+)(?:\\s*,\\s*(\\d+))?(?:\\s*,\\s*(\\d+))?");
    private static final Pattern SM = Pattern.compile("sm_(\\d+)");
    private static final Pattern TOKEN = Pattern.compile("\\.[A-Za-z_][\\w]*|[A-Za-z_$%][\\w$%]*|\\d+|\\[\\s*\\d*\\s*]|[(),]");

    final int ptxVersion;
    final String target;
    final Map<String, Entry> entries;
    final Map<String, Global> globals;
    /** Each entry's body, braces included, for the PTX interpreter (io.gpusockets.emulated.ptx). */
    final Map<String, Source> bodies;
    /** Module-scope {@code .shared} declarations (each CTA of every entry gets them). */
    final List<Source> sharedDeclarations;
    /** {@code .func} definitions by name. */
    final Map<String, Func> funcs;
    /** Names of {@code .extern .func} declarations (vprintf, malloc, free...). */
    final List<String> externFuncs;

    private PtxModule(int ptxVersion, String target, Map<String, Entry> entries, Map<String, Global> globals,
                      Map<String, Source> bodies, List<Source> sharedDeclarations, Map<String, Func> funcs,
                      List<String> externFuncs) {
        this.ptxVersion = ptxVersion;
        this.target = target;
        this.entries = Collections.unmodifiableMap(entries);
        this.globals = Collections.unmodifiableMap(globals);
        this.bodies = Collections.unmodifiableMap(bodies);
        this.sharedDeclarations = List.copyOf(sharedDeclarations);
        this.funcs = Collections.unmodifiableMap(funcs);
        this.externFuncs = List.copyOf(externFuncs);
    }

    /** The SM version of the first {@code .target} (sm_90 → 90), or 0. */
    int targetSm() {
        Matcher m = SM.matcher(target);
        return m.find() ? Integer.parseInt(m.group(1)) : 0;
    }

    static PtxModule parse(String ptx) {
        String text = stripComments(ptx);
        Matcher version = VERSION.matcher(text);
        if (!version.find()) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "image is not PTX text (no .version directive)");
        }
        int ptxVersion = Integer.parseInt(version.group(1)) * 10 + Integer.parseInt(version.group(2));
        Matcher targetMatch = TARGET.matcher(text);
        String target = targetMatch.find() ? targetMatch.group(1).trim() : "";
        // These module directives end at the line, not at ';': drop them before splitting statements.
        text = LINE_DIRECTIVE.matcher(text).replaceAll("");

        Map<String, Entry> entries = new LinkedHashMap<>();
        Map<String, Global> globals = new LinkedHashMap<>();
        Map<String, Source> bodies = new LinkedHashMap<>();
        List<Source> shared = new ArrayList<>();
        Map<String, Func> funcs = new LinkedHashMap<>();
        List<String> externs = new ArrayList<>();
        StringBuilder statement = new StringBuilder();
        int n = text.length();
        int line = 1;
        int statementLine = 1;
        boolean started = false;
        for (int i = 0; i < n; i++) {
            char c = text.charAt(i);
            if (c == '\n') {
                line++;
            } else if (!started && !Character.isWhitespace(c)) {
                started = true;
                statementLine = line;
            }
            if (c == ';') {
                String s = statement.toString();
                declareVariables(s, globals);
                List<String> words = tokens(s);
                if (words.contains(".shared")) {
                    shared.add(new Source(s, statementLine));
                }
                int func = words.indexOf(".func");
                if (func >= 0 && words.contains(".extern")) {
                    Matcher fm = FUNC.matcher(s);
                    if (fm.find()) {
                        externs.add(fm.group(1));
                    }
                }
                statement.setLength(0);
                started = false;
            } else if (c == '{') {
                int close = matchingBrace(text, i);
                if (statement.indexOf("=") >= 0) {
                    statement.append(text, i, close + 1);   // an initializer list, the statement goes on
                } else {
                    String entry = declareEntry(statement.toString(), entries);
                    if (entry != null) {
                        bodies.put(entry, new Source(text.substring(i, close + 1), line));
                    } else {
                        declareFunc(statement.toString(), new Source(text.substring(i, close + 1), line), funcs);
                    }
                    statement.setLength(0);
                    started = false;
                }
                line += (int) text.substring(i, close + 1).chars().filter(ch -> ch == '\n').count();
                i = close;
            } else {
                statement.append(c);
            }
        }
        return new PtxModule(ptxVersion, target, entries, globals, bodies, shared, funcs, externs);
    }

    private static int matchingBrace(String text, int open) {
        int depth = 0;
        for (int i = open; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '{') {
                depth++;
            } else if (c == '}' && --depth == 0) {
                return i;
            }
        }
        throw new CudaError(CUDA_ERROR_INVALID_PTX, "unbalanced '{' at offset " + open);
    }

    /** Removes // and block comments, leaving quoted strings (.file paths) intact. */
    static String stripComments(String s) {
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

    /** Declares the entry whose header this is and returns its name, or null for a .func or a section. */
    private static String declareEntry(String header, Map<String, Entry> entries) {
        Matcher m = ENTRY.matcher(header);
        if (!m.find()) {
            return null;
        }
        String name = m.group(1);
        List<Param> params = new ArrayList<>();
        int rest = m.end();
        if (rest < header.length() && header.charAt(rest) == '(') {
            int close = header.indexOf(')', rest);
            if (close < 0) {
                throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + name + ": parameter list not closed");
            }
            String list = header.substring(rest + 1, close).trim();
            long offset = 0;
            if (!list.isEmpty()) {
                for (String declaration : list.split(",")) {
                    Param p = param(name, declaration.trim(), offset);
                    params.add(p);
                    offset = p.offset() + p.size();
                }
            }
            rest = close + 1;
        }
        int maxThreads = DeviceProperties.MAX_THREADS_PER_BLOCK;
        Matcher limit = THREAD_LIMIT.matcher(header.substring(rest));
        while (limit.find()) {
            long product = 1;
            for (int g = 2; g <= 4; g++) {
                product *= limit.group(g) == null ? 1 : Long.parseLong(limit.group(g));
            }
            maxThreads = (int) Math.min(maxThreads, product);
        }
        if (entries.putIfAbsent(name, new Entry(name, List.copyOf(params), maxThreads)) != null) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + name + " declared twice");
        }
        return name;
    }

    /** Records the {@code .func} whose header this is (a section or other block is ignored). */
    private static void declareFunc(String header, Source body, Map<String, Func> funcs) {
        Matcher m = FUNC.matcher(header);
        if (!m.find()) {
            return;
        }
        String name = m.group(1);
        int open = header.indexOf('(', header.indexOf(".func"));
        List<Param> returns = open >= 0 && open < m.start(1) ? paramList(name, header, open) : List.of();
        int rest = m.end();
        List<Param> params = rest < header.length() && header.charAt(rest) == '(' ? paramList(name, header, rest) : List.of();
        if (funcs.putIfAbsent(name, new Func(name, returns, params, body)) != null) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "function " + name + " defined twice");
        }
    }

    private static List<Param> paramList(String name, String header, int open) {
        int close = header.indexOf(')', open);
        if (close < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "function " + name + ": parameter list not closed");
        }
        String list = header.substring(open + 1, close).trim();
        List<Param> out = new ArrayList<>();
        if (!list.isEmpty()) {
            for (String declaration : list.split(",")) {
                out.add(param(name, declaration.trim(), 0));
            }
        }
        return out;
    }

    /** {@code .param [.align N] TYPE [.ptr [.space] [.align N]] name[[K]]} placed at the next aligned offset. */
    private static Param param(String entry, String declaration, long after) {
        List<String> tokens = tokens(declaration);
        if (tokens.isEmpty() || !tokens.getFirst().equals(".param")) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + entry + ": not a .param: " + declaration);
        }
        Declarator d = declarator(tokens.subList(1, tokens.size()), entry + " parameter");
        if (d.names.size() != 1 || d.count < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + entry + ": bad parameter " + declaration);
        }
        long offset = (after + d.alignment - 1) / d.alignment * d.alignment;
        return new Param(d.names.getFirst(), offset, d.elementSize * d.count, d.alignment);
    }

    /** Module-scope {@code .global}/{@code .const} definitions; everything else ends here unused. */
    private static void declareVariables(String statement, Map<String, Global> globals) {
        int eq = statement.indexOf('=');
        String declaration = eq < 0 ? statement : statement.substring(0, eq);
        List<String> tokens = tokens(declaration);
        int space = Math.max(tokens.indexOf(".global"), tokens.indexOf(".const"));
        if (space < 0 || tokens.contains(".extern") || tokens.contains(".entry") || tokens.contains(".func")) {
            return;
        }
        Declarator d = declarator(tokens.subList(space + 1, tokens.size()), "variable");
        byte[] initial = eq < 0 ? new byte[0] : GlobalInitializer.bytes(statement.substring(eq + 1), d.typeName, d.elementSize / d.vector);
        long count = d.count >= 0 ? d.count : initial.length / d.elementSize;   // name[] takes its size from the initializer
        long size = d.elementSize * Math.max(count, 1);
        for (String name : d.names) {
            byte[] bytes = initial.length > size ? Arrays.copyOf(initial, (int) size) : initial;
            globals.put(name, new Global(name, size, d.alignment, bytes));
        }
    }

    /** Type, alignment, names and element count of the part of a declaration after its state space. */
    private record Declarator(String typeName, long elementSize, long vector, long alignment, List<String> names, long count) {
    }

    private static Declarator declarator(List<String> tokens, String what) {
        String type = null;
        long explicitAlign = 0;
        long vector = 1;
        long count = 1;
        boolean pointerAttributes = false;
        List<String> names = new ArrayList<>();
        for (int i = 0; i < tokens.size(); i++) {
            String t = tokens.get(i);
            if (t.equals(".align")) {
                long a = i + 1 < tokens.size() ? parseCount(tokens.get(++i), what) : 0;
                if (!pointerAttributes) {
                    explicitAlign = a;   // after .ptr it is the pointee's alignment, not the parameter's
                }
            } else if (t.equals(".ptr")) {
                pointerAttributes = true;
            } else if (t.equals(".v2") || t.equals(".v4") || t.equals(".v8")) {
                vector = Long.parseLong(t.substring(2));
            } else if (t.equals(".attribute")) {
                while (i < tokens.size() && !tokens.get(i).equals(")")) {
                    i++;
                }
            } else if (typeSize(t) > 0) {
                type = t;
            } else if (t.startsWith("[")) {
                String inner = t.substring(1, t.length() - 1).trim();
                count = inner.isEmpty() ? -1 : (count < 0 ? -1 : count * parseCount(inner, what));
            } else if (!t.startsWith(".") && !t.equals(",") && !Character.isDigit(t.charAt(0))) {
                names.add(t);
            }
        }
        if (type == null || names.isEmpty()) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, what + " without a type or a name: " + String.join(" ", tokens));
        }
        long elementSize = typeSize(type) * vector;
        long alignment = explicitAlign > 0 ? explicitAlign : elementSize;
        if (Long.bitCount(alignment) != 1) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, what + ": alignment " + alignment + " is not a power of two");
        }
        return new Declarator(type, elementSize, vector, alignment, names, count);
    }

    private static long parseCount(String s, String what) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, what + ": not a number: " + s);
        }
    }

    /** Bytes of a PTX fundamental type, or 0 when {@code t} is not one. */
    static long typeSize(String t) {
        return switch (t) {
            case ".b8", ".u8", ".s8" -> 1;
            case ".b16", ".u16", ".s16", ".f16", ".bf16" -> 2;
            case ".b32", ".u32", ".s32", ".f32", ".f16x2", ".bf16x2" -> 4;
            case ".b64", ".u64", ".s64", ".f64", ".texref", ".samplerref", ".surfref" -> 8;
            case ".b128" -> 16;
            default -> 0;
        };
    }

    private static List<String> tokens(String s) {
        List<String> out = new ArrayList<>();
        Matcher m = TOKEN.matcher(s);
        while (m.find()) {
            out.add(m.group());
        }
        return out;
    }
}
