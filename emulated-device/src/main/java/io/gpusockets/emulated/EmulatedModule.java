package io.gpusockets.emulated;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A PTX module loaded into one context: its parsed entries, device memory for each of its variables
 * (allocated and initialised at load) and for its code (a reservation of the footprint model: the
 * PTX text's bytes), and the function handles issued so far (one per entry, the same value on every
 * cuModuleGetFunction, as the real driver does).
 */
final class EmulatedModule {
    final long handle;
    final EmulatedContext context;
    final PtxModule ptx;
    /** Null for a module loaded with cuModuleLoadData*; the library for one made by cuLibrary*. */
    final EmulatedLibrary library;
    final Map<String, Allocation> globals;
    final EmulatedMemory.Reservation code;
    final Map<String, EmulatedFunction> functions = new ConcurrentHashMap<>();

    EmulatedModule(long handle, EmulatedContext context, PtxModule ptx, EmulatedLibrary library, Map<String, Allocation> globals,
                   EmulatedMemory.Reservation code) {
        this.handle = handle;
        this.context = context;
        this.ptx = ptx;
        this.library = library;
        this.globals = globals;
        this.code = code;
    }
}
