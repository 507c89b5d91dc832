package io.gpusockets.backend.server;

import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.ChunkHasher;
import io.gpusockets.backend.session.MigrationLanding;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;

/**
 * The target's side of a migration ({@link Migration} states the frames). Each chunk it receives is checked against
 * the hash sent with it ({@link ChunkHasher#reference} under the source's seed: a chunk damaged on the way is
 * refused). In isolation modes context and shared the session's window memory lands as it comes
 * ({@link MigrationLanding}): each LAYOUT makes the device memory of the source's windows here (and releases what
 * the source no longer has; a bad layout is refused, failing the migration, and the landing is released), and a chunk
 * that lies in landed memory is written there at once. Other chunks (memory outside the windows: module globals, the
 * program's own VMM memory; window memory the layout did not cover yet) are kept in host memory up to
 * {@code bufferBytes} and in a temp file beyond; a chunk sent again replaces the one kept, and a kept chunk moves into
 * the landing once a layout covers it.
 *
 * <p>At COMMIT it writes a checkpoint image into a temp folder: the header and arrays as sent, and the contents of
 * each memory range the landing does not hold from the kept chunks (every range covered or the migration fails
 * naming the missing chunk). Where the last layout was the final one (sent drained, so complete), the landed ranges
 * are left out of the image and the restore adopts the landed memory ({@link BackendServer#restoreLanded}: mapped at
 * the addresses the source had, no memory made or written for them): the downtime here is the replay of the records
 * and the rest, not a copy of the whole memory. Otherwise (no final layout, or isolation mode process, where an idle
 * worker process restores the session from the image: the landing is not built there) every range's contents go
 * into the image, read from the landing where they were written there, and the image is restored as a checkpoint is
 * ({@link BackendServer#restore}: the session detached, resumable under its token; in mode process DONE waits for the
 * worker's answer). DONE says how many bytes of memory contents the image carried ({@link Migration.Result#imageMemoryBytes}).
 *
 * <p>A group of sessions that migrate together ({@link Migration#runGroup}, a BEGIN of 16 bytes) is received by a
 * target of its own per member, the frames routed by their request id; in isolation context and shared each member's
 * COMMIT restores it without letting it resume, and after the last the shares are made again and all resume before the
 * one DONE ({@link #receiveGroup}); in isolation process each COMMIT writes the member's image, and after the last the
 * images are restored together, each in a worker of its own, their shares made again
 * ({@link BackendServer#restoreGroup}), before the one DONE. A failure leaves none of them.
 *
 * <p>Bounds: a chunk frame holds at most one chunk; at most {@link #MAX_CHUNKS} distinct chunks kept and
 * {@link #MAX_IMAGE_BYTES} of header and arrays (per member of a group, at most {@link #MAX_GROUP} members); a
 * layout as {@link MigrationLanding} bounds it; the temp folder and whatever the landing still holds go when the migration ends, however it ends.
 */
final class MigrationTarget implements AutoCloseable {
    static final int MAX_CHUNKS = 1 << 22;
    static final long MAX_IMAGE_BYTES = 1L << 30;
    private static final System.Logger LOG = System.getLogger("gpusockets.migration");

    private final BackendServer server;
    private final FrameChannel ch;
    private final long bufferBytes;
    private final Path dir;
    private final FileChannel spill;
    private final FileChannel header;
    private final FileChannel arrays;
    /** Chunks kept in memory, by address. */
    private final Map<Long, byte[]> kept = new HashMap<>();
    /** Chunks in the spill file, by address: offset (each address keeps its slot). */
    private final Map<Long, long[]> spilled = new HashMap<>();
    private long keptBytes, spillEnd, imageBytes;
    private long seed;
    private int chunkBytes;
    /** The landing (isolation modes context and shared), made at BEGIN; else null. */
    private MigrationLanding landing;
    /** Whether the last layout was the final one (the landing holds all the window memory). */
    private boolean finalLayout;

