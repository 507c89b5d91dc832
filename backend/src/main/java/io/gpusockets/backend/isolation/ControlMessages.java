package io.gpusockets.backend.isolation;

import io.gpusockets.backend.session.ShareRegistry;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntConsumer;

/**
 * The messages between the front process and a worker over the worker's control socket (fdunix://):
 * a little-endian int length (of what follows), a type byte, then the type's fields. A SESSION message
 * carries the frontend's connection as SCM_RIGHTS descriptors ({@link HandedConnection}).
 *
 * <pre>
 * worker → front                              front → worker
 *   READY     long pid                          SESSION  SessionTicket, HandedConnection (+ 1 or 2 descriptors)
 *   RESERVE   long request, byte kind, long n   ANSWER   long request, long value
 *   RELEASE   byte kind, long n                  RESUME   SessionTicket (the resuming peer's), HandedConnection
 *                                                          (+ 1 descriptor): a connection resuming the worker's session
 *   REJECTED  string what                       LIMITS   the tenant's limits after a reload
 *   USED      long request
 *   STATS     its session's figures, once a second ({@link io.gpusockets.backend.status.SessionFigures})
 *   PROGRESS  long request, string stage,       CHECKPOINT long request, byte stop, string file: checkpoint the
 *             long done, long total                        worker's session (issue 22)
 *   CHECKPOINTED long request, byte outcome,    RESTORE  long request, string file, string tenant, limits,
 *             ok: long bytes, int allocations,           long retainBytes: restore the image in file as this
 *             int records, long drainNanos,              idle worker's session (the first message instead of SESSION)
 *             long imageNanos; else string why
 *   RESTORED  long request, byte outcome,     MIGRATE  long request, string target, string frontend ("": the
 *             ok: SessionTicket (the restored            target), int n + n bytes: the backend's pre-shared key
 *             session's id, features, token,             (n = -1: none): migrate the worker's session (issue 23)
 *             identity, grace); else string why
 *   MIGRATED  long request, byte outcome,
 *             ok: the Migration.Result ({@link io.gpusockets.backend.server.Migration.Result#encode}); else string why
 *   MARKED    long mark: the answer to          TAKEOVER_MARK long mark: a backend takes this one over; the worker
 *             TAKEOVER_MARK, the last message             answers MARKED, and what it sends after that is read by the
 *             the old front reads                         backend that took over (same socket, its copy: {@link TakeOver})
 *   SHARE     long request, byte share kind,  SHARED   long request, byte outcome, done: long exporter session,
 *             long size, long object, int n +          long size, int n + n bytes (SHARE: the token; LOOKUP: the
 *             n bytes (the                             driver's IPC handle, 0 for VMM, whose descriptor comes with
 *             driver's IPC handle; 0 for VMM           it; 0 for window memory), window (LOOKUP of window memory:
 *             and window memory), window               its pieces, one descriptor each; else none); refused: int
 *             (+ 1 descriptor for VMM, 1 a piece       CUresult, string why
 *             for window memory): register an
 *             export with the front's registry
 *   LOOKUP    long request, byte share kind,
 *             64 bytes token: what a token names
 *             for this worker's session
 *   UNSHARE   byte share kind, long object: the
 *             session let go of what it exported
 *
 * a group checkpoint (sessions that share IPC memory and events, checkpointed together: {@link Workers#checkpointGroup})
 *   GROUP_DRAINED long request, byte outcome,   GROUP_DRAIN long request, byte stop: drain the session and hold it
 *             ok: long drainNanos; else string           drained for the group's next GROUP_STEP
 *             why: the session is held drained   GROUP_STEP long request (the drain's), byte step: 0 let go (the
 *   CHECKPOINTED (as above) answers a write              session runs on; an image written is deleted), 1 write
 *                                                        (+ long write request, string file, int n + n exports: byte
 *                                                        kind, long token id, 16 bytes secret, long object, long size;
 *                                                        int m + m longs: the ids of every token the group carries),
 *                                                        2 commit (the session runs on, or with stop stays frozen),
 *                                                        3 move (+ long request, string uri; a group migration,
 *                                                        drained with stop: it stays frozen, MOVED to uri goes to
 *                                                        its frontend, GROUP_STEPPED answers, the session ends:
 *                                                        {@link Workers#migrateGroup}; refused by a worker that no
 *                                                        longer holds it: it runs on there)
 * a group restore (the images restored in held workers first: {@link Workers#restoreGroup})
 *   RESHARE   long request, byte share kind,    GROUP_RESHARE long request, byte step: 1 register the session's
 *             long token id, 16 bytes secret,            exports again (RESHARE each), 2 open again what it opened
 *             long object, long size, int n + n          (LOOKUP each)
 *             bytes (an event: the driver's new
 *             IPC handle), window (memory: as
 *             SHARE's, + a descriptor a piece): an
 *             export of the restored image under its
 *             old token (answered by SHARED; the front
 *             takes only a token of that image, once)
 *   GROUP_STEPPED long request, byte outcome,
 *             refused or failed: string why
 *             (answers GROUP_RESHARE, and a
 *             GROUP_STEP move)
 * kind: 0 device memory, 1 pinned memory; string: int length + UTF-8; outcome: 0 done, 1 refused, 2 failed;
 * share kind: {@link io.gpusockets.backend.session.ShareRegistry} (1 memory, 2 event, 3 VMM), n at most
 * {@link #MAX_SHARE_BYTES}; window: int pieces (0: none, at most {@link #MAX_PIECES}), and with pieces long start
 * (where the allocation begins in the span), then each piece's long offset and long size in the span
 * ({@link io.gpusockets.backend.session.ShareRegistry.Window}), their descriptors riding on the message in that order
 * (a message of an earlier build, which ends before it, has none); a GROUP_STEP carries at most
 * {@link #MAX_GROUP_EXPORTS} exports and token ids. Only SHARE (from a worker), SESSION, RESUME and
 * SHARED (from the front) carry descriptors, at most {@link #MAX_DESCRIPTORS} a message.
 * </pre>
 *
 * <p>IPC memory of an address-stable session in isolation process (window memory: the physical allocations of its
 * address window that back a cuMemAlloc allocation, {@link io.gpusockets.backend.session.IpcCalls}) crosses in one
 * message each way: the exporter's SHARE carries every piece's descriptor, the front's registry keeps them, and the
 * SHARED answering another worker's LOOKUP carries a new descriptor of each. {@link #getWindow} checks the counts (at
 * most {@link #MAX_PIECES} pieces, as many descriptors as pieces); the registry checks the shape
 * ({@link io.gpusockets.backend.session.ShareRegistry#windowProblem}) and bounds the descriptors a session's shares
 * hold, so that no worker makes the front hold descriptors or memory without bound.
 */
