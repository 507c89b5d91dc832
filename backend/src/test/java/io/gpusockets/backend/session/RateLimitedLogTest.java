package io.gpusockets.backend.session;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.List;
import java.util.ResourceBundle;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class RateLimitedLogTest {
    private static final long SECOND = 1_000_000_000L;

    /** A logger that keeps its lines. */
    static final class Lines implements System.Logger {
        final List<String> lines = new ArrayList<>();

        @Override
        public String getName() {
            return "test";
        }

        @Override
        public boolean isLoggable(Level level) {
            return level.compareTo(Level.INFO) >= 0;
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String msg, Throwable thrown) {
            lines.add(level + " " + msg + (thrown == null ? "" : " [" + thrown.getClass().getSimpleName() + "]"));
        }

        @Override
        public void log(Level level, ResourceBundle bundle, String format, Object... params) {
            lines.add(level + " " + format);
        }
    }

    @Test
    void writesTheFirstLinesOfAnIntervalAndOneSummaryOfTheRest() {
        Lines out = new Lines();
        AtomicLong now = new AtomicLong();
        RateLimitedLog log = new RateLimitedLog(out, "session 7", "peer faults", 3, 10 * SECOND, now::get);
        for (int i = 0; i < 1000; i++) {
            log.log(Level.WARNING, "bad frame " + i);
        }
        assertEquals(List.of("WARNING session 7: bad frame 0", "WARNING session 7: bad frame 1",
                "WARNING session 7: bad frame 2"), out.lines);
        now.addAndGet(11 * SECOND);
        assertTrue(log.log(Level.WARNING, "bad frame 1000"));
        assertEquals("WARNING session 7: 997 more peer faults suppressed in 11 s", out.lines.get(3));
        assertEquals("WARNING session 7: bad frame 1000", out.lines.get(4));
        assertEquals(997, log.suppressed());
    }

    @Test
    void flushWritesWhatWasHeldBackOnce() {
        Lines out = new Lines();
        AtomicLong now = new AtomicLong();
        RateLimitedLog log = new RateLimitedLog(out, "session 8", "peer faults", 1, 10 * SECOND, now::get);
        log.log(Level.WARNING, "first");
        assertFalse(log.log(Level.WARNING, "second"));
        log.flush();
        log.flush();
        assertEquals(List.of("WARNING session 8: first", "WARNING session 8: 1 more peer faults suppressed in 1 s"), out.lines);
    }

    @Test
    void linesBelowTheLoggersLevelAreNeitherWrittenNorCountedNorBuilt() {
        Lines out = new Lines();
        RateLimitedLog log = new RateLimitedLog(out, "session 9", "peer faults", 1, SECOND, () -> 0);
        assertFalse(log.log(Level.DEBUG, () -> {
            throw new AssertionError("built");
        }));
        log.flush();
        assertEquals(List.of(), out.lines);
        assertEquals(0, log.suppressed());
    }

    @Test
    void aStackTraceGoesWithItsLine() {
        Lines out = new Lines();
        RateLimitedLog log = new RateLimitedLog(out, "session 1", "peer faults");
        log.log(Level.ERROR, () -> "failed inside the backend", new IllegalStateException());
        assertEquals(List.of("ERROR session 1: failed inside the backend [IllegalStateException]"), out.lines);
    }
}
