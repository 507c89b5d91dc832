package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_IMAGE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;

import io.gpusockets.protocol.images.ImageError;
import io.gpusockets.protocol.images.PtxText;
import io.gpusockets.protocol.images.PtxVariables;
import java.util.ArrayList;
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
    private static final Pattern ENTRY = Pattern.compile("\\.entry\\s+([A-Za-z_$%][\\w$%]*)\\s*");
    private static final Pattern FUNC = Pattern.compile("\\.func\\s*(?:\\([^)]*\\)\\s*)?([A-Za-z_$%][\\w$%]*)\\s*");
    private static final Pattern THREAD_LIMIT = Pattern.compile("\\.(maxntid|reqntid)\\s+(\\d+)(?:\\s*,\\s*(\\d+))?(?:\\s*,\\s*(\\d+))?");
    private static final Pattern SM = Pattern.compile("sm_(\\d+)");

    final int ptxVersion;
    final String target;
    /** Bytes of the PTX text the module was parsed from: its code in the footprint model (the driver compiles it to SASS). */
    final long textBytes;
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

    private PtxModule(int ptxVersion, String target, long textBytes, Map<String, Entry> entries, Map<String, Global> globals,
                      Map<String, Source> bodies, List<Source> sharedDeclarations, Map<String, Func> funcs,
                      List<String> externFuncs) {
        this.ptxVersion = ptxVersion;
        this.textBytes = textBytes;
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
        try {
            return parseText(ptx);
        } catch (ImageError e) {
            throw new CudaError(e.code, e.getMessage());
        }
    }

    private static PtxModule parseText(String ptx) {
        String text = PtxText.stripComments(ptx);
        Matcher version = VERSION.matcher(text);
        if (!version.find()) {
            throw new CudaError(CUDA_ERROR_INVALID_IMAGE, "image is not PTX text (no .version directive)");
        }
        int ptxVersion = Integer.parseInt(version.group(1)) * 10 + Integer.parseInt(version.group(2));
        Matcher targetMatch = TARGET.matcher(text);
        String target = targetMatch.find() ? targetMatch.group(1).trim() : "";

        Map<String, Entry> entries = new LinkedHashMap<>();
        Map<String, Global> globals = new LinkedHashMap<>();
        Map<String, Source> bodies = new LinkedHashMap<>();
        List<Source> shared = new ArrayList<>();
        Map<String, Func> funcs = new LinkedHashMap<>();
        List<String> externs = new ArrayList<>();
        PtxText.scan(text, new PtxText.Visitor() {
            @Override
            public void statement(String s, int line) {
                for (PtxVariables.Variable v : PtxVariables.declared(s, true)) {
                    globals.put(v.name(), new Global(v.name(), v.size(), v.alignment(), v.initial()));
                }
                List<String> words = PtxText.tokens(s);
                if (words.contains(".shared")) {
                    shared.add(new Source(s, line));
                }
                if (words.contains(".func") && words.contains(".extern")) {
                    Matcher fm = FUNC.matcher(s);
                    if (fm.find()) {
                        externs.add(fm.group(1));
                    }
                }
            }

            @Override
            public void block(String header, String body, int line) {
                String entry = declareEntry(header, entries);
                if (entry != null) {
                    bodies.put(entry, new Source(body, line));
                } else {
                    declareFunc(header, new Source(body, line), funcs);
                }
            }
        });
        return new PtxModule(ptxVersion, target, ptx.getBytes(java.nio.charset.StandardCharsets.UTF_8).length, entries,
                globals, bodies, shared, funcs, externs);
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
        List<String> tokens = PtxText.tokens(declaration);
        if (tokens.isEmpty() || !tokens.getFirst().equals(".param")) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + entry + ": not a .param: " + declaration);
        }
        PtxVariables.Declarator d = PtxVariables.declarator(tokens.subList(1, tokens.size()), entry + " parameter");
        if (d.names().size() != 1 || d.count() < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_PTX, "entry " + entry + ": bad parameter " + declaration);
        }
        long offset = (after + d.alignment() - 1) / d.alignment() * d.alignment();
        return new Param(d.names().getFirst(), offset, d.elementSize() * d.count(), d.alignment());
    }
}
