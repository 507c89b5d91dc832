package io.gpusockets.backend.status;

import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.session.SessionStats;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;

/**
 * Calls and frame bytes of the sessions that have ended, per tenant and transport, so that the
 * metrics' totals never drop when a session ends. Thread-safe; the server folds a session in under
 * the same lock that its snapshots read live sessions under, so a session is counted exactly once.
 */
public final class TrafficTotals {
    private record Key(String tenant, String transport) implements Comparable<Key> {
        @Override
        public int compareTo(Key o) {
            int c = tenant.compareTo(o.tenant);
            return c != 0 ? c : transport.compareTo(o.transport);
        }
    }

    private final Map<Key, long[]> ended = new TreeMap<>();

    /**
     * Folds an ended session in and runs {@code forget} (which takes it off the server's live set) in one
     * step, so that {@link #with} sees it either live or ended, never both nor neither.
     */
    public synchronized void ended(Session s, Runnable forget) {
        SessionStats.Totals t = s.stats().totals();
        add(ended, s.tenant().name(), s.stats().transport(), t.calls(), t.bytesIn(), t.bytesOut());
        forget.run();
    }

    /**
     * As {@link #ended(Session, Runnable)} for a session served by another process (a worker in isolation
     * mode process), by its last figures.
     */
    public synchronized void ended(SessionSnapshot last, Runnable forget) {
        add(ended, last.tenant(), last.transport(), last.calls(), last.bytesIn(), last.bytesOut());
        forget.run();
    }

    private static void add(Map<Key, long[]> sums, String tenant, String transport, long calls, long bytesIn, long bytesOut) {
        long[] sum = sums.computeIfAbsent(new Key(tenant, transport), k -> new long[3]);
        sum[0] += calls;
        sum[1] += bytesIn;
        sum[2] += bytesOut;
    }

    /** The live sessions of this process and of others, and the traffic totals with them. */
    public record Live(List<Session> sessions, List<SessionSnapshot> remote, List<ServerSnapshot.Traffic> traffic) {
    }

    /**
     * The live sessions ({@code live} and {@code remote} are asked for them under this object's lock, so
     * none is counted twice) and the totals of ended and live sessions together. Reads only the sessions'
     * counters: no session lock.
     */
    public synchronized Live with(Supplier<List<Session>> live, Supplier<List<SessionSnapshot>> remote) {
        List<Session> sessions = live.get();
        List<SessionSnapshot> others = remote.get();
        Map<Key, long[]> all = new TreeMap<>();
        ended.forEach((k, v) -> all.put(k, v.clone()));
        for (Session s : sessions) {
            SessionStats.Totals t = s.stats().totals();
            add(all, s.tenant().name(), s.stats().transport(), t.calls(), t.bytesIn(), t.bytesOut());
        }
        for (SessionSnapshot s : others) {
            add(all, s.tenant(), s.transport(), s.calls(), s.bytesIn(), s.bytesOut());
        }
        List<ServerSnapshot.Traffic> out = new ArrayList<>();
        all.forEach((k, v) -> out.add(new ServerSnapshot.Traffic(k.tenant(), k.transport(), v[0], v[1], v[2])));
        return new Live(sessions, others, out);
    }
}
