package io.gpusockets.backend.server;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class NativeHeapTrimTest {
    /** Freed malloc memory (what FFM arenas use) is given back by a trim where glibc has malloc_trim. */
    @Test
    void freedNativeMemoryIsGivenBack() {
        assumeTrue(NativeHeapTrim.available(), "this C library has no malloc_trim (not glibc)");
        List<Arena> arenas = new ArrayList<>();
        for (int i = 0; i < 2000; i++) {
            Arena a = Arena.ofShared();
            MemorySegment s = a.allocate(64 << 10);  // below glibc's mmap threshold: from the heap
            s.fill((byte) 1);
            arenas.add(a);
        }
        for (int i = 0; i < arenas.size(); i += 1) {
            arenas.get(i).close();
        }
        assertTrue(NativeHeapTrim.trim(), "malloc_trim gave nothing back after 125 MiB was freed");
    }

    /** Where glibc has mallopt and the environment says nothing, the backend limits its malloc arenas. */
    @Test
    void arenasAreLimitedUnlessTheEnvironmentSaysOtherwise() {
        assumeTrue(NativeHeapTrim.available(), "this C library is not glibc");
        boolean envSet = System.getenv("MALLOC_ARENA_MAX") != null;
        org.junit.jupiter.api.Assertions.assertEquals(!envSet, NativeHeapTrim.limitArenas(),
                envSet ? "MALLOC_ARENA_MAX is set: left as it is" : "mallopt(M_ARENA_MAX) accepted");
    }
}