final class ControlMessages {
    static final byte READY = 1;
    static final byte RESERVE = 2;
    static final byte RELEASE = 3;
    static final byte REJECTED = 4;
    static final byte USED = 5;
    static final byte STATS = 6;
    static final byte PROGRESS = 7;
    static final byte CHECKPOINTED = 8;
    static final byte RESTORED = 9;
    static final byte MIGRATED = 10;
    static final byte MARKED = 11;
    static final byte SHARE = 12;
    static final byte LOOKUP = 13;
    static final byte UNSHARE = 14;
    static final byte GROUP_DRAINED = 15;
    static final byte RESHARE = 16;
    static final byte GROUP_STEPPED = 17;
    static final byte SESSION = 20;
    static final byte ANSWER = 21;
    static final byte LIMITS = 22;
    static final byte RESUME = 23;
    static final byte CHECKPOINT = 24;
    static final byte RESTORE = 25;
    static final byte MIGRATE = 26;
    static final byte TAKEOVER_MARK = 27;
    static final byte SHARED = 28;
    static final byte GROUP_DRAIN = 29;
    static final byte GROUP_STEP = 30;
    static final byte GROUP_RESHARE = 31;

    /** GROUP_STEP's steps. */
    static final byte STEP_LET_GO = 0;
    static final byte STEP_WRITE = 1;
    static final byte STEP_COMMIT = 2;
    static final byte STEP_MOVE = 3;
    /** GROUP_RESHARE's steps. */
    static final byte STEP_EXPORT = 1;
    static final byte STEP_OPEN = 2;

    /** The most exports, and token ids, one GROUP_STEP carries (within {@link #MAX_BYTES}). */
    static final int MAX_GROUP_EXPORTS = 1024;

    /** The most bytes a SHARE or SHARED carries (the driver's IPC handle, a token: 64). */
    static final int MAX_SHARE_BYTES = 64;

    /**
     * The most pieces (physical allocations, one descriptor each) of window memory a SHARE or SHARED carries: a
     * cuMemAlloc allocation of an address window is one physical allocation (one run of granules); more than this is
     * refused to the program (CUDA_ERROR_NOT_SUPPORTED), and a message that has more is a broken peer.
     */
    static final int MAX_PIECES = 16;

    /** The most descriptors one control message carries (a connection's, or window memory's pieces). */
    static final int MAX_DESCRIPTORS = Math.max(HandedConnection.MAX_DESCRIPTORS, MAX_PIECES);

    static final byte OUTCOME_DONE = 0;
    static final byte OUTCOME_REFUSED = 1;
    static final byte OUTCOME_FAILED = 2;
    /** A RESTORED refusal that another worker process may not meet ({@code CheckpointRefused#anotherProcessMay}). */
    static final byte OUTCOME_REFUSED_HERE = 3;

    static final byte KIND_MEMORY = 0;
    static final byte KIND_PINNED = 1;

    /** Larger messages are a broken peer. */
    static final int MAX_BYTES = 64 << 10;

    private ControlMessages() {
    }

