package io.gpusockets.backend.server;

import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.GroupCheckpoint;
import io.gpusockets.backend.session.PhysicalMemory;
import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.session.SessionRestore;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A hand-over of a session served in this process (isolation {@code context}, address-stable memory, resume) to
 * another backend process on the same host and GPU, with no memory copied (issue 23 item 2): the session's window
 * memory is exported as POSIX file descriptors (cuMemExportToShareableHandle) and passed over a Unix socket that
 * carries descriptors (SCM_RIGHTS: an {@code fdunix://} connection, {@link DescriptorPassing}); the target imports
 * them and its restore maps them at the same addresses ({@link SessionRestore}, {@code Handed}); the rest of the
 * checkpoint image (records, module globals' and the program's own VMM memory's contents, CUDA arrays, resume state)
 * goes as bytes. How the connection was made is the caller's business ({@link BackendServer#handOver} listens for the
 * target, {@code backend --take-over} hands every session it can over its take-over connection, one after another);
 * {@link #send} and {@link #receive} only need it to carry descriptors. Messages, big-endian:
 *
 * <pre>
 * READY    (target, first) u8 ok, u64 features, u32 length, utf-8: why not (a target that does not accept
 *          hand-overs); features bit 0 ({@link #FEATURE_GROUP}): it takes groups (an older target sends 0)
 * GROUP    (source, only for a group) "GPUSHOG1", u32 members (2 to {@link #MAX_GROUP}), u64 0; then each member's
 *          BEGIN, HANDLEs and IMAGE, one member after the other, and one DONE answers for the group
 * BEGIN    (source) "GPUSHOV1", u32 n, u64 image bytes
 * HANDLE   (source) n x: u64 address, u64 size, with the allocation's descriptor attached; address 0: one of the
 *          program's own allocations ({@link Session#programMemory}, in the order the image's records make them),
 *          with no descriptor when the program released it and only maps it (its contents are in the image)
 * IMAGE    (source) the image's bytes ({@link io.gpusockets.backend.session.Session#writeHandOverImage})
 * DONE     (target) u8 ok, u64 restore nanoseconds, u32 length, utf-8: the target's frontend URI (ok) or why not
 * </pre>
 *
 * The source drains the session ({@link Session#drained}, as a migration's stop), exports, writes the image to a temp
 * file, sends, and waits for DONE with the session still drained. OK: the session freezes, its frontend is sent to
 * the target ({@link BackendServer#sessionMoved}; or, with {@link #SAME_ADDRESS}, its connection is closed and it resumes
 * at the address it used, {@link BackendServer#sessionResumesElsewhere}) and it ends here, releasing its handles (the
 * memory lives on: the target maps it). Anything else before that (a refusal, an import that fails, the connection lost): the drain lets
 * go and the program runs on here; a target that restored before its answer was lost holds the session detached
 * until its grace period ends. Bounds on the target: at most {@link #MAX_HANDLES} descriptors, images of at most
 * {@link #MAX_IMAGE_BYTES} in all (a group's members together), in a temp folder that goes when the hand-over ends.
 *
 * <p>Sessions that share IPC memory or events are handed over together ({@link #sendGroup}), reusing what a group
 * migration does ({@link GroupCheckpoint}): checked together (every partner named, what is not carried refused, before
 * anything is sent; a target whose READY lacks {@link #FEATURE_GROUP} is refused then too), drained together, and each
 * sent as a member whose image also carries what it shares; the exporter's shared memory is one of its handed
 * allocations (mapped, not copied). The target receives every member before restoring any, restores them all
 * unpublished, registers the exports again under their old tokens and maps each opened range at its old address from
 * the exporter's handed allocations, re-makes the opened events, and only then lets any resume and answers its one
 * DONE ({@link BackendServer#restoreHandedOverGroup}); a failure of any member leaves none there and every source
 * session running on.
 */
public final class HandOver {
    static final byte[] MAGIC = "GPUSHOV1".getBytes(StandardCharsets.US_ASCII);
    /** A group's BEGIN ({@link #sendGroup}). */
    static final byte[] GROUP_MAGIC = "GPUSHOG1".getBytes(StandardCharsets.US_ASCII);
    /** READY's feature bit (its u64): this target takes groups ({@link #sendGroup}); an older one sends 0. */
    static final long FEATURE_GROUP = 1;
    /** The most sessions one group hand-over carries (as a group migration: {@link MigrationTarget#MAX_GROUP}). */
    static final int MAX_GROUP = MigrationTarget.MAX_GROUP;
    static final int MAX_HANDLES = 1 << 20;
    static final long MAX_IMAGE_BYTES = 16L << 30;
    private static final int PIECE = 1 << 20;
    private static final System.Logger LOG = System.getLogger("gpusockets.migration");
    /**
     * The frontend URI that sends no MOVED: the source closes the session's connection and its frontend resumes at the
     * address it used, as after a lost connection (what {@code backend --take-over} does: that address is the new
     * backend's now).
     */
    public static final String SAME_ADDRESS = "";

    /**
     * What a hand-over did: the physical allocations handed over and their bytes (mapped by the target, not copied),
     * the bytes of device memory copied in the image (module globals, the program's own VMM memory), the image's size,
     * and the downtime split: drain, export, image (written and sent), the target's restore, and the switch (the
     * restore is timed by the target and may begin while the source's last write returns, so the parts can sum to a
     * little more than the downtime).
     */
    public record Result(long sessionId, String frontendUri, int handles, long handedBytes, long copiedBytes,
                         long imageBytes, long drainNanos, long exportNanos, long imageNanos, long restoreNanos,
                         long switchNanos, long downtimeNanos) {
    }

    private HandOver() {
    }

    private record Stop(long drainNanos, long exportNanos, long imageNanos, long restoreNanos, long stoppedAt,
                        int handles, long handedBytes, long copiedBytes, long imageBytes, String targetUri) {
    }

    /**
     * The source's side: hands {@code s} over through {@code c} (a connection that carries descriptors to the target
     * backend), then sends its frontend to {@code frontendUri}, or to the URI the target answers when null, or lets it
     * resume at the address it used ({@link #SAME_ADDRESS}). See the class for what a failure leaves.
     */
    public static Result send(BackendServer server, Session s, Connection c, String frontendUri, CheckpointProgress progress)
            throws CheckpointRefused, IOException {
        if (!DescriptorPassing.canCarry(c)) {
            throw new CheckpointRefused("hand-over refused: the connection to the target cannot carry descriptors"
                    + " (an fdunix:// connection is needed)");
        }
        check(s);
        Answer ready = answer(c);
        if (!ready.ok()) {
            throw new CheckpointRefused("hand-over refused by the target: " + ready.message());
        }
        Path dir = Files.createTempDirectory("gpusockets-handover");
        Stop stop;
        try {
            stop = s.drained(true, progress, drainNanos -> {
                long drainedAt = System.nanoTime();
                Sent sent = sendMember(s, c, dir.resolve("image"), progress, null);
                progress.progress("restore", 0, 1);
                Answer done = answer(c);
                if (!done.ok()) {
                    throw new IOException("the target failed the hand-over: " + done.message());
                }
                progress.progress("restore", 1, 1);
                return new Stop(drainNanos, sent.exportNanos(), sent.imageNanos(), done.nanos(),
                        drainedAt - drainNanos, sent.handles(), sent.handedBytes(), sent.copiedBytes(), sent.imageBytes(),
                        done.message());
            }, "handed over (frozen: it resumes in the target backend)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted during the hand-over of session " + s.id());
        } finally {
            Files.deleteIfExists(dir);
        }
        String uri = frontendUri != null ? frontendUri : stop.targetUri();
        long t = System.nanoTime();
        switchTo(server, s.id(), uri);
        long now = System.nanoTime();
        return new Result(s.id(), uri, stop.handles(), stop.handedBytes(), stop.copiedBytes(), stop.imageBytes(),
                stop.drainNanos(), stop.exportNanos(), stop.imageNanos(), stop.restoreNanos(), now - t, now - stop.stoppedAt());
    }

    /**
     * The source's side of a group hand-over: hands {@code group}, sessions that share IPC memory or events
     * ({@link io.gpusockets.backend.session.ShareRegistry#group}, every one named), over through {@code c} together,
     * then sends each frontend as {@link #send} does. Refused before anything is sent as a group migration is
     * ({@link GroupCheckpoint#checkTogether}: a partner not named, what a group move does not carry), for a member that
     * cannot be handed over ({@link #check}), and by a target whose READY does not say {@link #FEATURE_GROUP} (an older
     * backend); then all are drained together ({@link GroupCheckpoint#drainedTogether}), checked again, and each is sent
     * as a member (its allocations' descriptors and its image, with what it shares: the exporter's shared memory is one
     * of its handed allocations, mapped there and not copied; the opener's opened range is mapped again there from
     * them). Anything before the target's one DONE fails lets every session run on here and leaves nothing there.
     * Returns one result per session, in order (the drain, export and image parts each member's own; the restore and
     * downtime the group's).
     */
    public static List<Result> sendGroup(BackendServer server, List<Session> group, Connection c, String frontendUri,
                                         CheckpointProgress progress, io.gpusockets.backend.session.ShareRegistry registry)
            throws CheckpointRefused, IOException {
        if (group.size() < 2 || group.size() > MAX_GROUP) {
            throw new CheckpointRefused("a group hand-over carries 2 to " + MAX_GROUP + " sessions, not " + group.size());
        }
        if (!DescriptorPassing.canCarry(c)) {
            throw new CheckpointRefused("hand-over refused: the connection to the target cannot carry descriptors"
                    + " (an fdunix:// connection is needed)");
        }
        int n = group.size();
        Sent[] sent = new Sent[n];
        long[] drainNanos = new long[n];
        long[] stop = new long[2]; // drained at, restore nanos
        String[] targetUri = new String[1];
        Path dir = null;
        for (Session s : group) {
            s.movingWithGroup(true); // what each opened of the others' moves with it
        }
        try {
            for (Session s : group) {
                check(s, true);
            }
            GroupCheckpoint.checkTogether(group, registry, "hand-over", "gpusockets migrate %s --hand-over-to ADMIN_SOCKET");
            Answer ready = answer(c);
            if (!ready.ok()) {
                throw new CheckpointRefused("hand-over refused by the target: " + ready.message());
            }
            if ((ready.nanos() & FEATURE_GROUP) == 0) {
                throw new CheckpointRefused("hand-over of sessions " + ids(group) + " refused: the target backend does not"
                        + " take sessions that share IPC memory or events together (an older version); nothing was sent");
            }
            dir = Files.createTempDirectory("gpusockets-handover");
            Path image = dir.resolve("image");
            GroupCheckpoint.drainedTogether(group, true, progress, drainNanos,
                    "handed over with its group (frozen: it resumes in the target backend)", () -> {
                        stop[0] = System.nanoTime();
                        GroupCheckpoint.checkDrained(group, registry, "hand-over");
                        c.write(ByteBuffer.allocateDirect(20).put(GROUP_MAGIC).putInt(n).putLong(0).flip());
                        for (int i = 0; i < n; i++) {
                            sent[i] = sendMember(group.get(i), c, image, progress, registry);
                        }
                        progress.progress("restore", 0, 1);
                        Answer done = answer(c);
                        if (!done.ok()) {
                            throw new IOException("the target failed the hand-over of sessions " + ids(group) + ": "
                                    + done.message());
                        }
                        progress.progress("restore", 1, 1);
                        stop[1] = done.nanos();
                        targetUri[0] = done.message();
                    });
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted during the hand-over of sessions " + ids(group));
        } finally {
            for (Session s : group) {
                s.movingWithGroup(false);
            }
            if (dir != null) {
                Files.deleteIfExists(dir);
            }
        }
        String uri = frontendUri != null ? frontendUri : targetUri[0];
        long t = System.nanoTime();
        Migration.switchEach(group, (id, to) -> switchTo(server, id, to), uri);
        long now = System.nanoTime();
        long drainAll = Arrays.stream(drainNanos).sum(); // nested: one after the other, all before the first member is sent
        List<Result> results = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            Sent x = sent[i];
            results.add(new Result(group.get(i).id(), uri, x.handles(), x.handedBytes(), x.copiedBytes(), x.imageBytes(),
                    drainNanos[i], x.exportNanos(), x.imageNanos(), stop[1], now - t, now - stop[0] + drainAll));
        }
        return List.copyOf(results);
    }

    /** Sends the frontend of handed-over session {@code sessionId} to {@code uri}, or lets it resume where it was. */
    private static void switchTo(BackendServer server, long sessionId, String uri) throws CheckpointRefused {
        if (SAME_ADDRESS.equals(uri)) {
            server.sessionResumesElsewhere(sessionId);
        } else {
            server.sessionMoved(sessionId, uri);
        }
    }

    private static String ids(List<Session> group) {
        return group.stream().map(x -> String.valueOf(x.id())).collect(java.util.stream.Collectors.joining(", "));
    }

    /** What sending one drained session ({@link #sendMember}) did. */
    private record Sent(int handles, long handedBytes, long copiedBytes, long imageBytes, long exportNanos,
                        long imageNanos) {
    }

    /**
     * Sends drained session {@code s} on {@code c}: its allocations exported (BEGIN, HANDLE), its image written to
     * {@code image} (deleted after) and sent (IMAGE); {@code registry}: a member of a group, whose image carries what it
     * shares (null: alone).
     */
    private static Sent sendMember(Session s, Connection c, Path image, CheckpointProgress progress,
                                   io.gpusockets.backend.session.ShareRegistry registry)
            throws CheckpointRefused, IOException {
        long began = System.nanoTime();
        List<PhysicalMemory> memory = new ArrayList<>(s.physicalMemory());
        memory.addAll(s.programMemory());
        int[] fds = new int[memory.size()];
        Arrays.fill(fds, -1);
        try {
            progress.progress("export", 0, memory.size());
            long handed = 0;
            int exportedCount = 0;
            for (int i = 0; i < fds.length; i++) {
                if (memory.get(i).handle() != 0) {
                    fds[i] = s.exportPosixFd(memory.get(i));
                    handed += memory.get(i).size();
                    exportedCount++;
                }
            }
            long exported = System.nanoTime();
            progress.progress("export", memory.size(), memory.size());
            long copied;
            try (FileChannel f = FileChannel.open(image, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                copied = s.writeHandOverImage(f, memory, progress, registry);
            }
            long imageBytes = Files.size(image);
            ByteBuffer begin = ByteBuffer.allocateDirect(20).put(MAGIC).putInt(fds.length).putLong(imageBytes).flip();
            c.write(begin);
            ByteBuffer h = ByteBuffer.allocateDirect(16);
            for (int i = 0; i < fds.length; i++) {
                h.clear().putLong(memory.get(i).address()).putLong(memory.get(i).size()).flip();
                if (fds[i] >= 0) {
                    DescriptorPassing.send(c, h, fds[i]);
                } else {
                    c.write(h);
                }
            }
            sendFile(c, image);
            return new Sent(exportedCount, handed, copied, imageBytes, exported - began, System.nanoTime() - exported);
        } finally {
            for (int fd : fds) {
                if (fd >= 0) {
                    closeFd(fd);
                }
            }
            Files.deleteIfExists(image);
        }
    }

    /**
     * Refuses (nothing exchanged) a session that cannot be handed over: not granted resume, no address-stable memory,
     * or memory on a device that cannot export it as POSIX file descriptors.
     */
    public static void check(Session s) throws CheckpointRefused {
        check(s, false);
    }

    /**
     * {@link #check}; {@code withGroup}: {@code s} is handed over with the sessions it shares with ({@link #sendGroup}),
     * so what it opened of theirs does not refuse it.
     */
    public static void check(Session s, boolean withGroup) throws CheckpointRefused {
        if (s.resume() == null) {
            throw new CheckpointRefused("session " + s.id() + " cannot be handed over: it was not granted resume (its"
                    + " frontend could not follow it)");
        }
        s.checkHandOver(withGroup); // refuses early: no address-stable memory, or a device that cannot export
    }

    /** READY's or DONE's content. */
    private record Answer(boolean ok, long nanos, String message) {
    }

    private static Answer answer(Connection c) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(13);
        c.readFully(b);
        b.flip();
        boolean ok = b.get() != 0;
        long nanos = b.getLong();
        int len = b.getInt();
        if (len < 0 || len > 8192) {
            throw new IOException("hand-over: an answer of " + len + " bytes");
        }
        ByteBuffer m = ByteBuffer.allocateDirect(len);
        c.readFully(m);
        byte[] mb = new byte[len];
        m.flip().get(mb);
        return new Answer(ok, nanos, new String(mb, StandardCharsets.UTF_8));
    }

    private static void sendFile(Connection c, Path file) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(PIECE);
        try (FileChannel f = FileChannel.open(file, StandardOpenOption.READ)) {
            while (f.read(b.clear()) > 0 || b.position() > 0) {
                b.flip();
                c.write(b);
                if (b.hasRemaining()) {
                    throw new IOException("hand-over: a short write to the target");
                }
            }
        }
    }

    private static void closeFd(int fd) {
        DescriptorPassing.close(fd);
    }

    /**
     * The target's side: receives a hand-over through {@code c}, restores the session into {@code server} with its
     * window memory imported ({@link BackendServer#restoreHandedOver}), and answers DONE with {@code frontendUri} (the
     * address the session's frontend resumes at). Returns the session id (of a group's, the first member's:
     * {@link #receiveAll}); a failure is answered and thrown.
     */
    public static long receive(Connection c, BackendServer server, String frontendUri) throws IOException, CheckpointRefused {
        return receive(c, server, frontendUri, false).getFirst();
    }

    /**
     * {@link #receive} of one session or of a group handed over together ({@link #sendGroup}); returns every session
     * id received, in the order sent.
     */
    public static List<Long> receiveAll(Connection c, BackendServer server, String frontendUri)
            throws IOException, CheckpointRefused {
        return receive(c, server, frontendUri, false);
    }

    /**
     * {@link #receiveAll}; {@code takingOver}: on a take-over's connection, which needs no {@code --accept-migrations}.
     * A group's members are all received (each image to a file of its own) before any is restored; then all are
     * restored, their shares made again, and only then may any resume ({@link BackendServer#restoreHandedOverGroup}):
     * a failure of any leaves none here.
     */
    static List<Long> receive(Connection c, BackendServer server, String frontendUri, boolean takingOver)
            throws IOException, CheckpointRefused {
        String refusal = server.handOverRefusal(takingOver);
        done(c, refusal == null, refusal == null ? FEATURE_GROUP : 0, refusal);
        if (refusal != null) {
            throw new CheckpointRefused("hand-over refused: " + refusal);
        }
        List<Integer> fds = new ArrayList<>();
        Path dir = Files.createTempDirectory("gpusockets-handover");
        List<Path> images = new ArrayList<>();
        try {
            List<Long> ids;
            long restoreNanos;
            try {
                ByteBuffer begin = ByteBuffer.allocateDirect(20);
                c.readFully(begin);
                begin.flip();
                byte[] magic = new byte[MAGIC.length];
                begin.get(magic);
                List<List<SessionRestore.Handed>> handed = new ArrayList<>();
                if (Arrays.equals(magic, GROUP_MAGIC)) {
                    int n = begin.getInt();
                    long zero = begin.getLong();
                    if (n < 2 || n > MAX_GROUP || zero != 0) {
                        throw new IOException("hand-over: a bad group BEGIN (" + n + " sessions, 2 to " + MAX_GROUP + ")");
                    }
                    for (int i = 0; i < n; i++) {
                        c.readFully(begin.clear());
                        begin.flip();
                        begin.get(magic);
                        images.add(dir.resolve("image" + i));
                        handed.add(member(c, begin, magic, fds, images.getLast(), received(images)));
                    }
                } else {
                    images.add(dir.resolve("image"));
                    handed.add(member(c, begin, magic, fds, images.getLast(), 0));
                }
                long t = System.nanoTime();
                ids = images.size() == 1
                        ? List.of(server.restoreHandedOver(images.getFirst(), handed.getFirst(), CheckpointProgress.NONE,
                        takingOver))
                        : server.restoreHandedOverGroup(images, handed, takingOver);
                restoreNanos = System.nanoTime() - t;
            } catch (IOException | CheckpointRefused | RuntimeException e) {
                String why = e.getMessage() != null ? e.getMessage() : e.toString();
                try {
                    done(c, false, 0, why);
                } catch (IOException | RuntimeException ignored) {
                    // the source sees the connection end instead
                }
                throw e;
            }
            done(c, true, restoreNanos, frontendUri);
            LOG.log(System.Logger.Level.INFO, (ids.size() == 1 ? "session " + ids.getFirst() : "sessions " + ids
                    + " (sharing IPC memory or events)") + " handed over here (" + fds.size() + " allocations mapped,"
                    + " restore " + restoreNanos / 1_000_000 + " ms)");
            return ids;
        } finally {
            for (int fd : fds) {
                closeFd(fd); // the driver holds its own references to what it imported
            }
            for (Path image : images) {
                Files.deleteIfExists(image);
            }
            Files.deleteIfExists(dir);
        }
    }

    /** The bytes of the images received so far (a group's members before this one). */
    private static long received(List<Path> images) throws IOException {
        long bytes = 0;
        for (Path p : images) {
            if (Files.exists(p)) {
                bytes += Files.size(p);
            }
        }
        return bytes;
    }

    /**
     * One session's BEGIN (its magic and the rest in {@code begin}), HANDLEs and IMAGE: the descriptors added to
     * {@code fds} (at most {@link #MAX_HANDLES} in all), the image written to {@code image} (at most
     * {@link #MAX_IMAGE_BYTES} with the {@code received} bytes of the group's members before it); returns the
     * allocations.
     */
    private static List<SessionRestore.Handed> member(Connection c, ByteBuffer begin, byte[] magic, List<Integer> fds,
                                                      Path image, long received) throws IOException {
        int n = begin.getInt();
        long imageBytes = begin.getLong();
        if (!Arrays.equals(magic, MAGIC) || n < 0 || n > MAX_HANDLES - fds.size() || imageBytes <= 0
                || imageBytes > MAX_IMAGE_BYTES - received) {
            throw new IOException("hand-over: a bad BEGIN (" + n + " handles, an image of " + imageBytes + " bytes)");
        }
        List<SessionRestore.Handed> handed = new ArrayList<>(n);
        ByteBuffer h = ByteBuffer.allocateDirect(16);
        for (int i = 0; i < n; i++) {
            int[] got = {-1, 0};
            DescriptorPassing.receive(c, h.clear(), 1, fd -> {
                fds.add(fd);
                got[0] = fd;
                got[1]++;
            });
            h.flip();
            long address = h.getLong(), size = h.getLong();
            boolean descriptors = address == 0 ? got[1] <= 1 : got[1] == 1; // a program allocation may come without
            if (!descriptors || size <= 0 || address + size < address) {
                throw new IOException(String.format("hand-over: allocation %d (0x%x, %d bytes) came with %d descriptors",
                        i, address, size, got[1]));
            }
            handed.add(new SessionRestore.Handed(address, size, got[1] == 1 ? got[0] : -1));
        }
        receiveFile(c, image, imageBytes);
        return handed;
    }

    private static void receiveFile(Connection c, Path file, long bytes) throws IOException {
        ByteBuffer b = ByteBuffer.allocateDirect(PIECE);
        try (FileChannel f = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            long left = bytes;
            while (left > 0) {
                b.clear().limit((int) Math.min(PIECE, left));
                c.readFully(b);
                b.flip();
                left -= b.remaining();
                while (b.hasRemaining()) {
                    f.write(b);
                }
            }
        }
    }

    private static void done(Connection c, boolean ok, long restoreNanos, String message) throws IOException {
        byte[] m = (message == null ? "" : message).getBytes(StandardCharsets.UTF_8);
        if (m.length > 4000) {
            m = Arrays.copyOf(m, 4000);
        }
        c.write(ByteBuffer.allocateDirect(13 + m.length).put((byte) (ok ? 1 : 0)).putLong(restoreNanos).putInt(m.length)
                .put(m).flip());
    }
}
