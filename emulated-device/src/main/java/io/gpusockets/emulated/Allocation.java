package io.gpusockets.emulated;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * One block of emulated device memory: a device-like address range backed by its own native host
 * memory. The arena is shared (any stream thread may touch it) and closing it on free makes any late
 * access throw instead of reading freed memory.
 *
 * @param id     process-unique buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID)
 * @param kind   ALLOCATED by cuMemAlloc* (and cuMemAllocAsync), GLOBAL for a module's variable (cuMemFree
 *               refuses it), HEAP for a context's malloc heap (whose budget the context's reservations
 *               already hold: {@link EmulatedMemory.Reservation}), or MAPPED: a VMM mapping made accessible,
 *               whose memory and budget belong to its physical allocation ({@link VirtualMemory}), not to this record
 */
record Allocation(long base, long size, long id, Kind kind, EmulatedContext owner, Arena arena, MemorySegment host) {
    enum Kind { ALLOCATED, GLOBAL, HEAP, MAPPED }

    long end() {
        return base + size;
    }

    boolean contains(long address, long bytes) {
        return address >= base && bytes >= 0 && address - base <= size - bytes;
    }
}
