package io.gpusockets.backend.session;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The sessions that share IPC memory, checkpointed together and their shares made again where their images are
 * restored (issue 24 item 1), in every isolation mode: in context and shared every session is in this process and
 * this class does it all; in process each session lives in a worker and the front leads them ({@code
 * Workers#checkpointGroup}, {@code Workers#reshare}) through the parts here that run where the session is:
 * {@link #checkFront} in the front, {@link #writeMember}, {@link #reExportInWorker} and {@link #reOpen} in each worker.
 *
 * <p>A group checkpoint ({@link #checkpoint}) names every session linked by shares ({@link ShareRegistry#group}; one
 * left out is refused, naming it). All are drained first, one after the other, each holding its new calls, so that
 * none writes the memory it shares while another's image is taken; then each image is written as a single session's
 * is, plus what it shares ({@link CheckpointImage.Shares}): the IPC memory of its address window and the IPC events
 * it exported (the token's id and secret, the allocation's address and size, or the event's handle id: the contents
 * and the event are in its own image, as every allocation and event), and what it opened (the token, and the memory's
 * address and the reservation that maps it, or the opened event's handle id and context). Only then are they let go
 * or, with stop, frozen together. A group that holds what is not carried is refused before anything is drained (and
 * checked again once drained), naming it: in isolation process shareable VMM handles another session imported, the
 * driver's IPC memory mappings (isolation process, sessions without address-stable memory), a mapping or an imported
 * VMM allocation whose exporter freed the allocation, an opened event re-exported. In isolation process an IPC event
 * is the driver's: its export carries the token and the exporter's event, its open the token and the opener's event,
 * as in context mode, so the images are alike in every mode.
 *
 * <p>Shareable VMM handles (isolation context and shared): the exporter's allocation is in its image as its own
 * ({@link CheckpointVmm}) and its export is a share of kind VMM (the token's id and secret, the allocation's handle id
 * and size); the importer's image holds, for each handle it imported, the token, its handle id, references, size and
 * mappings, and the access settings over them ({@link CheckpointVmm#imported}, {@link CheckpointImage.Imported}), not the
 * memory, which {@link CheckpointVmm} leaves out of its records and contents. A restore exports the replayed allocation
 * again under the old token ({@link #reExport}), then {@link #reOpen} imports it again in the importer, only from the
 * export of a session restored with it, under its old handle id, maps it at its old addresses and sets its access.
 *
 * <p>A restore brings the shares back in two steps once the sessions are restored and before any may resume:
 * {@link #reExport} registers each restored exporter's memory and events again under their old tokens (the same id
 * and secret, so that the tokens the programs hold stay valid; an event joins a new {@link IpcEventShare} as its first
 * member), then {@link #reOpen} looks each opened token up as an open would and maps the exporter's physical
 * allocations at the opener's old address, and makes each opened event again under its old handle id, joined to the
 * exporter's share, or in isolation process opened through the driver from the exporter's new IPC handle, and imports
 * each imported VMM handle again (isolation context and shared) (its record,
 * a cuIpcOpenEventHandle, is not replayed: {@link SessionRestore}). Refused, the restore
 * undone, when the driver gives another address or the exporter's image was not restored in this backend. An event's
 * recordings are not carried: the sessions were drained, so every event was complete, as a new one is.
 *
 * <p>A migration of a group ({@code BackendServer#migrateGroup}, {@code Migration#runGroup}) uses the same checks
 * ({@link #checkTogether}, {@link #checkDrained}), the same drain ({@link #drainedTogether}) and the same shares in each
 * image ({@link Session#writeMigrationImage}); its target makes them again in the same order.
 */
public final class GroupCheckpoint {
    private GroupCheckpoint() {
    }

    /**
     * Checkpoints {@code group} together to {@code files} (one each, in order), with {@code stop} leaving them all
     * frozen. Refused (every session running on) when a session it shares with is not named, for what cannot be
     * carried, or for what a checkpoint of any of them refuses; a failure deletes every image written.
     */
    public static List<CheckpointResult> checkpoint(List<Session> group, ShareRegistry registry, List<Path> files,
                                                    boolean stop, CheckpointProgress progress)
            throws CheckpointRefused, IOException, InterruptedException {
        if (group.isEmpty() || group.size() != files.size()) {
            throw new IllegalArgumentException("sessions=" + group.size() + " files=" + files.size());
        }
        Set<Long> ids = new LinkedHashSet<>();
        for (Session s : group) {
            if (!ids.add(s.id())) {
                throw new CheckpointRefused("session " + s.id() + " is named twice");
            }
        }
        if (new TreeSet<>(files.stream().map(p -> p.toAbsolutePath().normalize()).toList()).size() != files.size()) {
            throw new CheckpointRefused("two sessions of the group would write one image file");
        }
        checkTogether(group, registry, "checkpoint", "gpusockets checkpoint %s --to DIR");
        CheckpointResult[] results = new CheckpointResult[group.size()];
        long[] drainNanos = new long[group.size()];
        drainedFrom(group, 0, stop, progress, drainNanos, () -> {
            checkDrained(group, registry, "checkpoint");
            boolean ok = false;
            try {
                for (int i = 0; i < group.size(); i++) {
                    Session s = group.get(i);
                    results[i] = s.writeImage(files.get(i), progress, drainNanos[i], shares(s, registry));
                }
                ok = true;
            } finally {
                if (!ok) {
                    for (Path f : files) {
                        java.nio.file.Files.deleteIfExists(f);
                    }
                }
            }
        });
        return List.of(results);
    }

    /**
     * The checks before a group is moved ({@link #checkpoint}, and a migration of a group,
     * {@code BackendServer#migrateGroup}), in the sessions' running state: every session is named once, every session
     * linked to them by shares is named (refused, naming those left out and {@code command}, a format with one %s for
     * the ids, as the way to name them all), each can be checkpointed, and the group holds nothing a group move does not
     * carry. {@code what}: the move's name in the messages ("checkpoint", "migration").
     */
    public static void checkTogether(List<Session> group, ShareRegistry registry, String what, String command)
            throws CheckpointRefused {
        Set<Long> ids = new LinkedHashSet<>();
        for (Session s : group) {
            if (!ids.add(s.id())) {
                throw new CheckpointRefused("session " + s.id() + " is named twice");
            }
        }
        checkNamed(ids, registry, what, command);
        for (Session s : group) {
            s.requireCheckpointable();
        }
        refuseNotCarried(group, registry, ids);
    }

    /**
     * Refused, naming those left out and {@code command} (a format with one %s for the ids) as the way to name them all,
     * when a session linked to {@code ids} by shares is not among them: the part of {@link #checkTogether} that the
     * front of isolation process makes itself (its sessions live in workers, {@code Workers#checkpointGroup}).
     */
    public static void checkNamed(Set<Long> ids, ShareRegistry registry, String what, String command)
            throws CheckpointRefused {
        Set<Long> missing = registry.group(ids);
        missing.removeAll(ids);
        if (!missing.isEmpty()) {
            throw new CheckpointRefused("session(s) " + join(ids) + " share memory or events with session(s) "
                    + join(missing) + ", which this " + what + " does not name: sessions that share move together (name"
                    + " them all: " + String.format(command, join(registry.group(ids)).replace(", ", " ")) + ")");
        }
    }

    /**
     * The checks of {@link #checkTogether} again once the whole group is drained: nothing of the group shares anew, but
     * a session outside it may have opened an export meanwhile (refused, naming it).
     */
    public static void checkDrained(List<Session> group, ShareRegistry registry, String what) throws CheckpointRefused {
        Set<Long> ids = new LinkedHashSet<>();
        for (Session s : group) {
            ids.add(s.id());
        }
        Set<Long> joined = registry.group(ids);
        joined.removeAll(ids);
        if (!joined.isEmpty()) {
            throw new CheckpointRefused("session(s) " + join(joined) + " opened memory of session(s) " + join(ids)
                    + " during the group " + what + "'s drain: name them too (the sessions keep running)");
        }
        refuseNotCarried(group, registry, ids);
    }

    /**
     * Refused, naming each, for what the group holds that a group checkpoint does not carry ({@link ShareRegistry#carried},
     * {@link SessionShares#carried}), and for an opened range whose export is gone (its exporter freed the allocation:
     * the mapping outlived it, and no image holds that memory).
     */
    private static void refuseNotCarried(List<Session> group, ShareRegistry registry, Set<Long> ids)
            throws CheckpointRefused {
        List<String> notCarried = new ArrayList<>();
        Set<Long> exported = exportsCarried(ids, registry, notCarried, true);
        for (Session s : group) {
            openedNotCarried(s, registry.carried(s.id(), new ArrayList<>(), true), exported, notCarried, true);
        }
        refuse(ids, notCarried);
    }

    /**
     * The ids of the tokens a group checkpoint of {@code ids} carries ({@link ShareRegistry#carried}); what the
     * sessions exported that it does not carry is added to {@code notCarried}, naming it.
     */
    public static Set<Long> exportsCarried(Set<Long> ids, ShareRegistry registry, List<String> notCarried) {
        return exportsCarried(ids, registry, notCarried, false);
    }

    /** As {@link #exportsCarried(Set, ShareRegistry, List)}; {@code vmm}: shareable VMM handles are carried too. */
    private static Set<Long> exportsCarried(Set<Long> ids, ShareRegistry registry, List<String> notCarried, boolean vmm) {
        Set<Long> exported = new java.util.HashSet<>();
        for (long id : ids) {
            for (ShareRegistry.Carried c : registry.carried(id, notCarried, vmm)) {
                exported.add(c.id());
            }
        }
        return exported;
    }

    /**
     * What drained session {@code s} holds that its group's checkpoint does not carry, added to {@code notCarried}
     * naming it: what it opened that is not carried ({@link SessionShares#carried}), an opened range or event whose
     * export is not among the group's carried tokens ({@code exported}: its exporter freed or destroyed it), an event
     * it opened and exported again. {@code exports}: what it exported that the group carries. With {@code vmm} (sessions
     * served in this process: isolation context and shared) its imported shareable VMM handles are carried, refused
     * when their export is not among {@code exported} (the exporter freed the allocation), and an exported one another
     * session imported when the session released its handle (its image names the allocation by its handle id).
     */
    static void openedNotCarried(Session s, List<ShareRegistry.Carried> exports, Set<Long> exported,
                                 List<String> notCarried, boolean vmm) {
        if (vmm) {
            for (byte[] token : s.sharing().carriedVmm().values()) {
                if (!exported.contains(ShareRegistry.idOf(token))) {
                    notCarried.add("session " + s.id() + "'s imported shareable VMM allocation whose exporter freed it");
                }
            }
            for (ShareRegistry.Carried c : exports) {
                if (c.kind() == ShareRegistry.KIND_VMM && !c.openers().isEmpty()
                        && s.handles().idOf(io.gpusockets.protocol.api.ParamType.MEMH, c.address()) == 0) {
                    notCarried.add("session " + s.id() + "'s shareable VMM allocation imported by session(s) "
                            + join(c.openers()) + " that it released (it only maps it)");
                }
            }
        }
        for (Map.Entry<Long, SessionShares.Opened> e : s.sharing().carried(s.id(), notCarried, vmm).entrySet()) {
            if (!exported.contains(ShareRegistry.idOf(e.getValue().mapped().token()))) {
                notCarried.add(String.format("session %d's opened IPC memory at 0x%x, whose exporter freed the"
                        + " allocation (the mapping outlived it)", s.id(), e.getKey()));
            }
        }
        Map<Long, byte[]> openedEvents = s.sharing().carriedEvents();
        for (ShareRegistry.Carried c : exports) {
            if (c.kind() == ShareRegistry.KIND_EVENT && openedEvents.containsKey(c.address())) {
                notCarried.add("session " + s.id() + "'s IPC event that it opened and exported again");
            }
        }
        for (byte[] token : openedEvents.values()) {
            if (!exported.contains(ShareRegistry.idOf(token))) {
                notCarried.add("session " + s.id() + "'s opened IPC event whose exporter destroyed it");
            }
        }
    }

    /** Refused, naming each, when {@code notCarried} is not empty. */
    private static void refuse(Set<Long> ids, List<String> notCarried) throws CheckpointRefused {
        if (!notCarried.isEmpty()) {
            throw new CheckpointRefused("session(s) " + join(ids) + " cannot be checkpointed together: a group checkpoint"
                    + " carries IPC events, and the IPC memory of address windows and shareable VMM handles of isolation context or"
                    + " shared, not "
                    + String.join("; ", notCarried) + " (the sessions keep running)");
        }
    }

    /**
     * The front's checks of a group in isolation process (its sessions live in workers, {@code Workers#checkpointGroup}),
     * before the drain and again once drained: every session linked by shares is named ({@link #checkNamed}), and what
     * they exported is carried. Returns the ids of the carried tokens; each worker checks its session itself
     * ({@link #writeMember}).
     */
    public static Set<Long> checkFront(Set<Long> ids, ShareRegistry registry, String what, String command)
            throws CheckpointRefused {
        checkNamed(ids, registry, what, command);
        List<String> notCarried = new ArrayList<>();
        Set<Long> exported = exportsCarried(ids, registry, notCarried);
        refuse(ids, notCarried);
        return exported;
    }

    /** Refused unless {@code s} can be checkpointed at all ({@link Session#requireCheckpointable}). */
    public static void requireCheckpointable(Session s) throws CheckpointRefused {
        s.requireCheckpointable();
    }

    /**
     * Writes the image of drained session {@code s}, a member of a group checkpointed together whose sessions live in
     * other processes (isolation process: its worker runs this; the front made the group's checks and sends what
     * {@code s} exported, {@code exports}, and the ids of every token the group carries, {@code exported}); refused,
     * naming it, for what {@code s} opened that is not carried ({@link #openedNotCarried}). A failure deletes the file.
     */
    public static CheckpointResult writeMember(Session s, java.nio.file.Path file, CheckpointProgress progress,
                                               long drainNanos, List<ShareRegistry.Carried> exports, Set<Long> exported)
            throws CheckpointRefused, IOException {
        List<String> notCarried = new ArrayList<>();
        openedNotCarried(s, exports, exported, notCarried, false);
        refuse(Set.of(s.id()), notCarried);
        boolean ok = false;
        try {
            CheckpointResult r = s.writeImage(file, progress, drainNanos, shares(s, exports, false));
            ok = true;
            return r;
        } finally {
            if (!ok) {
                java.nio.file.Files.deleteIfExists(file);
            }
        }
    }

    /** What runs once a whole group is drained ({@link #drainedTogether}). */
    @FunctionalInterface
    public interface Work {
        void run() throws CheckpointRefused, IOException;
    }

    /**
     * Drains every session of {@code group}, one inside the other's drain (each holding its new calls), runs
     * {@code work}, then lets them all go or, with {@code stop}, leaves them all frozen ({@code why} says where they
     * went); {@code drainNanos[i]}: how long session i's drain took. A refusal or failure of {@code work} lets every
     * session run on.
     */
    public static void drainedTogether(List<Session> group, boolean stop, CheckpointProgress progress, long[] drainNanos,
                                       String why, Work work) throws CheckpointRefused, IOException, InterruptedException {
        drainedFrom(group, 0, stop, progress, drainNanos, why, work);
    }

    /** Drains {@code group}'s sessions from {@code i} on, each inside the previous one's drain, then runs {@code work}. */
    private static void drainedFrom(List<Session> group, int i, boolean stop, CheckpointProgress progress, long[] drainNanos,
                                    Work work) throws CheckpointRefused, IOException, InterruptedException {
        drainedFrom(group, i, stop, progress, drainNanos, "checkpointed with its group (session(s) "
                + join(group.stream().map(Session::id).toList()) + ")"
                + (stop ? " and stopped (frozen: it resumes where the image is restored)" : ""), work);
    }

    private static void drainedFrom(List<Session> group, int i, boolean stop, CheckpointProgress progress, long[] drainNanos,
                                    String why, Work work) throws CheckpointRefused, IOException, InterruptedException {
        Session s = group.get(i);
        s.drained(stop, progress, nanos -> {
            drainNanos[i] = nanos;
            if (i + 1 < group.size()) {
                try {
                    drainedFrom(group, i + 1, stop, progress, drainNanos, why, work);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted during the group's drain");
                }
            } else {
                work.run();
            }
            return null;
        }, why);
    }

    /** What drained session {@code s} shares, for its image (a group checkpoint's, or a group migration's). */
    static CheckpointImage.Shares shares(Session s, ShareRegistry registry) throws IOException {
        List<String> notCarried = new ArrayList<>();
        List<ShareRegistry.Carried> carried = registry.carried(s.id(), notCarried, true);
        if (!notCarried.isEmpty()) { // something new since the check: the session was drained in between
            throw new IOException("session " + s.id() + ": " + String.join("; ", notCarried) + " cannot be carried");
        }
        return shares(s, carried, true);
    }

    /**
     * What drained session {@code s} shares, for its image, {@code carried} being what it exported that is carried;
     * {@code vmm}: its shareable VMM handles, exported and imported, are carried (isolation context and shared).
     */
    private static CheckpointImage.Shares shares(Session s, List<ShareRegistry.Carried> carried, boolean vmm)
            throws IOException {
        List<String> notCarried = new ArrayList<>();
        List<CheckpointImage.Export> exports = new ArrayList<>();
        for (ShareRegistry.Carried c : carried) {
            long object = c.address();
            if (c.kind() == ShareRegistry.KIND_EVENT) {
                object = s.handles().idOf(io.gpusockets.protocol.api.ParamType.EVENT, c.address());
                if (object == 0) {
                    throw new IOException("session " + s.id() + ": its exported IPC event has no handle");
                }
            } else if (c.kind() == ShareRegistry.KIND_VMM) {
                if (!vmm) {
                    throw new IOException("session " + s.id() + ": its shareable VMM handle cannot be carried here");
                }
                object = s.vmm().holds(c.address()) ? s.handles().idOf(io.gpusockets.protocol.api.ParamType.MEMH,
                        c.address()) : 0;
                if (object == 0) {
                    if (!c.openers().isEmpty()) {
                        throw new IOException("session " + s.id() + ": its shareable VMM allocation imported by session(s) "
                                + join(c.openers()) + " has no handle (released)");
                    }
                    continue; // released and nobody imported it: not carried, as for a session alone
                }
            }
            exports.add(new CheckpointImage.Export(c.kind(), c.id(), c.secret(), object, c.size()));
        }
        List<CheckpointImage.OpenedEvent> events = new ArrayList<>();
        for (Map.Entry<Long, byte[]> e : s.sharing().carriedEvents().entrySet()) {
            SessionHandles.Entry h = s.handles().entryOf(io.gpusockets.protocol.api.ParamType.EVENT, e.getKey());
            if (h == null) {
                throw new IOException("session " + s.id() + ": its opened IPC event has no handle");
            }
            events.add(new CheckpointImage.OpenedEvent(e.getValue(), h.id(), h.context()));
        }
        List<CheckpointImage.Opened> opened = new ArrayList<>();
        for (Map.Entry<Long, SessionShares.Opened> e : s.sharing().carried(s.id(), notCarried, vmm).entrySet()) {
            SessionShares.Mapped m = e.getValue().mapped();
            opened.add(new CheckpointImage.Opened(m.token(), e.getKey(), e.getValue().size(), m.reservation(), m.span(),
                    m.device()));
        }
        if (!notCarried.isEmpty()) { // something new since the check: the session was drained in between
            throw new IOException("session " + s.id() + ": " + String.join("; ", notCarried) + " cannot be carried");
        }
        CheckpointImage.Shares imported;
        try {
            imported = vmm ? CheckpointVmm.imported(s) : CheckpointImage.Shares.NONE;
        } catch (IllegalStateException e) {
            throw new IOException("session " + s.id() + ": " + e.getMessage());
        }
        return new CheckpointImage.Shares(List.copyOf(exports), List.copyOf(opened), List.copyOf(events),
                imported.imported(), imported.importedAccesses());
    }

    /**
     * A restored session's exports ({@link Session#restoredShares}) registered again in {@code registry} under their
     * old tokens, its allocations' physical memory exported anew. Refused, naming the export, when that cannot be.
     */
    public static void reExport(Session s, ShareRegistry registry) throws CheckpointRefused {
        for (CheckpointImage.Export e : s.restoredShares().exports()) {
            if (e.kind() == ShareRegistry.KIND_EVENT) {
                reExportEvent(s, registry, e);
                continue;
            }
            if (e.kind() == ShareRegistry.KIND_VMM) {
                reExportVmm(s, registry, e);
                continue;
            }
            try {
                ShareRegistry.Window w = IpcCalls.windowOf(s, e.address(), e.size());
                registry.restore(s.id(), s.tenant().name(), e.tokenId(), e.secret(), e.size(), w, e.address());
                s.sharing().exported(ShareRegistry.KIND_MEMORY, e.address());
            } catch (CallRejected | ShareRegistry.Refused x) {
                throw new CheckpointRefused(String.format("restore of session %d refused: its IPC memory export of 0x%x"
                        + " (%d bytes) cannot be made again: %s", s.id(), e.address(), e.size(), x.getMessage()));
            }
        }
    }

    /**
     * {@link #reExport} of a shareable VMM handle: the replayed allocation (its handle id in the image) exported again
     * through the driver as a POSIX descriptor, registered under the old token. Refused unless the session holds that
     * allocation, of that size, made with a shareable type requested (as cuMemExportToShareableHandle requires).
     */
    private static void reExportVmm(Session s, ShareRegistry registry, CheckpointImage.Export e) throws CheckpointRefused {
        String what = "restore of session " + s.id() + " refused: its shareable VMM handle export (handle " + e.address()
                + ") cannot be made again: ";
        SessionHandles.Entry h = s.handles().get(e.address(), io.gpusockets.protocol.api.ParamType.MEMH);
        SessionVmm.Made made = h == null ? null : s.vmm().madeOf(h.real());
        if (made == null || s.vmm().sizeOf(h.real()) != e.size()) {
            throw new CheckpointRefused(what + "the session made no allocation of that handle and size");
        }
        int types = java.nio.ByteBuffer.wrap(made.prop()).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                .getInt((int) io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPES);
        if ((types & VmmCalls.SHAREABLE_TYPES) == 0) {
            throw new CheckpointRefused(what + "the allocation was not made with a shareable handle type requested");
        }
        int fd;
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment out = arena.allocate(8);
            int r = s.host().driver().cuMemExportToShareableHandle(out, h.real(),
                    io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
            if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                throw new CheckpointRefused(what + "cuMemExportToShareableHandle failed: "
                        + io.gpusockets.protocol.api.CuResult.name(r));
            }
            fd = out.get(java.lang.foreign.ValueLayout.JAVA_INT, 0);
        }
        try {
            registry.restoreVmm(s.id(), s.tenant().name(), e.tokenId(), e.secret(), e.size(), fd, h.real());
        } catch (ShareRegistry.Refused x) {
            throw new CheckpointRefused(what + x.getMessage());
        }
        s.sharing().exported(ShareRegistry.KIND_VMM, h.real());
    }

    /** {@link #reExport} of an IPC event: the replayed event joins a new share, registered under the old token. */
    private static void reExportEvent(Session s, ShareRegistry registry, CheckpointImage.Export e) throws CheckpointRefused {
        String what = "restore of session " + s.id() + " refused: its IPC event export (event " + e.address()
                + ") cannot be made again: ";
        SessionHandles.Entry ev = s.handles().get(e.address(), io.gpusockets.protocol.api.ParamType.EVENT);
        SessionHandles.Entry ctx = ev == null ? null : s.handles().get(ev.context(), io.gpusockets.protocol.api.ParamType.CTX);
        if (ctx == null) {
            throw new CheckpointRefused(what + "the event or its context is not there after the replay");
        }
        IpcEventShare.Member m;
        try {
            m = inContext(s, ctx.real(), what, () -> registry.broker(s.id(), s.tenant().name()).newEventShare()
                    .join(s.id(), s.host().driver(), ev.real()));
        } catch (CallRejected x) {
            throw new CheckpointRefused(what + x.getMessage());
        }
        try {
            registry.restoreEvent(s.id(), s.tenant().name(), e.tokenId(), e.secret(), m.share(), ev.real());
        } catch (ShareRegistry.Refused x) {
            m.share().leave(m);
            throw new CheckpointRefused(what + x.getMessage());
        }
        s.sharing().member(m);
        s.sharing().exported(ShareRegistry.KIND_EVENT, ev.real());
    }

    @FunctionalInterface
    private interface InContext<T> {
        T run() throws CallRejected;
    }

    /** Runs {@code work} with the real context {@code ctx} current on this thread. */
    private static <T> T inContext(Session s, long ctx, String what, InContext<T> work) throws CheckpointRefused, CallRejected {
        io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
        int r = real.cuCtxPushCurrent(ctx);
        if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
            throw new CheckpointRefused(what + "its context cannot be made current: "
                    + io.gpusockets.protocol.api.CuResult.name(r));
        }
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            try {
                return work.run();
            } finally {
                real.cuCtxPopCurrent(arena.allocate(8));
            }
        }
    }

    /**
     * A restored session's opened IPC events ({@link Session#restoredShares}): each a new event in its context, under
     * its old handle id, joined to the exporter's share, or (isolation process) opened through the driver from the
     * exporter's new IPC handle; the token looked up through the session's broker (registered again first,
     * {@link #reExport}, {@link #reExportInWorker}).
     */
    private static void reOpenEvents(Session s) throws CheckpointRefused {
        for (CheckpointImage.OpenedEvent o : s.restoredShares().openedEvents()) {
            String what = "restore of session " + s.id() + " refused: its opened IPC event (event " + o.event()
                    + ") cannot be made again: ";
            ShareRegistry.Found f;
            try {
                f = s.shares().lookup(ShareRegistry.KIND_EVENT, o.token());
            } catch (ShareRegistry.Refused x) {
                throw new CheckpointRefused(what + x.getMessage() + " (restore the images of the sessions it shares with"
                        + " together: gpusockets restore FILE...)");
            }
            SessionHandles.Entry ctx = s.handles().get(o.context(), io.gpusockets.protocol.api.ParamType.CTX);
            if (f.events() == null && (f.driverBytes() == null || s.shares().sameProcess()) || ctx == null) {
                throw new CheckpointRefused(what + (ctx == null ? "its context is not there after the replay"
                        : "the exporter's event is neither a share of this process nor the driver's IPC event"));
            }
            try {
                long real = inContext(s, ctx.real(), what, () -> f.events() != null
                        ? IpcCalls.joinEvent(s, f.events(), o.token()) : openDriverEvent(s, f.driverBytes(), o.token()));
                CheckpointRecorder.Issued pin = new CheckpointRecorder.Issued(new long[] {o.event()});
                CheckpointRecorder.ISSUED.set(pin);
                long id;
                try {
                    id = s.handles().intern(io.gpusockets.protocol.api.ParamType.EVENT, real, 0, o.context());
                } finally {
                    CheckpointRecorder.ISSUED.remove();
                }
                if (id != o.event()) {
                    throw new CheckpointRefused(what + "it came back as event " + id);
                }
            } catch (CallRejected x) {
                throw new CheckpointRefused(what + x.getMessage());
            }
        }
    }

    /**
     * A restored session's opened IPC memory ({@link Session#restoredShares}) mapped again at the address it had, from
     * the exporter's share looked up through the session's broker (registered again first, {@link #reExport},
     * {@link #reExportInWorker}: in isolation process the exporter's physical allocations cross to this worker as
     * descriptors), then its opened events ({@link #reOpenEvents}). Refused, naming the range, when the token is not
     * there or the mapping cannot be made at that address.
     */
    public static void reOpen(Session s) throws CheckpointRefused {
        reOpen(s, null);
    }

    /**
     * {@link #reOpen(Session)} of a session restored in this process with the sessions {@code group} (isolation context
     * and shared), which also imports again the shareable VMM handles it had imported ({@link #reImport}), each from
     * the export of one of {@code group}; null: a worker of isolation process, which refuses them.
     */
    public static void reOpen(Session s, Set<Long> group) throws CheckpointRefused {
        for (CheckpointImage.Opened o : s.restoredShares().opened()) {
            String what = String.format("restore of session %d refused: its opened IPC memory at 0x%x (%d bytes) cannot be"
                    + " mapped again: ", s.id(), o.base(), o.size());
            ShareRegistry.Found f;
            try {
                f = s.shares().lookup(ShareRegistry.KIND_MEMORY, o.token());
            } catch (ShareRegistry.Refused x) {
                throw new CheckpointRefused(what + x.getMessage() + " (restore the images of the sessions it shares with"
                        + " together: gpusockets restore FILE...)");
            }
            if (f.window() == null || f.size() != o.size() || f.window().span() != o.span()
                    || o.reservation() + f.window().start() != o.base()) {
                ShareRegistry.closeAll(f.window());
                throw new CheckpointRefused(what + "the exporter's memory is not laid out as it was");
            }
            io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                long ctx = contextOn(s, o.device(), arena);
                if (ctx == 0) {
                    ShareRegistry.closeAll(f.window());
                    throw new CheckpointRefused(what + "the session has no context on device " + o.device());
                }
                int r = real.cuCtxPushCurrent(ctx); // the driver maps in a context of the device
                if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    ShareRegistry.closeAll(f.window());
                    throw new CheckpointRefused(what + "its context cannot be made current: "
                            + io.gpusockets.protocol.api.CuResult.name(r));
                }
                try {
                    IpcCalls.mapWindow(s, f.window(), o.size(), o.token(), o.device(), o.reservation());
                } finally {
                    real.cuCtxPopCurrent(arena.allocate(8));
                }
            } catch (CallRejected x) {
                throw new CheckpointRefused(what + x.getMessage() + " (" + io.gpusockets.protocol.api.CuResult.name(x.result)
                        + ")");
            }
        }
        reOpenEvents(s);
        reImport(s, group);
        s.restoredShares(CheckpointImage.Shares.NONE);
    }

    /**
     * A restored session's imported shareable VMM handles ({@link CheckpointImage.Imported}) made again: each token
     * looked up as an import would (the same tenant), and it must name the export of a session of {@code group} (an
     * image naming another session's memory is refused), of the size the image says; the driver imports the allocation
     * from the registry's descriptor, under its old handle id, then maps it at each old address (inside a reservation
     * of the session, over no mapping), retains or releases it to the references it had, and the access settings over
     * its mappings are made again in order. Not charged (the exporter's allocation is). Refused, naming it, when any
     * cannot be; what was made stays with the session, whose end (the restore undone) frees it.
     */
    private static void reImport(Session s, Set<Long> group) throws CheckpointRefused {
        CheckpointImage.Shares shares = s.restoredShares();
        if (shares.imported().isEmpty() && shares.importedAccesses().isEmpty()) {
            return;
        }
        String refused = "restore of session " + s.id() + " refused: ";
        if (group == null) {
            throw new CheckpointRefused(refused + "its imported shareable VMM handles are not carried in isolation process");
        }
        io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
        SessionVmm vmm = s.vmm();
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            for (CheckpointImage.Imported m : shares.imported()) {
                String what = refused + "its imported shareable VMM handle (" + m.size() + " bytes, handle " + m.handle()
                        + ") cannot be made again: ";
                if (m.size() <= 0 || m.references() < 0 || m.references() == 0 && (m.handle() != 0 || m.mappings().isEmpty())
                        || m.references() > 0 && m.handle() == 0
                        || m.references() > 1 && m.mappings().isEmpty() || m.mappings().size() > 1 << 16) {
                    throw new CheckpointRefused(what + "the image's references, handle and mappings do not agree");
                }
                ShareRegistry.Found f;
                try {
                    f = s.shares().lookup(ShareRegistry.KIND_VMM, m.token());
                } catch (ShareRegistry.Refused x) {
                    throw new CheckpointRefused(what + x.getMessage() + " (restore the images of the sessions it shares"
                            + " with together: gpusockets restore FILE...)");
                }
                long handle;
                try {
                    if (!group.contains(f.exporter()) || f.exporter() == s.id() || f.size() != m.size()) {
                        throw new CheckpointRefused(what + (f.size() != m.size() ? "the export has " + f.size() + " bytes"
                                : "the token is no export of another session restored with it"));
                    }
                    handle = inContext(s, anyContext(s, what), what, () -> {
                        java.lang.foreign.MemorySegment out = arena.allocate(8);
                        int r = real.cuMemImportFromShareableHandle(out, java.lang.foreign.MemorySegment.ofAddress(f.fd()),
                                io.gpusockets.protocol.structs.MemoryProps.HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
                        if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                            throw new CallRejected(r, "cuMemImportFromShareableHandle failed");
                        }
                        return out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
                    });
                } catch (CallRejected x) {
                    throw new CheckpointRefused(what + x.getMessage() + " ("
                            + io.gpusockets.protocol.api.CuResult.name(x.result) + ")");
                } finally {
                    io.gpusockets.transport.vsock.DescriptorPassing.close(f.fd());
                }
                if (vmm.sizeOf(handle) >= 0) {
                    real.cuMemRelease(handle);
                    throw new CheckpointRefused(what + "the driver gave an allocation the session holds already");
                }
                vmm.created(handle, m.size()); // not charged: the exporter's cuMemCreate is
                s.sharing().vmmImported(handle, m.token());
                if (m.handle() != 0) {
                    CheckpointRecorder.ISSUED.set(new CheckpointRecorder.Issued(new long[] {m.handle()}));
                    long id;
                    try {
                        id = s.handles().intern(io.gpusockets.protocol.api.ParamType.MEMH, handle, 0, 0);
                    } finally {
                        CheckpointRecorder.ISSUED.remove();
                    }
                    if (id != m.handle()) {
                        throw new CheckpointRefused(what + "it came back as handle " + id);
                    }
                }
                for (CheckpointImage.ImportedMapping g : m.mappings()) {
                    SessionVmm.Reservation res = vmm.reservationHolding(g.base(), g.size());
                    if (res == null || vmm.overlapsMapping(res, g.base(), g.size()) || g.offset() < 0
                            || g.offset() > m.size() - g.size()) {
                        throw new CheckpointRefused(what + String.format("its mapping 0x%x+%d (offset %d) is not inside a"
                                + " free range of a reservation of the session, or not inside the allocation", g.base(),
                                g.size(), g.offset()));
                    }
                    long ctx = res.device < 0 ? 0 : contextOn(s, res.device, arena);
                    if (ctx == 0) {
                        throw new CheckpointRefused(what + "the session has no context on the reservation's device");
                    }
                    try {
                        inContext(s, ctx, what, () -> {
                            int r = real.cuMemMap(g.base(), g.size(), g.offset(), handle, 0);
                            if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                                throw new CallRejected(r, String.format("cuMemMap at 0x%x failed", g.base()));
                            }
                            return null;
                        });
                    } catch (CallRejected x) {
                        throw new CheckpointRefused(what + x.getMessage() + " ("
                                + io.gpusockets.protocol.api.CuResult.name(x.result) + ")");
                    }
                    vmm.mapped(res, new SessionVmm.Mapping(g.base(), g.size(), handle, g.offset()));
                    s.memory().add(new SessionMemory.Range(g.base(), g.size(), SessionMemory.MAPPING, false));
                }
                for (int i = 1; i < m.references(); i++) {
                    java.lang.foreign.MemorySegment out = arena.allocate(8);
                    int r = real.cuMemRetainAllocationHandle(out, m.mappings().get(0).base());
                    if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                        throw new CheckpointRefused(what + "cuMemRetainAllocationHandle failed: "
                                + io.gpusockets.protocol.api.CuResult.name(r));
                    }
                    vmm.referenced(out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
                }
                if (m.references() == 0 && real.cuMemRelease(handle) == io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    vmm.unreferenced(handle); // the program released it: only its mappings hold it
                }
            }
            for (CheckpointImage.ImportedAccess a : shares.importedAccesses()) {
                reAccess(s, a, refused, arena);
            }
        }
    }

    /** One access setting over imported mappings ({@link #reImport}) made again, checked as cuMemSetAccess is. */
    private static void reAccess(Session s, CheckpointImage.ImportedAccess a, String refused, java.lang.foreign.Arena arena)
            throws CheckpointRefused {
        String what = refused + String.format("its VMM access setting over 0x%x+%d cannot be made again: ", a.base(),
                a.size());
        int count = a.desc().length / io.gpusockets.protocol.structs.MemoryProps.ACCESS_DESC_SIZE;
        if (count <= 0 || count > PoolCalls.MAX_ACCESS_DESCS
                || a.desc().length != count * io.gpusockets.protocol.structs.MemoryProps.ACCESS_DESC_SIZE
                || s.vmm().reservationHolding(a.base(), a.size()) == null) {
            throw new CheckpointRefused(what + "it is not inside a reservation of the session, or its descriptors are"
                    + " malformed");
        }
        SessionHandles.Entry ctx = s.handles().get(a.context(), io.gpusockets.protocol.api.ParamType.CTX);
        long real = ctx != null ? ctx.real() : contextOn(s, a.device(), arena);
        if (real == 0) {
            throw new CheckpointRefused(what + "its context is not there after the replay");
        }
        java.lang.foreign.MemorySegment desc = arena.allocate(a.desc().length, 8)
                .copyFrom(java.lang.foreign.MemorySegment.ofArray(a.desc()));
        try {
            PoolCalls.checkAccessDescs(desc, count, s.host().deviceCount());
            inContext(s, real, what, () -> {
                int r = s.host().driver().cuMemSetAccess(a.base(), a.size(), desc, count);
                if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                    throw new CallRejected(r, "cuMemSetAccess failed");
                }
                return null;
            });
        } catch (CallRejected x) {
            throw new CheckpointRefused(what + x.getMessage() + " (" + io.gpusockets.protocol.api.CuResult.name(x.result)
                    + ")");
        }
        s.vmm().accessSet(a.base(), a.size(), a.desc(), ctx != null ? a.context() : s.handles().idOf(
                io.gpusockets.protocol.api.ParamType.CTX, real), a.device());
    }

    /** A live context of restored session {@code s} (driver value), refused when it has none. */
    private static long anyContext(Session s, String what) throws CheckpointRefused {
        for (SessionHandles.Entry e : s.handles().all(io.gpusockets.protocol.api.ParamType.CTX)) {
            return e.real();
        }
        throw new CheckpointRefused(what + "the session has no context");
    }

    /**
     * Isolation process: the driver's IPC event of the exporter's worker ({@code bytes}) opened in the current context
     * of this worker (cuIpcOpenEventHandle: a new event of the driver, as the program's open made), opened with
     * {@code token}; its driver value.
     */
    private static long openDriverEvent(Session s, byte[] bytes, byte[] token) throws CallRejected {
        io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
        if (bytes.length != ShareRegistry.DRIVER_BYTES) {
            throw new CallRejected(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, "the exporter's IPC"
                    + " event handle has " + bytes.length + " bytes");
        }
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment out = arena.allocate(8);
            java.lang.foreign.MemorySegment handle = arena.allocate(ShareRegistry.DRIVER_BYTES)
                    .copyFrom(java.lang.foreign.MemorySegment.ofArray(bytes));
            int r = real.cuIpcOpenEventHandle(out, handle);
            if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "cuIpcOpenEventHandle of the exporter's event failed");
            }
            long event = out.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0);
            s.sharing().eventOpened(event, token);
            return event;
        }
    }

    /**
     * Isolation process: {@link #reExport} in a restored session's worker. Each IPC event it exported is exported again
     * through this process's driver (cuIpcGetEventHandle of the replayed event: new handle bytes) and registered in the
     * front under its old token ({@link ShareBroker#restoreShare}), and each allocation of its window it exported as
     * the physical allocations that back it, each a descriptor ({@link ShareBroker#restoreWindow}); the front checks
     * each token against the image it read itself.
     */
    public static void reExportInWorker(Session s) throws CheckpointRefused {
        for (CheckpointImage.Export e : s.restoredShares().exports()) {
            String what = "restore of session " + s.id() + " refused: its IPC " + (e.kind() == ShareRegistry.KIND_EVENT
                    ? "event export (event " + e.address() + ")" : String.format("memory export of 0x%x", e.address()))
                    + " cannot be made again: ";
            if (e.kind() == ShareRegistry.KIND_MEMORY) {
                try { // its window's physical allocations, each as a descriptor, cross to the front (RESHARE)
                    ShareRegistry.Window w = IpcCalls.windowOf(s, e.address(), e.size());
                    s.shares().restoreWindow(e.tokenId(), e.secret(), e.size(), w, e.address());
                    s.sharing().exported(ShareRegistry.KIND_MEMORY, e.address());
                } catch (CallRejected | ShareRegistry.Refused x) {
                    throw new CheckpointRefused(what + x.getMessage());
                }
                continue;
            }
            if (e.kind() != ShareRegistry.KIND_EVENT) {
                throw new CheckpointRefused(what + "an export of kind " + e.kind());
            }
            SessionHandles.Entry ev = s.handles().get(e.address(), io.gpusockets.protocol.api.ParamType.EVENT);
            SessionHandles.Entry ctx = ev == null ? null : s.handles().get(ev.context(), io.gpusockets.protocol.api.ParamType.CTX);
            if (ctx == null) {
                throw new CheckpointRefused(what + "the event or its context is not there after the replay");
            }
            io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
            try {
                byte[] bytes = inContext(s, ctx.real(), what, () -> {
                    try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                        java.lang.foreign.MemorySegment out = arena.allocate(ShareRegistry.DRIVER_BYTES);
                        int r = real.cuIpcGetEventHandle(out, ev.real());
                        if (r != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                            throw new CallRejected(r, "cuIpcGetEventHandle failed");
                        }
                        return out.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                    }
                });
                s.shares().restoreShare(ShareRegistry.KIND_EVENT, e.tokenId(), e.secret(), bytes, ev.real());
            } catch (CallRejected | ShareRegistry.Refused x) {
                throw new CheckpointRefused(what + x.getMessage());
            }
            s.sharing().exported(ShareRegistry.KIND_EVENT, ev.real());
        }
    }

    /**
     * The exports of the image in {@code file}, written by a group checkpoint ({@link CheckpointImage.Shares}), read from
     * its header: kind, token id and secret, address and size as in the image. For the front of isolation process,
     * which takes from a restoring worker only these ({@code Workers#restoreHeld}).
     */
    public static List<ShareRegistry.Carried> imageExports(java.nio.file.Path file) throws IOException {
        List<ShareRegistry.Carried> exports = new ArrayList<>();
        for (CheckpointImage.Export e : SessionRestore.sharesOf(file).exports()) {
            exports.add(new ShareRegistry.Carried(e.kind(), e.tokenId(), e.secret().clone(), e.address(), e.size(), Set.of()));
        }
        return List.copyOf(exports);
    }

    /** A context of restored session {@code s} on device {@code device} (driver value), or 0. */
    private static long contextOn(Session s, int device, java.lang.foreign.Arena arena) {
        io.gpusockets.protocol.api.CudaDriver real = s.host().driver();
        java.lang.foreign.MemorySegment out = arena.allocate(8);
        for (SessionHandles.Entry e : s.handles().all(io.gpusockets.protocol.api.ParamType.CTX)) {
            if (real.cuCtxPushCurrent(e.real()) != io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS) {
                continue;
            }
            try {
                if (real.cuCtxGetDevice(out) == io.gpusockets.protocol.api.CuResult.CUDA_SUCCESS
                        && out.get(java.lang.foreign.ValueLayout.JAVA_INT, 0) == device) {
                    return e.real();
                }
            } finally {
                real.cuCtxPopCurrent(arena.allocate(8));
            }
        }
        return 0;
    }

    private static String join(java.util.Collection<Long> ids) {
        return ids.stream().map(String::valueOf).collect(java.util.stream.Collectors.joining(", "));
    }
}
