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
 *
 * <p>Lookups ({@link #get}, {@link #idOf}, {@link #entryOf}) take no lock: every call checks its
 * handles here, from many lanes at once. Changes are made under this object's monitor. Each entry
 * counts the calls using it ({@link Entry#uses}), so that a destroy waits for them ({@link SessionUses}).
 */
public final class SessionHandles {
    /** One issued handle. {@code owner} and {@code context} are ids (0 = none). */
    public static final class Entry {
        private final long id;
        private final ParamType kind;
        private final long real;
        private volatile long owner;
        private volatile long context;
        /** The calls using it now, and whether it is being destroyed. */
        final Uses uses = new Uses();
        /**
         * A function's or a kernel's per-thread stack need ({@link LaunchStack}: its local size rounded up), -1 until its first launch
         * asks the driver; written once (a race asks twice and writes the same value).
         */
        int stackNeed = -1;

        public Entry(long id, ParamType kind, long real, long owner, long context) {
            this.id = id;
            this.kind = kind;
            this.real = real;
            this.owner = owner;
            this.context = context;
        }

        public long id() {
            return id;
        }

        public ParamType kind() {
            return kind;
        }

        public long real() {
            return real;
        }

        public long owner() {
            return owner;
        }

        public long context() {
            return context;
        }

        @Override
        public String toString() {
            return "Entry[id=" + id + ", kind=" + kind + ", real=0x" + Long.toHexString(real) + ", owner=" + owner
                    + ", context=" + context + "]";
        }
    }

    private final Map<Long, Entry> byId = new java.util.concurrent.ConcurrentHashMap<>();
    private final Map<ParamType, Map<Long, Entry>> byReal = new EnumMap<>(ParamType.class);
    /** Ids of the handles each id owns ({@link Entry#owner}). */
    private final Map<Long, Set<Long>> byOwner = new HashMap<>();
    /** Ids of the handles made in each context id ({@link Entry#context}). */
    private final Map<Long, Set<Long>> byContext = new HashMap<>();
    private long next;
    /** Room reserved by calls in progress ({@link #reserve}), in handles and in streams. */
    private int reserved, reservedStreams;

    /**
     * Whether the calls of this session are recorded for checkpoint ({@link CheckpointRecorder}): {@link #intern}
     * then tells the calling thread's {@link CheckpointRecorder.Issued} the ids it issues, and at a restore issues
     * the ids pinned there instead of the next ones.
     */
    private volatile boolean tracked;

    /** See {@link #tracked}. */
    void tracked(boolean on) {
        this.tracked = on;
    }

    /** The id the next new handle would get (for a checkpoint image). */
    synchronized long nextId() {
        return next;
    }

    /** After a restore: new handles are numbered from {@code id} on (the checkpointed session's next id). */
    synchronized void continueFrom(long id) {
        next = Math.max(next, id);
    }

    /**
     * Ids start at a session-specific offset so that two sessions of a backend rarely share a value: the id's
     * counter ({@link SessionIds#counter}, the session id itself with fleet id 0) shifted left by 24, which stays
     * positive (a fleet id's bits would be shifted out or into the sign).
     */
    public SessionHandles(long sessionId) {
        this.next = (SessionIds.counter(sessionId) << 24) + 0x100;
        for (ParamType t : ParamType.values()) {
            byReal.put(t, new java.util.concurrent.ConcurrentHashMap<>());
        }
    }

    /**
     * The id for a real driver value, issuing a new one the first time. Real 0 maps to 0. Texture and surface
     * objects ({@link ParamType#isIdentityHandle}) get their real value as their id: kernels receive them as
     * parameters, which the backend passes on unread. Such a value that is already another handle's id of this
     * session (ids are counted from {@code counter << 24}, real texture objects are small numbers on a GPU and
     * on the emulated device: it does not happen in practice) gets 0; the caller destroys the object and refuses the
     * call. With recording on, the value is told to the calling thread's {@link CheckpointRecorder.Issued} as an
     * issued id (never pinned: a restore cannot choose it, it checks it).
     */
    public synchronized long intern(ParamType kind, long real, long owner, long context) {
        if (real == 0) {
            return 0;
        }
        Map<Long, Entry> reals = byReal.get(kind);
        Entry known = reals.get(real);
        if (known != null) {
            return known.id();
        }
        if (kind.isIdentityHandle()) {
            if (byId.containsKey(real)) {
                return 0;
            }
            Entry e = new Entry(real, kind, real, owner, context);
            put(e);
            reals.put(real, e);
            CheckpointRecorder.Issued issued = tracked ? CheckpointRecorder.ISSUED.get() : null;
            if (issued != null) {
                issued.add(real); // recorded; a restore compares the value the driver gives then with it
            }
            return real;
        }
        while (byId.containsKey(next)) {
            next++;   // an identity handle took this value
        }
        CheckpointRecorder.Issued issued = tracked ? CheckpointRecorder.ISSUED.get() : null;
        long newId = issued == null ? next : issued.take(next, byId::containsKey);
        if (newId == next) {
            next++;
        }
        if (issued != null) {
            issued.add(newId);
        }
        Entry e = new Entry(newId, kind, real, owner, context);
        put(e);
        reals.put(real, e);
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
            e.owner = owner;
            if (e.context == 0) {
                e.context = context;
            }
            put(e);
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
        Map<Long, Entry> known = byReal.get(kind);
        int count = 0;
        for (long i = 0; i < n; i++) {
            long real = reals.getAtIndex(java.lang.foreign.ValueLayout.JAVA_LONG, i);
            if (real != 0 && !known.containsKey(real)) {
                count++;
            }
        }
        return count;
    }

    /** Handles held now, of every kind. */
    public int size() {
        return byId.size();
    }

    /** The entry for an id of the given kind, or null. */
    public Entry get(long id, ParamType kind) {
        Entry e = byId.get(id);
        return e != null && e.kind() == kind ? e : null;
    }

    /** The id already issued for a real value, or 0. */
    public long idOf(ParamType kind, long real) {
        Entry e = byReal.get(kind).get(real);
        return e == null ? 0 : e.id();
    }

    /** The entry of a real driver value, or null. */
    public Entry entryOf(ParamType kind, long real) {
        return byReal.get(kind).get(real);
    }

    /**
     * Drops a handle and everything it owns or that was made in it (when it is a context), owned
     * things' own things too; returns what was dropped, the handle first. Linear in what is dropped.
     */
    public synchronized List<Entry> remove(long id) {
        Map<Long, Entry> removed = collect(id);
        for (Entry e : removed.values()) {
            byId.remove(e.id());
            byReal.get(e.kind()).remove(e.real());
            unindex(e);
            byOwner.remove(e.id());
            byContext.remove(e.id());
        }
        return new ArrayList<>(removed.values());
    }

    /** What {@link #remove} would drop, by id, the handle first; nothing is dropped. */
    public synchronized Map<Long, Entry> collect(long id) {
        Map<Long, Entry> found = new java.util.LinkedHashMap<>();
        Entry root = byId.get(id);
        if (root == null) {
            return found;
        }
        java.util.ArrayDeque<Entry> todo = new java.util.ArrayDeque<>();
        found.put(root.id(), root);
        todo.add(root);
        while (!todo.isEmpty()) {
            Entry e = todo.poll();
            addChildren(byOwner.get(e.id()), found, todo);
            if (e.kind() == ParamType.CTX) {
                addChildren(byContext.get(e.id()), found, todo);
            }
        }
        return found;
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
    public List<Entry> all(ParamType kind) {
        return new ArrayList<>(byReal.get(kind).values());
    }

    public int count(ParamType kind) {
        return byReal.get(kind).size();
    }
}
