package io.gpusockets.emulated;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * A context's device heap for kernels' {@code malloc}/{@code free}: one allocation of the context's
 * device memory (so accesses through the pointers it hands out get the usual checks), sized by
 * CU_LIMIT_MALLOC_HEAP_SIZE (8 MiB by default) when a kernel first allocates, carved first-fit into
 * 16-byte aligned blocks; freed neighbours merge. Thread-safe (one lock); exhaustion gives 0 (NULL).
 */
final class DeviceHeap {
    private static final long ALIGN = 16;

    private final Allocation region;
    /** Free blocks: start to size. */
    private final TreeMap<Long, Long> free = new TreeMap<>();
    /** Blocks handed out: start to size. */
    private final Map<Long, Long> used = new HashMap<>();

    DeviceHeap(Allocation region) {
        this.region = region;
        free.put(region.base(), region.size());
    }

    /** A block of at least {@code size} bytes, or 0 when none is free. */
    synchronized long malloc(long size) {
        if (size < 0 || size > region.size()) {
            return 0;
        }
        long want = Math.max(ALIGN, (size + ALIGN - 1) / ALIGN * ALIGN);
        for (Map.Entry<Long, Long> e : free.entrySet()) {
            if (e.getValue() >= want) {
                long start = e.getKey();
                long rest = e.getValue() - want;
                free.remove(start);
                if (rest > 0) {
                    free.put(start + want, rest);
                }
                used.put(start, want);
                return start;
            }
        }
        return 0;
    }

    /** Frees a block malloc returned; false for any other address (free(NULL) is a no-op, true). */
    synchronized boolean free(long address) {
        if (address == 0) {
            return true;
        }
        Long size = used.remove(address);
        if (size == null) {
            return false;
        }
        long start = address;
        long length = size;
        Map.Entry<Long, Long> before = free.lowerEntry(start);
        if (before != null && before.getKey() + before.getValue() == start) {
            free.remove(before.getKey());
            start = before.getKey();
            length += before.getValue();
        }
        Long after = free.remove(address + size);
        if (after != null) {
            length += after;
        }
        free.put(start, length);
        return true;
    }
}
