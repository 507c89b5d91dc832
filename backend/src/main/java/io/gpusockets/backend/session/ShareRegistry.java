package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The backend's shares between sessions (issue 24 item 1): IPC memory and event handles and shareable VMM handles, kept
 * in the FRONT process (the one that accepts connections and knows every session's tenant), whatever the isolation
 * mode. A program never sees what the driver made: an export is given a 64-byte token, and an import names the token.
 *
 * <pre>
 * token (64 bytes)
 *   0  magic   "GSSH"           16 secret   16 bytes of SecureRandom (compared in constant time)
 *   4  version 1                32 zero     32 bytes
 *   5  kind    1 memory, 2 event, 3 VMM
 *   6  zero    2 bytes
 *   8  id      long, little-endian (issued in order from a random start, never reused by this process)
 * </pre>
 *
 * Each entry holds the exporter's session and tenant and what an importer needs: the driver's 64 IPC bytes (memory and
 * events, exported by a worker process in isolation mode {@code process}) and the allocation's size, or, for an event
 * of an exporter in isolation context, its {@link IpcEventShare} (which an opener joins), or a POSIX
 * descriptor of the VMM allocation (kept open here until the entry goes), or, for memory of an exporter with
 * address-stable memory (any isolation mode; in isolation process the worker sends them with its SHARE), descriptors
 * of the physical allocations of its address window that back it ({@link Window}, kept open here until the entry
 * goes; each lookup gets new ones). The token
 * carries no authority by itself: a
 * lookup from a session of another tenant, of an unknown or stale token, or of the wrong kind is refused with
 * CUDA_ERROR_INVALID_VALUE, as the driver answers a handle it cannot open, and another tenant's attempt is logged
 * (rate limited) naming both sessions.
 *
 * <p>Bounds: at most {@link #maxPerSession} live shares per exporting session ({@value #MAX_PROPERTY}, default
 * {@value #MAX_DEFAULT}; past it CUDA_ERROR_OUT_OF_MEMORY), holding at most as many descriptors in all (a VMM share one,
 * window memory one a piece), so no peer grows this process's memory or descriptors without bound; a window's shape
 * is checked ({@link #windowProblem}) before it is kept. An entry goes when its exporter lets go of what it names ({@link #withdraw}: the allocation freed, the
 * VMM handle released, the event destroyed), so that no token keeps memory alive that its tenant no longer pays for,
 * and when its exporting session ends (mappings already opened stay, as the driver keeps them). Who opened what is kept
 * too: a session sharing with another is refused a checkpoint, a migration and a hand-over of itself alone
 * ({@link #movingRefusal}, which names the partners and how to move them together). The sessions linked by shares
 * ({@link #group}) are checkpointed together (the backend's group checkpoint, every isolation mode,
 * {@link GroupCheckpoint}): the IPC memory of an exporter's address window and its IPC events ({@link #carried}) go into
 * the exporter's image with their tokens' ids and secrets, and come back under the same tokens when the image is
 * restored ({@link #restore}, {@link #restoreEvent}, {@link #restoreDriverEvent}: in isolation process a worker
 * registers them again, RESHARE), so that the openers' mappings and events are made again and a
 * later open of an old token works; shareable VMM handles go the same way in isolation context and shared
 * ({@link #carried(long, List, boolean)}, {@link #restoreVmm}), and a group of isolation process holding one that another
 * session imported is refused, naming it. A session with exports nobody opened moves alone; its
 * exports are not in its image then (they go with the session here). Token ids start at a random value per process, so
 * that a restored token hardly meets one the restoring backend issued (if it does, that restore is refused).
 */
public final class ShareRegistry {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    public static final int TOKEN_BYTES = 64;
    /** The driver's CUipcMemHandle / CUipcEventHandle. */
    public static final int DRIVER_BYTES = 64;
    public static final byte KIND_MEMORY = 1;
    public static final byte KIND_EVENT = 2;
    public static final byte KIND_VMM = 3;

    public static final String MAX_PROPERTY = "gpusockets.ipc.maxSharesPerSession";
    public static final int MAX_DEFAULT = 1024;

    /** The refusal of a share or a lookup: the CUresult the program sees and why. */
    public static final class Refused extends Exception {
        private final int result;

        public Refused(int result, String message) {
            super(message);
            this.result = result;
        }

        public int result() {
            return result;
        }
    }

    /** What an importer gets: the driver's bytes and the size (memory, events), or a descriptor (VMM: the caller's). */
    public record Found(long exporter, byte[] driverBytes, long size, int fd, Window window, IpcEventShare events) {
        public Found(long exporter, byte[] driverBytes, long size, int fd) {
            this(exporter, driverBytes, size, fd, null, null);
        }
    }

    /**
     * A cuMemAlloc allocation of the exporter's address window (isolation context, shared and process) as the
     * physical allocations (granules of its own) that back it, each a POSIX descriptor mapped at {@code offset} of a span; the allocation
     * starts at {@code start} of the span. A lookup's descriptors are new ones (duplicates), the caller's to close.
     */
    public record Window(long start, List<Piece> pieces) {
        public long span() {
            Piece last = pieces.get(pieces.size() - 1);
            return last.offset() + last.size();
        }
    }

    /** One physical allocation of a {@link Window}: {@code size} bytes at {@code offset} of the span, as a descriptor. */
    public record Piece(long offset, long size, int fd) {
    }

    /**
     * What is wrong with the shape of window memory {@code w} holding an allocation of {@code size} bytes (null: it is
     * sound): pieces, each of a positive size, one after another from offset 0 without a gap, and the allocation
     * ({@code start}, {@code size} bytes, at least one) inside their span. A worker's SHARE and the front's SHARED
     * (isolation process) are checked with it, as the registry checks every window it is given.
     */
    public static String windowProblem(Window w, long size) {
        if (w == null || w.pieces().isEmpty()) {
            return "window memory without pieces";
        }
        long at = 0;
        for (Piece p : w.pieces()) {
            if (p.offset() != at || p.size() <= 0 || p.size() > Long.MAX_VALUE - at) {
                return "window memory whose piece at offset " + p.offset() + " (" + p.size() + " bytes) does not follow at "
                        + at;
            }
            at += p.size();
        }
        if (size <= 0 || w.start() < 0 || w.start() >= at || size > at - w.start()) {
            return "window memory of " + size + " bytes at " + w.start() + " of a span of " + at + " bytes";
        }
        return null;
    }

    /** The descriptors {@code e} holds (a VMM share's, window memory's pieces). */
    private static int descriptors(Entry e) {
        return (e.fd() >= 0 ? 1 : 0) + (e.window() == null ? 0 : e.window().pieces().size());
    }

    /**
     * Refused (OUT_OF_MEMORY) when session {@code exporter}, holding {@code mine}, may not add a share of
     * {@code adding} descriptors: at most {@link #maxPerSession} live shares and as many descriptors in all.
     */
    private void checkRoom(long exporter, Set<Long> mine, int adding) throws Refused {
        if (mine.size() >= maxPerSession) {
            throw new Refused(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "session " + exporter + " has " + mine.size()
                    + " live IPC/shareable exports, the most a session may have (" + MAX_PROPERTY + "=" + maxPerSession
                    + " on the backend)");
        }
        long held = 0;
        for (long id : mine) {
            Entry e = entries.get(id);
            held += e == null ? 0 : descriptors(e);
        }
        if (held + adding > maxPerSession) {
            throw new Refused(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "session " + exporter + "'s live IPC/shareable exports"
                    + " hold " + held + " descriptors; " + adding + " more would pass the most a session's may hold ("
                    + MAX_PROPERTY + "=" + maxPerSession + " on the backend)");
        }
    }

    private record Entry(long id, byte[] secret, byte kind, long exporter, String tenant, byte[] driverBytes, long size,
                         int fd, Window window, IpcEventShare events, long object, Set<Long> openers) {
    }

    private static final byte[] MAGIC = {'G', 'S', 'S', 'H'};
    private static final byte VERSION = 1;

    private final int maxPerSession;
    private final SecureRandom random = new SecureRandom();
    private final Map<Long, Entry> entries = new HashMap<>();
    private final Map<Long, Set<Long>> byExporter = new HashMap<>();
    /** Importing session -> the exporters it opened something of. */
    private final Map<Long, Set<Long>> opened = new HashMap<>();
    /** From a random start, so that a token restored into another backend ({@link #restore}) hardly meets one of its own. */
    private long nextId;
    private final java.util.concurrent.atomic.AtomicInteger eventStreams = new java.util.concurrent.atomic.AtomicInteger();
    private final RateLimitedLog refusals = new RateLimitedLog(LOG, "shares", "refused share lookups");

    public ShareRegistry(int maxPerSession) {
        if (maxPerSession < 1) {
            throw new IllegalArgumentException(MAX_PROPERTY + "=" + maxPerSession + " (at least 1)");
        }
        this.maxPerSession = maxPerSession;
        this.nextId = 1 + (random.nextLong() >>> 2);
    }

    /** A registry bounded by {@value #MAX_PROPERTY}, else {@value #MAX_DEFAULT}. */
    public static ShareRegistry configured() {
        return new ShareRegistry(Integer.getInteger(MAX_PROPERTY, MAX_DEFAULT));
    }

    public int maxPerSession() {
        return maxPerSession;
    }

    /**
     * Registers an export of session {@code exporter} (tenant {@code tenant}); returns its token. {@code fd} (VMM, else
     * -1) becomes this registry's, closed when the entry goes, or at once when the share is refused.
     */
    public synchronized byte[] share(long exporter, String tenant, byte kind, byte[] driverBytes, long size, int fd)
            throws Refused {
        return share(exporter, tenant, kind, driverBytes, size, fd, null, 0);
    }

    /**
     * As {@link #share(long, String, byte, byte[], long, int)}, for memory of the exporter's address window
     * ({@code window}: made in this process in isolation context and shared, sent with a worker's SHARE in isolation
     * process; its descriptors become this registry's, closed when the entry goes or at once when the share is refused)
     * instead of the driver's bytes. {@code object} names what was exported in the exporter (its
     * allocation's address, its VMM handle) for {@link #withdraw}.
     */
    public synchronized byte[] share(long exporter, String tenant, byte kind, byte[] driverBytes, long size, int fd,
                                     Window window, long object) throws Refused {
        return share(exporter, tenant, kind, driverBytes, size, fd, window, null, object);
    }

    /**
     * Registers an IPC event of the exporter served in this process (isolation context, shared): {@code events}, whose
     * members an importer joins ({@link IpcEventShare}), instead of the driver's bytes.
     */
    public synchronized byte[] shareEvent(long exporter, String tenant, IpcEventShare events, long object) throws Refused {
        return share(exporter, tenant, KIND_EVENT, null, 0, -1, null, java.util.Objects.requireNonNull(events), object);
    }

    private byte[] share(long exporter, String tenant, byte kind, byte[] driverBytes, long size, int fd,
                         Window window, IpcEventShare events, long object) throws Refused {
        try {
            if (kind != KIND_MEMORY && kind != KIND_EVENT && kind != KIND_VMM) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "share of kind " + kind);
            }
            boolean windowed = window != null && kind == KIND_MEMORY && !window.pieces().isEmpty();
            if (window != null && !windowed || (kind == KIND_VMM) != (fd >= 0)
                    || events != null && kind != KIND_EVENT
                    || kind != KIND_VMM && !windowed && events == null
                    && (driverBytes == null || driverBytes.length != DRIVER_BYTES)
                    || windowed && (fd >= 0 || driverBytes != null)) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a share of kind " + kind + " without what an importer needs");
            }
            String problem = windowed ? windowProblem(window, size) : null;
            if (problem != null) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a share of " + problem);
            }
            Set<Long> mine = byExporter.computeIfAbsent(exporter, k -> new LinkedHashSet<>());
            checkRoom(exporter, mine, (fd >= 0 ? 1 : 0) + (windowed ? window.pieces().size() : 0));
            byte[] secret = new byte[16];
            random.nextBytes(secret);
            while (entries.containsKey(nextId)) {
                nextId++; // a restored share (restore) took it
            }
            long id = nextId++;
            Entry e = new Entry(id, secret, kind, exporter, tenant, driverBytes == null ? null : driverBytes.clone(), size, fd,
                    window, events, object, new TreeSet<>());
            entries.put(id, e);
            mine.add(id);
            fd = -1;
            window = null;
            return token(id, kind, secret);
        } finally {
            if (fd >= 0) {
                DescriptorPassing.close(fd);
            }
            closeAll(window);
        }
    }

    /**
     * The share {@code token} names, for session {@code importer} of {@code tenant}: refused (INVALID_VALUE) for
     * another tenant's share, a stale or forged token or one of another kind. A VMM share's descriptor is a new one
     * (a duplicate), the caller's to close.
     */
    public Found lookup(long importer, String tenant, byte kind, byte[] token) throws Refused {
        Entry e;
        synchronized (this) {
            e = entryOf(token, kind);
            if (e == null) {
                throw refusal("session " + importer + " (tenant " + tenant + "): an IPC/shareable handle this backend did not"
                        + " issue, or one whose exporting session ended, or of another kind", null);
            }
            if (!e.tenant().equals(tenant)) {
                String why = "session " + importer + " (tenant " + tenant + ") named a handle exported by session "
                        + e.exporter() + " of another tenant";
                refusals.log(Level.WARNING, () -> why);
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "the handle belongs to another tenant");
            }
            if (e.exporter() == importer && kind != KIND_VMM) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_CONTEXT, "an IPC handle cannot be opened by the session that"
                        + " exported it (as the driver refuses it in the exporting process)");
            }
            int fd = -1;
            Window window = null;
            try {
                if (e.fd() >= 0) {
                    fd = DescriptorPassing.duplicate(e.fd());
                }
                if (e.window() != null) {
                    List<Piece> pieces = new ArrayList<>();
                    window = new Window(e.window().start(), pieces);
                    for (Piece p : e.window().pieces()) {
                        pieces.add(new Piece(p.offset(), p.size(), DescriptorPassing.duplicate(p.fd())));
                    }
                }
            } catch (IOException x) {
                if (fd >= 0) {
                    DescriptorPassing.close(fd);
                }
                closeAll(window);
                throw new Refused(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "no descriptor for the import: " + x.getMessage());
            }
            if (e.exporter() != importer) {
                e.openers().add(importer);
                opened.computeIfAbsent(importer, k -> new TreeSet<>()).add(e.exporter());
            }
            return new Found(e.exporter(), e.driverBytes() == null ? null : e.driverBytes().clone(), e.size(), fd, window,
                    e.events());
        }
    }

    /** Closes the descriptors of {@code w} (null: none). */
    public static void closeAll(Window w) {
        if (w != null) {
            for (Piece p : w.pieces()) {
                DescriptorPassing.close(p.fd());
            }
        }
    }

    private Refused refusal(String log, String message) {
        refusals.log(Level.INFO, () -> log);
        return new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, message == null ? "no such IPC/shareable handle here"
                + " (forged, stale: its exporting session ended, or of another kind)" : message);
    }

    private Entry entryOf(byte[] token, byte kind) {
        if (token == null || token.length != TOKEN_BYTES) {
            return null;
        }
        ByteBuffer b = ByteBuffer.wrap(token).order(ByteOrder.LITTLE_ENDIAN);
        for (byte m : MAGIC) {
            if (b.get() != m) {
                return null;
            }
        }
        if (b.get() != VERSION || b.get() != kind || b.getShort() != 0) {
            return null;
        }
        long id = b.getLong();
        byte[] secret = new byte[16];
        b.get(secret);
        while (b.hasRemaining()) {
            if (b.get() != 0) {
                return null;
            }
        }
        Entry e = entries.get(id);
        if (e == null || e.kind() != kind || !MessageDigest.isEqual(e.secret(), secret)) {
            return null;
        }
        return e;
    }

    private static byte[] token(long id, byte kind, byte[] secret) {
        ByteBuffer b = ByteBuffer.allocate(TOKEN_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        b.put(MAGIC).put(VERSION).put(kind).putShort((short) 0).putLong(id).put(secret);
        return b.array();
    }

    /**
     * The exporter let go of what its shares of {@code kind} name as {@code object} (freed the allocation, released the
     * VMM handle): those shares go, their descriptors closed, so that no token keeps memory alive that its tenant is no
     * longer charged for. What importers opened already stays, as the driver keeps it.
     */
    public void withdraw(long exporter, byte kind, long object) {
        List<Integer> close = new ArrayList<>();
        List<Window> windows = new ArrayList<>();
        synchronized (this) {
            Set<Long> mine = byExporter.get(exporter);
            if (mine == null) {
                return;
            }
            for (var it = mine.iterator(); it.hasNext(); ) {
                Entry e = entries.get(it.next());
                if (e != null && e.kind() == kind && e.object() == object) {
                    it.remove();
                    entries.remove(e.id());
                    if (e.fd() >= 0) {
                        close.add(e.fd());
                    }
                    if (e.window() != null) {
                        windows.add(e.window());
                    }
                }
            }
        }
        close.forEach(DescriptorPassing::close);
        windows.forEach(ShareRegistry::closeAll);
    }

    /** Session {@code session} ended: its exports go (their descriptors closed) and it opens nothing any more. */
    public void sessionEnded(long session) {
        List<Integer> close = new ArrayList<>();
        List<Window> windows = new ArrayList<>();
        synchronized (this) {
            Set<Long> mine = byExporter.remove(session);
            if (mine != null) {
                for (long id : mine) {
                    Entry e = entries.remove(id);
                    if (e != null && e.fd() >= 0) {
                        close.add(e.fd());
                    }
                    if (e != null && e.window() != null) {
                        windows.add(e.window());
                    }
                }
            }
            opened.remove(session);
            for (Entry e : entries.values()) {
                e.openers().remove(session);
            }
            for (Set<Long> exporters : opened.values()) {
                exporters.remove(session);
            }
        }
        close.forEach(DescriptorPassing::close);
        windows.forEach(ShareRegistry::closeAll);
    }

    /**
     * Why session {@code session} cannot be checkpointed, migrated or handed over alone (null: it can): it opened a share
     * of another live session, or another live session opened one of its exports. The message names the partners and
     * how to migrate or checkpoint them together ({@link #partners}).
     */
    public synchronized String movingRefusal(long session, String what) {
        Set<Long> with = partnersOf(session);
        if (with.isEmpty()) {
            return null;
        }
        Set<Long> group = group(Set.of(session));
        String ids = join(group).replace(", ", " ");
        return "session " + session + " cannot be " + what + " alone: it shares memory or events with session(s) "
                + join(with) + " by IPC/shareable handles; sessions that share IPC memory or events move together: they"
                + " migrate together (gpusockets migrate " + ids + " --to URI) and are handed over together (gpusockets"
                + " migrate " + ids + " --hand-over-to ADMIN_SOCKET), in isolation context or shared, and are checkpointed"
                + " together in every isolation mode (gpusockets checkpoint " + ids + " --to DIR --stop, then gpusockets"
                + " restore DIR/*.ckpt)";
    }

    private static String join(Set<Long> ids) {
        return ids.stream().map(String::valueOf).collect(java.util.stream.Collectors.joining(", "));
    }

    /** The live sessions {@code session} shares with (opened one of theirs, or they opened one of its), without itself. */
    private Set<Long> partnersOf(long session) {
        Set<Long> with = new TreeSet<>(opened.getOrDefault(session, Set.of()));
        for (long id : byExporter.getOrDefault(session, Set.of())) {
            Entry e = entries.get(id);
            if (e != null) {
                with.addAll(e.openers());
            }
        }
        with.remove(session);
        return with;
    }

    /** The sessions {@code session} shares with directly ({@link #movingRefusal}); empty: none. */
    public synchronized Set<Long> partners(long session) {
        return partnersOf(session);
    }

    /** {@code sessions} and every live session linked to one of them by shares, directly or through others. */
    public synchronized Set<Long> group(Set<Long> sessions) {
        Set<Long> group = new TreeSet<>(sessions);
        java.util.ArrayDeque<Long> todo = new java.util.ArrayDeque<>(sessions);
        while (!todo.isEmpty()) {
            for (long p : partnersOf(todo.poll())) {
                if (group.add(p)) {
                    todo.add(p);
                }
            }
        }
        return group;
    }

    /**
     * An export of {@code session} that a group checkpoint carries, of {@code kind}: IPC memory of its address window
     * (isolation context and shared), the allocation at {@code address}, {@code size} bytes, or an IPC event of
     * isolation context (its driver value as {@code address}), under the token's {@code id} and {@code secret};
     * {@code openers}: the sessions that opened it.
     */
    public record Carried(byte kind, long id, byte[] secret, long address, long size, Set<Long> openers) {
    }

    /**
     * What a group checkpoint carries of {@code session}'s exports ({@link Carried}: IPC memory of its window, and IPC
     * events, of isolation context or exported through the driver of a worker in isolation process, {@code address} the
     * event's driver value in the exporter's process), and why it cannot carry the rest (added to {@code notCarried}):
     * a shareable VMM handle another session imported, or IPC memory exported through the driver (isolation process)
     * that another session opened.
     */
    public synchronized List<Carried> carried(long session, List<String> notCarried) {
        return carried(session, notCarried, false);
    }

    /**
     * As {@link #carried(long, List)}; with {@code vmm} (a group checkpoint, migration or hand-over of sessions served in
     * this process: isolation context and shared) the session's shareable VMM handles are carried too, {@code address}
     * their driver value in the exporter.
     */
    public synchronized List<Carried> carried(long session, List<String> notCarried, boolean vmm) {
        List<Carried> out = new ArrayList<>();
        for (long id : byExporter.getOrDefault(session, Set.of())) {
            Entry e = entries.get(id);
            if (e == null) {
                continue;
            }
            if (e.kind() == KIND_MEMORY && e.window() != null || e.kind() == KIND_EVENT || vmm && e.kind() == KIND_VMM) {
                out.add(new Carried(e.kind(), e.id(), e.secret().clone(), e.object(), e.size(), Set.copyOf(e.openers())));
            } else if (!e.openers().isEmpty()) {
                notCarried.add("session " + session + "'s " + (e.kind() == KIND_EVENT ? "IPC event" : e.kind() == KIND_VMM
                        ? "shareable VMM handle" : "IPC memory handle of the driver") + " opened by session(s) "
                        + join(e.openers()));
            }
        }
        return out;
    }

    /**
     * Registers again, under its old token ({@code id}, {@code secret}), an export of a restored session
     * {@code exporter} ({@link #carried} wrote it into the image): IPC memory of its window, {@code window}'s
     * descriptors becoming this registry's (closed at once when refused). Refused when this registry has a share of
     * that id already (another backend's token that happens to meet it: the restore fails, naming it).
     */
    public synchronized void restore(long exporter, String tenant, long id, byte[] secret, long size, Window window,
                                     long object) throws Refused {
        restore(exporter, tenant, KIND_MEMORY, id, secret, size, window, null, object);
    }

    /**
     * As {@link #restore(long, String, long, byte[], long, Window, long)} for an IPC event of isolation context
     * ({@code events}, its exporter's event already its member, {@code object} that event).
     */
    public synchronized void restoreEvent(long exporter, String tenant, long id, byte[] secret, IpcEventShare events,
                                          long object) throws Refused {
        restore(exporter, tenant, KIND_EVENT, id, secret, 0, null, java.util.Objects.requireNonNull(events), object);
    }

    /**
     * As {@link #restoreEvent} for an IPC event that a restored session's worker exported again through its driver
     * (isolation process): {@code driverBytes} (its new CUipcEventHandle) instead of a share of this process.
     */
    public synchronized void restoreDriverEvent(long exporter, String tenant, long id, byte[] secret, byte[] driverBytes,
                                                long object) throws Refused {
        if (driverBytes == null || driverBytes.length != DRIVER_BYTES) {
            throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored IPC event without the driver's handle");
        }
        restore(exporter, tenant, KIND_EVENT, id, secret, 0, null, null, driverBytes.clone(), object);
    }

    /**
     * As {@link #restore(long, String, long, byte[], long, Window, long)} for a shareable VMM handle of a restored session
     * (isolation context, shared): {@code fd}, the driver's POSIX descriptor of the allocation {@code object} of
     * {@code size} bytes exported again, becomes this registry's (closed at once when refused).
     */
    public synchronized void restoreVmm(long exporter, String tenant, long id, byte[] secret, long size, int fd,
                                        long object) throws Refused {
        try {
            if (fd < 0 || size <= 0) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored shareable VMM handle without its"
                        + " descriptor or size");
            }
            restore(exporter, tenant, KIND_VMM, id, secret, size, null, null, null, fd, object);
            fd = -1;
        } finally {
            if (fd >= 0) {
                DescriptorPassing.close(fd);
            }
        }
    }

    private void restore(long exporter, String tenant, byte kind, long id, byte[] secret, long size, Window window,
                         IpcEventShare events, long object) throws Refused {
        restore(exporter, tenant, kind, id, secret, size, window, events, null, object);
    }

    private void restore(long exporter, String tenant, byte kind, long id, byte[] secret, long size, Window window,
                         IpcEventShare events, byte[] driverBytes, long object) throws Refused {
        restore(exporter, tenant, kind, id, secret, size, window, events, driverBytes, -1, object);
    }

    /** {@code fd}: a VMM share's descriptor (else -1), this registry's once it returns, the caller's when it throws. */
    private void restore(long exporter, String tenant, byte kind, long id, byte[] secret, long size, Window window,
                         IpcEventShare events, byte[] driverBytes, int fd, long object) throws Refused {
        try {
            if (secret == null || secret.length != 16
                    || (kind == KIND_MEMORY ? window == null || window.pieces().isEmpty()
                    : kind == KIND_VMM ? fd < 0
                    : kind != KIND_EVENT || events == null && driverBytes == null)) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored share without its secret or memory");
            }
            if (kind == KIND_MEMORY && windowProblem(window, size) != null) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "a restored share of " + windowProblem(window, size));
            }
            if (entries.containsKey(id)) {
                throw new Refused(CuResult.CUDA_ERROR_INVALID_VALUE, "the restored IPC token " + id + " of session "
                        + exporter + " is in use in this backend by session " + entries.get(id).exporter());
            }
            Set<Long> mine = byExporter.computeIfAbsent(exporter, k -> new LinkedHashSet<>());
            checkRoom(exporter, mine, (window == null ? 0 : window.pieces().size()) + (fd >= 0 ? 1 : 0));
            entries.put(id, new Entry(id, secret.clone(), kind, exporter, tenant, driverBytes, size, fd, window, events, object,
                    new TreeSet<>()));
            mine.add(id);
            window = null;
        } finally {
            closeAll(window);
        }
    }

    /** The share id a token of {@link #TOKEN_BYTES} names (its bytes 8 to 15), checked or not. */
    static long idOf(byte[] token) {
        return ByteBuffer.wrap(token).order(ByteOrder.LITTLE_ENDIAN).getLong(8);
    }

    /** The token of the share {@code id} with {@code secret} and {@code kind}, as {@link #share} gave it. */
    public static byte[] tokenOf(long id, byte kind, byte[] secret) {
        return token(id, kind, secret);
    }

    /** Live shares now (for the backend's status). */
    public synchronized int count() {
        return entries.size();
    }

    /** The backend's streams of IPC event shares (isolation context: one per member, {@link IpcEventShare}) live now. */
    public int eventStreams() {
        return eventStreams.get();
    }

    /** Live shares of session {@code session}. */
    public synchronized int countOf(long session) {
        return byExporter.getOrDefault(session, Set.of()).size();
    }

    /** The share broker of session {@code session} of {@code tenant} served in this process (isolation context, shared). */
    public ShareBroker broker(long session, String tenant) {
        return new ShareBroker() {
            @Override
            public byte[] share(byte kind, byte[] driverBytes, long size, int fd, long object) throws Refused {
                return ShareRegistry.this.share(session, tenant, kind, driverBytes, size, fd, null, object);
            }

            @Override
            public void withdraw(byte kind, long object) {
                ShareRegistry.this.withdraw(session, kind, object);
            }

            @Override
            public Found lookup(byte kind, byte[] token) throws Refused {
                return ShareRegistry.this.lookup(session, tenant, kind, token);
            }

            @Override
            public byte[] shareWindow(long size, Window window, long object) throws Refused {
                return ShareRegistry.this.share(session, tenant, KIND_MEMORY, null, size, -1, window, object);
            }

            @Override
            public IpcEventShare newEventShare() {
                return new IpcEventShare(eventStreams);
            }

            @Override
            public byte[] shareEvent(IpcEventShare events, long object) throws Refused {
                return ShareRegistry.this.shareEvent(session, tenant, events, object);
            }

            @Override
            public boolean sameProcess() {
                return true;
            }
        };
    }
}
