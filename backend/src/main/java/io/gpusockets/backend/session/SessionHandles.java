package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ParamType;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The opaque handles one session was issued. A frontend only ever sees ids from here; the real
 * driver values never leave the backend, so a handle of another session (or a guessed value) is
 * simply unknown.
 *
 * <p>Each entry records its owner (a module owns its functions, a library its kernels) and the
 * context it was made in, so destroying a handle drops everything that the driver destroys with it.
 * Both are indexed (children by owner, handles by context), so that dropping a handle costs time in
 * what it drops, not in what the session holds: a context with tens of thousands of events goes at once.
 *
 * <p>The table is bounded: a call that may add handles first {@link #reserve reserves} room for them
 * (refused past the session's caps, before the driver makes anything) and gives the reservation back
 * when it ends, by which time what it made is in the table. A handle counts twice between the two,
 * so a call near the cap may be refused a moment early, never let past it.
 */
public final class SessionHandles {
    /** One issued handle. {@code owner} and {@code context} are ids (0 = none). */
    public record Entry(long id, ParamType kind, long real, long owner, long context) {
    }

    private final Map<Long, Entry> byId = new HashMap<>();
    private final Map<ParamType, Map<Long, Long>> byReal = new EnumMap<>(ParamType.class);
    /** Ids of the handles each id owns ({@link Entry#owner}). */
    private final Map<Long, Set<Long>> byOwner = new HashMap<>();
    /** Ids of the handles made in each context id ({@link Entry#context}). */
    private final Map<Long, Set<Long>> byContext = new HashMap<>();
    private long next;
    /** Room reserved by calls in progress ({@link #reserve}), in handles and in streams. */
    private int reserved, reservedStreams;

    /** Ids start at a session-specific offset so that two sessions rarely share a value. */
    public SessionHandles(long sessionId) {
        this.next = (sessionId << 24) + 0x100;
    }

    /** The id for a real driver value, issuing a new one the first time. Real 0 maps to 0. */
    public synchronized long intern(ParamType kind, long real, long owner, long context) {
        if (real == 0) {
            return 0;
        }
        Map<Long, Long> reals = byReal.computeIfAbsent(kind, k -> new HashMap<>());
        Long id = reals.get(real);
        if (id != null) {
            return id;
        }
        long newId = next++;
        reals.put(real, newId);
        put(new Entry(newId, kind, real, owner, context));
        return newId;
    }

    private void put(Entry e) {
        byId.put(e.id(), e);
        if (e.owner() != 0) {
            byOwner.computeIfAbsent(e.owner(), k -> new LinkedHashSet<>()).add(e.id());
        }
        if (e.context() != 0) {
            byContext.computeIfAbsent(e.context(), k -> new LinkedHashSet<>()).add(e.id());
        }
    }

    private void unindex(Entry e) {
        unindex(byOwner, e.owner(), e.id());
        unindex(byContext, e.context(), e.id());
    }

    private static void unindex(Map<Long, Set<Long>> index, long key, long id) {
        if (key == 0) {
            return;
        }
        Set<Long> ids = index.get(key);
        if (ids != null && ids.remove(id) && ids.isEmpty()) {
            index.remove(key);
        }
    }

    /**
     * Makes an issued handle belong to {@code owner} and {@code context} (ids, 0 = none) when it
     * belongs to neither yet: a module first met through a query that could not say whose it is.
     */
    public synchronized void claim(long id, long owner, long context) {
        Entry e = byId.get(id);
        if (e != null && e.owner() == 0) {
            unindex(e);
            put(new Entry(id, e.kind(), e.real(), owner, e.context() == 0 ? context : e.context()));
        }
    }

    /**
     * Reserves room for {@code n} more handles, {@code streams} of them streams, when the table then
     * stays within {@code cap} handles and {@code streamCap} streams; returns null, or which cap refused
     * ("handles" or "streams"). Each reservation is given back with {@link #unreserve}.
     */
    public synchronized String reserve(int n, int streams, int cap, int streamCap) {
        if ((long) byId.size() + reserved + n > cap) {
            return "handles";
        }
        if ((long) count(ParamType.STREAM) + reservedStreams + streams > streamCap) {
            return "streams";
        }
        reserved += n;
        reservedStreams += streams;
        return null;
    }

    /** Gives back a reservation of {@link #reserve}. */
    public synchronized void unreserve(int n, int streams) {
        reserved -= n;
        reservedStreams -= streams;
    }

    /** How many of the first {@code n} real values of {@code kind} in {@code reals} have no id yet. */
    public synchronized int unknown(ParamType kind, java.lang.foreign.MemorySegment reals, long n) {
        Map<Long, Long> known = byReal.get(kind);
        int count = 0;
        for (long i = 0; i < n; i++) {
            long real = reals.getAtIndex(java.lang.foreign.ValueLayout.JAVA_LONG, i);
            if (real != 0 && (known == null || !known.containsKey(real))) {
                count++;
            }
        }
        return count;
    }

    /** Handles held now, of every kind. */
    public synchronized int size() {
        return byId.size();
    }

    /** The entry for an id of the given kind, or null. */
    public synchronized Entry get(long id, ParamType kind) {
        Entry e = byId.get(id);
        return e != null && e.kind() == kind ? e : null;
    }

    /** The id already issued for a real value, or 0. */
    public synchronized long idOf(ParamType kind, long real) {
        Map<Long, Long> reals = byReal.get(kind);
        Long id = reals == null ? null : reals.get(real);
        return id == null ? 0 : id;
    }

    /**
     * Drops a handle and everything it owns or that was made in it (when it is a context), owned
     * things' own things too; returns what was dropped, the handle first. Linear in what is dropped.
     */
    public synchronized List<Entry> remove(long id) {
        Entry root = byId.get(id);
        if (root == null) {
            return List.of();
        }
        Map<Long, Entry> removed = new java.util.LinkedHashMap<>();
        java.util.ArrayDeque<Entry> todo = new java.util.ArrayDeque<>();
        removed.put(root.id(), root);
        todo.add(root);
        while (!todo.isEmpty()) {
            Entry e = todo.poll();
            addChildren(byOwner.get(e.id()), removed, todo);
            if (e.kind() == ParamType.CTX) {
                addChildren(byContext.get(e.id()), removed, todo);
            }
        }
        for (Entry e : removed.values()) {
            byId.remove(e.id());
            byReal.get(e.kind()).remove(e.real());
            unindex(e);
            byOwner.remove(e.id());
            byContext.remove(e.id());
        }
        return new ArrayList<>(removed.values());
    }

    private void addChildren(Set<Long> ids, Map<Long, Entry> removed, java.util.ArrayDeque<Entry> todo) {
        if (ids == null) {
            return;
        }
        for (long child : ids) {
            Entry c = byId.get(child);
            if (c != null && removed.putIfAbsent(child, c) == null) {
                todo.add(c);
            }
        }
    }

    /** All live entries of a kind. */
    public synchronized List<Entry> all(ParamType kind) {
        List<Entry> out = new ArrayList<>();
        for (Entry e : byId.values()) {
            if (e.kind() == kind) {
                out.add(e);
            }
        }
        return out;
    }

    public synchronized int count(ParamType kind) {
        Map<Long, Long> reals = byReal.get(kind);
        return reals == null ? 0 : reals.size();
    }
}
