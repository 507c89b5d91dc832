package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * What a resumable session ({@link Handshake#FEATURE_RESUME}) keeps so that a lost connection loses no call:
 *
 * <ul>
 *   <li><b>Received</b> (the reader's alone): per lane, the request id of the last call frame that arrived
 *       whole and how many DATA frames of it arrived since. RESUMED sends it, and the frontend resends
 *       what follows. Request ids rise on each lane; a call frame whose id does not is a protocol
 *       violation (a frontend that resends what already arrived would run a call twice).</li>
 *   <li><b>Replies not yet acknowledged</b>: a copy of every frame the backend sends for a call (its DATA,
 *       then its reply), per lane, until a later call of that lane carries {@link FrameHeader#FLAG_ACKED}
 *       (the frontend had every earlier reply of the lane; a caller waits for its reply before its thread's
 *       next call, so this is one reply per lane but in a batch). The copies are bounded by
 *       {@link #boundBytes} per session: a reply beyond it is sent but not kept, and a resume that would
 *       need it is refused (the session then ends, as without resume).</li>
 * </ul>
 *
 * <p>An entry is sent live while the channel it started on is the session's; once the channel changed
 * under it (the connection was lost mid-reply), its frames are only kept, and the whole entry is sent on
 * the new channel when it completes ({@link #send}) or when the session resumes ({@link #resend}), never
 * both: each entry remembers the channel it went out on whole. A frontend skips a reply it already has.
 *
 * <p>Output placed in a ring's shared window goes out live as a reference into it, but is kept as the bytes
 * ({@link #sendWindowData}): a resume brings a new ring with a window of its own, and sends them as plain DATA.
 */
final class ResumeLog {
    /** Default {@link #boundBytes}: the retained replies of one session. */
    static final long DEFAULT_BOUND_BYTES = 8L << 20;

    private static final class Entry {
        final long requestId;
        final List<int[]> heads = new ArrayList<>(2);      // opcode, flags per frame
        final List<ByteBuffer> bodies = new ArrayList<>(2);
        long bytes;
        boolean complete;
        /** Frames dropped for the bound: the entry cannot be resent. */
        boolean dropped;
        /** The channel the entry's frames went out on live, or null. */
        FrameChannel startedOn;
        /** Begun while detached, or on a channel since lost: its frames go out only whole, once complete. */
        boolean diverted;
        /** The channel the whole entry went out on, or null. */
        FrameChannel sentWholeOn;

        Entry(long requestId) {
            this.requestId = requestId;
        }
    }

    private final long boundBytes;
    private final Map<Integer, ArrayDeque<Entry>> lanes = new ConcurrentHashMap<>();
    /** Guarded by this. */
    private long bytes;
    /** The reader's: lane → {last call's request id, DATA frames of it since}. */
    private final Map<Integer, long[]> received = new HashMap<>();

    ResumeLog(long boundBytes) {
        this.boundBytes = boundBytes;
    }

    /** A complete reply kept for a lane (a checkpoint image carries them): its frames' heads and bodies. */
    record Kept(int lane, long requestId, List<int[]> heads, List<byte[]> bodies) {
    }

    /**
     * For a checkpoint, with the session drained (no call running, no frame being received): the received ids by
     * lane ({lastRequestId, dataFrames}), a copy.
     */
    Map<Integer, long[]> receivedCopy() {
        Map<Integer, long[]> copy = new java.util.TreeMap<>();
        received.forEach((l, v) -> copy.put(l, v.clone()));
        return copy;
    }

    /**
     * For a checkpoint, with the session drained: every reply kept and not yet acknowledged, in order per lane.
     * Throws IllegalStateException naming a reply that was beyond the bound (a resume would need it) or unfinished.
     */
    List<Kept> kept() {
        List<Kept> out = new ArrayList<>();
        for (Map.Entry<Integer, ArrayDeque<Entry>> l : new java.util.TreeMap<>(lanes).entrySet()) {
            ArrayDeque<Entry> q = l.getValue();
            synchronized (q) {
                for (Entry e : q) {
                    if (e.dropped || !e.complete) {
                        throw new IllegalStateException("the reply to request " + e.requestId + " on lane " + l.getKey()
                                + (e.dropped ? " was larger than the resume retention bound (" + boundBytes + " bytes)"
                                : " is not complete"));
                    }
                    List<byte[]> bodies = new ArrayList<>();
                    for (ByteBuffer b : e.bodies) {
                        byte[] a = new byte[b.remaining()];
                        b.duplicate().get(a);
                        bodies.add(a);
                    }
                    out.add(new Kept(l.getKey(), e.requestId, List.copyOf(e.heads), bodies));
                }
            }
        }
        return out;
    }

    /** A restored session's log: what the checkpointed one had received and kept (sent on its resume). */
    static ResumeLog restored(long boundBytes, Map<Integer, long[]> received, List<Kept> kept) {
        ResumeLog log = new ResumeLog(boundBytes);
        received.forEach((l, v) -> log.received.put(l, v.clone()));
        for (Kept k : kept) {
            Entry e = new Entry(k.requestId());
            for (int i = 0; i < k.heads().size(); i++) {
                e.heads.add(k.heads().get(i).clone());
                e.bodies.add(ByteBuffer.wrap(k.bodies().get(i)));
                e.bytes += k.bodies().get(i).length;
            }
            e.complete = true;
            log.lane(k.lane()).addLast(e);
            log.bytes += e.bytes;
        }
        return log;
    }

    /** The reader received a whole frame; throws if a call's request id does not rise on its lane. */
    void received(FrameHeader h) throws io.gpusockets.protocol.wire.ProtocolException {
        long[] r = received.computeIfAbsent(h.lane(), l -> new long[2]);
        if (h.opcode() == Opcodes.DATA) {
            r[1]++;
            return;
        }
        if (h.requestId() <= r[0]) {
            throw new io.gpusockets.protocol.wire.ProtocolException("request id " + h.requestId() + " on lane " + h.lane()
                    + " does not follow " + r[0] + " (a call sent twice)");
        }
        r[0] = h.requestId();
        r[1] = 0;
        if (h.acked()) {
            ack(h.lane(), h.requestId());
        }
    }

    /** What RESUMED tells the frontend. Only on the reader's thread. */
    Handshake.ResumeState state() {
        Map<Integer, long[]> copy = new HashMap<>();
        received.forEach((l, v) -> copy.put(l, v.clone()));
        return new Handshake.ResumeState(copy);
    }

    private ArrayDeque<Entry> lane(int lane) {
        return lanes.computeIfAbsent(lane, l -> new ArrayDeque<>());
    }

    /** Forgets the lane's replies to requests before {@code requestId}. */
    private void ack(int lane, long requestId) {
        ArrayDeque<Entry> q = lanes.get(lane);
        if (q == null) {
            return;
        }
        synchronized (q) {
            for (Entry e; (e = q.peekFirst()) != null && e.requestId < requestId; ) {
                q.pollFirst();
                synchronized (this) {
                    bytes -= e.bytes;
                }
            }
        }
    }

    /**
     * Keeps a copy of one frame the backend sends for a call and sends it on {@code channel} when that is
     * where its entry goes live; swallows a send that fails (the reader notices the loss and the session
     * waits to resume). {@code channel} null: detached.
     */
    void send(Supplier<FrameChannel> channel, int opcode, int flags, int lane, long requestId, ByteBuffer... body) {
        send(channel, opcode, flags, lane, requestId, body, null, null);
    }

    /**
     * {@link #send} for a window DATA frame of a call's output: kept as the bytes the window holds ({@code bytes}, a
     * plain DATA frame: the window belongs to its connection, and the connection a resume brings has another), sent
     * live as the reference {@code ref} on the window's own connection ({@code windowChannel}), else as the bytes.
     */
    void sendWindowData(Supplier<FrameChannel> channel, Object windowChannel, int lane, long requestId, ByteBuffer ref,
                        ByteBuffer bytes) {
        send(channel, Opcodes.DATA, 0, lane, requestId, new ByteBuffer[] {bytes}, ref, windowChannel);
    }

    private void send(Supplier<FrameChannel> channel, int opcode, int flags, int lane, long requestId, ByteBuffer[] body,
                      ByteBuffer windowRef, Object windowChannel) {
        ArrayDeque<Entry> q = lane(lane);
        synchronized (q) {
            Entry e = q.peekLast();
            if (e == null || e.requestId != requestId) {
                e = new Entry(requestId);
                q.addLast(e);
            }
            long n = 0;
            for (ByteBuffer b : body) {
                n += b.remaining();
            }
            if (!e.dropped && reserve(n)) {
                ByteBuffer copy = ByteBuffer.allocate((int) n);
                for (ByteBuffer b : body) {
                    copy.put(b.duplicate());
                }
                e.heads.add(new int[] {opcode, flags});
                e.bodies.add(copy.flip());
                e.bytes += n;
            } else if (!e.dropped) {
                e.dropped = true;
                unreserve(e.bytes);
                e.bytes = 0;
                e.heads.clear();
                e.bodies.clear();
            }
            boolean last = (flags & FrameHeader.FLAG_REPLY) != 0;
            e.complete = last;
            FrameChannel ch = channel.get();
            if (e.startedOn == null && !e.diverted) {
                if (ch == null) {
                    e.diverted = true; // begun while detached: never live from its middle
                } else {
                    e.startedOn = ch;
                }
            }
            if (ch == null) {
                return;
            }
            try {
                if (!e.diverted && e.startedOn == ch) {
                    if (windowRef != null && ch == windowChannel) {
                        ch.send(opcode, flags | FrameHeader.FLAG_WINDOW, lane, requestId, windowRef);
                    } else {
                        ch.send(opcode, flags, lane, requestId, body);
                    }
                    if (last) {
                        e.sentWholeOn = ch;
                    }
                } else if (last && !e.dropped) {
                    sendWhole(ch, lane, e); // it began on a channel since lost, or while detached
                } else if (last) {
                    // too large to keep and cut off from its start: the frontend cannot get it; closing makes
                    // the resume that follows refuse (resend) and the session end, rather than leave a call waiting
                    ch.close();
                }
            } catch (IOException lost) {
                // kept: the session resumes on a new channel and sends it there, or ends
            }
        }
    }

    private synchronized boolean reserve(long n) {
        if (bytes + n > boundBytes) {
            return false;
        }
        bytes += n;
        return true;
    }

    private synchronized void unreserve(long n) {
        bytes -= n;
    }

    /** Bytes kept now. */
    synchronized long bytes() {
        return bytes;
    }

    /**
     * After a resume: sends every whole reply not yet sent whole on {@code ch}. Returns null, or why the
     * session cannot resume (a reply it needs was beyond the bound).
     */
    String resend(FrameChannel ch) throws IOException {
        for (Map.Entry<Integer, ArrayDeque<Entry>> l : lanes.entrySet()) {
            ArrayDeque<Entry> q = l.getValue();
            synchronized (q) {
                for (Iterator<Entry> it = q.iterator(); it.hasNext(); ) {
                    Entry e = it.next();
                    if (e.dropped) {
                        return "the reply to request " + e.requestId + " on lane " + l.getKey() + " was not kept: with the"
                                + " replies of the session's other threads not yet acknowledged it was beyond the resume"
                                + " retention bound (" + boundBytes + " bytes)";
                    }
                    if (e.complete && e.sentWholeOn != ch) {
                        sendWhole(ch, l.getKey(), e);
                    } else if (!e.complete && e.startedOn != ch) {
                        e.diverted = true; // its last frame sends it whole
                    }
                }
            }
        }
        return null;
    }

    private static void sendWhole(FrameChannel ch, int lane, Entry e) throws IOException {
        for (int i = 0; i < e.heads.size(); i++) {
            int[] h = e.heads.get(i);
            ch.send(h[0], h[1], lane, e.requestId, e.bodies.get(i).duplicate());
        }
        e.startedOn = ch;
        e.sentWholeOn = ch;
        e.diverted = false;
    }
}
