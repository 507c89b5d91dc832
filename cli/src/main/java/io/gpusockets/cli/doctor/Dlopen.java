package io.gpusockets.cli.doctor;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * Asks this process's dynamic loader which file {@code dlopen(name)} maps (dlinfo RTLD_DI_LINKMAP: the
 * link map's l_name), then closes it again. Loading runs no code of ours: the frontend's libcuda.so.1
 * has no constructor and starts its JVM only at its first call.
 */
final class Dlopen {
    private static final int RTLD_LAZY = 1;
    private static final int RTLD_DI_LINKMAP = 2;

    private Dlopen() {
    }

    /** The path the loader mapped for {@code name}, or null when it cannot be loaded or asked. */
    static String pathOf(String name) {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            MethodHandle open = linker.downcallHandle(libc.find("dlopen").orElseThrow(), FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
            MethodHandle info = linker.downcallHandle(libc.find("dlinfo").orElseThrow(),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS));
            MethodHandle close = linker.downcallHandle(libc.find("dlclose").orElseThrow(), FunctionDescriptor.of(JAVA_INT, ADDRESS));
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment handle = (MemorySegment) open.invokeExact(arena.allocateFrom(name), RTLD_LAZY);
                if (MemorySegment.NULL.equals(handle)) {
                    return null;
                }
                try {
                    MemorySegment out = arena.allocate(ADDRESS);
                    if ((int) info.invokeExact(handle, RTLD_DI_LINKMAP, out) != 0) {
                        return null;
                    }
                    // struct link_map { ElfW(Addr) l_addr; char *l_name; ... }
                    MemorySegment map = out.get(ADDRESS, 0).reinterpret(2 * ADDRESS.byteSize());
                    MemorySegment lName = map.get(ADDRESS, ADDRESS.byteSize());
                    return MemorySegment.NULL.equals(lName) ? null : lName.reinterpret(4096).getString(0);
                } finally {
                    int ignored = (int) close.invokeExact(handle);
                }
            }
        } catch (Throwable t) {
            return null;
        }
    }
}
