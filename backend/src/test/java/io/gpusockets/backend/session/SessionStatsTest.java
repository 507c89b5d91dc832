package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.backend.status.ServerSnapshot;
import io.gpusockets.backend.status.SessionSnapshot;
import io.gpusockets.backend.status.TrafficTotals;
import io.gpusockets.backend.testing.FakeGpu;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;

class SessionStatsTest {
    private static final long S = 1_000_000_000L;

    @Test
    void countsCallsAndFrameBytesButNotControlFramesAsCalls() {
        SessionStats st = new SessionStats(0, 0);
        st.frameIn(new FrameHeader(100, 7, 0, 1, 1));           // a call with a 100-byte body
        st.frameIn(new FrameHeader(4096, Opcodes.DATA, 0, 1, 1)); // its bulk data: bytes, not a call
        st.frameIn(new FrameHeader(0, Opcodes.LANE_END, 0, 1, 0));
        st.frameOut(SessionStats.bodyBytes(ByteBuffer.allocate(10), ByteBuffer.allocate(6)));
        SessionStats.Totals t = st.totals();
        assertEquals(1, t.calls());
        assertEquals(3 * FrameHeader.BYTES + 100 + 4096, t.bytesIn());
        assertEquals(FrameHeader.BYTES + 16, t.bytesOut());
    }

    @Test
    void ratesAreMeasuredOverTheLastFiveSamplesOnly() {
        SessionStats st = new SessionStats(0, 0);
        // before the window is full: from the start
        call(st, 10);
        assertEquals(5.0, st.rates(2 * S).calls(), 1e-9);
        st.sample(1 * S);
        assertEquals(5.0, st.rates(2 * S).calls(), 1e-9, "calls before the first sample count while the window fills");
        // a burst of 1000 calls in the first second, then 10 calls a second
        call(st, 990);
        for (int sec = 2; sec <= 12; sec++) {
            call(st, 10);
            st.sample(sec * S);
        }
        // samples kept: seconds 8..12; from second 8 to 12 there were 40 calls
        SessionStats.Rates r = st.rates(12 * S);
        assertEquals(10.0, r.calls(), 1e-9, "the burst of the first second has left the window");
        assertEquals(10.0 * (FrameHeader.BYTES + 8), r.bytesIn(), 1e-6);
        assertEquals(0, st.rates(0).calls(), "an interval too short to measure gives zero, not infinity");
        assertEquals(12.0, st.ageSeconds(12 * S), 1e-9);
    }

    @Test
    void anEndedSessionsCountersStayInItsTenantsTotals() {
        Set<Session> live = ConcurrentHashMap.newKeySet();
        TrafficTotals totals = new TrafficTotals();
        Session a = SessionTestKit.session(new FakeGpu());
        Session b = SessionTestKit.session(new FakeGpu());
        a.stats().transport("tcp");
        b.stats().transport("unix");
        live.add(a);
        live.add(b);
        call(a.stats(), 3);
        call(b.stats(), 5);
        List<ServerSnapshot.Traffic> before = totals.with(() -> new ArrayList<>(live), List::of).traffic();
        totals.ended(a, () -> live.remove(a));
        var after = totals.with(() -> new ArrayList<>(live), List::of);
        assertEquals(List.of(b), after.sessions(), "the ended session is no longer live");
        assertEquals(before, after.traffic(), "its calls and bytes are still counted, once");
        assertEquals(List.of(new ServerSnapshot.Traffic("test", "tcp", 3, 3 * (FrameHeader.BYTES + 8), 0),
                new ServerSnapshot.Traffic("test", "unix", 5, 5 * (FrameHeader.BYTES + 8), 0)), after.traffic());
        a.end("test");
        b.end("test");
    }

    @Test
    void aWorkerSessionIsCountedLiveThenEndedExactlyOnce() {
        TrafficTotals totals = new TrafficTotals();
        Set<SessionSnapshot> remote = ConcurrentHashMap.newKeySet();
        SessionSnapshot w = new SessionSnapshot(9, "alice", "tcp", "peer", 0, 0, 4, 0, 100, 200, 0, 0, 0, 1, false);
        remote.add(w);
        var live = totals.with(List::of, () -> new ArrayList<>(remote));
        assertEquals(List.of(w), live.remote());
        assertEquals(List.of(new ServerSnapshot.Traffic("alice", "tcp", 4, 100, 200)), live.traffic());
        totals.ended(w, () -> remote.remove(w));
        var after = totals.with(List::of, () -> new ArrayList<>(remote));
        assertEquals(List.of(), after.remote());
        assertEquals(live.traffic(), after.traffic(), "its figures stay in the totals, once");
    }

    private static void call(SessionStats st, int n) {
        for (int i = 0; i < n; i++) {
            st.frameIn(new FrameHeader(8, 7, FrameHeader.FLAG_NO_REPLY, 1, i));
        }
    }
}