    /** A buffer to fill with one message's fields after its length and type. */
    static ByteBuffer start(byte type) {
        ByteBuffer b = ByteBuffer.allocateDirect(MAX_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(0).put(type);
        return b;
    }

    /** Sets the length and flips for sending. */
    static ByteBuffer finish(ByteBuffer b) {
        b.putInt(0, b.position() - 4);
        return b.flip();
    }

    static void putString(ByteBuffer b, String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        b.putInt(bytes.length).put(bytes);
    }

    /** As {@link #putString}, cut to {@code max} characters (a refusal's message must fit in one message). */
    static void putString(ByteBuffer b, String s, int max) {
        putString(b, s.length() <= max ? s : s.substring(0, max) + "...");
    }

    /** Reads an int length and that many bytes, at most {@link #MAX_SHARE_BYTES}. */
    static byte[] getShareBytes(ByteBuffer b) throws IOException {
        int n = b.getInt();
        if (n < 0 || n > MAX_SHARE_BYTES || n > b.remaining()) {
            throw new IOException("control message: " + n + " share bytes (0.." + MAX_SHARE_BYTES + "), " + b.remaining() + " left");
        }
        byte[] bytes = new byte[n];
        b.get(bytes);
        return bytes;
    }

    /**
     * Writes the window section: {@code w}'s pieces (none: {@code w} null), at most {@link #MAX_PIECES}; returns the
     * descriptors to send with the message, in the pieces' order.
     */
    static int[] putWindow(ByteBuffer b, ShareRegistry.Window w) {
        if (w == null) {
            b.putInt(0);
            return new int[0];
        }
        List<ShareRegistry.Piece> pieces = w.pieces();
        if (pieces.isEmpty() || pieces.size() > MAX_PIECES) {
            throw new IllegalArgumentException("a window of " + pieces.size() + " pieces (1.." + MAX_PIECES + ")");
        }
        b.putInt(pieces.size()).putLong(w.start());
        int[] fds = new int[pieces.size()];
        for (int i = 0; i < fds.length; i++) {
            ShareRegistry.Piece p = pieces.get(i);
            b.putLong(p.offset()).putLong(p.size());
            fds[i] = p.fd();
        }
        return fds;
    }

    /**
     * Reads the window section (absent, as in a message of an earlier build: none): null when it has no pieces, else
     * the window whose pieces take the descriptors that came with the message ({@code fds}, in order; taken off the
     * list). A count over {@link #MAX_PIECES}, or descriptors that are not one a piece, is a broken peer: an
     * IOException, the descriptors left in {@code fds}. The shape (offsets, sizes) is the registry's to check
     * ({@link ShareRegistry#windowProblem}).
     */
    static ShareRegistry.Window getWindow(ByteBuffer b, List<Integer> fds) throws IOException {
        int n = b.hasRemaining() ? b.getInt() : 0;
        if (n < 0 || n > MAX_PIECES) {
            throw new IOException("control message: a window of " + n + " pieces (0.." + MAX_PIECES + ")");
        }
        if (n == 0) {
            return null;
        }
        if (fds.size() != n || b.remaining() < 8 + 16L * n) {
            throw new IOException("control message: a window of " + n + " pieces with " + fds.size() + " descriptor(s) and "
                    + b.remaining() + " bytes");
        }
        long start = b.getLong();
        List<ShareRegistry.Piece> pieces = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            pieces.add(new ShareRegistry.Piece(b.getLong(), b.getLong(), fds.get(i)));
        }
        fds.clear();
        return new ShareRegistry.Window(start, List.copyOf(pieces));
    }

    static String getString(ByteBuffer b) throws IOException {
        int n = b.getInt();
        if (n < 0 || n > b.remaining()) {
            throw new IOException("control message: string of " + n + " bytes, " + b.remaining() + " left");
        }
        byte[] bytes = new byte[n];
        b.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** Reads one message (type byte first) from a peer that sends no descriptors. */
    static ByteBuffer read(Connection c) throws IOException {
        ByteBuffer len = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
        c.readFully(len);
        return body(c, len.flip().getInt(), 0, null);
    }

    /** Reads one message, passing descriptors that come with it (at most a connection's) to {@code fds}. */
    static ByteBuffer readWithDescriptors(Connection c, IntConsumer fds) throws IOException {
        return readWithDescriptors(c, HandedConnection.MAX_DESCRIPTORS, fds);
    }

    /**
     * Reads one message, passing descriptors that come with it to {@code fds}: at most {@code maxFds} (more is an
     * IOException; the kernel closes those past the bound).
     */
    static ByteBuffer readWithDescriptors(Connection c, int maxFds, IntConsumer fds) throws IOException {
        ByteBuffer len = ByteBuffer.allocateDirect(4).order(ByteOrder.LITTLE_ENDIAN);
        DescriptorPassing.receive(c, len, maxFds, fds);
        return body(c, len.flip().getInt(), maxFds, fds);
    }

    private static ByteBuffer body(Connection c, int n, int maxFds, IntConsumer fds) throws IOException {
        if (n < 1 || n > MAX_BYTES) {
            throw new IOException("control message of " + n + " bytes (1.." + MAX_BYTES + ")");
        }
        ByteBuffer b = ByteBuffer.allocateDirect(n).order(ByteOrder.LITTLE_ENDIAN);
        if (fds == null) {
            c.readFully(b);
        } else {
            DescriptorPassing.receive(c, b, maxFds, fds);
        }
        return b.flip();
    }
}
