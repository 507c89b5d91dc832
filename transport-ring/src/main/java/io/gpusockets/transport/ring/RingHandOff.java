package io.gpusockets.transport.ring;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.util.Optional;

/**
 * Moves the server's end of a ring:// connection to another process of the same host (the backend's worker
 * processes, isolation mode process), so that the client's bytes go straight between it and that process with
 * no relay, and the shared window is that process's too. A connection is two things: the shared file (rings,
 * counters, closed flags, window) and the set-up socket whose EOF tells either side the other died. The
 * process that accepted passes both descriptors (SCM_RIGHTS, done by the caller) with the ring's capacity and
 * window size; the other process {@link #adopt}s them and carries on from the shared counters as they stand;
 * then the first {@link #release}s its copies, without a sign to the client. From then on the client's
 * liveness socket reaches EOF when the new process dies (it holds the only server reference left).
 *
 * <p>A connection can be handed over only before anything but its handshake was read from it, and only while
 * its shared window was not taken.
 */
public final class RingHandOff {
    private RingHandOff() {
    }

    /**
     * What another process needs to take a connection over. The descriptors stay the connection's (until
     * {@link #release}); the caller passes copies of them.
     *
     * @param mappingFd the shared file's descriptor
     * @param liveness  the set-up socket (a JDK channel, which does not tell its descriptor: the caller finds it)
     * @param capacity  bytes of each ring
     * @param window    bytes of the shared window (0: none)
     */
    public record Parts(int mappingFd, SocketChannel liveness, long capacity, long window) {
    }

    /** The parts of a ring:// connection's server end that can be handed over, or empty for anything else. */
    public static Optional<Parts> parts(Connection c) {
        if (!(c instanceof RingConnection r) || !r.hasSharedWindow() && r.windowBytes() > 0) {
            return Optional.empty();
        }
        int fd = r.mappingDescriptor();
        Optional<SocketChannel> liveness = r.livenessChannel();
        if (fd < 0 || liveness.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(new Parts(fd, liveness.get(), r.capacity(), r.windowBytes()));
    }

    /**
     * This process's copies go after another process took the connection over: unmapped, descriptors closed,
     * no closed flag set, no shutdown(2); the client does not notice.
     */
    public static void release(Connection c) {
        ((RingConnection) c).detach();
    }

    /**
     * The server's end of a connection another process set up, from descriptors it passed: this process maps
     * the shared file (the descriptor is closed once mapped) and owns the socket's descriptor from now on.
     * Throws (having closed both) when the file is not a ring of that capacity and window.
     */
    public static Connection adopt(int mappingFd, int livenessFd, long capacity, long window, PeerInfo peer) throws IOException {
        LivenessSocket liveness = new LivenessSocket.Descriptor(livenessFd);
        try {
            SharedMapping mapping = SharedMapping.adopt(mappingFd, capacity, window);
            return new RingConnection(mapping, true, liveness, peer, BackoffIdleStrategy::new);
        } catch (IOException | RuntimeException e) {
            liveness.close();
            throw e;
        }
    }
}
