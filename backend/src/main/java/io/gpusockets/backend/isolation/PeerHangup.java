package io.gpusockets.backend.isolation;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.util.OptionalInt;

/**
 * Whether one connection's peer has gone, asked without reading: for a session reader that stops reading
 * (its body budget used up, e.g. by frames queued behind a lane blocked in the driver) and must still end
 * the session when its frontend goes. The transport's own answer ({@link Connection#peerClosed}) counts
 * first; for the JDK's tcp:// and unix:// channels (and the TCP socket under tls://), which have none, the
 * socket's descriptor is found once
 * ({@link SocketHandOff#descriptor}) and the kernel asked (poll POLLRDHUP, {@link DescriptorPassing#hungUp}),
 * which sees the peer's close even behind unread bytes. Made lazily, by the one thread that asks.
 */
public final class PeerHangup {
    private final Connection connection;
    /** The socket's descriptor: -2 not yet looked for, -1 none to be had. */
    private int fd = -2;
    /** The channel that owns {@link #fd} (while it is open, the descriptor is that socket's). */
    private java.nio.channels.SocketChannel channel;

    public PeerHangup(Connection connection) {
        this.connection = connection;
    }

    /** Whether the peer is known to have gone; false when nothing can tell. */
    public boolean gone() {
        if (connection.peerClosed()) {
            return true;
        }
        if (fd == -2) {
            fd = -1;
            channel = connection.livenessChannel().orElse(null);
            if (channel != null && channel.isOpen()) {
                try {
                    OptionalInt found = SocketHandOff.descriptor(channel);
                    fd = found.orElse(-1);
                } catch (IOException | RuntimeException e) {
                    fd = -1; // cannot tell: the reader waits for the budget as before
                }
            }
        }
        return fd >= 0 && channel.isOpen() && DescriptorPassing.hungUp(fd);
    }
}
