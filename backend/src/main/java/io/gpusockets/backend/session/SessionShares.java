package io.gpusockets.backend.session;

import java.util.Map;
import java.util.Set;

/**
 * What one session opened of other sessions' shares ({@link ShareRegistry}): IPC memory ranges (cuIpcOpenMemHandle,
 * by base, with the context they were opened in, or, by the window route, the session's own mapping of the exporter's
 * window memory), IPC events (cuIpcOpenEventHandle, driver handles) and imported VMM
 * allocations (cuMemImportFromShareableHandle, driver handles). None is charged to the tenant: the exporter's
 * allocation already is. The session's end closes the memory it opened ({@link SessionCleanup}); its events and
 * VMM handles go as its other events and allocations do. In isolation context, the session's events that are members of
 * an IPC event share ({@link IpcEventShare}: exported or opened) leave it before the driver destroys them or their
 * context ({@link #eventGoing}, {@link #contextGoing}, {@link #leaveAll}). While it holds any, the session is refused a checkpoint, a
 * migration and a hand-over of itself alone ({@link #refusal}); a group checkpoint carries its window-memory mappings
 * ({@link #carried}), its opened IPC events ({@link #carriedEvents}: each with the token it was opened with, in every
 * isolation mode) and, in isolation context and shared, its imported VMM allocations ({@link #carriedVmm}: each with
 * its token), and refuses the rest.
 */
final class SessionShares {
    /**
     * An opened IPC memory range: its size, the context id it was opened in, and how many opens of it the session holds
     * (the driver answers a second open of one handle with the same pointer and counts it: each close takes one).
     */
    record Opened(long size, long context, int opens, Mapped mapped) {
    }

    /**
     * The window route (isolation context and shared; isolation process for an address-stable exporter): the
     * importer's own mapping of the exporter's window memory (its reservation of {@code span}
     * bytes at {@code reservation}, and each imported physical allocation's address, size and handle), which a close
     * unmaps, releases and frees ({@link IpcCalls#unmapWindow}); null for the driver's IPC mappings. {@code token} and
     * {@code device} (what it was opened with, for whose device) go into a group checkpoint's image, which maps it again
     * at the same address on restore.
     */
    record Mapped(long reservation, long span, long[] addresses, long[] sizes, long[] handles, byte[] token, int device) {
    }

    private final Map<Long, Opened> memory = new java.util.concurrent.ConcurrentHashMap<>();
    private final Set<Long> events = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final Set<Long> vmm = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** An open of IPC memory at {@code base}; true when it is the session's first of that range. */
    boolean memoryOpened(long base, long size, long context) {
        return memory.merge(base, new Opened(size, context, 1, null),
                (old, one) -> new Opened(old.size(), old.context(), old.opens() + 1, old.mapped())).opens() == 1;
    }

    /** Window memory of another session mapped at {@code base} (the window route): each open a mapping of its own. */
    void memoryMapped(long base, long size, Mapped mapped) {
        memory.put(base, new Opened(size, 0, 1, mapped));
    }

    /** The opened range at {@code base}, or null. */
    Opened memoryAt(long base) {
        return memory.get(base);
    }

    /** A close of the range at {@code base}; true when it was the session's last open of it (the range goes). */
    boolean memoryClosed(long base) {
        Opened left = memory.computeIfPresent(base, (k, o) -> o.opens() <= 1 ? null : new Opened(o.size(), o.context(),
                o.opens() - 1, o.mapped()));
        return left == null;
    }

    /** The range at {@code base} left the session (with its context, or its last close); true when it was an opened one. */
    boolean memoryGone(long base) {
        return memory.remove(base) != null;
    }

    /** Every opened range now, by base (a copy), taken: the session's end closes each as often as it was opened. */
    Map<Long, Opened> takeMemory() {
        Map<Long, Opened> all = new java.util.TreeMap<>(memory);
        memory.keySet().removeAll(all.keySet());
        return all;
    }

    /** What the session exported, by share kind: allocations' addresses, events and VMM handles (driver values). */
    private final Map<Byte, Set<Long>> exports = new java.util.concurrent.ConcurrentHashMap<>();

    void exported(byte kind, long object) {
        exports.computeIfAbsent(kind, k -> java.util.concurrent.ConcurrentHashMap.newKeySet()).add(object);
    }

    /** The session let go of {@code object}; true when it had exported it (its shares must go: {@link ShareBroker#withdraw}). */
    boolean unexported(byte kind, long object) {
        Set<Long> s = exports.get(kind);
        return s != null && s.remove(object);
    }

    void eventOpened(long real) {
        events.add(real);
    }

    /**
     * The event {@code real} goes (destroyed, or with its context or session): it leaves its IPC event share, if any
     * ({@link IpcEventShare#leave}), before the driver destroys it.
     */
    void eventGoing(long real) {
        IpcEventShare.Member m = members.remove(real);
        if (m != null) {
            m.share().leave(m);
        }
    }

    void eventGone(long real) {
        eventGoing(real);
        events.remove(real);
        eventTokens.remove(real);
        interprocess.remove(real);
    }

    /** Events made with CU_EVENT_INTERPROCESS (driver values): only those may be exported (as the driver requires). */
    private final Set<Long> interprocess = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /** Isolation context: this session's events that are members of an IPC event share, by driver value. */
    private final Map<Long, IpcEventShare.Member> members = new java.util.concurrent.ConcurrentHashMap<>();

