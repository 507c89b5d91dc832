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
 *               whose memory and budget belong to its physical allocation ({@link VirtualMemory}), not to this record,
 *               or IPC: another process's cuMemAlloc allocation opened with cuIpcOpenMemHandle ({@link IpcMemory}), its
 *               memory file mapped here; cuMemFree refuses it, cuIpcCloseMemHandle removes it, and it takes nothing of
 *               this device's budget (the exporter's holds it, as one GPU's memory is counted once)
 */
record Allocation(long base, long size, long id, Kind kind, EmulatedContext owner, Arena arena, MemorySegment host) {
    enum Kind { ALLOCATED, GLOBAL, HEAP, MAPPED, IPC }

    long end() {
        return base + size;
    }

    boolean contains(long address, long bytes) {
        return address >= base && bytes >= 0 && address - base <= size - bytes;
    }
}
