package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A session's VMM objects, in real driver values: its address reservations, the mappings inside them,
 * its allocation handles with how many references the session holds on each (one per cuMemCreate
 * or cuMemRetainAllocationHandle, as the driver counts them) and each one's size, and the sparse or
 * deferred-mapping arrays (and mipmapped arrays) a handle's memory was bound to by cuMemMapArrayAsync. The
 * driver keeps an allocation while a reference, a mapping or an array binding holds it; a binding is
 * counted until its array goes (an unmap names no handle, so which binding it ended is not known here:
 * the charge errs high, never low). The frontend sees handles through {@link SessionHandles} (kind MEMH);
 * reservations are plain addresses, checked here.
 */
final class SessionVmm {
    /** One mapping of {@code handle} (real) at [base, base+size). */
    record Mapping(long base, long size, long handle) {
        long end() {
            return base + size;
        }
    }

    /** One reservation [base, base+size) and its mappings by base. */
    static final class Reservation {
        final long base;
        final long size;
        final TreeMap<Long, Mapping> mappings = new TreeMap<>();

        Reservation(long base, long size) {
            this.base = base;
            this.size = size;
        }

        boolean contains(long p, long n) {
            return n > 0 && p >= base && p - base <= size - n;
        }
    }

    private final TreeMap<Long, Reservation> reservations = new TreeMap<>();
    private final Map<Long, Integer> references = new HashMap<>();
    /** Bytes of each allocation the session made (cuMemCreate), until the driver frees it. */
    private final Map<Long, Long> sizes = new HashMap<>();
    /** The arrays and mipmapped arrays (real) each allocation (real) was bound to, until they go. */
    private final Map<Long, java.util.Set<Long>> bindings = new HashMap<>();

    synchronized void reserved(long base, long size) {
        reservations.put(base, new Reservation(base, size));
    }

    /** The reservation that holds all of [p, p+n), or null. */
    synchronized Reservation reservationHolding(long p, long n) {
        Map.Entry<Long, Reservation> e = reservations.floorEntry(p);
        return e != null && e.getValue().contains(p, n) ? e.getValue() : null;
    }

    /** The reservation starting at {@code base} with exactly {@code size}, or null. */
    synchronized Reservation reservationAt(long base, long size) {
        Reservation r = reservations.get(base);
        return r != null && r.size == size ? r : null;
    }

    synchronized void freed(Reservation r) {
        reservations.remove(r.base);
    }

    /** Whether [p, p+n) overlaps a mapping of {@code r}. */
    synchronized boolean overlapsMapping(Reservation r, long p, long n) {
        Map.Entry<Long, Mapping> before = r.mappings.floorEntry(p);
        if (before != null && before.getValue().end() > p) {
            return true;
        }
        Map.Entry<Long, Mapping> after = r.mappings.ceilingEntry(p);
        return after != null && after.getKey() < p + n;
    }

    synchronized void mapped(Reservation r, Mapping m) {
        r.mappings.put(m.base(), m);
    }

    /**
     * The mappings that make up exactly [p, p+n) in {@code r}, or null when the range cuts one or covers
     * unmapped addresses (the driver unmaps whole mappings only).
     */
    synchronized List<Mapping> mappingsCovering(Reservation r, long p, long n) {
        List<Mapping> out = new ArrayList<>();
        long at = p;
        for (Mapping m : r.mappings.tailMap(p, true).values()) {
            if (m.base() != at || m.end() > p + n) {
                break;
            }
            out.add(m);
            at = m.end();
            if (at == p + n) {
                return out;
            }
        }
        return null;
    }

    synchronized void unmapped(Reservation r, List<Mapping> ms) {
        for (Mapping m : ms) {
            r.mappings.remove(m.base());
        }
    }

    /** The mapping containing address {@code p}, or null. */
    synchronized Mapping mappingAt(long p) {
        Map.Entry<Long, Reservation> e = reservations.floorEntry(p);
        if (e == null) {
            return null;
        }
        Map.Entry<Long, Mapping> m = e.getValue().mappings.floorEntry(p);
        return m != null && p < m.getValue().end() ? m.getValue() : null;
    }

    /** cuMemCreate made {@code handle} of {@code size} bytes: the session's first reference. */
    synchronized void created(long handle, long size) {
        sizes.put(handle, size);
        referenced(handle);
    }

    /** Bytes of the session's allocation {@code handle}, or -1 when it made none of that value. */
    synchronized long sizeOf(long handle) {
        Long n = sizes.get(handle);
        return n == null ? -1 : n;
    }

    /** cuMemMapArrayAsync bound (part of) {@code handle}'s memory to the array or mipmapped array {@code resource}. */
    synchronized void bound(long handle, long resource) {
        bindings.computeIfAbsent(handle, k -> new java.util.HashSet<>()).add(resource);
    }

    /**
     * The array or mipmapped array {@code resource} went (destroyed, or with its context): the driver unbound
     * what it held. Returns the allocations that nothing of the session holds any more (the driver freed them).
     */
    synchronized List<Long> resourceGone(long resource) {
        List<Long> freed = new ArrayList<>();
        for (var it = bindings.entrySet().iterator(); it.hasNext(); ) {
            var e = it.next();
            if (e.getValue().remove(resource) && e.getValue().isEmpty()) {
                it.remove();
                if (goneLocked(e.getKey())) {
                    freed.add(e.getKey());
                }
            }
        }
        return freed;
    }

    /**
     * Whether nothing of the session holds {@code handle} any more (no reference, mapping or array binding):
     * the driver freed it, and its size is forgotten.
     */
    synchronized boolean gone(long handle) {
        return goneLocked(handle);
    }

    private boolean goneLocked(long handle) {
        if (references.containsKey(handle) || isMapped(handle)) {
            return false;
        }
        sizes.remove(handle);
        return true;
    }

    synchronized void referenced(long handle) {
        references.merge(handle, 1, Integer::sum);
    }

    /** Drops one reference; returns how many remain (-1 when the session held none). */
    synchronized int unreferenced(long handle) {
        Integer n = references.get(handle);
        if (n == null) {
            return -1;
        }
        if (n == 1) {
            references.remove(handle);
            return 0;
        }
        references.put(handle, n - 1);
        return n - 1;
    }

    /** Whether a mapping of the session, or an array it was bound to, still uses {@code handle} (real). */
    synchronized boolean isMapped(long handle) {
        if (bindings.containsKey(handle)) {
            return true;
        }
        for (Reservation r : reservations.values()) {
            for (Mapping m : r.mappings.values()) {
                if (m.handle() == handle) {
                    return true;
                }
            }
        }
        return false;
    }

    synchronized boolean holds(long handle) {
        return references.containsKey(handle);
    }

    synchronized int handleCount() {
        return references.size();
    }

    synchronized int reservationCount() {
        return reservations.size();
    }

    /** Takes every mapping, for the session's end. */
    synchronized List<Mapping> takeMappings() {
        List<Mapping> all = new ArrayList<>();
        for (Reservation r : reservations.values()) {
            all.addAll(r.mappings.values());
            r.mappings.clear();
        }
        return all;
    }

    /** Takes every handle with its reference count, for the session's end. */
    synchronized Map<Long, Integer> takeReferences() {
        Map<Long, Integer> all = new HashMap<>(references);
        references.clear();
        return all;
    }

    /** Forgets every array binding and size, for the session's end (its arrays and allocations go with it). */
    synchronized void clearBindings() {
        bindings.clear();
        sizes.clear();
    }

    synchronized List<Reservation> takeReservations() {
        List<Reservation> all = new ArrayList<>(reservations.values());
        reservations.clear();
        return all;
    }
}
