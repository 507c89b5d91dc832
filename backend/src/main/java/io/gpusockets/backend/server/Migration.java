package io.gpusockets.backend.server;

import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.ChunkHasher;
import io.gpusockets.backend.session.MigrationLanding;
import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.backend.session.Session;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A migration of a running session from this backend to another (issue 23 item 1), the source's side: one connection
 * to the target's listening URI whose HELLO asks for {@link Handshake#FEATURE_MIGRATION}, then frames on lane 0:
 *
 * <pre>
 * MIGRATE_BEGIN   u64 hasher seed, u32 chunk bytes
 * MIGRATE_LAYOUT  flags 1: final (complete, sent drained), else 0; u32 n, n x (i32 device, u64 address, u64 size):
 *                 the physical allocations of the session's address windows ({@link MigrationLanding})
 * MIGRATE_CHUNK   u64 address, u64 hash (the session's {@link ChunkHasher} under that seed), the chunk's bytes
 * MIGRATE_IMAGE   flags 0: a piece of the checkpoint image's header; flags 1: a piece of its CUDA arrays' contents
 * MIGRATE_COMMIT  u32 n, n x (u64 base, u64 size): the device memory ranges the header lists first
 * MIGRATE_DONE    (target to source) u8 ok, u64 restore nanoseconds, utf-8 message (u32 length, bytes), u64 bytes
 *                 of device memory contents the target wrote into the image at COMMIT (0 when all of it was landed)
 * </pre>
 *
 * Each round starts with a LAYOUT: the target lands the session's window memory as it receives it
 * ({@link MigrationLanding}: the chunks go straight into device memory made in that layout, and its restore at COMMIT
 * takes that memory over), so that the downtime at the target is the replay of the records and the final chunks, not
 * a copy of the whole memory; the pre-copy sends again what lay under a physical allocation the layout replaced
 * ({@link PreCopy#layout}). A layout too large for one frame goes as an empty one (not final): the target then keeps
 * the chunks and writes them into the image at COMMIT, as it does for the memory outside the windows (module
 * globals, the program's own VMM memory).
 *
 * Pre-copy rounds ({@link PreCopy}) run while the program runs, at most {@link #MAX_ROUNDS}, while the chunks a round
 * sends are fewer than the round before; then the session is drained ({@link Session#drained}, as a checkpoint with
 * stop does), the final round sends the chunks that changed, the image's header and arrays follow, COMMIT, and the
 * source waits for DONE with the session still drained. OK: the session freezes, its frontend is sent to the target
 * ({@link BackendServer#sessionMoved}). Anything else before that (a refusal, a failure, the connection lost): the
 * drain lets go and the program runs on here; the target, had it restored the session before the loss of its answer,
 * holds it detached until its grace period ends (no frontend is sent there).
 *
 * <p>Sessions that share IPC memory or events migrate together on one connection ({@link #runGroup}: the same frames,
 * each carrying its member's index as its request id, one DONE for the group; only with a target that grants
 * {@link Handshake#FEATURE_MIGRATION_GROUP}). From a backend in isolation mode process, where each session lives in a
 * worker, a group goes as the images its workers wrote, stop and copy, on the same frames ({@link ImageSender}).
 */
public final class Migration {
    /** Pre-copy rounds at most before the stop (the changed set must also shrink from one round to the next). */
    static final int MAX_ROUNDS = 8;
    /** The chunk size: 1 MiB (divides the image's chunk, fits a frame). */
    static final int CHUNK_BYTES = 1 << 20;
    /** The device staging buffer of a pre-copy round: 16 chunks. */
    static final long STAGING_BYTES = 16L * CHUNK_BYTES;
    /** The HELLO identity of a migration. */
    static final String IDENTITY = "gpusockets-migration";
    /** A piece of the image in one IMAGE frame. */
    static final int IMAGE_PIECE = 1 << 20;

    /**
     * What a migration did: each round's chunks and bytes (pre-copy rounds, then the final one), and the downtime
     * split: the drain, the final round's hash and copy, the target's restore, and the switch (the frontend told; the
     * restore is timed by the target and may begin while the source's last write returns, so the parts can sum to a
     * little more than the downtime);
     * and the bytes of memory contents the target wrote into its image at COMMIT (0 where it landed all the memory as
     * it came, -1 where the target did not say).
     */
    public record Result(long sessionId, String target, List<PreCopy.Round> rounds, long drainNanos, long hashNanos,
                         long finalCopyNanos, long restoreNanos, long switchNanos, long downtimeNanos,
                         long imageMemoryBytes) {
        /** Bytes of memory sent over all rounds. */
        public long bytes() {
            long n = 0;
            for (PreCopy.Round r : rounds) {
                n += r.sentBytes();
            }
            return n;
        }

        /**
         * Writes this result into {@code b} (a worker's answer to the front: long id, string target (int length,
         * UTF-8), int rounds, each round's fields, then the six durations and the image's memory bytes); at most {@link #ENCODED_BYTES} bytes with
         * a target of {@link #MAX_TARGET} bytes or fewer.
         */
        public void encode(ByteBuffer b) {
            byte[] t = target.getBytes(StandardCharsets.UTF_8);
            b.putLong(sessionId).putInt(t.length).put(t).putInt(rounds.size());
            for (PreCopy.Round r : rounds) {
                b.putInt(r.round()).put((byte) (r.drained() ? 1 : 0)).putInt(r.chunks()).putLong(r.bytes())
                        .putInt(r.sentChunks()).putLong(r.sentBytes()).putLong(r.hashNanos()).putLong(r.copyNanos());
            }
            b.putLong(drainNanos).putLong(hashNanos).putLong(finalCopyNanos).putLong(restoreNanos).putLong(switchNanos)
                    .putLong(downtimeNanos).putLong(imageMemoryBytes);
        }

        /** The longest target URI an encoded result carries (a migration's URI is far shorter). */
        public static final int MAX_TARGET = 4096;
        /** {@link #encode}'s bound. */
        public static final int ENCODED_BYTES = 8 + 4 + MAX_TARGET + 4 + (MAX_ROUNDS + 1) * 45 + 7 * 8;

        /** Reads what {@link #encode} wrote; a ProtocolException for what it cannot have written. */
        public static Result decode(ByteBuffer b) throws ProtocolException {
            try {
                long id = b.getLong();
                int n = b.getInt();
                if (n < 0 || n > MAX_TARGET || n > b.remaining()) {
                    throw new ProtocolException("migration result: a target of " + n + " bytes");
                }
                byte[] t = new byte[n];
                b.get(t);
                int count = b.getInt();
                if (count < 0 || count > MAX_ROUNDS + 1) {
                    throw new ProtocolException("migration result: " + count + " rounds (at most " + (MAX_ROUNDS + 1) + ")");
                }
                List<PreCopy.Round> rounds = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    rounds.add(new PreCopy.Round(b.getInt(), b.get() != 0, b.getInt(), b.getLong(), b.getInt(), b.getLong(),
                            b.getLong(), b.getLong()));
                }
                return new Result(id, new String(t, StandardCharsets.UTF_8), List.copyOf(rounds), b.getLong(), b.getLong(),
                        b.getLong(), b.getLong(), b.getLong(), b.getLong(), b.getLong());
            } catch (java.nio.BufferUnderflowException e) {
                throw new ProtocolException("migration result: truncated");
            }
        }
    }

    private Migration() {
    }

    /** What the stop produced. */
    private record Stop(long drainNanos, PreCopy.Round last, long restoreNanos, long stoppedAt, long imageMemoryBytes) {
    }

    /**
     * The switch at the end of a migration the target confirmed: tells session {@code sessionId}'s frontend to resume
     * at {@code uri} and ends the session here ({@link BackendServer#sessionMoved} where this process serves it; in a
     * worker process, the worker's own session).
     */
    @FunctionalInterface
    public interface Switch {
        void moved(long sessionId, String uri) throws CheckpointRefused;
    }

    /**
     * Tells each frontend of a group that moved ({@code moved}, to {@code uri}), even when another could not be told;
     * then throws the first refusal, the others suppressed in it.
     */
    static void switchEach(List<Session> group, Switch moved, String uri) throws CheckpointRefused {
        CheckpointRefused notSent = null;
        for (Session s : group) {
            try {
                moved.moved(s.id(), uri);
            } catch (CheckpointRefused e) {
                if (notSent == null) {
                    notSent = e;
                } else {
                    notSent.addSuppressed(e);
                }
            }
        }
        if (notSent != null) {
            throw notSent;
        }
    }

    /**
     * The source's side (see the class), run by the process that serves {@code s}: the backend itself (isolation
     * modes context and shared) or the session's worker process (mode process, control message MIGRATE). {@code psk}:
     * the key that proves this backend to the target, or null.
     */
    public static Result run(Switch moved, Session s, String targetUri, String frontendUri, byte[] psk,
                             CheckpointProgress progress) throws CheckpointRefused, IOException {
        TransportUri uri = target(targetUri);
        Connection c = Transports.connect(uri, Duration.ofSeconds(10), TransportOptions.NONE);
        try (FrameChannel ch = new FrameChannel(c)) {
            open(ch, targetUri, psk);
            ByteBuffer begin = ByteBuffer.allocate(12).putLong(s.chunkHasher().seed()).putInt(CHUNK_BYTES).flip();
            ch.send(Opcodes.MIGRATE_BEGIN, 0, 0, 0, begin);
            PreCopy.Sink sink = sink(ch, s, 0);
            Stop stop;
            List<PreCopy.Round> rounds;
            try (PreCopy pc = new PreCopy(s, CHUNK_BYTES, STAGING_BYTES)) {
                layout(ch, pc, s, false);
                PreCopy.Round prev = pc.round(sink);
                progress.progress("pre-copy", 1, MAX_ROUNDS);
                for (int i = 1; i < MAX_ROUNDS && prev.sentChunks() > 0; i++) {
                    layout(ch, pc, s, false);
                    PreCopy.Round r = pc.round(sink);
                    progress.progress("pre-copy", i + 1, MAX_ROUNDS);
                    if (r.sentChunks() >= prev.sentChunks()) {
                        break; // not shrinking: stop now
                    }
                    prev = r;
                }
                try {
                    stop = s.drained(true, progress, drainNanos -> {
                        long drainedAt = System.nanoTime(); // the stop began drainNanos before this
                        layout(ch, pc, s, true);
                        PreCopy.Round last = pc.finalRound(sink);
                        List<long[]> memory;
                        try (ImageWriter header = new ImageWriter(ch, 0); ImageWriter arrays = new ImageWriter(ch, 1)) {
                            memory = s.writeMigrationImage(header, arrays, progress);
                        }
                        commit(ch, memory, 0);
                        progress.progress("restore", 0, 1);
                        long[] done = awaitDone(ch, targetUri);
                        progress.progress("restore", 1, 1);
                        return new Stop(drainNanos, last, done[0], drainedAt - drainNanos, done[1]);
                    }, "migrated to " + targetUri + " (frozen: it resumes there)");
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted during the migration of session " + s.id());
                }
                rounds = pc.rounds();
            }
            long t = System.nanoTime();
            moved.moved(s.id(), frontendUri != null ? frontendUri : targetUri);
            long now = System.nanoTime();
            return new Result(s.id(), targetUri, rounds, stop.drainNanos(), stop.last().hashNanos(),
                    stop.last().copyNanos(), stop.restoreNanos(), now - t, now - stop.stoppedAt(), stop.imageMemoryBytes());
        }
    }

    /** The target's URI, parsed; refused, naming it, when it is not one. */
    private static TransportUri target(String targetUri) throws CheckpointRefused {
        try {
            return TransportUri.parse(targetUri);
        } catch (IllegalArgumentException e) {
            throw new CheckpointRefused("migration refused: target " + targetUri + ": " + e.getMessage());
        }
    }

    /**
     * Where the pre-copy of {@code s} sends its chunks: CHUNK frames with request id {@code member}. A chunk goes under
     * the address the program knows (the image's); a restored module global that lies elsewhere here is hashed again
     * under it (the device hashed it where it lies).
     */
    private static PreCopy.Sink sink(FrameChannel ch, Session s, int member) {
        long seed = s.chunkHasher().seed();
        return (chunk, hash, bytes) -> {
            long address = s.toProgram(chunk.address());
            long sent = address == chunk.address() ? hash : ChunkHasher.reference(address, bytes, seed);
            ch.send(Opcodes.MIGRATE_CHUNK, 0, 0, member, ByteBuffer.allocate(16).putLong(address).putLong(sent).flip(),
                    bytes.asByteBuffer());
        };
    }

    /** The COMMIT of a member: the image's memory ranges, {address, bytes} each. */
    private static void commit(FrameChannel ch, List<long[]> memory, int member) throws IOException {
        ByteBuffer commit = ByteBuffer.allocate(4 + 16 * memory.size()).putInt(memory.size());
        for (long[] m : memory) {
            commit.putLong(m[0]).putLong(m[1]);
        }
        ch.send(Opcodes.MIGRATE_COMMIT, 0, 0, member, commit.flip());
    }

    /**
     * Reads the target's DONE: {restore nanoseconds, image memory bytes (-1: not said)}; an IOException naming the
     * target's message when it failed the migration.
     */
    private static long[] awaitDone(FrameChannel ch, String targetUri) throws IOException {
        FrameHeader h = ch.readHeader();
        if (h.opcode() != Opcodes.MIGRATE_DONE || h.length() > 8192) {
            throw new ProtocolException("migration: expected the target's DONE, got " + h);
        }
        ByteBuffer b = ch.readBody(h.length()).order(java.nio.ByteOrder.BIG_ENDIAN);
        try {
            boolean ok = b.get() != 0;
            long restoreNanos = b.getLong();
            int len = b.getInt();
            if (len < 0 || len > b.remaining()) {
                throw new ProtocolException("migration: a DONE message of " + len + " bytes");
            }
            byte[] m = new byte[len];
            b.get(m);
            String message = new String(m, StandardCharsets.UTF_8);
            long imageMemory = b.remaining() >= 8 ? b.getLong() : -1;
            if (!ok) {
                throw new IOException("the target " + targetUri + " failed the migration: " + message);
            }
            return new long[] {restoreNanos, imageMemory};
        } catch (java.nio.BufferUnderflowException e) {
            throw new ProtocolException("migration: a truncated DONE");
        }
    }

    /**
     * Migrates {@code group}, sessions that share IPC memory or events (checked by the caller,
     * {@link io.gpusockets.backend.session.GroupCheckpoint#checkTogether}), together on one connection to the target
     * (issue 24 item 1; isolation context and shared at this end, any mode at the target). The HELLO asks for
     * {@link Handshake#FEATURE_MIGRATION_GROUP} too (a target that does not grant it is refused before anything is
     * sent). Every frame carries its member's index in the group as its request id:
     *
     * <pre>
     * MIGRATE_BEGIN   (one per member, before its first other frame) u64 hasher seed, u32 chunk bytes, u32 members
     * LAYOUT, CHUNK, IMAGE, COMMIT   as for one session, each member's own
     * MIGRATE_DONE    (target to source, once, after the last member's COMMIT) as for one session: ok, the restore's
     *                 nanoseconds (all members), message, bytes of memory the images carried (all members)
     * </pre>
     *
     * Each member's pre-copy rounds run as for one session, one member after the other, while the programs run; then
     * every member is drained, one inside the other's drain ({@link io.gpusockets.backend.session.GroupCheckpoint#drainedTogether}),
     * the group is checked again (a session outside it that opened an export meanwhile is refused, naming it), and each
     * member's final round, image (with what it shares, as a group checkpoint's image: {@link Session#writeMigrationImage})
     * and COMMIT follow. The target restores every member without letting any resume, makes the shares again in the
     * group restore's order, and only then answers DONE; on OK every member freezes here and each frontend is sent to
     * the target ({@code moved}, one by one). Anything else before that lets every member run on here; the target keeps
     * none of them. The results: one per member, in order, each with its own rounds and the group's shared stop.
     */
    public static List<Result> runGroup(Switch moved, List<Session> group, String targetUri, String frontendUri, byte[] psk,
                                        CheckpointProgress progress,
                                        io.gpusockets.backend.session.ShareRegistry registry)
            throws CheckpointRefused, IOException {
        TransportUri uri = target(targetUri);
        int n = group.size();
        Connection c = Transports.connect(uri, Duration.ofSeconds(10), TransportOptions.NONE);
        List<PreCopy> copies = new ArrayList<>(n);
        try (FrameChannel ch = new FrameChannel(c)) {
            open(ch, targetUri, psk, true);
            for (Session s : group) {
                s.movingWithGroup(true);
            }
            List<PreCopy.Sink> sinks = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                Session s = group.get(i);
                int member = i;
                ch.send(Opcodes.MIGRATE_BEGIN, 0, 0, member,
                        ByteBuffer.allocate(16).putLong(s.chunkHasher().seed()).putInt(CHUNK_BYTES).putInt(n).flip());
                PreCopy.Sink sink = sink(ch, s, member);
                sinks.add(sink);
                PreCopy pc = new PreCopy(s, CHUNK_BYTES, STAGING_BYTES);
                copies.add(pc);
                layout(ch, pc, s, false, member);
                PreCopy.Round prev = pc.round(sink);
                for (int r = 1; r < MAX_ROUNDS && prev.sentChunks() > 0; r++) {
                    layout(ch, pc, s, false, member);
                    PreCopy.Round next = pc.round(sink);
                    if (next.sentChunks() >= prev.sentChunks()) {
                        break; // not shrinking: stop now
                    }
                    prev = next;
                }
                progress.progress("pre-copy", i + 1, n);
            }
            long[] drainNanos = new long[n];
            PreCopy.Round[] last = new PreCopy.Round[n];
            long[] stop = new long[3]; // drained at, restore nanos, image memory bytes
            try {
                io.gpusockets.backend.session.GroupCheckpoint.drainedTogether(group, true, progress, drainNanos,
                        "migrated with its group to " + targetUri + " (frozen: it resumes there)", () -> {
                            stop[0] = System.nanoTime();
                            io.gpusockets.backend.session.GroupCheckpoint.checkDrained(group, registry, "migration");
                            for (int i = 0; i < n; i++) {
                                Session s = group.get(i);
                                layout(ch, copies.get(i), s, true, i);
                                last[i] = copies.get(i).finalRound(sinks.get(i));
                                List<long[]> memory;
                                try (ImageWriter header = new ImageWriter(ch, 0, i);
                                     ImageWriter arrays = new ImageWriter(ch, 1, i)) {
                                    memory = s.writeMigrationImage(header, arrays, progress, registry);
                                }
                                commit(ch, memory, i);
                            }
                            progress.progress("restore", 0, 1);
                            long[] done = awaitDone(ch, targetUri);
                            stop[1] = done[0];
                            stop[2] = done[1];
                            progress.progress("restore", 1, 1);
                        });
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted during the migration of sessions " + group.stream().map(Session::id)
                        .toList());
            }
            long t = System.nanoTime();
            switchEach(group, moved, frontendUri != null ? frontendUri : targetUri);
            long now = System.nanoTime();
            long drainAll = java.util.Arrays.stream(drainNanos).sum(); // nested: one after the other, all before the final rounds
            List<Result> results = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                List<PreCopy.Round> rounds = copies.get(i).rounds();
                results.add(new Result(group.get(i).id(), targetUri, rounds, drainNanos[i], last[i].hashNanos(),
                        last[i].copyNanos(), stop[1], now - t, now - stop[0] + drainAll, stop[2]));
            }
            return List.copyOf(results);
        } finally {
            for (PreCopy pc : copies) {
                pc.close();
            }
            for (Session s : group) {
                s.movingWithGroup(false);
            }
        }
    }

    /**
     * A group migration whose members' images were written by their workers (isolation process at this end:
     * {@link BackendServer#migrateGroup}, {@link io.gpusockets.backend.isolation.Workers#migrateGroup}): stop and copy,
     * no pre-copy. {@link #open} connects and says HELLO before any member is drained (a target that does not take
     * groups is refused with nothing drained); {@link #send} sends each image as {@link #runGroup}'s frames, read back
     * by {@link io.gpusockets.backend.session.CheckpointImageParts}: BEGIN, no LAYOUT (the target lands nothing: every
     * range's contents go into its image), the device memory as CHUNKs under a seed of this migration, the header and
     * the arrays as IMAGE, COMMIT; then it waits for the one DONE. The target cannot tell these frames from
     * {@link #runGroup}'s: the wire is unchanged.
     */
    public static final class ImageSender implements AutoCloseable {
        private final FrameChannel ch;
        private final String targetUri;

        private ImageSender(FrameChannel ch, String targetUri) {
            this.ch = ch;
            this.targetUri = targetUri;
        }

        /** Connects to {@code targetUri} and asks for a group migration ({@code psk}: this backend's key, or null). */
        public static ImageSender open(String targetUri, byte[] psk) throws CheckpointRefused, IOException {
            TransportUri uri = target(targetUri);
            Connection c = Transports.connect(uri, Duration.ofSeconds(10), TransportOptions.NONE);
            FrameChannel ch = new FrameChannel(c);
            try {
                Migration.open(ch, targetUri, psk, true);
                return new ImageSender(ch, targetUri);
            } catch (CheckpointRefused | IOException | RuntimeException e) {
                ch.close();
                throw e;
            }
        }

        /**
         * Sends {@code images} (one a member, in order) and waits for DONE: {restore nanoseconds, image memory bytes
         * (-1: not said)} then each member's bytes of device memory sent; an IOException naming the target's message
         * when it failed the migration.
         */
        public long[] send(List<java.nio.file.Path> images, CheckpointProgress progress) throws IOException {
            int n = images.size();
            if (n < 2 || n > MigrationTarget.MAX_GROUP) {
                throw new IllegalArgumentException("images=" + n);
            }
            long[] out = new long[2 + n];
            long seed = new java.security.SecureRandom().nextLong();
            for (int i = 0; i < n; i++) {
                int member = i;
                ch.send(Opcodes.MIGRATE_BEGIN, 0, 0, member,
                        ByteBuffer.allocate(16).putLong(seed).putInt(CHUNK_BYTES).putInt(n).flip());
                List<long[]> memory;
                try (ImageWriter header = new ImageWriter(ch, 0, member); ImageWriter arrays = new ImageWriter(ch, 1, member)) {
                    memory = io.gpusockets.backend.session.CheckpointImageParts.read(images.get(i), CHUNK_BYTES,
                            new io.gpusockets.backend.session.CheckpointImageParts.Sink() {
                                @Override
                                public void header(ByteBuffer piece) throws IOException {
                                    header.write(piece);
                                }

                                @Override
                                public void memory(long address, java.lang.foreign.MemorySegment bytes) throws IOException {
                                    long hash = ChunkHasher.reference(address, bytes, seed);
                                    ch.send(Opcodes.MIGRATE_CHUNK, 0, 0, member,
                                            ByteBuffer.allocate(16).putLong(address).putLong(hash).flip(), bytes.asByteBuffer());
                                    out[2 + member] += bytes.byteSize();
                                }

                                @Override
                                public void arrays(ByteBuffer piece) throws IOException {
                                    arrays.write(piece);
                                }
                            });
                }
                commit(ch, memory, member);
                progress.progress("send", i + 1, n);
            }
            progress.progress("restore", 0, 1);
            long[] done = awaitDone(ch, targetUri);
            progress.progress("restore", 1, 1);
            out[0] = done[0];
            out[1] = done[1];
            return out;
        }

        @Override
        public void close() {
            ch.close();
        }
    }

    /**
     * Sends the window layout ({@link MigrationLanding#encode}) and tells the pre-copy; {@code last}: the final one, on
     * the drained session (flags 1). One too large for a frame goes empty and not final (the target then lands nothing).
     */
    private static void layout(FrameChannel ch, PreCopy pc, Session s, boolean last) throws IOException {
        layout(ch, pc, s, last, 0);
    }

    /** {@link #layout} of group member {@code member} (the frame's request id). */
    private static void layout(FrameChannel ch, PreCopy pc, Session s, boolean last, int member) throws IOException {
        List<io.gpusockets.backend.session.PhysicalMemory> layout = s.windowLayout();
        boolean fits = 4L + (long) MigrationLanding.ENTRY_BYTES * layout.size() <= ch.maxBody()
                && layout.size() <= MigrationLanding.MAX_ENTRIES;
        if (!fits) {
            layout = List.of();
        }
        pc.layout(layout);
        ch.send(Opcodes.MIGRATE_LAYOUT, last && fits ? 1 : 0, 0, member, MigrationLanding.encode(layout));
    }

    /** The handshake of a migration: SERVER_HELLO, HELLO with the migration bit (and the key's proof), WELCOME. */
    private static void open(FrameChannel ch, String target, byte[] psk) throws IOException, CheckpointRefused {
        open(ch, target, psk, false);
    }

    /**
     * {@link #open}; {@code group}: the HELLO asks for {@link Handshake#FEATURE_MIGRATION_GROUP} too, and a target that
     * does not grant it is refused before anything is sent.
     */
    private static void open(FrameChannel ch, String target, byte[] psk, boolean group) throws IOException, CheckpointRefused {
        FrameHeader h = ch.readHeader();
        if (h.opcode() != Opcodes.SERVER_HELLO || h.length() > 4096) {
            throw new ProtocolException(target + " is not a GPUsockets backend (first frame " + h + ")");
        }
        Handshake.ServerHello hello = Handshake.ServerHello.decode(ch.readBody(h.length()));
        if (Handshake.PROTOCOL_VERSION < hello.minVersion() || Handshake.PROTOCOL_VERSION > hello.maxVersion()) {
            throw new CheckpointRefused("migration refused: " + target + " speaks protocol versions " + hello.minVersion()
                    + ".." + hello.maxVersion() + "; this backend speaks " + Handshake.PROTOCOL_VERSION);
        }
        byte[] proof = new byte[0];
        if (hello.authMethod() == Handshake.AUTH_PSK && psk != null) {
            proof = Handshake.proof(psk, hello.nonce(), IDENTITY);
        }
        int features = Handshake.FEATURE_MIGRATION | (group ? Handshake.FEATURE_MIGRATION_GROUP : 0);
        ch.send(Opcodes.HELLO, 0, 0, 0, new Handshake.Hello(Handshake.PROTOCOL_VERSION, features, IDENTITY, proof).encode());
        h = ch.readHeader();
        if (h.opcode() == Opcodes.REFUSE && h.length() <= 8192) {
            throw new CheckpointRefused("migration refused by " + target + ": "
                    + Handshake.readString(ch.readBody(h.length())));
        }
        if (h.opcode() != Opcodes.WELCOME || h.length() > 8192) {
            throw new ProtocolException("migration: expected WELCOME from " + target + ", got " + h);
        }
        Handshake.Welcome w = Handshake.Welcome.decode(ch.readBody(h.length()));
        if ((w.features() & Handshake.FEATURE_MIGRATION) == 0) {
            throw new CheckpointRefused("migration refused: " + target + " did not grant it");
        }
        if (group && (w.features() & Handshake.FEATURE_MIGRATION_GROUP) == 0) {
            throw new CheckpointRefused("migration refused: " + target + " does not take sessions that share IPC memory"
                    + " or events migrating together (a backend older than this one):"
                    + " nothing was sent, the sessions run on here");
        }
    }

    /** A channel that sends what is written to it as IMAGE frames of at most {@link #IMAGE_PIECE} bytes. */
    private static final class ImageWriter implements WritableByteChannel {
        private final FrameChannel ch;
        private final int flags;
        private final int member;
        private final ByteBuffer piece = ByteBuffer.allocate(IMAGE_PIECE);
        private boolean open = true;

        ImageWriter(FrameChannel ch, int flags) {
            this(ch, flags, 0);
        }

        ImageWriter(FrameChannel ch, int flags, int member) {
            this.ch = ch;
            this.flags = flags;
            this.member = member;
        }

        @Override
        public int write(ByteBuffer src) throws IOException {
            int n = src.remaining();
            while (src.hasRemaining()) {
                int k = Math.min(src.remaining(), piece.remaining());
                piece.put(piece.position(), src, src.position(), k);
                piece.position(piece.position() + k);
                src.position(src.position() + k);
                if (!piece.hasRemaining()) {
                    flush();
                }
            }
            return n;
        }

        private void flush() throws IOException {
            if (piece.position() > 0) {
                ch.send(Opcodes.MIGRATE_IMAGE, flags, 0, member, piece.flip());
                piece.clear();
            }
        }

        @Override
        public boolean isOpen() {
            return open;
        }

        @Override
        public void close() throws IOException {
            if (open) {
                open = false;
                flush();
            }
        }
    }

    /** DONE's body. */
    static ByteBuffer done(boolean ok, long restoreNanos, String message, long imageMemoryBytes) {
        byte[] m = message.getBytes(StandardCharsets.UTF_8);
        if (m.length > 4000) {
            m = java.util.Arrays.copyOf(m, 4000);
        }
        return ByteBuffer.allocate(21 + m.length).put((byte) (ok ? 1 : 0)).putLong(restoreNanos).putInt(m.length).put(m)
                .putLong(imageMemoryBytes).flip();
    }

    static List<long[]> ranges(ByteBuffer b) throws ProtocolException {
        int n = b.getInt();
        if (n < 0 || n > b.remaining() / 16) {
            throw new ProtocolException("migration: COMMIT names " + n + " ranges in " + b.remaining() + " bytes");
        }
        List<long[]> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            long base = b.getLong(), size = b.getLong();
            if (size < 0) {
                throw new ProtocolException("migration: a range of " + size + " bytes");
            }
            out.add(new long[] {base, size});
        }
        return out;
    }
}
