package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.Transport;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;

/**
 * {@code tcp://host:port} and {@code unix:///path}: JDK stream sockets, one {@link SocketConnection} per
 * socket (blocking mode, but for an accepted one's handshake: see {@link ChannelAccess}). Found by {@link io.gpusockets.protocol.transport.Transports}
 * through {@link java.util.ServiceLoader}.
 *
 * <p>Host names are resolved before the connect timeout starts, so a slow resolver is not covered by it.
 */
public final class SocketTransport implements Transport {
    static final String TCP = "tcp";
    static final String UNIX = "unix";

    /** For {@link java.util.ServiceLoader}. */
    public SocketTransport() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of(TCP, UNIX);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout) throws IOException {
        Objects.requireNonNull(timeout, "timeout");
        Endpoint endpoint = Endpoint.of(uri);
        if (!endpoint.isUnix() && uri.port() == 0) {
            throw new IllegalArgumentException("port 0 is for listening only: uri=" + uri);
        }
        SocketChannel channel = TimedConnect.open(endpoint, timeout);
        try {
            ChannelAccess io = ChannelAccess.direct(channel);
            return endpoint.isUnix() ? SocketConnection.unix(io, uri) : SocketConnection.tcp(io);
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    @Override
    public Listener listen(TransportUri uri) throws IOException {
        Endpoint endpoint = Endpoint.of(uri);
        return endpoint.isUnix() ? SocketListener.unix(endpoint) : SocketListener.tcp(endpoint);
    }
}
