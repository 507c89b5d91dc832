package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.emulated.ptx.PtxFunction;
import io.gpusockets.emulated.ptx.PtxKernel;
import io.gpusockets.emulated.ptx.PtxUnsupported;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A kernel of a loaded module. {@code kernel} is its Java implementation, or null when the emulated
 * device has none: it then runs from its PTX ({@link #interpreted}, parsed at the first launch or the first
 * query of its local size; compiled to JVM bytecode or interpreted, see {@link PtxKernel}).
 */
final class EmulatedFunction {
    static final int MAX_THREADS_PER_BLOCK = 0;
    static final int SHARED_SIZE_BYTES = 1;
    static final int CONST_SIZE_BYTES = 2;
    static final int LOCAL_SIZE_BYTES = 3;
    static final int NUM_REGS = 4;
    static final int PTX_VERSION = 5;
    static final int BINARY_VERSION = 6;
    static final int CACHE_MODE_CA = 7;
    static final int MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
    static final int PREFERRED_SHARED_MEMORY_CARVEOUT = 9;
    static final int LAST_SETTABLE = 15;
    /** Registers per thread the emulated device claims for every kernel (used by occupancy). */
    static final int REGISTERS = 32;

    final long handle;
    final EmulatedModule module;
    final PtxModule.Entry entry;
    final EmulatedKernels.Kernel kernel;
    /** Attributes a program may set (8..15); defaults as a freshly loaded function has them. */
    private final Map<Integer, Integer> settable = new ConcurrentHashMap<>(Map.of(
            MAX_DYNAMIC_SHARED_SIZE_BYTES, DeviceProperties.SHARED_MEMORY_PER_BLOCK,
            PREFERRED_SHARED_MEMORY_CARVEOUT, -1));

    /** The parsed entry, or the reason it cannot run; set at the first launch. */
    private volatile Object interpreted;

    EmulatedFunction(long handle, EmulatedModule module, PtxModule.Entry entry) {
        this.handle = handle;
        this.module = module;
        this.entry = entry;
        this.kernel = EmulatedKernels.find(entry.name());
    }

    /** The entry parsed for the PTX interpreter; CUDA_ERROR_NOT_SUPPORTED naming what it cannot run. */
    PtxKernel interpreted() {
        Object parsed = interpreted;
        if (parsed == null) {
            synchronized (this) {
                parsed = interpreted;
                if (parsed == null) {
                    parsed = parse();
                    interpreted = parsed;
                }
            }
        }
        if (parsed instanceof PtxKernel k) {
            return k;
        }
        throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, (String) parsed);
    }

    private Object parse() {
        PtxModule.Source body = module.ptx.bodies.get(entry.name());
        if (body == null) {
            return "kernel " + entry.name() + ": no body in the module";
        }
        Map<String, Long> params = new LinkedHashMap<>();
        for (PtxModule.Param p : entry.params()) {
            params.put(p.name(), p.offset());
        }
        Map<String, Long> globals = new LinkedHashMap<>();
        module.globals.forEach((name, a) -> globals.put(name, a.base()));
        int index = 0;
        for (String name : module.ptx.entries.keySet()) {   // kernels name the entries they launch (dynamic parallelism)
            globals.putIfAbsent(name, PtxKernel.functionAddress(index++));
        }
        List<Map.Entry<String, Integer>> shared = module.ptx.sharedDeclarations.stream()
                .map(s -> Map.entry(s.text(), s.line())).toList();
        try {
            Map<String, PtxFunction> funcs = new LinkedHashMap<>();
            module.ptx.funcs.forEach((name, f) -> funcs.put(name, new PtxFunction(name, functionParams(f.returns()),
                    functionParams(f.params()), f.body().text(), f.body().line())));
            return PtxKernel.compile(entry.name(), body.text(), body.line(), params, globals, shared, funcs,
                    java.util.Set.copyOf(module.ptx.externFuncs));
        } catch (PtxUnsupported e) {
            return "kernel " + entry.name() + " cannot run on the emulated device: " + e.getMessage();
        }
    }

    private static List<PtxFunction.Param> functionParams(List<PtxModule.Param> list) {
        return list.stream().map(p -> new PtxFunction.Param(p.name(), p.size(), p.alignment())).toList();
    }

    /**
     * CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: the .local memory a thread of the entry has as its PTX declares it
     * (its .local variables and call-site parameters, {@link PtxKernel#localBytes}; the entry is parsed for it
     * if no launch has yet), 0 for an entry the interpreter cannot parse.
     */
    private int localBytes() {
        try {
            return (int) Math.min(interpreted().localBytes(), Integer.MAX_VALUE);
        } catch (CudaError cannotRun) {
            return 0;
        }
    }

    long maxDynamicShared() {
        return settable.get(MAX_DYNAMIC_SHARED_SIZE_BYTES);
    }

    /** The attribute's value, or null for a number that is no CUfunction_attribute. */
    Integer attribute(int attribute) {
        return switch (attribute) {
            case MAX_THREADS_PER_BLOCK -> entry.maxThreadsPerBlock();
            case LOCAL_SIZE_BYTES -> localBytes();
            case SHARED_SIZE_BYTES, CONST_SIZE_BYTES, CACHE_MODE_CA -> 0;
            case NUM_REGS -> REGISTERS;
            case PTX_VERSION -> module.ptx.ptxVersion;
            case BINARY_VERSION -> module.ptx.targetSm();
            default -> attribute > CACHE_MODE_CA && attribute <= LAST_SETTABLE ? settable.getOrDefault(attribute, 0) : null;
        };
    }

    /** Stores a settable attribute; false when it is read-only, unknown, or out of range. */
    boolean setAttribute(int attribute, int value) {
        boolean ok = switch (attribute) {
            case MAX_DYNAMIC_SHARED_SIZE_BYTES -> value >= 0 && value <= DeviceProperties.SHARED_MEMORY_PER_BLOCK_OPTIN;
            case PREFERRED_SHARED_MEMORY_CARVEOUT -> value >= -1 && value <= 100;
            default -> attribute > PREFERRED_SHARED_MEMORY_CARVEOUT && attribute <= LAST_SETTABLE && value >= 0;
        };
        if (ok) {
            settable.put(attribute, value);
        }
        return ok;
    }
}
