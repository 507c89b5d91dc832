package io.gpusockets.backend.server;

import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.CheckpointRefused;
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
 * READY    (target, first) u8 ok, u64 0, u32 length, utf-8: why not (a target that does not accept hand-overs)
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
 * until its grace period ends. Bounds on the target: at most {@link #MAX_HANDLES} descriptors, an image of at most
 * {@link #MAX_IMAGE_BYTES}, in a temp folder that goes when the hand-over ends.
 */
public final class HandOver {
    static final byte[] MAGIC = "GPUSHOV1".getBytes(StandardCharsets.US_ASCII);
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
        Path image = dir.resolve("image");
        Stop stop;
        try {
            stop = s.drained(true, progress, drainNanos -> {
                long drainedAt = System.nanoTime();
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
                        copied = s.writeHandOverImage(f, memory, progress);
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
                    long sent = System.nanoTime();
                    progress.progress("restore", 0, 1);
                    Answer done = answer(c);
                    if (!done.ok()) {
                        throw new IOException("the target failed the hand-over: " + done.message());
                    }
                    progress.progress("restore", 1, 1);
                    return new Stop(drainNanos, exported - drainedAt, sent - exported, done.nanos(),
                            drainedAt - drainNanos, exportedCount, handed, copied, imageBytes, done.message());
                } finally {
                    for (int fd : fds) {
                        if (fd >= 0) {
                            closeFd(fd);
                        }
                    }
                }
            }, "handed over (frozen: it resumes in the target backend)");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted during the hand-over of session " + s.id());
        } finally {
            Files.deleteIfExists(image);
            Files.deleteIfExists(dir);
        }
        String uri = frontendUri != null ? frontendUri : stop.targetUri();
        long t = System.nanoTime();
        if (SAME_ADDRESS.equals(uri)) {
            server.sessionResumesElsewhere(s.id());
        } else {
            server.sessionMoved(s.id(), uri);
        }
        long now = System.nanoTime();
        return new Result(s.id(), uri, stop.handles(), stop.handedBytes(), stop.copiedBytes(), stop.imageBytes(),
                stop.drainNanos(), stop.exportNanos(), stop.imageNanos(), stop.restoreNanos(), now - t, now - stop.stoppedAt());
    }

    /**
     * Refuses (nothing exchanged) a session that cannot be handed over: not granted resume, no address-stable memory,
     * or memory on a device that cannot export it as POSIX file descriptors.
     */
    public static void check(Session s) throws CheckpointRefused {
        if (s.resume() == null) {
            throw new CheckpointRefused("session " + s.id() + " cannot be handed over: it was not granted resume (its"
                    + " frontend could not follow it)");
        }
        s.physicalMemory(); // refuses early: no address-stable memory, or a device that cannot export
        s.programMemory();
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
     * address the session's frontend resumes at). Returns the session id; a failure is answered and thrown.
     */
    public static long receive(Connection c, BackendServer server, String frontendUri) throws IOException, CheckpointRefused {
        return receive(c, server, frontendUri, false);
    }

    /** {@link #receive}; {@code takingOver}: on a take-over's connection, which needs no {@code --accept-migrations}. */
    static long receive(Connection c, BackendServer server, String frontendUri, boolean takingOver)
            throws IOException, CheckpointRefused {
        String refusal = server.handOverRefusal(takingOver);
        done(c, refusal == null, 0, refusal);
        if (refusal != null) {
            throw new CheckpointRefused("hand-over refused: " + refusal);
        }
        List<Integer> fds = new ArrayList<>();
        Path dir = Files.createTempDirectory("gpusockets-handover");
        Path image = dir.resolve("image");
        try {
            long id;
            long restoreNanos;
            try {
                ByteBuffer begin = ByteBuffer.allocateDirect(20);
                c.readFully(begin);
                begin.flip();
                byte[] magic = new byte[MAGIC.length];
                begin.get(magic);
                int n = begin.getInt();
                long imageBytes = begin.getLong();
                if (!Arrays.equals(magic, MAGIC) || n < 0 || n > MAX_HANDLES || imageBytes <= 0 || imageBytes > MAX_IMAGE_BYTES) {
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
                long t = System.nanoTime();
                id = server.restoreHandedOver(image, handed, CheckpointProgress.NONE, takingOver);
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
            LOG.log(System.Logger.Level.INFO, "session " + id + " handed over here (" + fds.size() + " allocations mapped,"
                    + " restore " + restoreNanos / 1_000_000 + " ms)");
            return id;
        } finally {
            for (int fd : fds) {
                closeFd(fd); // the driver holds its own references to what it imported
            }
            Files.deleteIfExists(image);
            Files.deleteIfExists(dir);
        }
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
