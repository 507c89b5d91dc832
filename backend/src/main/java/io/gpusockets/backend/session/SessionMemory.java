package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The device memory ranges a session may touch: its allocations and the globals of its modules.
 * Every device pointer from the wire is checked here before any driver call. Ranges are indexed by
 * owner too, so that a destroyed context or module drops its ranges in time linear in them.
 * Lookups take no lock (every call's pointers are checked here, from many lanes at once); changes
 * are made under this object's monitor. Each range counts the calls using it ({@link Range#uses}), so
 * that a free waits for them ({@link SessionUses}).
 */
public final class SessionMemory {
    /**
     * One range. {@code owner} is the handle id of the context (allocations) or module (globals)
     * that frees it when destroyed; {@code freeable} is false for module globals.
     */
    public static final class Range {
        private final long base;
        private final long size;
        private final long owner;
        private final boolean freeable;
        /** The calls using it now, and whether it is being freed. */
        final Uses uses = new Uses();

        public Range(long base, long size, long owner, boolean freeable) {
            this.base = base;
            this.size = size;
            this.owner = owner;
            this.freeable = freeable;
        }

        public long base() {
            return base;
        }

        public long size() {
            return size;
        }

        public long owner() {
            return owner;
        }

        public boolean freeable() {
            return freeable;
        }

        boolean contains(long p, long n) {
            return p >= base && n >= 0 && n <= size && p - base <= size - n;
        }

        @Override
        public String toString() {
            return String.format("Range[0x%x+%d, owner=%d%s]", base, size, owner, freeable ? "" : ", not freeable");
        }
    }

    /**
     * The owner of a VMM mapping's range: no context or module frees it. Adjacent mappings form one
     * device span (a copy or set may cross from one into the next, as on the GPU's page tables).
     */
    static final long MAPPING = -1;

    /**
     * The owner of another session's memory mapped here by cuIpcOpenMemHandle in isolation context (the session's own
     * VMM mapping of it, {@link IpcCalls}): no context or module frees it, and cuMemFree refuses it.
     */
    static final long IPC_MAPPING = -2;

    private final java.util.concurrent.ConcurrentSkipListMap<Long, Range> ranges = new java.util.concurrent.ConcurrentSkipListMap<>();
    /** Bases of the ranges of each owner. */
    private final Map<Long, java.util.Set<Long>> byOwner = new java.util.HashMap<>();
    private long allocatedBytes;
    /** Told of every range that leaves (its quota charge goes back: {@link SessionQuota#rangeRemoved}). */
    private volatile java.util.function.Consumer<Range> onRemoved = r -> { };

    void onRemoved(java.util.function.Consumer<Range> listener) {
        this.onRemoved = listener;
    }

    public synchronized void add(Range r) {
        Range old = ranges.put(r.base(), r);
        if (old != null) {
            unindex(old);
            if (old.freeable()) {
                allocatedBytes -= old.size();
            }
        }
        byOwner.computeIfAbsent(r.owner(), k -> new java.util.HashSet<>()).add(r.base());
        if (r.freeable()) {
            allocatedBytes += r.size();
        }
    }

    /** Whether [p, p+n) lies within one range (n = 0: p lies in or at the end of one). */
    public boolean contains(long p, long n) {
        return covering(p, n) != null;
    }

    /**
     * The range that holds [p, p+n) (n = 0: p lies in or at the end of it), or, for a span over
     * adjacent VMM mappings, the first of them ({@link #next} gives the others); null when none does.
     */
    public Range covering(long p, long n) {
        if (n < 0) {
            return null;
        }
        Map.Entry<Long, Range> e = ranges.floorEntry(p);
        if (e == null) {
            return null;
        }
        Range first = e.getValue();
        if (first.contains(p, n)) {
            return first;
        }
        // a span over adjacent VMM mappings
        if (first.owner() != MAPPING || p - first.base() >= first.size()) {
            return null;
        }
        long end = p + n;
        if (end < p) {
            return null;
        }
        for (Range r = first; r.base() + r.size() < end; ) {
            r = next(r);
            if (r == null) {
                return null;
            }
        }
        return first;
    }

    /** The mapping that starts where mapping {@code r} ends, or null. */
    Range next(Range r) {
        Range n = ranges.get(r.base() + r.size());
        return n != null && n.owner() == MAPPING ? n : null;
    }

    /** The range (allocation, global or mapping) that starts exactly at {@code base}, or null. */
    Range at(long base) {
        return ranges.get(base);
    }

    /** The freeable allocation that starts exactly at {@code base}, or null. */
    public Range allocationAt(long base) {
        Range r = ranges.get(base);
        return r != null && r.freeable() ? r : null;
    }

    public Range remove(long base) {
        Range r;
        synchronized (this) {
            r = ranges.remove(base);
            if (r != null) {
                unindex(r);
                if (r.freeable()) {
                    allocatedBytes -= r.size();
                }
            }
        }
        if (r != null) {
            onRemoved.accept(r);
        }
        return r;
    }

    private void unindex(Range r) {
        java.util.Set<Long> bases = byOwner.get(r.owner());
        if (bases != null && bases.remove(r.base()) && bases.isEmpty()) {
            byOwner.remove(r.owner());
        }
    }

    /** The ranges owned by these handle ids; nothing is dropped. */
    public synchronized List<Range> ownedBy(java.util.Collection<Long> owners) {
        List<Range> out = new ArrayList<>();
        for (long owner : owners) {
            java.util.Set<Long> bases = byOwner.get(owner);
            if (bases != null) {
                for (long base : bases) {
                    out.add(ranges.get(base));
                }
            }
        }
        return out;
    }

    /** Drops every range owned by one of these handle ids (a destroyed context or module). */
    public List<Range> removeOwnedBy(java.util.Set<Long> owners) {
        List<Range> out = new ArrayList<>();
        synchronized (this) {
            for (long owner : owners) {
                java.util.Set<Long> bases = byOwner.remove(owner);
                if (bases == null) {
                    continue;
                }
                for (long base : bases) {
                    Range r = ranges.remove(base);
                    out.add(r);
                    if (r.freeable()) {
                        allocatedBytes -= r.size();
                    }
                }
            }
        }
        out.forEach(onRemoved);
        return out;
    }

    /** The bases of the freeable allocations owned by {@code owner} (a context's handle id). */
    synchronized List<Long> allocationsOwnedBy(long owner) {
        List<Long> out = new ArrayList<>();
        for (Range r : ownedBy(List.of(owner))) {
            if (r.freeable()) {
                out.add(r.base());
            }
        }
        return out;
    }

    /** Every range now, by base (a copy). */
    synchronized List<Range> ranges() {
        return new ArrayList<>(ranges.values());
    }

    public synchronized int allocationCount() {
        return (int) ranges.values().stream().filter(Range::freeable).count();
    }

    public synchronized long allocatedBytes() {
        return allocatedBytes;
    }
}
