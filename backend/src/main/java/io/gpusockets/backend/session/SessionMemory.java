package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The device memory ranges a session may touch: its allocations and the globals of its modules.
 * Every device pointer from the wire is checked here before any driver call. Ranges are indexed by
 * owner too, so that a destroyed context or module drops its ranges in time linear in them.
 */
public final class SessionMemory {
    /**
     * One range. {@code owner} is the handle id of the context (allocations) or module (globals)
     * that frees it when destroyed; {@code freeable} is false for module globals.
     */
    public record Range(long base, long size, long owner, boolean freeable) {
        boolean contains(long p, long n) {
            return p >= base && n >= 0 && n <= size && p - base <= size - n;
        }
    }

    /**
     * The owner of a VMM mapping's range: no context or module frees it. Adjacent mappings form one
     * device span (a copy or set may cross from one into the next, as on the GPU's page tables).
     */
    static final long MAPPING = -1;

    private final TreeMap<Long, Range> ranges = new TreeMap<>();
    /** Bases of the ranges of each owner. */
    private final Map<Long, java.util.Set<Long>> byOwner = new java.util.HashMap<>();
    private long allocatedBytes;

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
    public synchronized boolean contains(long p, long n) {
        if (n < 0) {
            return false;
        }
        Map.Entry<Long, Range> e = ranges.floorEntry(p);
        if (e == null) {
            return false;
        }
        Range r = e.getValue();
        if (r.contains(p, n)) {
            return true;
        }
        // a span over adjacent VMM mappings
        if (r.owner() != MAPPING || p - r.base() >= r.size()) {
            return false;
        }
        long end = p + n;
        if (end < p) {
            return false;
        }
        while (r.base() + r.size() < end) {
            Range next = ranges.get(r.base() + r.size());
            if (next == null || next.owner() != MAPPING) {
                return false;
            }
            r = next;
        }
        return true;
    }

    /** The freeable allocation that starts exactly at {@code base}, or null. */
    public synchronized Range allocationAt(long base) {
        Range r = ranges.get(base);
        return r != null && r.freeable() ? r : null;
    }

    public synchronized Range remove(long base) {
        Range r = ranges.remove(base);
        if (r != null) {
            unindex(r);
            if (r.freeable()) {
                allocatedBytes -= r.size();
            }
        }
        return r;
    }

    private void unindex(Range r) {
        java.util.Set<Long> bases = byOwner.get(r.owner());
        if (bases != null && bases.remove(r.base()) && bases.isEmpty()) {
            byOwner.remove(r.owner());
        }
    }

    /** Drops every range owned by one of these handle ids (a destroyed context or module). */
    public synchronized List<Range> removeOwnedBy(java.util.Set<Long> owners) {
        List<Range> out = new ArrayList<>();
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
        return out;
    }

    public synchronized int allocationCount() {
        return (int) ranges.values().stream().filter(Range::freeable).count();
    }

    public synchronized long allocatedBytes() {
        return allocatedBytes;
    }
}
