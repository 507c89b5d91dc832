package io.gpusockets.backend.fuzz;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * The backend's log while a fuzz test runs: its lines are kept off the console (one per refused
 * handshake or ended session would be millions), and every ERROR (an exception inside the backend that
 * is not a protocol error: "internal error", "failed inside the backend") is kept for the test to fail on.
 */
final class BackendLogs extends Handler {
    private final Logger logger = Logger.getLogger("gpusockets");
    private final List<String> errors = new CopyOnWriteArrayList<>();
    private final java.util.Deque<String> recent = new java.util.concurrent.ConcurrentLinkedDeque<>();
    private boolean parents;

    static BackendLogs capture() {
        BackendLogs l = new BackendLogs();
        l.parents = l.logger.getUseParentHandlers();
        l.logger.setUseParentHandlers(false);
        l.logger.addHandler(l);
        return l;
    }

    /** Errors logged since the last call, cleared. */
    List<String> takeErrors() {
        List<String> e = List.copyOf(errors);
        errors.clear();
        return e;
    }

    /** The last few lines logged (any level), for a failure's message. */
    String recent() {
        return String.join("\n", recent);
    }

    @Override
    public void publish(LogRecord r) {
        recent.addLast(r.getLevel() + " " + r.getMessage());
        while (recent.size() > 20) {
            recent.pollFirst();
        }
        if (r.getLevel().intValue() >= Level.SEVERE.intValue()) {
            String thrown = r.getThrown() == null ? "" : " " + stack(r.getThrown());
            errors.add(r.getLoggerName() + ": " + r.getMessage() + thrown);
        }
    }

    private static String stack(Throwable t) {
        java.io.StringWriter w = new java.io.StringWriter();
        t.printStackTrace(new java.io.PrintWriter(w));
        return w.toString();
    }

    @Override
    public void flush() {
    }

    @Override
    public void close() {
        logger.removeHandler(this);
        logger.setUseParentHandlers(parents);
    }
}
