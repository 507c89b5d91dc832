package io.gpusockets.backend.session;

import java.lang.System.Logger.Level;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The log lines of one subject (a session's peer faults, one listener's accept failures) that the
 * outside can cause at any rate: the first {@link #burst} lines of each interval are written, the rest
 * only counted, and the count is written as one summary line ("session 7: 1234 more peer faults
 * suppressed in 10 s") when the next line comes after the interval, or at {@link #flush()}. So a peer
 * sending bad frames as fast as it can costs the log a few lines per interval, not a line per frame.
 * Thread-safe; a message is only built when it is written.
 */
public final class RateLimitedLog {
    public static final int BURST_DEFAULT = 10;
    public static final long INTERVAL_NANOS_DEFAULT = TimeUnit.SECONDS.toNanos(10);

    private final System.Logger log;
    private final String subject;
    private final String what;
    private final int burst;
    private final long intervalNanos;
    private final LongSupplier clock;
    private long windowStart;
    private int written;
    private long held;
    private long heldTotal;

    /**
     * @param subject who the lines are about, the prefix of each ("session 7")
     * @param what    what the summary counts, plural ("peer faults")
     */
    public RateLimitedLog(System.Logger log, String subject, String what) {
        this(log, subject, what, BURST_DEFAULT, INTERVAL_NANOS_DEFAULT, System::nanoTime);
    }

    RateLimitedLog(System.Logger log, String subject, String what, int burst, long intervalNanos, LongSupplier clock) {
        if (burst < 1 || intervalNanos < 1) {
            throw new IllegalArgumentException("burst=" + burst + " intervalNanos=" + intervalNanos + ": must be at least 1");
        }
        this.log = log;
        this.subject = subject;
        this.what = what;
        this.burst = burst;
        this.intervalNanos = intervalNanos;
        this.clock = clock;
        this.windowStart = clock.getAsLong();
    }

    /** Writes "subject: message" unless this interval's lines are spent; returns whether it was written. */
    public boolean log(Level level, String message) {
        return log(level, () -> message, null);
    }

    public boolean log(Level level, Supplier<String> message) {
        return log(level, message, null);
    }

    /** As {@link #log(Level, String)}, with a stack trace (for faults of the backend itself, not of its peer). */
    public synchronized boolean log(Level level, Supplier<String> message, Throwable thrown) {
        if (!log.isLoggable(level)) {
            return false;
        }
        long now = clock.getAsLong();
        if (now - windowStart >= intervalNanos) {
            summarize(now);
            windowStart = now;
            written = 0;
        }
        if (written >= burst) {
            held++;
            heldTotal++;
            return false;
        }
        written++;
        String line = subject + ": " + message.get();
        if (thrown == null) {
            log.log(level, line);
        } else {
            log.log(level, line, thrown);
        }
        return true;
    }

    /** Writes the summary of lines held back since the last one, if any (at the subject's end). */
    public synchronized void flush() {
        summarize(clock.getAsLong());
    }

    /** Lines held back so far, in all. */
    public synchronized long suppressed() {
        return heldTotal;
    }

    private void summarize(long now) {
        if (held == 0) {
            return;
        }
        long seconds = Math.max(1, TimeUnit.NANOSECONDS.toSeconds(now - windowStart));
        log.log(Level.WARNING, subject + ": " + held + " more " + what + " suppressed in " + seconds + " s");
        held = 0;
    }
}
