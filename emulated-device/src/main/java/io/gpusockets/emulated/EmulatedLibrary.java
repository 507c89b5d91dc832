package io.gpusockets.emulated;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A context-independent library (cuLibraryLoadData): parsed once, loaded into a context as an
 * ordinary module the first time that context asks for it (cuLibraryGetModule, cuKernelGetFunction,
 * or a launch of one of its kernels).
 */
final class EmulatedLibrary {
    /** A CUkernel: a library's entry, not yet bound to a context. */
    record Kernel(long handle, EmulatedLibrary library, String name) {
    }

    final long handle;
    final PtxModule ptx;
    final Map<EmulatedContext, EmulatedModule> modules = new ConcurrentHashMap<>();
    final Map<String, Kernel> kernels = new ConcurrentHashMap<>();

    EmulatedLibrary(long handle, PtxModule ptx) {
        this.handle = handle;
        this.ptx = ptx;
    }
}
