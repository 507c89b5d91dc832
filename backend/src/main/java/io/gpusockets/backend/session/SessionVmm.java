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
 *
 * <p>For a checkpoint ({@link CheckpointVmm}) it also keeps how each object was made: each reservation's device and
 * the context id it was made in, each allocation's properties, flags and context id, each mapping's offset, and the
 * access settings ({@code cuMemSetAccess}) still in force, each with the context id it was made in (an unmap drops
 * the settings of what it unmapped). An access setting that a later one covers for the same context and devices is
 * dropped, so repeating a call does not grow them.
 */
final class SessionVmm {
    /** One mapping of [offset, offset+size) of {@code handle} (real) at [base, base+size). */
    record Mapping(long base, long size, long handle, long offset) {
        long end() {
            return base + size;
        }
    }

    /**
     * One reservation [base, base+size) and its mappings by base; {@code device}: the address window it lies in
     * (-1: none, the driver placed it), {@code context}: the id of the context current when it was made (0: none).
     */
    static final class Reservation {
        final long base;
        final long size;
        final int device;
        final long context;
        final TreeMap<Long, Mapping> mappings = new TreeMap<>();

        Reservation(long base, long size, int device, long context) {
            this.base = base;
            this.size = size;
            this.device = device;
            this.context = context;
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

    /** How an allocation (real) was made: its CUmemAllocationProp bytes, flags and the context id current then. */
    record Made(byte[] prop, long flags, long context) {
    }

    /**
     * A cuMemSetAccess in force: [base, base+size) (whole mappings), its descriptors, the id of the context current
     * at the call and that context's device.
     */
    record Access(long base, long size, byte[] desc, long context, int device) {
        long end() {
            return base + size;
        }
    }

    private final Map<Long, Made> made = new HashMap<>();
    /** Access settings in force, in call order. */
    private final List<Access> accesses = new ArrayList<>();
    /** Allocations (real) an unmap took an accessible mapping of while the allocation lived on: their contents outside
     * the mappings left may matter to the program. */
    private final java.util.Set<Long> unmappedWhileAccessible = new java.util.HashSet<>();

    synchronized void reserved(long base, long size) {
        reserved(base, size, -1, 0);
    }

    synchronized void reserved(long base, long size, int device, long context) {
        reservations.put(base, new Reservation(base, size, device, context));
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
            List<Access> kept = new ArrayList<>();
            boolean accessible = false;
            for (Access a : accesses) {
                if (a.end() <= m.base() || a.base() >= m.end()) {
                    kept.add(a);
                    continue;
                }
                accessible = true;
                if (a.base() < m.base()) {
                    kept.add(new Access(a.base(), m.base() - a.base(), a.desc(), a.context(), a.device()));
                }
                if (a.end() > m.end()) {
                    kept.add(new Access(m.end(), a.end() - m.end(), a.desc(), a.context(), a.device()));
                }
            }
            accesses.clear();
            accesses.addAll(kept);
            if (accessible) {
                unmappedWhileAccessible.add(m.handle());
            }
        }
    }

    /** cuMemCreate made {@code handle}: how, for a checkpoint. */
    synchronized void made(long handle, byte[] prop, long flags, long context) {
        made.put(handle, new Made(prop, flags, context));
    }

    /** How {@code handle} was made, or null. */
    synchronized Made madeOf(long handle) {
        return made.get(handle);
    }

    /**
     * cuMemSetAccess succeeded on [base, base+size) in the context {@code context} (id) of {@code device}: kept, and
     * the earlier settings of the same context that it covers, naming no device it does not name, dropped.
     */
    synchronized void accessSet(long base, long size, byte[] desc, long context, int device) {
        Access now = new Access(base, size, desc, context, device);
        accesses.removeIf(a -> a.context() == context && a.base() >= base && a.end() <= now.end()
                && devices(now.desc()).containsAll(devices(a.desc())));
        accesses.add(now);
    }

    /** The devices a descriptor list names (CUmemAccessDesc: location type, id, flags; 12 bytes each, little-endian). */
    static java.util.Set<Integer> devices(byte[] desc) {
        java.util.Set<Integer> out = new java.util.HashSet<>();
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(desc).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (int at = 0; at + 12 <= desc.length; at += 12) {
            out.add(b.getInt(at + 4));
        }
        return out;
    }

    /** The access settings in force, in call order. */
    synchronized List<Access> accesses() {
        return new ArrayList<>(accesses);
    }

    /** Every reservation, by base (a copy; their mapping maps are live: read them under this object's monitor). */
    synchronized List<Reservation> reservations() {
        return new ArrayList<>(reservations.values());
    }

    /** Every mapping, by base. */
    synchronized List<Mapping> mappings() {
        List<Mapping> all = new ArrayList<>();
        for (Reservation r : reservations.values()) {
            all.addAll(r.mappings.values());
        }
        return all;
    }

    /** The session's references on each allocation it holds one on (real handle to count). */
    synchronized Map<Long, Integer> references() {
        return new HashMap<>(references);
    }

    /** The allocations the session made and the driver has not freed, with their sizes. */
    synchronized Map<Long, Long> sizes() {
        return new HashMap<>(sizes);
    }

    /** Whether an unmap took an accessible mapping of {@code handle} while it lived on. */
    synchronized boolean unmappedWhileAccessible(long handle) {
        return unmappedWhileAccessible.contains(handle);
    }

    /** Whether any allocation is bound to an array (cuMemMapArrayAsync). */
    synchronized boolean hasBindings() {
        return !bindings.isEmpty();
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
        made.remove(handle);
        unmappedWhileAccessible.remove(handle);
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
        made.clear();
        accesses.clear();
        unmappedWhileAccessible.clear();
    }

    synchronized List<Reservation> takeReservations() {
        List<Reservation> all = new ArrayList<>(reservations.values());
        reservations.clear();
        return all;
    }
}
