package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The device memory ranges a session may touch: its allocations and the globals of its modules.
 * Every device pointer from the wire is checked here before any driver call.
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
    private long allocatedBytes;

    public synchronized void add(Range r) {
        ranges.put(r.base(), r);
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
        if (r != null && r.freeable()) {
            allocatedBytes -= r.size();
        }
        return r;
    }

    /** Drops every range owned by one of these handle ids (a destroyed context or module). */
    public synchronized List<Range> removeOwnedBy(java.util.Set<Long> owners) {
        List<Range> out = new ArrayList<>();
        ranges.values().removeIf(r -> {
            if (owners.contains(r.owner())) {
                out.add(r);
                if (r.freeable()) {
                    allocatedBytes -= r.size();
                }
                return true;
            }
            return false;
        });
        return out;
    }

    /** The bases of the freeable allocations owned by {@code owner} (a context's handle id). */
    synchronized List<Long> allocationsOwnedBy(long owner) {
        List<Long> out = new ArrayList<>();
        for (Range r : ranges.values()) {
            if (r.owner() == owner && r.freeable()) {
                out.add(r.base());
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
