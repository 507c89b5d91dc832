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
        long[] sum = ended.computeIfAbsent(new Key(s.tenant().name(), s.stats().transport()), k -> new long[3]);
        SessionStats.Totals t = s.stats().totals();
        sum[0] += t.calls();
        sum[1] += t.bytesIn();
        sum[2] += t.bytesOut();
        forget.run();
    }

    /**
     * The live sessions ({@code live} is asked for them under this object's lock, so none is counted twice)
     * and the totals of ended and live sessions together. Reads only the sessions' counters: no session lock.
     */
    public synchronized Map.Entry<List<Session>, List<ServerSnapshot.Traffic>> with(Supplier<List<Session>> live) {
        List<Session> sessions = live.get();
        Map<Key, long[]> all = new TreeMap<>();
        ended.forEach((k, v) -> all.put(k, v.clone()));
        for (Session s : sessions) {
            long[] sum = all.computeIfAbsent(new Key(s.tenant().name(), s.stats().transport()), k -> new long[3]);
            SessionStats.Totals t = s.stats().totals();
            sum[0] += t.calls();
            sum[1] += t.bytesIn();
            sum[2] += t.bytesOut();
        }
        List<ServerSnapshot.Traffic> out = new ArrayList<>();
        all.forEach((k, v) -> out.add(new ServerSnapshot.Traffic(k.tenant(), k.transport(), v[0], v[1], v[2])));
        return Map.entry(sessions, out);
    }
}