    void interprocessEvent(long real) {
        interprocess.add(real);
    }

    boolean interprocess(long real) {
        return interprocess.contains(real);
    }

    /** The session's event {@code m.event()} joined an IPC event share. */
    void member(IpcEventShare.Member m) {
        members.put(m.event(), m);
    }

    /** The share member of the session's event {@code real}, or null (one map read: every cuEventRecord asks). */
    IpcEventShare.Member memberOf(long real) {
        return members.isEmpty() ? null : members.get(real);
    }

    /** The context {@code realContext} goes: its events leave their shares first. */
    void contextGoing(long realContext) {
        for (IpcEventShare.Member m : members.values()) {
            if (m.context() == realContext) {
                eventGoing(m.event());
            }
        }
    }

    /** The session ends: every event of it leaves its share, before its contexts go. */
    void leaveAll() {
        for (long event : members.keySet()) {
            eventGoing(event);
        }
    }

    /** The token each imported allocation (driver value) was imported with: a group checkpoint imports it again. */
    private final Map<Long, byte[]> vmmTokens = new java.util.concurrent.ConcurrentHashMap<>();

    /** The session imported another session's allocation {@code real} with {@code token}. */
    void vmmImported(long real, byte[] token) {
        vmm.add(real);
        vmmTokens.put(real, token.clone());
    }

    /**
     * The shareable VMM allocations the session imported from other sessions, by driver value: the token each was
     * imported with (what a group checkpoint of isolation context or shared carries, {@link CheckpointVmm#imported}).
     */
    Map<Long, byte[]> carriedVmm() {
        Map<Long, byte[]> out = new java.util.TreeMap<>();
        for (long h : vmm) {
            byte[] t = vmmTokens.get(h);
            if (t != null) {
                out.put(h, t);
            }
        }
        return out;
    }

    /** Whether {@code real} is an allocation the session imported from another session. */
    boolean imported(long real) {
        return vmm.contains(real);
    }

    void vmmGone(long real) {
        vmm.remove(real);
        vmmTokens.remove(real);
    }

    /**
     * What a group checkpoint carries of what the session opened: its window-memory mappings, by base (its IPC events:
     * {@link #carriedEvents}); what it cannot carry (the driver's IPC memory mappings, imported shareable VMM handles) is
     * added to {@code notCarried}, naming the session.
     */
    Map<Long, Opened> carried(long session, java.util.List<String> notCarried) {
        return carried(session, notCarried, false);
    }

    /**
     * As {@link #carried(long, java.util.List)}; with {@code vmmCarried} (sessions served in this process: isolation
     * context and shared) imported shareable VMM handles are carried ({@link #carriedVmm}) and not refused.
     */
    Map<Long, Opened> carried(long session, java.util.List<String> notCarried, boolean vmmCarried) {
        Map<Long, Opened> out = new java.util.TreeMap<>();
        int driverMappings = 0;
        for (Map.Entry<Long, Opened> e : memory.entrySet()) {
            if (e.getValue().mapped() != null) {
                out.put(e.getKey(), e.getValue());
            } else {
                driverMappings++;
            }
        }
        if (driverMappings > 0) {
            notCarried.add("session " + session + "'s " + driverMappings + " IPC memory mapping(s) of the driver (isolation"
                    + " process)");
        }
        long unknown = events.stream().filter(e -> !eventTokens.containsKey(e)).count();
        if (unknown > 0) { // every open records its token (IpcCalls): none should be left
            notCarried.add("session " + session + "'s " + unknown + " IPC event(s) opened without a token");
        }
        if (!vmmCarried && !vmm.isEmpty()) {
            notCarried.add("session " + session + "'s " + vmm.size() + " imported shareable VMM allocation(s) (isolation"
                    + " process)");
        }
        return out;
    }

    /**
     * The token each IPC event the session opened was opened with, by the event's driver value (what a group checkpoint
     * carries of its opened events, {@link #carriedEvents}): a member of a share (isolation context) or the driver's
     * opened event (isolation process).
     */
    private final Map<Long, byte[]> eventTokens = new java.util.concurrent.ConcurrentHashMap<>();

    /** The session's event {@code real} was opened with {@code token} (a member of a share, or the driver's opened event). */
    void eventOpened(long real, byte[] token) {
        eventOpened(real);
        eventTokens.put(real, token.clone());
    }

    /** The IPC events the session opened, by driver value: the token each was opened with. */
    Map<Long, byte[]> carriedEvents() {
        Map<Long, byte[]> out = new java.util.TreeMap<>();
        for (long e : events) {
            byte[] t = eventTokens.get(e);
            if (t != null) {
                out.put(e, t);
            }
        }
        return out;
    }

    /** Why the session cannot be {@code what} (checkpointed, migrated, handed over) for what it opened; null: it can. */
    String refusal(long session, String what) {
        if (memory.isEmpty() && events.isEmpty() && vmm.isEmpty()) {
            return null;
        }
        return "session " + session + " cannot be " + what + ": it holds " + memory.size() + " IPC memory mapping(s), "
                + events.size() + " IPC event(s) and " + vmm.size() + " imported shareable allocation(s) of other"
                + " sessions: sessions that share IPC memory are checkpointed, migrated and handed over together (name"
                + " them all to gpusockets checkpoint or gpusockets migrate), and alone they do not move";
    }
}
