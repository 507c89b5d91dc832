package io.gpusockets.backend.session;

import java.util.Map;
import java.util.Set;

/**
 * What one session opened of other sessions' shares ({@link ShareRegistry}): IPC memory ranges (cuIpcOpenMemHandle,
 * by base, with the context they were opened in), IPC events (cuIpcOpenEventHandle, driver handles) and imported VMM
 * allocations (cuMemImportFromShareableHandle, driver handles). None is charged to the tenant: the exporter's
 * allocation already is. The session's end closes the memory it opened ({@link SessionCleanup}); its events and
 * VMM handles go as its other events and allocations do. While it holds any, the session is refused a checkpoint, a
 * migration and a hand-over ({@link #refusal}).
 */
final class SessionShares {
    /** An opened IPC memory range: its size and the context id it was opened in. */
    record Opened(long size, long context) {
    }

    private final Map<Long, Opened> memory = new java.util.concurrent.ConcurrentHashMap<>();
    private final Set<Long> events = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final Set<Long> vmm = java.util.concurrent.ConcurrentHashMap.newKeySet();

    void memoryOpened(long base, long size, long context) {
        memory.put(base, new Opened(size, context));
    }

    /** The opened range at {@code base}, or null. */
    Opened memoryAt(long base) {
        return memory.get(base);
    }

    /** The range at {@code base} left the session (closed, or with its context); true when it was an opened one. */
    boolean memoryGone(long base) {
        return memory.remove(base) != null;
    }

    /** Every opened range now, by base (a copy), taken: the session's end closes them. */
    Map<Long, Opened> takeMemory() {
        Map<Long, Opened> all = new java.util.TreeMap<>(memory);
        memory.keySet().removeAll(all.keySet());
        return all;
    }

    void eventOpened(long real) {
        events.add(real);
    }

    void eventGone(long real) {
        events.remove(real);
    }

    void vmmImported(long real) {
        vmm.add(real);
    }

    /** Whether {@code real} is an allocation the session imported from another session. */
    boolean imported(long real) {
        return vmm.contains(real);
    }

    void vmmGone(long real) {
        vmm.remove(real);
    }

    /** Why the session cannot be {@code what} (checkpointed, migrated, handed over) for what it opened; null: it can. */
    String refusal(long session, String what) {
        if (memory.isEmpty() && events.isEmpty() && vmm.isEmpty()) {
            return null;
        }
        return "session " + session + " cannot be " + what + ": it holds " + memory.size() + " IPC memory mapping(s), "
                + events.size() + " IPC event(s) and " + vmm.size() + " imported shareable allocation(s) of other"
                + " sessions, and sessions that share memory by IPC/shareable handles do not move together in this version";
    }
}
