package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * One device's address window of a session ({@link StableAddresses}): its reservation, the ranges not yet
 * handed out, and the slabs of plain allocations' size classes. Bookkeeping only: mapping and unmapping are
 * {@link StableAddresses}'. Not thread-safe: its owner's lock guards it.
 */
final class AddressWindow {
    final int device;
    final long base;
    final long size;
    final long granule;
    /** Free ranges: base to length, merged. */
    private final TreeMap<Long, Long> free = new TreeMap<>();
    /** Slabs of plain (cuMemAlloc, pitched) allocations by context and size class: a context's blocks share
     * granules only with its own (the emulated device reaches mapped memory from the context that made it
     * accessible). Pools keep slabs of their own ({@link StablePools}). */
    final Map<SlabKey, List<Slab>> slabs = new HashMap<>();

    AddressWindow(int device, long base, long size, long granule) {
        this.device = device;
        this.base = base;
        this.size = size;
        this.granule = granule;
        free.put(base, size);
    }

    record SlabKey(long context, long blockSize) {
    }

    /** A granule cut into blocks of one size class; a set bit is a block held (live, or its free not yet reached). */
    static final class Slab {
        final long base;
        final long blockSize;
        final long handle;
        final long context;
        final BitSet used;
        final int blocks;

        Slab(long base, long blockSize, long handle, long context, int blocks) {
            this.base = base;
            this.blockSize = blockSize;
            this.handle = handle;
            this.context = context;
            this.blocks = blocks;
            this.used = new BitSet(blocks);
        }

        /** Takes block {@code i} when it is free (a restore names the place); false when it is held. */
        boolean takeBlock(int i) {
            if (i < 0 || i >= blocks || used.get(i)) {
                return false;
            }
            used.set(i);
            return true;
        }

        /** Takes the lowest free block; -1 when full. */
        int takeBlock() {
            int i = used.nextClearBit(0);
            if (i >= blocks) {
                return -1;
            }
            used.set(i);
            return i;
        }
    }

    /** The slabs of {@code context}'s blocks of {@code blockSize} in {@code slabs}, made on first use. */
    static List<Slab> slabsOf(Map<SlabKey, List<Slab>> slabs, long context, long blockSize) {
        return slabs.computeIfAbsent(new SlabKey(context, blockSize), k -> new ArrayList<>());
    }

    /** The lowest free range of {@code n} bytes (a granule multiple), taken; 0 when none. */
    long take(long n) {
        for (Map.Entry<Long, Long> e : free.entrySet()) {
            if (e.getValue() >= n) {
                long at = e.getKey();
                free.remove(at);
                if (e.getValue() > n) {
                    free.put(at + n, e.getValue() - n);
                }
                return at;
            }
        }
        return 0;
    }

    /**
     * The lowest free range of {@code n} bytes starting at a multiple of {@code alignment} (a power of two, at least
     * the granule) from the window's base, taken; 0 when none. For a reservation the program makes itself inside the
     * window ({@link StableAddresses#cuMemAddressReserve}).
     */
    long takeAligned(long n, long alignment) {
        for (Map.Entry<Long, Long> e : free.entrySet()) {
            long at = base + ((e.getKey() - base + alignment - 1) & -alignment);
            long end = e.getKey() + e.getValue();
            if (at >= e.getKey() && at <= end - n && takeAt(at, n)) {
                return at;
            }
        }
        return 0;
    }

    /** Takes exactly {@code [at, at + n)} when all of it is free (a restore names the place); false otherwise. */
    boolean takeAt(long at, long n) {
        Map.Entry<Long, Long> e = free.floorEntry(at);
        if (e == null || e.getKey() + e.getValue() < at + n) {
            return false;
        }
        long start = e.getKey(), end = e.getKey() + e.getValue();
        free.remove(start);
        if (at > start) {
            free.put(start, at - start);
        }
        if (end > at + n) {
            free.put(at + n, end - at - n);
        }
        return true;
    }

    /** Gives back a range {@link #take} or {@link #takeAt} handed out, merged with its free neighbours. */
    void give(long at, long n) {
        Map.Entry<Long, Long> before = free.floorEntry(at);
        if (before != null && before.getKey() + before.getValue() == at) {
            at = before.getKey();
            n += before.getValue();
            free.remove(at);
        }
        Long after = free.get(at + n);
        if (after != null) {
            free.remove(at + n);
            n += after;
        }
        free.put(at, n);
    }
}
