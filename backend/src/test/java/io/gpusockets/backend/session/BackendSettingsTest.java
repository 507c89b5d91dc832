package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Properties;
import java.util.Set;
import org.junit.jupiter.api.Test;

class BackendSettingsTest {

    private static Properties props(String name, String value) {
        Properties p = new Properties();
        p.setProperty(name, value);
        return p;
    }

    private static BackendSettings parse(String name, String value) {
        return BackendSettings.fromProperties(props(name, value), 2);
    }

    @Test
    void defaults() {
        BackendSettings s = BackendSettings.fromProperties(new Properties(), 16);
        assertEquals(SessionLimits.DEFAULT, s.limits());
        assertNull(s.preSharedKey());
        assertEquals(Set.of(), s.allowedUids());
        assertEquals(Set.of(), s.allowedCids());
        assertEquals(10_000, s.handshakeMillis());
        assertEquals(0, s.warmContexts());
        assertEquals(50, s.laneSpinMicros());
        assertTrue(s.pipelinedToLane());
        assertEquals(0, BackendSettings.fromProperties(new Properties(), 2).laneSpinMicros(), "lanes poll on two cores");
    }

    @Test
    void parsesTheLaneSpin() {
        assertEquals(20, parse(BackendSettings.LANE_SPIN_MICROS_PROP, "20").laneSpinMicros());
        assertEquals(20_000, parse(BackendSettings.LANE_SPIN_MICROS_PROP, " 20 ").laneSpinNanos());
        assertEquals(0, BackendSettings.fromProperties(props(BackendSettings.LANE_SPIN_MICROS_PROP, "0"), 64).laneSpinMicros());
    }

    @Test
    void parsesPipelinedToLane() {
        assertFalse(parse(BackendSettings.PIPELINED_TO_LANE_PROP, "false").pipelinedToLane());
        assertTrue(parse(BackendSettings.PIPELINED_TO_LANE_PROP, "TRUE").pipelinedToLane());
    }

    private static void assertRejected(String name, String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parse(name, value));
        assertTrue(e.getMessage().contains(name + "=" + value), e.getMessage());
    }

    @Test
    void rejectsBadValuesNamingTheProperty() {
        assertRejected(BackendSettings.LANE_SPIN_MICROS_PROP, "fast");
        assertRejected(BackendSettings.LANE_SPIN_MICROS_PROP, "-1");
        assertRejected(BackendSettings.LANE_SPIN_MICROS_PROP, "1000001");
        assertRejected(BackendSettings.PIPELINED_TO_LANE_PROP, "yes");
    }

    @Test
    void rejectsBadServerSettingsWithNameAndValue() {
        BackendSettings d = SessionTestKit.settings();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> d.withServer(null, Set.of(), Set.of(), 10_000, -1));
        assertTrue(e.getMessage().contains("warmContexts=-1"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> d.withServer(null, Set.of(), Set.of(), 0, 0));
        assertTrue(e.getMessage().contains("handshakeMillis=0"), e.getMessage());
    }

    @Test
    void theServerGroupKeepsItsValuesAndTheTuningItsOwn() {
        byte[] psk = {1, 2, 3};
        BackendSettings tuned = BackendSettings.fromProperties(props("gpusockets.backend.laneSpinMicros", "7"), 16);
        BackendSettings s = tuned.withServer(psk, Set.of(1000), Set.of(3L), 1234, 2);
        assertArrayEquals(psk, s.preSharedKey());
        assertEquals(Set.of(1000), s.allowedUids());
        assertEquals(Set.of(3L), s.allowedCids());
        assertEquals(1234, s.handshakeMillis());
        assertEquals(2, s.warmContexts());
        assertEquals(7, s.laneSpinMicros());
    }

    @Test
    void serverLimitsDefaultAndKeepTheirValuesApartFromTheRest() {
        BackendSettings d = SessionTestKit.settings();
        assertEquals(ServerLimits.DEFAULT, d.serverLimits());
        assertEquals(0, d.serverLimits().idleTimeoutSeconds(), "no idle timeout unless asked for");
        BackendSettings s = d.withServerLimits(new ServerLimits(10, 5, 3, 60)).withServer(null, Set.of(), Set.of(), 1234, 0);
        assertEquals(new ServerLimits(10, 5, 3, 60), s.serverLimits());
        assertEquals(1234, s.handshakeMillis());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new ServerLimits(0, 1, 1, 0));
        assertTrue(e.getMessage().contains("maxConnections=0"), e.getMessage());
    }

    @Test
    void theJvmsSystemPropertiesAreTheSource() {
        String before = System.getProperty(BackendSettings.LANE_SPIN_MICROS_PROP);
        System.setProperty(BackendSettings.LANE_SPIN_MICROS_PROP, "37");
        try {
            assertEquals(37, BackendSettings.fromSystemProperties().laneSpinMicros());
        } finally {
            if (before == null) {
                System.clearProperty(BackendSettings.LANE_SPIN_MICROS_PROP);
            } else {
                System.setProperty(BackendSettings.LANE_SPIN_MICROS_PROP, before);
            }
        }
    }
}
