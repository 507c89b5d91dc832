package io.gpusockets.backend.isolation;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.ring.RingHandOff;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * How a frontend's connection crosses from the front to the worker that serves its session: the tail of the
 * SESSION control message (after the {@link SessionTicket}) and the descriptors that ride on it.
 * <pre>
 *   kind SOCKET (0)                                 1 descriptor: the connected stream socket
 *   kind RING   (1)  long capacity, long window     2 descriptors: the shared file, the set-up socket
 * </pre>
 * SOCKET carries tcp://, unix://, vsock:// and fdunix:// connections (and the worker's end of a relay pair);
 * RING carries a ring:// connection whole ({@link RingHandOff}): the worker maps the same shared memory, the
 * frontend's bytes go straight between it and the worker, and the shared window is the worker's. Connections
 * whose state lives in the front process (TLS: its session keys and record sequence; vchan://: libxenvchan's
 * grant mappings and event channel, set up with the guest for this process) cannot cross: the front relays
 * their frames ({@link FrameRelay}).
 */
final class HandedConnection {
    static final byte SOCKET = 0;
    static final byte RING = 1;
    /** Descriptors a SESSION message carries at most. */
    static final int MAX_DESCRIPTORS = 2;

    /**
     * What the front sends for one connection; {@link #release} lets go of the front's copies once the worker
     * has them.
     */
    record Outgoing(byte kind, int[] descriptors, long capacity, long window, Runnable release) {
        void put(ByteBuffer m) {
            m.put(kind);
            if (kind == RING) {
                m.putLong(capacity).putLong(window);
            }
        }
    }

    /** What a worker received: its session's ticket and connection. */
    record Received(SessionTicket ticket, Connection connection) {
    }

    private HandedConnection() {
    }

    /** What to send for {@code c}, or empty when it cannot cross whole (the front relays it). */
    static Optional<Outgoing> of(Connection c) throws IOException {
        Optional<RingHandOff.Parts> ring = RingHandOff.parts(c);
        if (ring.isPresent()) {
            RingHandOff.Parts p = ring.get();
            OptionalInt liveness = SocketHandOff.descriptor(p.liveness());
            if (liveness.isEmpty()) {
                throw new IOException("the ring's set-up socket could not be found to hand over");
            }
            return Optional.of(new Outgoing(RING, new int[] {p.mappingFd(), liveness.getAsInt()}, p.capacity(), p.window(),
                    () -> RingHandOff.release(c)));
        }
        OptionalInt fd = SocketHandOff.descriptor(c);
        return fd.isEmpty() ? Optional.empty() : Optional.of(socket(fd.getAsInt(), () -> SocketHandOff.release(c)));
    }

    /** A stream socket's descriptor (of a relay pair: {@code release} closes the front's copy). */
    static Outgoing socket(int fd, Runnable release) {
        return new Outgoing(SOCKET, new int[] {fd}, 0, 0, release);
    }

    /** Whether {@code c} keeps its shared window when it crosses to a worker (a ring:// connection does). */
    static boolean keepsWindow(Connection c) {
        return RingHandOff.parts(c).isPresent();
    }

    /**
     * A worker's side: waits for the SESSION message on {@code control} and makes its connection; null when the
     * front closed the control socket first (stopped while idle).
     */
    static Received receive(Connection control) throws IOException {
        List<Integer> fds = new ArrayList<>(MAX_DESCRIPTORS);
        ByteBuffer m;
        try {
            m = ControlMessages.readWithDescriptors(control, fds::add);
        } catch (java.io.EOFException e) {
            fds.forEach(DescriptorPassing::close);
            return null;
        }
        if (m.get() != ControlMessages.SESSION) {
            fds.forEach(DescriptorPassing::close);
            throw new IOException("the front sent no session");
        }
        return session(m, fds);
    }

    /** The ticket and connection of a SESSION message whose type byte was read, its descriptors in {@code fds}. */
    static Received session(ByteBuffer m, List<Integer> fds) throws IOException {
        try {
            SessionTicket t = SessionTicket.decode(m);
            return new Received(t, adopt(m, t, fds));
        } catch (IOException | RuntimeException e) {
            fds.forEach(DescriptorPassing::close);
            throw e instanceof IOException io ? io : new IOException("bad SESSION message: " + e, e);
        }
    }

    /**
     * The connection a SESSION or RESUME message carries: its kind and fields (what follows the ticket in
     * {@code m}) and the descriptors that came with it, which the connection owns from then on ({@code fds} is
     * emptied; on failure the caller closes what is left in it).
     */
    static Connection adopt(ByteBuffer m, SessionTicket t, List<Integer> fds) throws IOException {
        byte kind = m.get();
        int n = fds.size();
        if (!(kind == SOCKET && n == 1 || kind == RING && n == 2)) {
            throw new IOException("connection of kind " + kind + " with " + n + " descriptor(s)");
        }
        long capacity = kind == RING ? m.getLong() : 0;
        long window = kind == RING ? m.getLong() : 0;
        int[] taken = fds.stream().mapToInt(Integer::intValue).toArray();
        fds.clear(); // from here the adopting call owns them (and closes them when it fails)
        return kind == SOCKET ? DescriptorPassing.adopt(taken[0], t.peer())
                : RingHandOff.adopt(taken[0], taken[1], capacity, window, t.peer());
    }
}
