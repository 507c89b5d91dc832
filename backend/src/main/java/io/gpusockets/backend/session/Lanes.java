package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.ProtocolException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The lanes of one session by id: made on a lane's first frame up to the session's lane limit,
 * dropped on LANE_END, and all stopped when the session ends. Only the session's reader adds lanes.
 *
 * <p>A lane a LANE_END dropped still runs what was queued before it on its thread: until that thread
 * ends it is {@link #ending}, waited for by the session's end like the others (else a call it runs
 * afterwards, a context or allocation made, outlives the session's release), counted by {@link #busy}
 * and against the lane limit (else a peer that ends lanes with calls queued piles up threads past it).
 */
final class Lanes {
    /** How long an ending lane may take to finish the call it is in before it is interrupted. */
    static final long FINISH_MILLIS = 2000;
    /** How long an interrupted lane may take to stop before it counts as stuck inside the driver. */
    static final long INTERRUPTED_FINISH_MILLIS = 10_000;

    private final Session session;
    private final int max;
    private final Map<Integer, Lane> lanes = new ConcurrentHashMap<>();
    /** Lanes dropped by LANE_END whose thread may still run what was queued (see the class comment). */
    private final java.util.Set<Lane> ending = ConcurrentHashMap.newKeySet();
    /** The lanes {@link #endAll} found still inside a driver call. */
    private volatile List<Lane> stuck = List.of();
    private volatile long finishMillis = FINISH_MILLIS;
    private volatile long interruptedFinishMillis = INTERRUPTED_FINISH_MILLIS;

    Lanes(Session session, int max) {
        this.session = session;
        this.max = max;
    }

    /** The lane {@code id}, made on first use; a frontend past the limit breaks the protocol. */
    Lane lane(int id) throws ProtocolException {
        Lane lane = lanes.get(id);
        if (lane == null) {
            ending.removeIf(l -> !l.isAlive());
            if (lanes.size() + ending.size() >= max) {
                session.tenant().rejected("lanes");
                throw new ProtocolException("too many lanes: max=" + max);
            }
            lane = new Lane(session, id);
            lanes.put(id, lane);
        }
        return lane;
    }

    /** Each lane's context stack, bottom first (real values), by lane id (a checkpoint, with the session drained). */
    Map<Integer, long[]> contextStacks() {
        Map<Integer, long[]> out = new java.util.TreeMap<>();
        lanes.forEach((id, l) -> out.put(id, l.contextStack()));
        return out;
    }

    /** A restore: lane {@code id} is made now, with this context stack (real values). */
    void restore(int id, long[] reals) throws ProtocolException {
        lane(id).contextStack(reals);
    }

    /** LANE_END: the lane finishes what is queued and stops; an unknown id is ignored. */
    void end(int id) {
        Lane lane = lanes.remove(id);
        if (lane != null) {
            lane.end();
            if (lane.isAlive()) {
                ending.add(lane);
            }
        }
    }

    int size() {
        return lanes.size();
    }

    /** Whether a call is queued or running on some lane's thread. */
    boolean busy() {
        for (Lane l : lanes.values()) {
            if (l.pending.get() > 0) {
                return true;
            }
        }
        for (Lane l : ending) {
            if (l.pending.get() > 0) {
                return true;
            }
        }
        return false;
    }

    /** A destroyed context leaves every lane's stack. */
    void forgetContext(long real) {
        for (Lane l : lanes.values()) {
            l.forgetContext(real);
        }
        for (Lane l : ending) {
            l.forgetContext(real);
        }
    }

    /**
     * Stops every lane for the session's end and waits for their threads; returns true when one is
     * still running afterwards (inside a driver call that did not return; {@link #awaitStuck} waits for
     * those). {@link #FINISH_MILLIS} and {@link #INTERRUPTED_FINISH_MILLIS} bound the waits.
     */
    boolean endAll() {
        return endAll(finishMillis, interruptedFinishMillis);
    }

    /** Shorter waits for {@link #endAll()}, for tests. */
    void stopWaits(long finish, long interruptedFinish) {
        finishMillis = finish;
        interruptedFinishMillis = interruptedFinish;
    }

    /**
     * Waits up to {@code millis} for the lanes {@link #endAll} found stuck to leave the driver and end;
     * true when every one has (at once when none was stuck).
     */
    boolean awaitStuck(long millis) throws InterruptedException {
        long deadline = System.nanoTime() + millis * 1_000_000L;
        for (Lane l : stuck) {
            long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000L);
            if (!l.join(left)) {
                return false;
            }
        }
        stuck = List.of();
        return true;
    }

    boolean endAll(long finishMillis, long interruptedFinishMillis) {
        List<Lane> all = new ArrayList<>(lanes.values());
        lanes.clear();
        for (Lane l : all) {
            l.end();
        }
        all.addAll(ending);   // already told to end: waited for the same way
        ending.clear();
        List<Lane> still = new ArrayList<>();
        try {
            for (Lane l : all) {
                // A lane inside a long driver call finishes it first; a lane waiting for data that will never come is interrupted.
                if (!l.join(finishMillis)) {
                    l.interrupt();
                    if (!l.join(interruptedFinishMillis)) {
                        still.add(l);
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            for (Lane l : all) {
                if (l.isAlive()) {
                    still.add(l);
                }
            }
        }
        stuck = List.copyOf(still);
        return !still.isEmpty();
    }
}
