package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ParamType;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The opaque handles one session was issued. A frontend only ever sees ids from here; the real
 * driver values never leave the backend, so a handle of another session (or a guessed value) is
 * simply unknown.
 *
 * <p>Each entry records its owner (a module owns its functions, a library its kernels) and the
 * context it was made in, so destroying a handle drops everything that the driver destroys with it.
 */
public final class SessionHandles {
    /** One issued handle. {@code owner} and {@code context} are ids (0 = none). */
    public record Entry(long id, ParamType kind, long real, long owner, long context) {
    }

    private final Map<Long, Entry> byId = new HashMap<>();
    private final Map<ParamType, Map<Long, Long>> byReal = new EnumMap<>(ParamType.class);
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
        byId.put(newId, new Entry(newId, kind, real, owner, context));
        return newId;
    }

    /**
     * Makes an issued handle belong to {@code owner} and {@code context} (ids, 0 = none) when it
     * belongs to neither yet: a module first met through a query that could not say whose it is.
     */
    public synchronized void claim(long id, long owner, long context) {
        Entry e = byId.get(id);
        if (e != null && e.owner() == 0 && e.context() == 0) {
            byId.put(id, new Entry(id, e.kind(), e.real(), owner, context));
        } else if (e != null && e.owner() == 0) {
            byId.put(id, new Entry(id, e.kind(), e.real(), owner, e.context()));
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

    /** Drops a handle and everything it owns or that was made in it (when it is a context); returns what was dropped. */
    public synchronized List<Entry> remove(long id) {
        List<Entry> removed = new ArrayList<>();
        Entry root = byId.get(id);
        if (root != null) {
            collect(root, removed);
            for (Entry e : removed) {
                byId.remove(e.id());
                byReal.get(e.kind()).remove(e.real());
            }
        }
        return removed;
    }

    private void collect(Entry e, List<Entry> into) {
        into.add(e);
        for (Entry child : List.copyOf(byId.values())) {
            if (!into.contains(child) && (child.owner() == e.id() || (e.kind() == ParamType.CTX && child.context() == e.id()))) {
                collect(child, into);
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
