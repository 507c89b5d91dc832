package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a program may ask of libraries, kernels and functions beyond loading and launching them
 * (issue 11): counts and enumerations in the order of the PTX's entries, a library's globals in the
 * current context, kernel attributes (a CUkernel stands for its function in the current context,
 * whose settable attributes it reads and writes), names, cache and shared-memory configurations
 * (checked and accepted: they change nothing on a CPU), and a function's loading state (always
 * loaded: modules load their functions eagerly here).
 */
final class KernelQueries {
    static final int FUNCTION_LOADING_STATE_LOADED = 1;
    /** CUfunc_cache: CU_FUNC_CACHE_PREFER_NONE .. CU_FUNC_CACHE_PREFER_EQUAL. */
    static final int MAX_CACHE_CONFIG = 3;
    /** CUsharedconfig: CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE .. EIGHT_BYTE_BANK_SIZE. */
    static final int MAX_SHARED_CONFIG = 2;

    private final Contexts contexts;
    private final Modules modules;
    private final Launcher launcher;
    /** NUL-terminated names handed out as const char*: one copy per distinct name, kept for the device's life. */
    private final Map<String, MemorySegment> names = new ConcurrentHashMap<>();

    KernelQueries(Contexts contexts, Modules modules, Launcher launcher) {
        this.contexts = contexts;
        this.modules = modules;
        this.launcher = launcher;
    }

    EmulatedLibrary library(long handle) {
        return contexts.lookup(handle, EmulatedLibrary.class, "library");
    }

    EmulatedLibrary.Kernel kernel(long handle) {
        return contexts.lookup(handle, EmulatedLibrary.Kernel.class, "kernel");
    }

    int kernelCount(long lib) {
        return library(lib).ptx.entries.size();
    }

    /** The library's kernels in entry order, at most {@code max}. */
    List<Long> kernels(long lib, int max) {
        EmulatedLibrary l = library(lib);
        List<Long> out = new ArrayList<>();
        for (String name : l.ptx.entries.keySet()) {
            if (out.size() >= max) {
                break;
            }
            out.add(modules.kernel(l, name).handle());
        }
        return out;
    }

    int functionCount(long mod) {
        return contexts.lookup(mod, EmulatedModule.class, "mod").ptx.entries.size();
    }

    List<Long> functions(long mod, int max) {
        EmulatedModule m = contexts.lookup(mod, EmulatedModule.class, "mod");
        List<Long> out = new ArrayList<>();
        for (String name : m.ptx.entries.keySet()) {
            if (out.size() >= max) {
                break;
            }
            out.add(modules.function(m, name).handle);
        }
        return out;
    }

    /** The library's variable in the current context (the library is loaded there on first use). */
    Allocation global(long lib, String name) {
        EmulatedModule m = modules.libraryModule(library(lib), contexts.current());
        Allocation a = m.globals.get(name);
        if (a == null) {
            throw new CudaError(CUDA_ERROR_NOT_FOUND, "no .global or .const variable named " + name + " in the library");
        }
        return a;
    }

    /** The kernel's function in the current context, after checking that {@code dev} is a device. */
    private long onDevice(long kernel, int dev) {
        kernel(kernel);
        contexts.checkDevice(dev);
        return kernel;
    }

    int kernelAttribute(int attrib, long kernel, int dev) {
        return launcher.attribute(onDevice(kernel, dev), attrib);
    }

    void setKernelAttribute(int attrib, int value, long kernel, int dev) {
        launcher.setAttribute(onDevice(kernel, dev), attrib, value);
    }

    void kernelCacheConfig(long kernel, int config, int dev) {
        onDevice(kernel, dev);
        checkRange("config", config, MAX_CACHE_CONFIG);
    }

    void functionCacheConfig(long func, int config) {
        launcher.function(func);
        checkRange("config", config, MAX_CACHE_CONFIG);
    }

    void functionSharedConfig(long func, int config) {
        launcher.function(func);
        checkRange("config", config, MAX_SHARED_CONFIG);
    }

    long kernelLibrary(long kernel) {
        return kernel(kernel).library().handle;
    }

    long functionModule(long func) {
        return launcher.function(func).module.handle;
    }

    int loadingState(long func) {
        launcher.function(func);
        return FUNCTION_LOADING_STATE_LOADED;
    }

    MemorySegment kernelName(long kernel) {
        return name(kernel(kernel).name());
    }

    MemorySegment functionName(long func) {
        return name(launcher.function(func).entry.name());
    }

    private MemorySegment name(String name) {
        return names.computeIfAbsent(name, n -> Arena.global().allocateFrom(n, StandardCharsets.UTF_8));
    }

    /** Writes {@code handles} as a CUkernel/CUfunction array of {@code count} elements. */
    static void putHandles(MemorySegment out, int count, List<Long> handles) {
        if (count < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "count=" + count);
        }
        if (count == 0) {
            return;
        }
        MemorySegment array = HostSegments.sized(out, 8L * count, "array");
        for (int i = 0; i < handles.size(); i++) {
            array.setAtIndex(ValueLayout.JAVA_LONG_UNALIGNED, i, handles.get(i));
        }
    }

    private static void checkRange(String what, int value, int max) {
        if (value < 0 || value > max) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, what + "=" + value);
        }
    }
}
