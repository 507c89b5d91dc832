package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.transport.unix.UnixSocketFile;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A bound {@link ServerSocketChannel} in blocking mode; the channels it accepts start in non-blocking mode,
 * read and written by the {@link ChannelReactor} until the backend serves them on platform threads alone
 * ({@link ChannelAccess}). {@link #close()} unblocks a thread in
 * {@link #accept()} with an {@link java.nio.channels.AsynchronousCloseException}; a unix listener then
 * removes its socket file.
 */
final class SocketListener implements Listener {
    /** Connections the kernel queues before accept() takes them; Linux caps it at net.core.somaxconn. */
    static final int BACKLOG = 128;

    /** Turns an accepted channel into a Connection for the listener's scheme. */
    @FunctionalInterface
    interface Wrapper {
        Connection wrap(ChannelAccess accepted) throws IOException;
    }

    private final ServerSocketChannel server;
    private final TransportUri address;
    private final Wrapper wrapper;
    private final Runnable afterClose;
    private final AtomicBoolean closed = new AtomicBoolean();

    private SocketListener(ServerSocketChannel server, TransportUri address, Wrapper wrapper, Runnable afterClose) {
        this.server = server;
        this.address = address;
        this.wrapper = wrapper;
        this.afterClose = afterClose;
    }

    /** Port 0 binds an ephemeral port; {@link #address()} then reports the real one. */
    static SocketListener tcp(Endpoint endpoint) throws IOException {
        return tcp(endpoint, SocketConnection::tcp);
    }

    /** A TCP listener whose accepted channels {@code wrapper} turns into connections (tls:// wraps them in TLS). */
    static SocketListener tcp(Endpoint endpoint, Wrapper wrapper) throws IOException {
        ServerSocketChannel server = ServerSocketChannel.open(endpoint.family());
        try {
            // a restarted backend must not wait out TIME_WAIT connections of its predecessor
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.bind(endpoint.address(), BACKLOG);
            int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
            String host = endpoint.uri().host();
            TransportUri bound = endpoint.uri().withRest((host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port);
            return new SocketListener(server, bound, wrapper, () -> { });
        } catch (IOException e) {
            server.close();
            throw Failures.naming("cannot listen on", endpoint.uri(), e);
        }
    }

    static SocketListener unix(Endpoint endpoint) throws IOException {
        TransportUri uri = endpoint.uri();
        UnixSocketFile.removeIfStale(endpoint);
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(endpoint.address(), BACKLOG);
            UnixSocketFile file = UnixSocketFile.bound(Path.of(uri.path()));
            return new SocketListener(server, uri, accepted -> SocketConnection.unix(accepted, uri), file::deleteIfStillOurs);
        } catch (IOException e) {
            server.close();
            throw Failures.naming("cannot listen on", uri, e);
        }
    }

    @Override
    public Connection accept() throws IOException {
        SocketChannel accepted = server.accept();
        try {
            return wrapper.wrap(ChannelAccess.accepted(accepted));
        } catch (IOException | RuntimeException e) {
            accepted.close();
            throw e;
        }
    }

    @Override
    public TransportUri address() {
        return address;
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            server.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
        afterClose.run();
    }

    /** The channel of a plain tcp:// or unix:// listener; empty for tls://, whose connections need this process's TLS. */
    @Override
    public java.util.Optional<ServerSocketChannel> serverChannel() {
        String scheme = address.scheme();
        return scheme.equals("tcp") || scheme.equals("unix") ? java.util.Optional.of(server) : java.util.Optional.empty();
    }

    /** Closes the channel (the JDK does not shut a listening socket down) and leaves a unix socket's file in place. */
    @Override
    public void closeLeavingSocket() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            server.close();
        } catch (IOException ignored) {
            // the descriptor is released even when close reports an error
        }
    }

    @Override
    public String toString() {
        return "SocketListener[" + address + "]";
    }
}