    MigrationTarget(BackendServer server, FrameChannel ch, long bufferBytes) throws IOException {
        this.server = server;
        this.ch = ch;
        this.bufferBytes = bufferBytes;
        this.dir = Files.createTempDirectory("gpusockets-migration");
        this.spill = open(dir.resolve("chunks"));
        this.header = open(dir.resolve("header"));
        this.arrays = open(dir.resolve("arrays"));
    }

    private static FileChannel open(Path p) throws IOException {
        return FileChannel.open(p, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
    }

    /**
     * Receives until COMMIT, restores, answers; returns the restored session's id, or -1 when the source closed the
     * connection before BEGIN (a probe such as {@code gpusockets doctor migration}: nothing to restore, nothing to log).
     */
    long receive() throws IOException {
        FrameHeader h;
        try {
            h = ch.readHeader();
        } catch (java.io.EOFException e) {
            LOG.log(System.Logger.Level.DEBUG, "migration: the source closed before BEGIN (a probe)");
            return -1;
        }
        if (h.opcode() == Opcodes.MIGRATE_BEGIN && h.length() == 16) {
            return receiveGroup(h);
        }
        if (h.opcode() != Opcodes.MIGRATE_BEGIN || h.length() != 12 || h.requestId() != 0) {
            throw new ProtocolException("migration: expected BEGIN, got " + h);
        }
        begin(ch.readBody(h.length()).order(ByteOrder.BIG_ENDIAN));
        while (true) {
            h = ch.readHeader();
            if (h.opcode() == Opcodes.MIGRATE_COMMIT) {
                return commit(ranges(h), null)[0];
            }
            frame(h);
        }
    }

    /** The most sessions one group migration carries (as the admin socket's requests name at most). */
    static final int MAX_GROUP = 64;

    /**
     * Receives a group of sessions that migrate together ({@link Migration#runGroup}; {@code first}: the first BEGIN's
     * header, its body unread): a target of its own for each member (this one for the first to begin, the others
     * with {@code bufferBytes / n} each), the frames routed by their request id; each member's COMMIT restores it
     * without letting it resume; after the last, the shares are made again and all resume ({@link BackendServer#reshareMigrated}), and
     * one DONE answers. In isolation process each COMMIT writes the member's image only, and after the last they are
     * restored together in workers ({@link BackendServer#restoreGroup}). Any failure ends every member restored so far (nothing is left here). Returns the first
     * member's session id.
     */
    private long receiveGroup(FrameHeader first) throws IOException {
        int n = -1;
        MigrationTarget[] members = null;
        boolean[] committed = null;
        int commits = 0;
        long restoreNanos = 0, imageMemory = 0;
        List<io.gpusockets.backend.session.Session> made = new java.util.ArrayList<>();
        Path[] images = null; // isolation process: each member's image, restored together after the last COMMIT
        boolean ok = false;
        try {
            FrameHeader h = first;
            while (true) {
                long member = h.requestId();
                if (h.opcode() == Opcodes.MIGRATE_BEGIN) {
                    if (h.length() != 16) {
                        throw new ProtocolException("migration: a group's BEGIN " + h);
                    }
                    ByteBuffer b = ch.readBody(h.length()).order(ByteOrder.BIG_ENDIAN);
                    int count = b.getInt(12);
                    if (n < 0) {
                        if (count < 2 || count > MAX_GROUP) {
                            throw new ProtocolException("migration: a group of " + count + " sessions (2 to " + MAX_GROUP
                                    + ")");
                        }
                        n = count;
                        members = new MigrationTarget[n];
                        committed = new boolean[n];
                        images = new Path[n];
                    }
                    if (count != n || member < 0 || member >= n || members[(int) member] != null) {
                        throw new ProtocolException("migration: BEGIN of member " + member + " of " + count + " in a group of "
                                + n + " (each member begins once)");
                    }
                    MigrationTarget t = !begun ? this : new MigrationTarget(server, ch, Math.max(bufferBytes / n, 1));
                    members[(int) member] = t;
                    t.begin(b);
                } else {
                    if (members == null || member < 0 || member >= n || members[(int) member] == null
                            || committed[(int) member]) {
                        throw new ProtocolException("migration: " + h + " for a group member that has not begun or has"
                                + " committed");
                    }
                    MigrationTarget t = members[(int) member];
                    if (h.opcode() == Opcodes.MIGRATE_COMMIT) {
                        if (server.landsMigrations()) {
                            long[] r = t.commit(ranges(h), made);
                            restoreNanos += r[1];
                            imageMemory += r[2];
                        } else { // isolation process: restored together, in workers, after the last
                            Path image = t.dir.resolve("image");
                            imageMemory += t.writeImage(image, ranges(h), false);
                            images[(int) member] = image;
                        }
                        committed[(int) member] = true;
                        if (++commits == n) {
                            long t0 = System.nanoTime();
                            List<Long> restored;
                            try {
                                if (server.landsMigrations()) {
                                    server.reshareMigrated(made);
                                    restored = made.stream().map(io.gpusockets.backend.session.Session::id).toList();
                                } else { // none is left here when it fails
                                    restored = server.restoreGroup(java.util.Arrays.asList(images), CheckpointProgress.NONE);
                                }
                            } catch (CheckpointRefused e) {
                                throw new IOException(e.getMessage(), e);
                            }
                            restoreNanos += System.nanoTime() - t0;
                            ok = true;
                            String ids = restored.stream().map(String::valueOf)
                                    .collect(java.util.stream.Collectors.joining(", "));
                            ch.send(Opcodes.MIGRATE_DONE, 0, 0, 0, Migration.done(true, restoreNanos,
                                    "restored sessions " + ids + " together", imageMemory));
                            LOG.log(System.Logger.Level.INFO, "sessions " + ids + " migrated here together (restore "
                                    + restoreNanos / 1_000_000 + " ms, " + imageMemory + " bytes of memory through the images)");
                            return restored.get(0);
                        }
                    } else {
                        t.frame(h);
                    }
                }
                h = ch.readHeader();
            }
        } finally {
            if (!ok) {
                server.unmakeMigrated(made, "its group's migration failed");
            }
            if (members != null) {
                for (MigrationTarget t : members) {
                    if (t != null && t != this) {
                        t.close();
                    }
                }
            }
        }
    }

    /** Whether BEGIN came for this target. */
    private boolean begun;

    /** COMMIT's ranges, its body read and checked. */
    private List<long[]> ranges(FrameHeader h) throws IOException {
        if (h.length() > ch.maxBody()) {
            throw new ProtocolException("migration: COMMIT of " + h.length() + " bytes");
        }
        return Migration.ranges(ch.readBody(h.length()).order(ByteOrder.BIG_ENDIAN));
    }

    /** One LAYOUT, CHUNK or IMAGE frame; anything else is refused. */
    private void frame(FrameHeader h) throws IOException {
        switch (h.opcode()) {
            case Opcodes.MIGRATE_LAYOUT -> layout(h);
            case Opcodes.MIGRATE_CHUNK -> chunk(h);
            case Opcodes.MIGRATE_IMAGE -> image(h);
            default -> throw new ProtocolException("migration: unexpected " + h);
        }
    }

    /** BEGIN's body: the hasher's seed and the chunk size (checked); the landing made where this process lands. */
    private void begin(ByteBuffer b) throws IOException {
        begun = true;
        seed = b.getLong();
        chunkBytes = b.getInt();
        if (chunkBytes <= 0 || chunkBytes % 16 != 0 || chunkBytes > ch.maxBody() - 16
                || io.gpusockets.backend.session.ChunkHasher.DEFAULT_CHUNK_BYTES % chunkBytes != 0) {
            throw new ProtocolException("migration: chunks of " + chunkBytes + " bytes (a multiple of 16 that divides "
                    + io.gpusockets.backend.session.ChunkHasher.DEFAULT_CHUNK_BYTES + ", at most a frame)");
        }
        if (server.landsMigrations()) {
            landing = new MigrationLanding(server.host().driver(), server.host().deviceCount(), chunkBytes);
        }
    }

    private void chunk(FrameHeader h) throws IOException {
        if (h.length() <= 16 || h.length() > 16 + chunkBytes) {
            throw new ProtocolException("migration: a chunk frame of " + h.length() + " bytes (chunks of " + chunkBytes + ")");
        }
        ByteBuffer b = ch.readBody(h.length()).order(ByteOrder.BIG_ENDIAN);
        long address = b.getLong(), hash = b.getLong();
        byte[] bytes = new byte[b.remaining()];
        b.get(bytes);
        if (ChunkHasher.reference(address, MemorySegment.ofArray(bytes), seed) != hash) {
            throw new ProtocolException(String.format("migration: chunk 0x%x (%d bytes) does not match its hash",
                    address, bytes.length));
        }
        if (landing != null && landing.write(address, MemorySegment.ofArray(bytes))) {
            forget(address); // what was kept for it is older
            return;
        }
        keep(address, bytes);
    }

    /** Keeps a chunk in host memory or the spill file. */
    private void keep(long address, byte[] bytes) throws IOException {
        byte[] had = kept.get(address);
        long[] slot = spilled.get(address);
        if (had == null && slot == null && kept.size() + spilled.size() >= MAX_CHUNKS) {
            throw new ProtocolException("migration: more than " + MAX_CHUNKS + " chunks");
        }
        if (had != null && had.length == bytes.length) {
            kept.put(address, bytes);
        } else if (slot != null && slot[1] == bytes.length) {
            write(spill, ByteBuffer.wrap(bytes), slot[0]);
        } else if (had == null && slot == null && keptBytes + bytes.length <= bufferBytes) {
            kept.put(address, bytes);
            keptBytes += bytes.length;
        } else {
            if (had != null) {
                kept.remove(address);
                keptBytes -= had.length;
            }
            write(spill, ByteBuffer.wrap(bytes), spillEnd);
            spilled.put(address, new long[] {spillEnd, bytes.length});
            spillEnd += bytes.length;
        }
    }

    /** Drops what is kept for {@code address} (its slot in the spill file stays unused). */
    private void forget(long address) {
        byte[] had = kept.remove(address);
        if (had != null) {
            keptBytes -= had.length;
        }
        spilled.remove(address);
    }

    /**
     * A LAYOUT: the landing made to match it ({@link MigrationLanding#apply}), then the kept chunks that now lie in
     * landed memory moved there. Without a landing it is read and checked only.
     */
    private void layout(FrameHeader h) throws IOException {
        if (h.length() > ch.maxBody() || (h.flags() != 0 && h.flags() != 1)) {
            throw new ProtocolException("migration: a layout " + h);
        }
        List<MigrationLanding.Entry> entries = MigrationLanding.decode(ch.readBody(h.length()).order(ByteOrder.BIG_ENDIAN));
        finalLayout = h.flags() == 1;
        if (landing == null) {
            return;
        }
        List<Long> made;
        try {
            made = landing.apply(entries);
        } catch (ProtocolException e) {
            landing.close(); // a bad layout leaves nothing landed
            landing = null;
            throw e;
        }
        if (made.isEmpty()) {
            return;
        }
        for (Long address : new java.util.ArrayList<>(kept.keySet())) {
            byte[] b = kept.get(address);
            if (landing.holds(address, b.length)) {
                landing.write(address, MemorySegment.ofArray(b));
                forget(address);
            }
        }
        for (Map.Entry<Long, long[]> e : new java.util.ArrayList<>(spilled.entrySet())) {
            if (landing.holds(e.getKey(), e.getValue()[1])) {
                byte[] b = new byte[(int) e.getValue()[1]];
                ByteBuffer dst = ByteBuffer.wrap(b);
                while (dst.hasRemaining()) {
                    if (spill.read(dst, e.getValue()[0] + dst.position()) < 0) {
                        throw new IOException("migration: the chunk file ended early");
                    }
                }
                landing.write(e.getKey(), MemorySegment.ofArray(b));
                forget(e.getKey());
            }
        }
    }

    private void image(FrameHeader h) throws IOException {
        if (h.length() > ch.maxBody() || imageBytes + h.length() > MAX_IMAGE_BYTES || (h.flags() != 0 && h.flags() != 1)) {
            throw new ProtocolException("migration: an image piece " + h + " (at most " + MAX_IMAGE_BYTES + " bytes in all)");
        }
        imageBytes += h.length();
        FileChannel to = h.flags() == 0 ? header : arrays;
        write(to, ch.readBody(h.length()), to.size());
    }

    private static void write(FileChannel f, ByteBuffer b, long at) throws IOException {
        while (b.hasRemaining()) {
            at += f.write(b, at);
        }
    }

    /**
     * Writes the image from the header, the kept chunks (and, without a final layout, the landed ones) and the arrays,
     * and restores it (adopting the landing where the final layout came). {@code made} null: a session alone, restored,
     * resumable and answered DONE here; else a group member, restored into {@code made} without resuming and not
     * answered (the group is, {@link #receiveGroup}). Returns {session id, restore nanoseconds, image memory bytes}.
     */
    private long[] commit(List<long[]> memory, List<io.gpusockets.backend.session.Session> made) throws IOException {
        Path image = dir.resolve("image");
        boolean landed = landing != null && finalLayout;
        long imageMemory = writeImage(image, memory, landed);
        long t = System.nanoTime();
        long id;
        long landedBytes = landed ? landing.landedBytes() : 0;
        try {
            if (made != null) {
                MigrationLanding l = landing;
                id = server.restoreMigratedMember(image, landed ? l.handOff() : null, landed ? l::adopted : () -> { },
                        made);
                return new long[] {id, System.nanoTime() - t, imageMemory};
            }
            if (landed) {
                MigrationLanding l = landing;
                id = server.restoreLanded(image, l.handOff(), l::adopted, CheckpointProgress.NONE);
            } else {
                id = server.restore(image, CheckpointProgress.NONE);
            }
        } catch (CheckpointRefused e) {
            throw new IOException(e.getMessage(), e);
        }
        long restoreNanos = System.nanoTime() - t;
        ch.send(Opcodes.MIGRATE_DONE, 0, 0, 0, Migration.done(true, restoreNanos, "restored session " + id, imageMemory));
        LOG.log(System.Logger.Level.INFO, "session " + id + " migrated here (" + memory.size() + " ranges, "
                + (landed ? landedBytes + " bytes landed as received, " : landing == null ? "" : "no final layout: ")
                + imageMemory + " bytes of memory through the image, restore " + restoreNanos / 1_000_000 + " ms)");
        return new long[] {id, restoreNanos, imageMemory};
    }

    /**
     * Writes the checkpoint image {@code image} from the header, the kept chunks (and, unless {@code landed}, the landed
     * ones) and the arrays; returns the bytes of memory contents it carries.
     */
    private long writeImage(Path image, List<long[]> memory, boolean landed) throws IOException {
        long imageMemory = 0;
        try (FileChannel out = FileChannel.open(image, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            header.transferTo(0, header.size(), out);
            int left = 0;
            for (long[] m : memory) {
                if (landed && m[1] > 0 && landing.holds(m[0], m[1])) {
                    left++;
                }
            }
            if (left > 0) { // the header ends with the count of ranges: less those left out
                ByteBuffer count = ByteBuffer.allocate(4);
                if (header.size() < 4 || header.read(count, header.size() - 4) != 4) {
                    throw new IOException("migration: the image's header is too short");
                }
                int ranges = count.flip().getInt();
                if (ranges < memory.size()) {
                    throw new ProtocolException("migration: the header lists " + ranges + " ranges, COMMIT " + memory.size());
                }
                write(out, ByteBuffer.allocate(4).putInt(ranges - left).flip(), header.size() - 4);
            }
            int imageChunk = (int) ChunkHasher.DEFAULT_CHUNK_BYTES;
            ByteBuffer buf = ByteBuffer.allocateDirect(imageChunk);
            CRC32C crc = new CRC32C();
            for (long[] m : memory) {
                long base = m[0], size = m[1];
                if (landed && size > 0 && landing.holds(base, size)) {
                    continue; // its contents are in the landing, which the restore adopts
                }
                imageMemory += size;
                write(out, ByteBuffer.allocate(21).put((byte) 0).putLong(base).putInt(0).putLong(size).flip(), out.size());
                for (long off = 0; off < size; off += imageChunk) {
                    int n = (int) Math.min(imageChunk, size - off);
                    buf.clear();
                    for (int k = 0; k < n; k += chunkBytes) {
                        long address = base + off + k;
                        int len = Math.min(chunkBytes, n - k);
                        byte[] b = kept.get(address);
                        long[] slot = spilled.get(address);
                        if (b == null && slot == null && landing != null && landing.holds(address, len)) {
                            landing.read(address, MemorySegment.ofBuffer(buf.slice(buf.position(), len)), len);
                            buf.position(buf.position() + len);
                            continue;
                        }
                        if ((b == null ? slot == null || slot[1] != len : b.length != len)) {
                            throw new IOException(String.format("migration: no chunk of %d bytes at 0x%x (range 0x%x+%d)",
                                    len, address, base, size));
                        }
                        if (b != null) {
                            buf.put(b);
                        } else {
                            ByteBuffer dst = buf.slice(buf.position(), len);
                            long at = slot[0];
                            while (dst.hasRemaining()) {
                                int r = spill.read(dst, at + dst.position());
                                if (r < 0) {
                                    throw new IOException("migration: the chunk file ended early");
                                }
                            }
                            buf.position(buf.position() + len);
                        }
                    }
                    buf.flip();
                    crc.reset();
                    crc.update(buf.duplicate());
                    ByteBuffer len = ByteBuffer.allocate(4).putInt(n).flip();
                    ByteBuffer sum = ByteBuffer.allocate(4).putInt((int) crc.getValue()).flip();
                    write(out, len, out.size());
                    write(out, buf, out.size());
                    write(out, sum, out.size());
                }
            }
            arrays.transferTo(0, arrays.size(), out.position(out.size()));
            write(out, ByteBuffer.wrap("GPUSEND!".getBytes(java.nio.charset.StandardCharsets.US_ASCII)), out.size());
        }
        return imageMemory;
    }

    /** Answers a failure (best effort: the source may be gone). */
    void fail(String why) {
        try {
            ch.send(Opcodes.MIGRATE_DONE, 0, 0, 0, Migration.done(false, 0, why, -1));
        } catch (IOException | RuntimeException ignored) {
            // the source sees the connection end instead
        }
    }

    @Override
    public void close() {
        if (landing != null) {
            landing.close();
        }
        for (FileChannel f : new FileChannel[] {spill, header, arrays}) {
            try {
                f.close();
            } catch (IOException ignored) {
                // deleted below
            }
        }
        try (var files = Files.list(dir)) {
            for (Path p : (Iterable<Path>) files::iterator) {
                Files.deleteIfExists(p);
            }
            Files.deleteIfExists(dir);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "migration: temp folder " + dir + " not removed: " + e.getMessage());
        }
    }
}
