package io.gpusockets.backend.isolation;

import io.gpusockets.backend.tenant.TenantConfig;
import java.util.Locale;

/**
 * How far apart the backend keeps its sessions (DESIGN.md §5, README "Isolation modes").
 * <ul>
 *   <li>{@link #PROCESS} (the default): every session is served by a worker process of its own, which owns
 *       its CUDA contexts: a faulting kernel, a driver crash or a JVM error ends only that worker's session.
 *       CUDA documents a kernel fault's error as ending the use of CUDA by the whole process ("the process
 *       must be terminated and relaunched"), so only a process per session contains one.
 *   <li>{@link #CONTEXT}: every session has its own contexts in the one backend process; a kernel fault
 *       poisons the driver of that process, and the backend then refuses new sessions until it restarts.
 *   <li>{@link #SHARED}: the sessions of one tenant share one real context per device (trusted tenants:
 *       a fault in one session's kernel poisons the context of all of them).
 * </ul>
 */
public enum Isolation {
    CONTEXT, PROCESS, SHARED;

    /** What {@code gpusockets backend} runs without {@code --isolation} (the CLI's default value). */
    public static final String DEFAULT_NAME = "process";

    /** "context", "process" or "shared" (any case); throws naming the choices otherwise. */
    public static Isolation parse(String text) {
        try {
            return valueOf(text.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("isolation=" + text + ": must be context, process or shared");
        }
    }

    /**
     * Why a tenants configuration cannot serve a backend in this mode, or null. Mode process schedules no
     * device-time share: each session's worker is a process of its own, whose launches the front never sees
     * (the GPU time-slices the processes), so a {@code device-share} there would be silently ignored.
     */
    public String tenantsRefusal(TenantConfig config) {
        TenantConfig.Section s = this == PROCESS ? config.withDeviceShare() : null;
        if (s == null) {
            return null;
        }
        String where = config.file() == null ? "" : config.file() + ":" + s.line() + ": ";
        return where + "[" + (TenantConfig.DEFAULT.equals(s.name()) ? "default" : "tenant " + s.name()) + "] has device-share = "
                + s.limits().deviceShare() + ", which isolation mode process (the default) does not schedule: each session's"
                + " worker is a process of its own and its launches never reach the front; run the backend with"
                + " --isolation context to share device time, or remove device-share";
    }

    @Override
    public String toString() {
        return name().toLowerCase(Locale.ROOT);
    }
}
