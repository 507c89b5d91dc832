package io.gpusockets.protocol.api.codegen;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Emits the Java code each layer derives from the API table. Run by the build in source-file mode
 * (see the modules' pom.xml):
 * <pre>
 *   java ApiGenerator.java --table cuda-driver.api --emit protocol|frontend|backend|native --out DIR
 * </pre>
 * protocol: {@code CudaDriver}, {@code UnsupportedCudaDriver}, {@code ForwardingCudaDriver}, {@code DelegatingCudaDriver}, {@code ApiInvoker},
 * {@code ApiEntries};
 * frontend: {@code GeneratedRemoteDriver} and {@code FrontendHandlers}; backend: {@code NativeBindings}
 * and {@code BackendHandlers}; native: the C trampolines of the frontend's libcuda.so.1
 * ({@code gpusockets_exports.c}).
 *
 * <p>Hand-written calls are bound to the table here: each side gets one interface per API area
 * ({@code area=} of the entries marked custom=… or local) with one method per entry, and the code
 * that dispatches to them. A handler class that lacks a method, or a side that lacks an area's
 * handler, does not compile.
 */
public final class ApiGenerator {
    private final ApiTable table;
    private final Path out;
    /** not-forwarded.api and cuda-h-13.0.txt, beside the table (read for the native stubs). */
    private final Path tableDir;

    private ApiGenerator(ApiTable table, Path out, Path tableDir) {
        this.table = table;
        this.out = out;
        this.tableDir = tableDir;
    }

    public static void main(String[] args) throws IOException {
        String tablePath = null, emit = null, outDir = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--table" -> tablePath = args[i + 1];
                case "--emit" -> emit = args[i + 1];
                case "--out" -> outDir = args[i + 1];
                default -> throw new IllegalArgumentException("unknown option: " + args[i]);
            }
        }
        if (tablePath == null || emit == null || outDir == null) {
            throw new IllegalArgumentException("usage: ApiGenerator --table FILE --emit protocol|frontend|backend --out DIR");
        }
        ApiTable table = ApiTable.parse(Files.readString(Path.of(tablePath), StandardCharsets.UTF_8));
        ApiGenerator g = new ApiGenerator(table, Path.of(outDir), Path.of(tablePath).toAbsolutePath().getParent());
        switch (emit) {
            case "protocol" -> {
                g.write("io.gpusockets.protocol.api", "CudaDriver", g.cudaDriver());
                g.write("io.gpusockets.protocol.api", "UnsupportedCudaDriver", g.unsupportedDriver());
                g.write("io.gpusockets.protocol.api", "ForwardingCudaDriver", g.forwardingDriver());
                g.write("io.gpusockets.protocol.api", "DelegatingCudaDriver", g.delegatingDriver());
                g.write("io.gpusockets.protocol.api", "ApiInvoker", g.invoker());
                g.write("io.gpusockets.protocol.api", "ApiEntries", g.entries());
            }
            case "frontend" -> {
                g.write("io.gpusockets.frontend", "GeneratedRemoteDriver", g.remoteDriver());
                g.write("io.gpusockets.frontend", "FrontendHandlers", new HandlerEmitter(table).frontendHandlers());
            }
            case "backend" -> {
                g.write("io.gpusockets.backend.driver", "NativeBindings", g.nativeBindings());
                g.write("io.gpusockets.backend.session", "BackendHandlers", new HandlerEmitter(table).backendHandlers());
            }
            case "native" -> g.writeFile("gpusockets_exports.c", g.nativeExports() + g.notForwardedStubs());
            default -> throw new IllegalArgumentException("unknown --emit: " + emit);
        }
    }

    private void writeFile(String name, String text) throws IOException {
        Files.createDirectories(out);
        Path file = out.resolve(name);
        if (!Files.exists(file) || !Files.readString(file).equals(text)) {
            Files.writeString(file, text);
        }
    }

    private void write(String pkg, String cls, String body) throws IOException {
        Path dir = out.resolve(pkg.replace('.', '/'));
        Files.createDirectories(dir);
        String text = "// Generated from cuda-driver.api by ApiGenerator. Do not edit: change the table.\n"
                + "package " + pkg + ";\n\n" + body;
        Path file = dir.resolve(cls + ".java");
        if (!Files.exists(file) || !Files.readString(file).equals(text)) {
            Files.writeString(file, text);
        }
    }

    static String javaType(ApiParam p) {
        return p.out() ? "MemorySegment" : p.type().javaType();
    }

    static String signature(ApiFunction f) {
        List<String> ps = new ArrayList<>();
        for (ApiParam p : f.params()) {
            ps.add(javaType(p) + " " + p.name());
        }
        return "int " + f.name() + "(" + String.join(", ", ps) + ")";
    }

    static String argNames(ApiFunction f) {
        List<String> ps = new ArrayList<>();
        for (ApiParam p : f.params()) {
            ps.add(p.name());
        }
        return String.join(", ", ps);
    }

    static String doc(ApiFunction f) {
        String hand = f.customFrontend() && f.customBackend() ? "; hand-written in the frontend and the backend"
                : f.customFrontend() ? "; hand-written in the frontend" : f.customBackend() ? "; hand-written in the backend" : "";
        return "    /** {@code " + String.join("}, {@code ", f.symbols()) + "}" + (f.async() ? "; async" : "") + hand
                + (f.local() ? "; answered locally by the frontend" : "")
                + (f.area().isEmpty() ? "" : " (area " + f.area() + ")") + ". */\n";
    }

    private String cudaDriver() {
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * The CUDA driver API, C-shaped: pointers are MemorySegments, handles and device pointers are\n")
                .append(" * longs, every method returns a CUresult. Implemented by the real driver (NativeCudaDriver),\n")
                .append(" * the emulated device, and the remote stub (RemoteCudaDriver).\n */\n");
        b.append("public interface CudaDriver {\n");
        for (ApiFunction f : table.functions()) {
            b.append(doc(f)).append("    ").append(signature(f)).append(";\n\n");
        }
        return b.append("}\n").toString();
    }

    private String unsupportedDriver() {
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/** A driver that implements nothing: each call returns CUDA_ERROR_NOT_SUPPORTED. Subclasses override what they offer. */\n");
        b.append("public abstract class UnsupportedCudaDriver implements CudaDriver {\n");
        b.append("    /** What every method not overridden returns; CUDA_ERROR_NOT_SUPPORTED unless a subclass says otherwise. */\n");
        b.append("    protected int unsupported() {\n        return CuResult.CUDA_ERROR_NOT_SUPPORTED;\n    }\n\n");
        for (ApiFunction f : table.functions()) {
            b.append("    @Override\n    public ").append(signature(f)).append(" {\n        return unsupported();\n    }\n\n");
        }
        return b.append("}\n").toString();
    }

    private String forwardingDriver() {
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * A driver whose every method, hand-written and local ones included, funnels into {@link #forward}\n")
                .append(" * with its table entry and its arguments in C order: for drivers that decide per call where it\n")
                .append(" * goes (the frontend's MultiBackendDriver). {@link ApiInvoker} is the way back to a CudaDriver.\n */\n");
        b.append("public abstract class ForwardingCudaDriver implements CudaDriver {\n");
        b.append("    private static final ApiFunction[] FUNCTIONS = ApiTable.get().functions().toArray(new ApiFunction[0]);\n\n");
        b.append("    /** Handles one call; {@code args} are boxed, in C order. */\n");
        b.append("    protected abstract int forward(ApiFunction f, Object... args);\n\n");
        for (ApiFunction f : table.functions()) {
            b.append("    @Override\n    public final ").append(signature(f)).append(" {\n");
            b.append("        return forward(FUNCTIONS[").append(f.index()).append("]");
            if (!f.params().isEmpty()) {
                b.append(", ").append(argNames(f));
            }
            b.append(");\n    }\n\n");
        }
        return b.append("}\n").toString();
    }

    private String delegatingDriver() {
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * A driver that passes every call to {@link #delegate} unchanged, without boxing: subclasses override\n")
                .append(" * the calls they answer differently (the backend's address-stable memory). Unlike\n")
                .append(" * {@link ForwardingCudaDriver}, it adds one virtual call and nothing else to the per-call path.\n */\n");
        b.append("public abstract class DelegatingCudaDriver implements CudaDriver {\n");
        b.append("    /** The driver every call not overridden goes to. */\n    protected final CudaDriver delegate;\n\n");
        b.append("    protected DelegatingCudaDriver(CudaDriver delegate) {\n        this.delegate = delegate;\n    }\n\n");
        for (ApiFunction f : table.functions()) {
            b.append("    @Override\n    public ").append(signature(f)).append(" {\n");
            b.append("        return delegate.").append(f.name()).append("(");
            if (!f.params().isEmpty()) {
                b.append(argNames(f));
            }
            b.append(");\n    }\n\n");
        }
        return b.append("}\n").toString();
    }

    static String boxed(String t) {
        return switch (t) {
            case "int" -> "Integer";
            case "long" -> "Long";
            case "byte" -> "Byte";
            case "short" -> "Short";
            case "float" -> "Float";
            default -> t;
        };
    }

    private String entries() {
        StringBuilder b = new StringBuilder();
        b.append("/**\n * Every table entry as a constant named for its function, so that code which names an entry (a\n")
                .append(" * hand-written call sending its own request, a test) is checked by the compiler, not looked up by\n")
                .append(" * a string at run time.\n */\n");
        b.append("@SuppressWarnings(\"checkstyle:ConstantName\")\npublic final class ApiEntries {\n    private ApiEntries() {\n    }\n\n");
        b.append("    private static final java.util.List<ApiFunction> F = ApiTable.get().functions();\n\n");
        for (ApiFunction f : table.functions()) {
            b.append("    public static final ApiFunction ").append(f.name()).append(" = entry(").append(f.index())
                    .append(", \"").append(f.name()).append("\");\n");
        }
        b.append("\n    private static ApiFunction entry(int index, String name) {\n")
                .append("        ApiFunction f = index < F.size() ? F.get(index) : null;\n")
                .append("        if (f == null || !f.name().equals(name)) {\n")
                .append("            throw new IllegalStateException(\"generated code is stale at \" + name);\n        }\n")
                .append("        return f;\n    }\n}\n");
        return b.toString();
    }

    private String invoker() {
        StringBuilder b = new StringBuilder("import java.lang.foreign.MemorySegment;\n\n");
        b.append("/** Calls a {@link CudaDriver} method chosen by table index with boxed arguments (the backend's generic dispatch). */\n");
        b.append("public final class ApiInvoker {\n    private ApiInvoker() {\n    }\n\n");
        b.append("    /** Names in table order, checked against the runtime table when this class loads. */\n");
        b.append("    private static final String[] NAMES = {\n");
        for (ApiFunction f : table.functions()) {
            b.append("        \"").append(f.name()).append("\",\n");
        }
        b.append("    };\n\n    static {\n        checkAgainst(ApiTable.get(), NAMES);\n    }\n\n");
        b.append("    static void checkAgainst(ApiTable t, String[] names) {\n")
                .append("        if (t.functions().size() != names.length) {\n")
                .append("            throw new IllegalStateException(\"generated code is stale: table has \" + t.functions().size() + \" entries, code \" + names.length);\n        }\n")
                .append("        for (int i = 0; i < names.length; i++) {\n")
                .append("            if (!t.functions().get(i).name().equals(names[i])) {\n")
                .append("                throw new IllegalStateException(\"generated code is stale at entry \" + i + \": \" + names[i]);\n")
                .append("            }\n        }\n    }\n\n");
        // One switch over every entry would be a method of over 8000 bytes of bytecode, which HotSpot never
        // compiles (DontCompileHugeMethods): every generic call would run it in the interpreter. So the entries
        // are split into methods of INVOKER_CHUNK each, chosen by a small switch.
        List<ApiFunction> all = table.functions();
        int chunks = (all.size() + INVOKER_CHUNK - 1) / INVOKER_CHUNK;
        b.append("    /** Entries per {@code invokeN} method: each stays small enough for the JIT to compile. */\n");
        b.append("    static final int CHUNK = ").append(INVOKER_CHUNK).append(";\n\n");
        b.append("    public static int invoke(CudaDriver d, int index, Object[] a) {\n        return switch (index < 0 ? -1 : index / CHUNK) {\n");
        for (int c = 0; c < chunks; c++) {
            b.append("            case ").append(c).append(" -> invoke").append(c).append("(d, index, a);\n");
        }
        b.append("            default -> throw new IllegalArgumentException(\"no API function at index \" + index);\n");
        b.append("        };\n    }\n");
        for (int c = 0; c < chunks; c++) {
            b.append("\n    @SuppressWarnings(\"cast\")\n    private static int invoke").append(c)
                    .append("(CudaDriver d, int index, Object[] a) {\n        return switch (index) {\n");
            for (ApiFunction f : all.subList(c * INVOKER_CHUNK, Math.min(all.size(), (c + 1) * INVOKER_CHUNK))) {
                List<String> casts = new ArrayList<>();
                for (int i = 0; i < f.params().size(); i++) {
                    String t = javaType(f.params().get(i));
                    casts.add("(" + boxed(t) + ") a[" + i + "]");
                }
                b.append("            case ").append(f.index()).append(" -> d.").append(f.name()).append("(")
                        .append(String.join(", ", casts)).append(");\n");
            }
            b.append("            default -> throw new IllegalArgumentException(\"no API function at index \" + index);\n");
            b.append("        };\n    }\n");
        }
        b.append("}\n");
        return b.toString();
    }

    /** Entries per generated {@code ApiInvoker.invokeN}: about 2.5 KB of bytecode each, far below HotSpot's 8000-byte limit. */
    static final int INVOKER_CHUNK = 64;

    private String remoteDriver() {
        StringBuilder b = new StringBuilder();
        b.append("import io.gpusockets.protocol.api.ApiFunction;\nimport io.gpusockets.protocol.api.ApiTable;\n")
                .append("import io.gpusockets.protocol.api.CudaDriver;\nimport java.lang.foreign.MemorySegment;\n\n");
        b.append("/**\n * The frontend's stubs: every function the table does not mark custom=frontend or local is\n")
                .append(" * marshalled by {@link #call}; the others go to their area's handler in {@link FrontendHandlers},\n")
                .append(" * which the subclass binds once with {@link #bind} before any call.\n */\n");
        b.append("public abstract class GeneratedRemoteDriver implements CudaDriver {\n");
        b.append("    protected static final ApiFunction[] FUNCTIONS = ApiTable.get().functions().toArray(new ApiFunction[0]);\n\n");
        b.append("    private FrontendHandlers handlers;\n\n");
        b.append("    /** Marshals one call by its table entry; {@code args} are in C order. */\n");
        b.append("    protected abstract int call(ApiFunction f, Object... args);\n\n");
        b.append("    /** Binds the hand-written calls; once, from the subclass's constructor. */\n");
        b.append("    protected final void bind(FrontendHandlers handlers) {\n")
                .append("        if (this.handlers != null) {\n            throw new IllegalStateException(\"handlers bound twice\");\n        }\n")
                .append("        this.handlers = java.util.Objects.requireNonNull(handlers);\n    }\n\n");
        for (ApiFunction f : table.functions()) {
            b.append(doc(f)).append("    @Override\n    public final ").append(signature(f)).append(" {\n");
            if (HandlerEmitter.frontendHandled(f)) {
                b.append("        return handlers.").append(f.area()).append("().").append(f.name()).append("(")
                        .append(argNames(f)).append(");\n    }\n\n");
                continue;
            }
            b.append("        return call(FUNCTIONS[").append(f.index()).append("]");
            if (!f.params().isEmpty()) {
                b.append(", ").append(argNames(f));
            }
            b.append(");\n    }\n\n");
        }
        b.append("    static {\n");
        for (ApiFunction f : table.functions()) {
            b.append("        check(").append(f.index()).append(", \"").append(f.name()).append("\");\n");
        }
        b.append("    }\n\n    private static void check(int index, String name) {\n")
                .append("        if (index >= FUNCTIONS.length || !FUNCTIONS[index].name().equals(name)) {\n")
                .append("            throw new IllegalStateException(\"generated code is stale at \" + name);\n        }\n    }\n}\n");
        return b.toString();
    }

    /** C type of a parameter in the exported prototypes (the ABI class is what matters: ints, 64-bit ints, pointers). */
    private static String cType(ApiParam p) {
        if (p.out()) {
            return "void *";
        }
        if (p.byValue()) {
            return byValueType(p);
        }
        return switch (p.type()) {
            case I32 -> "int";
            case U32, ZERO -> "unsigned int";
            case DEV -> "int";
            case U8 -> "unsigned char";
            case U16 -> "unsigned short";
            case F32 -> "float";
            case I64, U64, SIZE, DPTR -> "unsigned long long";
            case CTX, MOD, FUNC, STREAM, EVENT, LIB, KERNEL -> "void *";
            default -> "void *";
        };
    }

    /** C type of the upcall's parameter: handles are Java longs on the Java side; a struct by value goes by address. */
    private static String upcallCType(ApiParam p) {
        if (p.byValue()) {
            return "void *";
        }
        return !p.out() && p.type().isHandle() ? "unsigned long long" : cType(p);
    }

    /** The struct a {@code byvalue} bytes input is in the exported prototype: only its size and alignment matter. */
    private static String byValueType(ApiParam p) {
        return "gpus_byvalue_" + p.length().text();
    }

    /** The name of the entry's first input parameter of a type (the generator's table check guarantees one). */
    private static String firstOfType(ApiFunction f, io.gpusockets.protocol.api.ParamType type) {
        for (ApiParam p : f.params()) {
            if (!p.out() && p.type() == type) {
                return p.name();
            }
        }
        throw new IllegalArgumentException(f.name() + ": context rule " + f.context() + " needs a " + type + " input");
    }

    /**
     * The stubs of the functions not forwarded (not-forwarded.api): each exported under its name and
     * the ABI symbol cuda.h 13.0 maps it to, taking no arguments (callers' arguments are ignored, which
     * the x86-64 and AArch64 C calling conventions allow), returning its error through
     * gpus_not_forwarded (procaddress.c), which logs one line the first time. cuGetProcAddress does not
     * list them (gpus_symbols), so probing libraries see "not found".
     */
    private String notForwardedStubs() throws IOException {
        List<io.gpusockets.protocol.api.NotForwarded.Entry> entries = io.gpusockets.protocol.api.NotForwarded.parse(
                Files.readString(tableDir.resolve("not-forwarded.api"), StandardCharsets.UTF_8));
        java.util.Map<String, String> abi = io.gpusockets.protocol.api.NotForwarded.parseCudaH(
                Files.readString(tableDir.resolve("cuda-h-13.0.txt"), StandardCharsets.UTF_8));
        StringBuilder b = new StringBuilder("\n/* Functions not forwarded (not-forwarded.api). */\n");
        b.append("const int gpus_not_forwarded_count = ").append(entries.size()).append(";\n");
        b.append("const struct gpus_not_forwarded_entry gpus_not_forwarded_entries[] = {\n");
        for (var e : entries) {
            b.append("    {\"").append(e.name()).append("\", ").append(e.code()).append(", \"")
                    .append(e.reason().replace("\\", "\\\\").replace("\"", "\\\"")).append("\"},\n");
        }
        b.append("    {NULL, 0, NULL},\n};\n\n");
        for (int i = 0; i < entries.size(); i++) {
            var e = entries.get(i);
            java.util.LinkedHashSet<String> symbols = new java.util.LinkedHashSet<>(List.of(e.name(), abi.getOrDefault(e.name(), e.name())));
            for (String symbol : symbols) {
                b.append("GPUS_EXPORT CUresult CUDAAPI ").append(symbol).append("(void) {\n    return gpus_not_forwarded(")
                        .append(i).append(");\n}\n");
            }
        }
        return b.toString();
    }

    private String nativeExports() {
        List<ApiFunction> fs = table.functions();
        StringBuilder b = new StringBuilder();
        b.append("/* Generated from cuda-driver.api by ApiGenerator. Do not edit: change the table. */\n");
        b.append("#include \"gpusockets.h\"\n\n");
        b.append("const int gpus_function_count = ").append(fs.size()).append(";\n\n");
        java.util.Set<String> byValueTypes = new java.util.TreeSet<>();
        for (ApiFunction f : fs) {
            for (ApiParam p : f.params()) {
                if (p.byValue() && byValueTypes.add(p.length().text())) {
                    b.append("/* a struct cuda.h passes by value (CUipcMemHandle, CUipcEventHandle: char reserved[N]) */\n")
                            .append("typedef struct { char reserved[").append(p.length().text()).append("]; } ")
                            .append(byValueType(p)).append(";\n\n");
                }
            }
        }
        b.append("const char *const gpus_function_names[] = {\n");
        for (ApiFunction f : fs) {
            b.append("    \"").append(f.name()).append("\",\n");
        }
        b.append("};\n\n");
        for (ApiFunction f : fs) {
            List<String> params = new ArrayList<>();
            List<String> upcallTypes = new ArrayList<>();
            List<String> args = new ArrayList<>();
            for (ApiParam p : f.params()) {
                params.add(cType(p) + " " + p.name());
                upcallTypes.add(upcallCType(p));
                String cast = !p.out() && p.type().isHandle() ? "(unsigned long long)(uintptr_t)" : "";
                args.add(p.byValue() ? "(void *) &" + p.name() : cast + p.name());
            }
            String proto = "(" + (params.isEmpty() ? "void" : String.join(", ", params)) + ")";
            String upcall = "(" + (upcallTypes.isEmpty() ? "void" : String.join(", ", upcallTypes)) + ")";
            b.append("typedef CUresult (*gpus_fn_").append(f.name()).append(")").append(upcall).append(";\n");
            for (String symbol : f.exportedSymbols()) {
                boolean perThreadStream = symbol.endsWith("_ptsz");
                b.append("GPUS_EXPORT CUresult CUDAAPI ").append(symbol).append(proto).append(" {\n");
                b.append("    void *gpus_fn = gpus_entry(").append(f.index()).append(");\n");
                b.append("    if (gpus_fn == NULL) {\n        return gpus_unavailable(").append(f.index()).append(");\n    }\n");
                if (perThreadStream) {
                    for (ApiParam p : f.params()) {
                        if (!p.out() && p.type() == io.gpusockets.protocol.api.ParamType.STREAM) {
                            b.append("    if (").append(p.name()).append(" == NULL) {\n        ").append(p.name())
                                    .append(" = GPUS_STREAM_PER_THREAD; /* _ptsz: the default stream is per thread */\n    }\n");
                        }
                    }
                }
                // context-local storage (export_tables.c) ends with its context: destructors first
                if (f.context() == io.gpusockets.protocol.api.ContextRule.DESTROY) {
                    b.append("    gpus_cls_context_gone(").append(firstOfType(f, io.gpusockets.protocol.api.ParamType.CTX)).append(");\n");
                } else if (f.context() == io.gpusockets.protocol.api.ContextRule.RESET) {
                    b.append("    gpus_cls_primary_reset(").append(firstOfType(f, io.gpusockets.protocol.api.ParamType.DEV)).append(");\n");
                }
                b.append("    CUresult gpus_r = ((gpus_fn_").append(f.name()).append(") gpus_fn)(").append(String.join(", ", args)).append(");\n");
                b.append("    if (gpus_tracing()) {\n        gpus_trace(\"").append(symbol).append(" -> %d\", gpus_r);\n    }\n");
                b.append("    return gpus_r;\n}\n\n");
            }
        }
        b.append("const struct gpus_symbol gpus_symbols[] = {\n");
        for (ApiFunction f : fs) {
            for (String symbol : f.exportedSymbols()) {
                boolean perThread = !f.perThread().isEmpty() && symbol.endsWith(f.perThread());
                b.append("    {\"").append(f.serves()).append("\", \"").append(symbol).append("\", ")
                        .append(f.since(symbol)).append(", ").append(perThread ? 1 : 0).append(", (void *) ")
                        .append(symbol).append("},\n");
            }
        }
        b.append("    {NULL, NULL, 0, 0, NULL},\n};\n");
        return b.toString();
    }

    private String nativeBindings() {
        StringBuilder b = new StringBuilder();
        b.append("import static java.lang.foreign.ValueLayout.*;\n\n")
                .append("import io.gpusockets.protocol.api.CuResult;\nimport io.gpusockets.protocol.api.CudaDriver;\n")
                .append("import java.lang.foreign.FunctionDescriptor;\nimport java.lang.foreign.MemorySegment;\n")
                .append("import java.lang.invoke.MethodHandle;\n\n");
        b.append("/**\n * FFM downcalls to the real libcuda.so.1, one static final MethodHandle per table entry, bound to\n")
                .append(" * the entry's first symbol through {@link NativeLibrary}. A symbol the library lacks answers\n")
                .append(" * CUDA_ERROR_NOT_FOUND instead of failing the whole binding.\n */\n");
        b.append("public class NativeBindings implements CudaDriver {\n");
        for (ApiFunction f : table.functions()) {
            List<String> layouts = new ArrayList<>();
            for (ApiParam p : f.params()) {
                layouts.add(p.out() ? "ADDRESS" : p.byValue() ? "java.lang.foreign.MemoryLayout.structLayout("
                        + "java.lang.foreign.MemoryLayout.sequenceLayout(" + p.length().text() + ", JAVA_BYTE))" : p.type().layout());
            }
            b.append("    private static final MethodHandle ").append(f.name()).append(" = NativeLibrary.bind(\"")
                    .append(f.primarySymbol()).append("\", FunctionDescriptor.of(JAVA_INT")
                    .append(layouts.isEmpty() ? "" : ", " + String.join(", ", layouts)).append("), ")
                    .append(f.critical()).append(");\n");
        }
        b.append("\n");
        for (ApiFunction f : table.functions()) {
            b.append(doc(f)).append("    @Override\n    public ").append(signature(f)).append(" {\n");
            b.append("        if (").append(f.name()).append(" == null) {\n            return CuResult.CUDA_ERROR_NOT_FOUND;\n        }\n");
            b.append("        try {\n            return (int) ").append(f.name()).append(".invokeExact(").append(argNames(f))
                    .append(");\n        } catch (Throwable t) {\n            throw NativeLibrary.downcallFailed(\"")
                    .append(f.primarySymbol()).append("\", t);\n        }\n    }\n\n");
        }
        return b.append("}\n").toString();
    }
}
