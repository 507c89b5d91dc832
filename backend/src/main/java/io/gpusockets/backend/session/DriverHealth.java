package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import java.lang.System.Logger.Level;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Whether the driver in this process is still usable. A kernel fault's sticky error
 * ({@link CuResult#poisonsProcess}: CUDA documents that "any further CUDA work will return the same error"
 * and that the process must be relaunched) poisons the whole process: on the H200 (driver 580) every later
 * context creation failed. The first such error any call returns is recorded here, logged loudly once, and
 * from then on the server refuses new sessions with {@link #refusal()} and status shows it. In isolation mode
 * process only the faulting session's worker is poisoned (it exits with its session and logs a warning, not the
 * backend's alarm: {@link #servesOneSession}); the front runs no kernels.
 */
public final class DriverHealth {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    /** The first process-poisoning error: its code, the session it was returned to, the call that returned it. */
    public record Poison(int code, long sessionId, String call, long epochMillis) {
        public String codeName() {
            return CuResult.name(code);
        }
    }

    private final AtomicReference<Poison> poison = new AtomicReference<>();
    private final boolean faultsPoison;
    private volatile boolean worker;

    /** For the real driver, whose kernel faults poison its process. */
    public DriverHealth() {
        this(true);
    }

    /**
     * @param faultsPoison whether a kernel fault poisons the driver's whole process: true for the real driver; the
     *                     emulated device says by its fault scope (scope context keeps a fault in its context, so
     *                     there is nothing to refuse sessions for)
     */
    public DriverHealth(boolean faultsPoison) {
        this.faultsPoison = faultsPoison;
    }

    /** This process is a worker of isolation mode process: it serves one session and exits with it. */
    public void servesOneSession() {
        worker = true;
    }

    /** Records {@code code} if it poisons the process and none was recorded before; logs it once. */
    public void sawResult(int code, long sessionId, String call) {
        if (!faultsPoison || !CuResult.poisonsProcess(code) || poison.get() != null) {
            return;
        }
        Poison p = new Poison(code, sessionId, call, System.currentTimeMillis());
        if (poison.compareAndSet(null, p) && worker) {
            LOG.log(Level.WARNING, "session " + sessionId + ": " + call + " returned " + p.codeName() + ", a kernel fault that"
                    + " poisons this worker process's driver; the worker ends with its session, no other session is touched");
        } else if (poison.get() == p) {
            LOG.log(Level.ERROR, "THE DRIVER IN THIS BACKEND PROCESS IS POISONED: " + call + " of session " + sessionId
                    + " returned " + p.codeName() + ", a kernel fault after which CUDA answers every later call of the process,"
                    + " other sessions' included, with the same error and makes no new context. New sessions are refused"
                    + " from now on; restart the backend, or run it with --isolation process (a worker process per session)");
        }
    }

    /** The first poisoning error seen, if any. */
    public Optional<Poison> poison() {
        return Optional.ofNullable(poison.get());
    }

    /** What a new session is told once the driver is poisoned, or null while it is not. */
    public String refusal() {
        Poison p = poison.get();
        if (p == null) {
            return null;
        }
        return "the driver in this backend process is poisoned by a kernel fault of session " + p.sessionId() + " ("
                + p.codeName() + "); restart the backend, or run it with --isolation process";
    }
}
