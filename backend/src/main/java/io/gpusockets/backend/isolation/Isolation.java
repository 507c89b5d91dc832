package io.gpusockets.backend.isolation;

import java.util.Locale;

/**
 * How far apart the backend keeps its sessions (DESIGN.md §5, README "Isolation modes").
 * <ul>
 *   <li>{@link #CONTEXT}: every session has its own contexts in the one backend process (the default).
 *   <li>{@link #PROCESS}: every session is served by a worker process of its own, which owns its CUDA
 *       contexts: a faulting kernel, a driver crash or a JVM error ends only that worker's session.
 *   <li>{@link #SHARED}: the sessions of one tenant share one real context per device (trusted tenants:
 *       a fault in one session's kernel poisons the context of all of them).
 * </ul>
 */
public enum Isolation {
    CONTEXT, PROCESS, SHARED;

    /** "context", "process" or "shared" (any case); throws naming the choices otherwise. */
    public static Isolation parse(String text) {
        try {
            return valueOf(text.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("isolation=" + text + ": must be context, process or shared");
        }
    }

    @Override
    public String toString() {
        return name().toLowerCase(Locale.ROOT);
    }
}
