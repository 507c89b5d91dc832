package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Keeps a session's destroys and frees from pulling anything out from under a call of another lane.
 * A call uses each handle and device range it checked, and its lane's context, from the check until
 * its driver call has returned, and publishes those uses in its lane's {@link UseSlot} ({@link Call});
 * a destroy or free {@link #retire retires} what it takes away first: marks it dying ({@link Uses}),
 * so that no call starts to use it, waits until no lane's slot shows a use of it, and only then lets
 * the driver destroy it. A call that finds what it names dying is refused as if it were already gone.
 * Destroying a context takes everything made in it, so it waits for every call running in it and
 * every call using something of it.
 *
 * <p>Destroys of one session take turns (one lock), and a call never waits for that lock, nor for
 * a retirement, while it holds uses: it lets them go first and takes them again after
 * ({@link Call#retire}). So a destroy waits only for calls that wait for nothing of ours (at worst
 * for the driver), and two destroys cannot wait for each other. Calls that destroy nothing take no
 * lock here, nor write memory another lane writes: a use costs a volatile store and load in the
 * lane's own slot.
 */
final class SessionUses {
    private final Session session;
    /** Held by the call whose destroy or free is in progress. */
    private final ReentrantLock destroys = new ReentrantLock();
    /** Notified when a use of something dying ends. */
    private final Object drained = new Object();
    /** The slots of the session's lanes that may be running a call. */
    private final Set<UseSlot> slots = java.util.concurrent.ConcurrentHashMap.newKeySet();

    SessionUses(Session session) {
        this.session = session;
    }

    /** A lane's slot, from its making until its last call ended. */
    void register(UseSlot slot) {
        slots.add(slot);
    }

    void unregister(UseSlot slot) {
        slots.remove(slot);
    }

    private boolean inUse(Set<Uses> marked) {
        for (UseSlot slot : slots) {
            if (slot.usesAny(marked)) {
                return true;
            }
        }
        return false;
    }

    void lockDestroys() throws InterruptedException {
        destroys.lockInterruptibly();
    }

    void unlockDestroys() {
        destroys.unlock();
    }

    /** A use of something dying ended: a retirement may be waiting for it. */
    void released() {
        synchronized (drained) {
            drained.notifyAll();
        }
    }

    /**
     * What one destroy takes away: the handles it drops with what they own or hold, and the device
     * ranges they own or it frees, each marked dying. {@link #commit} once the driver destroyed them;
     * otherwise {@link #close} lets calls use them again.
     */
    final class Retirement implements AutoCloseable {
        private final Set<Uses> marked = Collections.newSetFromMap(new IdentityHashMap<>());
        private boolean committed;

        /** The driver destroyed them: they stay dying until they leave the tables. */
        void commit() {
            committed = true;
        }

        @Override
        public void close() {
            if (!committed) {
                for (Uses u : marked) {
                    u.revive();
                }
                committed = true;
            }
        }
    }

    /**
     * Marks the handles {@code handleIds} (with everything {@link SessionHandles#remove} would drop with
     * them) and the ranges (allocations, mappings) at {@code rangeBases} (with the ranges the dropped handles own) dying,
     * lets go of {@code c}'s own uses of them, and waits until no call uses any of them. What a call
     * running in a dying context makes meanwhile is added before the wait ends. The caller holds the
     * session's destroy lock and must close the result.
     */
    Retirement retire(Call c, long[] handleIds, long[] rangeBases) throws InterruptedException {
        Retirement r = new Retirement();
        Set<Uses> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        try {
            while (true) {
                List<Uses> fresh = new ArrayList<>();
                List<Long> ids = new ArrayList<>();
                for (long id : handleIds) {
                    for (SessionHandles.Entry e : session.handles().collect(id).values()) {
                        ids.add(e.id());
                        fresh.add(e.uses);
                    }
                }
                for (SessionMemory.Range range : session.memory().ownedBy(ids)) {
                    fresh.add(range.uses);
                }
                for (long base : rangeBases) {
                    SessionMemory.Range range = session.memory().at(base);
                    if (range != null) {
                        fresh.add(range.uses);
                    }
                }
                fresh.removeIf(u -> !seen.add(u));
                if (fresh.isEmpty()) {
                    return r;
                }
                for (Uses u : fresh) {
                    if (u.markDying()) {   // else destroyed already, by a destroy before this one
                        r.marked.add(u);
                    }
                }
                c.releaseUsesOf(r.marked);
                synchronized (drained) {
                    while (inUse(r.marked)) {
                        drained.wait(100);   // notified by the use's end ({@link #released}); the bound is a safety net
                    }
                }
            }
        } catch (InterruptedException | RuntimeException e) {
            r.close();
            throw e;
        }
    }
}
