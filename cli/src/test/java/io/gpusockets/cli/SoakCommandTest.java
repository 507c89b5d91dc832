package io.gpusockets.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SoakCommandTest {
    private static List<SoakCommand.Sample> samples(long rssStart, long rssEnd, long dev) {
        List<SoakCommand.Sample> out = new ArrayList<>();
        for (int i = 0; i <= 100; i++) {
            long rss = rssStart + (rssEnd - rssStart) * i / 100;
            out.add(new SoakCommand.Sample(i * 10.0, rss, 40, 30, dev, i, i, 0));
        }
        return out;
    }

    @Test
    void flatRunPasses() {
        SoakCommand.Verdict v = SoakCommand.verdict(samples(200L << 20, 204L << 20, 1L << 30), 100, 5, 1 << 20);
        assertTrue(v.flat(), String.join("\n", v.lines()));
    }

    @Test
    void growingRssFails() {
        SoakCommand.Verdict v = SoakCommand.verdict(samples(200L << 20, 260L << 20, 1L << 30), 100, 5, 1 << 20);
        assertFalse(v.flat(), String.join("\n", v.lines()));
        assertTrue(String.join("\n", v.lines()).contains("over 5.0 %"));
    }

    @Test
    void growingDeviceMemoryFails() {
        List<SoakCommand.Sample> s = new ArrayList<>(samples(200L << 20, 200L << 20, 1L << 30));
        for (int i = 90; i <= 100; i++) {
            SoakCommand.Sample x = s.get(i);
            s.set(i, new SoakCommand.Sample(x.seconds(), x.rssBytes(), 40, 30, 2L << 30, i, i, 0));
        }
        assertFalse(SoakCommand.verdict(s, 100, 5, 1 << 20).flat());
    }

    @Test
    void deviceMemoryNoiseWithinWhatClientsHoldPasses() {
        List<SoakCommand.Sample> s = new ArrayList<>(samples(200L << 20, 200L << 20, 0));
        for (int i = 0; i <= 100; i++) {
            SoakCommand.Sample x = s.get(i);
            // what clients hold mid-cycle comes and goes; the floor rises by 256 KiB at the end
            long floor = i >= 90 ? 256L << 10 : 0;
            s.set(i, new SoakCommand.Sample(x.seconds(), x.rssBytes(), 40, 30, floor + (i % 3) * (256L << 10), i, i, 0));
        }
        assertTrue(SoakCommand.verdict(s, 100, 5, 1 << 20).flat(), "within what the clients may hold");
        assertFalse(SoakCommand.verdict(s, 100, 5, 1 << 10).flat(), "more than the clients may hold");
    }

    @Test
    void fallingDeviceMemoryIsNoLeak() {
        List<SoakCommand.Sample> s = new ArrayList<>(samples(200L << 20, 200L << 20, 8L << 30));
        for (int i = 90; i <= 100; i++) {
            SoakCommand.Sample x = s.get(i);
            s.set(i, new SoakCommand.Sample(x.seconds(), x.rssBytes(), 40, 30, 7L << 30, i, i, 0));
        }
        assertTrue(SoakCommand.verdict(s, 100, 5, 1 << 20).flat());
    }

    @Test
    void tooFewSamplesCannotPass() {
        assertFalse(SoakCommand.verdict(samples(1, 1, 1).subList(0, 3), 100, 5, 1 << 20).flat());
    }

    @Test
    void times() {
        assertEquals(Duration.ofHours(1), SoakCommand.parseTime("1h"));
        assertEquals(Duration.ofMinutes(20), SoakCommand.parseTime("20m"));
        assertEquals(Duration.ofSeconds(90), SoakCommand.parseTime("90s"));
        assertEquals(Duration.ofSeconds(90), SoakCommand.parseTime("90"));
        assertEquals(Duration.ofMillis(1500), SoakCommand.parseTime("1500ms"));
        assertThrows(IllegalArgumentException.class, () -> SoakCommand.parseTime("ten"));
        assertThrows(IllegalArgumentException.class, () -> SoakCommand.parseTime("5x"));
    }
}
