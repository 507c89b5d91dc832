package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_FOUND;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Modules, functions and libraries: loading PTX into a context (with device memory for its
 * variables and, in the footprint model, its code), handing out one function handle per entry, and
 * binding context-independent libraries to a context on first use (a library costs device memory in
 * each context it is used in, as on the driver).
 */
final class Modules {
    private final Handles handles;
    private final EmulatedMemory memory;
    private final Set<EmulatedLibrary> libraries = ConcurrentHashMap.newKeySet();

    Modules(Handles handles, EmulatedMemory memory) {
        this.handles = handles;
        this.memory = memory;
    }

    EmulatedModule load(EmulatedContext c, MemorySegment image, EmulatedLibrary library) {
        return load(c, PtxModule.parse(ModuleImage.ptxText(image)), library);
    }

    EmulatedModule load(EmulatedContext c, PtxModule ptx, EmulatedLibrary library) {
        Map<String, Allocation> globals = new LinkedHashMap<>();
        EmulatedMemory.Reservation code;
        try {
            for (PtxModule.Global g : ptx.globals.values()) {
                Allocation a = memory.allocate(c, g.size(), Allocation.Kind.GLOBAL);
                globals.put(g.name(), a);
                MemorySegment.copy(MemorySegment.ofArray(g.initial()), 0, a.host(), 0, g.initial().length);
            }
            code = memory.reserve(c, ptx.textBytes);
        } catch (RuntimeException e) {
            free(globals.values());
            throw e;
        }
        EmulatedModule m = new EmulatedModule(handles.issue(), c, ptx, library, globals, code);
        handles.own(c, m.handle, m);
        return m;
    }

    /**
     * Frees the module's variables once the context's queued work (which may use them) is done: they stay in the
     * address space until then, so a kernel queued before the unload reads them as it would have.
     */
    void unload(EmulatedModule m) {
        handles.remove(m.handle, m);
        m.context.owned.remove(m.handle);
        for (EmulatedFunction f : m.functions.values()) {
            handles.remove(f.handle, f);
            m.context.owned.remove(f.handle);
        }
        memory.release(m.code);
        if (!m.globals.isEmpty()) {
            m.context.allWork().join();
        }
        for (Allocation a : m.globals.values()) {
            if (memory.unmap(a)) {
                memory.release(a);
            }
        }
    }

    private void free(Iterable<Allocation> allocations) {
        for (Allocation a : allocations) {
            if (memory.unmap(a)) {
                memory.release(a);
            }
        }
    }

    EmulatedFunction function(EmulatedModule m, String name) {
        PtxModule.Entry entry = m.ptx.entries.get(name);
        if (entry == null) {
            throw new CudaError(CUDA_ERROR_NOT_FOUND, "no .entry named " + name + " in the module");
        }
        return m.functions.computeIfAbsent(name, n -> {
            long h = handles.issue();
            return handles.own(m.context, h, new EmulatedFunction(h, m, entry));
        });
    }

    /** A library is not bound to any context: its handle lives until cuLibraryUnload or the device closes. */
    EmulatedLibrary loadLibrary(MemorySegment image) {
        PtxModule ptx = PtxModule.parse(ModuleImage.ptxText(image));
        long h = handles.issue();
        EmulatedLibrary lib = handles.register(h, new EmulatedLibrary(h, ptx));
        libraries.add(lib);
        return lib;
    }

    void unloadLibrary(EmulatedLibrary lib) {
        handles.remove(lib.handle, lib);
        libraries.remove(lib);
        for (EmulatedLibrary.Kernel k : lib.kernels.values()) {
            handles.remove(k.handle(), k);
        }
        for (EmulatedModule m : lib.modules.values()) {
            lib.modules.remove(m.context, m);
            unload(m);
        }
    }

    /** The library's module in {@code c}, loaded on first use. */
    EmulatedModule libraryModule(EmulatedLibrary lib, EmulatedContext c) {
        if (!libraries.contains(lib)) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "library was unloaded");
        }
        return lib.modules.computeIfAbsent(c, ctx -> load(ctx, lib.ptx, lib));
    }

    EmulatedLibrary.Kernel kernel(EmulatedLibrary lib, String name) {
        if (!lib.ptx.entries.containsKey(name)) {
            throw new CudaError(CUDA_ERROR_NOT_FOUND, "no .entry named " + name + " in the library");
        }
        return lib.kernels.computeIfAbsent(name, n -> {
            long h = handles.issue();
            return handles.register(h, new EmulatedLibrary.Kernel(h, lib, n));
        });
    }

    /** Forgets what a destroyed context had loaded from libraries (its memory and handles go with the context). */
    void forget(EmulatedContext c) {
        for (EmulatedLibrary lib : libraries) {
            lib.modules.remove(c);
        }
    }

    /** Device shutdown: every library goes. */
    void unloadAll() {
        for (EmulatedLibrary lib : List.copyOf(libraries)) {
            unloadLibrary(lib);
        }
    }
}
