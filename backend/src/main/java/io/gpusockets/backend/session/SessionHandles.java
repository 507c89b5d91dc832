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
