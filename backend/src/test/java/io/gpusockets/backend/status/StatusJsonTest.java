package io.gpusockets.backend.status;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class StatusJsonTest {

    @Test
    @SuppressWarnings("unchecked")
    void writesEveryFieldAndReadsBackTheSameValues() {
        String text = StatusJson.write(Snapshots.sample());
        assertTrue(text.indexOf('\n') < 0, "one line: " + text);
        Map<String, Object> s = (Map<String, Object>) StatusJson.parse(text);
        assertEquals(1_700_000_000_000L, s.get("time"));
        assertEquals(3L, s.get("connections"));
        assertEquals(5L, s.get("shares"), "live shares between sessions");
        Map<String, Object> dev = (Map<String, Object>) ((List<Object>) s.get("devices")).getFirst();
        assertEquals(Map.of("index", 0L, "name", "GPUsockets Emulated Device", "memoryUsedBytes", 6L << 20,
                "memoryTotalBytes", 8L << 30), dev);
        List<Object> tenants = (List<Object>) s.get("tenants");
        Map<String, Object> alice = (Map<String, Object>) tenants.get(0);
        assertEquals(1L << 30, alice.get("memoryLimitBytes"));
        assertEquals(Map.of("memory", 2L, "streams", 1L), alice.get("rejections"));
        Map<String, Object> def = (Map<String, Object>) tenants.get(1);
        assertNull(def.get("memoryLimitBytes"), "unlimited is null");
        assertTrue(def.containsKey("sessionLimit") && def.get("sessionLimit") == null);
        Map<String, Object> x = (Map<String, Object>) ((List<Object>) s.get("sessions")).getFirst();
        assertEquals(7L, x.get("id"));
        assertEquals("alice", x.get("tenant"));
        assertEquals("tcp://127.0.0.1:5000 (\"x\"\n\u0001)", x.get("peer"), "quotes and control characters survive");
        assertEquals(4L << 20, x.get("memoryBytes"));
        assertEquals(2L, x.get("streams"));
        assertEquals(12.35, x.get("callsPerSecond"));
        assertEquals(61.5, x.get("ageSeconds"));
        assertEquals(true, x.get("stableAddresses"));
        assertEquals(false, ((Map<String, Object>) ((List<Object>) s.get("sessions")).get(1)).get("stableAddresses"));
        assertEquals("serving", x.get("state"));
        assertEquals("migrating", ((Map<String, Object>) ((List<Object>) s.get("sessions")).get(1)).get("state"));
        Map<String, Object> t = (Map<String, Object>) ((List<Object>) s.get("traffic")).get(1);
        assertEquals(Map.of("tenant", "default", "transport", "unix", "calls", 5L, "bytesIn", 300L, "bytesOut", 200L), t);
    }

    @Test
    @SuppressWarnings("unchecked")
    void aPoisonedDriverIsWrittenWithItsErrorSessionAndMessageAndAHealthyOneAsNull() {
        ServerSnapshot base = Snapshots.sample();
        assertNull(((Map<String, Object>) StatusJson.parse(StatusJson.write(base))).get("poisoned"));
        ServerSnapshot poisoned = new ServerSnapshot(base.timeMillis(), base.backend(), base.connections(), base.devices(),
                base.tenants(), base.sessions(), base.traffic(), new ServerSnapshot.Poisoned("CUDA_ERROR_ASSERT", 9,
                "cuCtxSynchronize", 1_700_000_000_500L, "the driver ... is poisoned"));
        Map<String, Object> s = (Map<String, Object>) StatusJson.parse(StatusJson.write(poisoned));
        assertEquals(Map.of("error", "CUDA_ERROR_ASSERT", "sessionId", 9L, "call", "cuCtxSynchronize", "time",
                1_700_000_000_500L, "message", "the driver ... is poisoned"), s.get("poisoned"));
    }

    @Test
    @SuppressWarnings("unchecked")
    void aSessionsStateIsServingMigratingOrDetached() {
        SessionSnapshot serving = Snapshots.sample().sessions().getFirst();
        assertEquals(SessionSnapshot.SERVING, serving.state());
        for (SessionSnapshot x : List.of(serving, serving.asMigrating(), serving.asDetached())) {
            ServerSnapshot base = Snapshots.sample();
            ServerSnapshot one = new ServerSnapshot(base.timeMillis(), base.backend(), base.connections(), base.devices(),
                    base.tenants(), List.of(x), base.traffic(), null);
            Map<String, Object> s = (Map<String, Object>) StatusJson.parse(StatusJson.write(one));
            assertEquals(x.state(), ((Map<String, Object>) ((List<Object>) s.get("sessions")).getFirst()).get("state"));
        }
        assertTrue(serving.asMigrating().migrating() && !serving.asMigrating().detached());
        assertTrue(serving.asDetached().detached() && !serving.asDetached().migrating());
        assertThrows(NullPointerException.class, () -> new SessionSnapshot(1, "t", "tcp", "p", 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, false, null));
    }

    @Test
    void readerRefusesBrokenTextWithTheOffset() {
        for (String bad : new String[] {"", "{", "{\"a\":}", "[1,]", "\"abc", "{\"a\":1} x", "nul", "\"\\u12\"", "--1"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StatusJson.parse(bad), bad);
            assertTrue(e.getMessage().startsWith("bad JSON at offset "), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> StatusJson.parse("[".repeat(40) + "]".repeat(40)),
                "nesting is capped");
        assertEquals(List.of(true, false, -2.5e3, "é"), StatusJson.parse(" [true, false, -2.5e3, \"\\u00e9\"] "));
    }
}
