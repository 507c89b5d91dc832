package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.Transport;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import javax.net.ssl.SSLContext;

/**
 * {@code tls://host:port}: TCP as {@link SocketTransport} carries it, inside TLS 1.3 ({@link TlsConnection}),
 * with the certificates {@link TlsOptions} names. A scheme of its own, not a tcp:// option, so that an
 * address says whether it is encrypted and a tls:// client never falls back to plaintext.
 *
 * <p>A listener needs its certificate ({@link TlsOptions#KEY_STORE}); given {@link TlsOptions#TRUST} it asks
 * clients for certificates and verifies them, and the subject of a verified one becomes
 * {@link io.gpusockets.protocol.transport.PeerInfo#certificate()}. A client verifies the server's
 * certificate and its name (the URI's host) against {@link TlsOptions#TRUST}, else the JDK's CAs.
 * Without options, {@link #connect(TransportUri, Duration)} trusts the JDK's CAs and
 * {@link #listen(TransportUri)} is refused.
 */
public final class TlsTransport implements Transport {
    static final String TLS = "tls";

    /** For {@link java.util.ServiceLoader}. */
    public TlsTransport() {
    }

    @Override
    public Set<String> schemes() {
        return Set.of(TLS);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout) throws IOException {
        return connect(uri, timeout, TransportOptions.NONE);
    }

    @Override
    public Connection connect(TransportUri uri, Duration timeout, TransportOptions options) throws IOException {
        Objects.requireNonNull(timeout, "timeout");
        Endpoint endpoint = endpoint(uri);
        if (uri.port() == 0) {
            throw new IllegalArgumentException("port 0 is for listening only: uri=" + uri);
        }
        SSLContext context = clientContext(options);
        long start = System.nanoTime();
        SocketChannel channel = TimedConnect.open(endpoint, timeout);
        TlsConnection connection;
        try {
            connection = TlsConnection.client(ChannelAccess.direct(channel), context, uri, options.get(TlsOptions.SERVER_NAME).orElse(uri.host()));
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
        Duration left = timeout.minusNanos(System.nanoTime() - start);
        connection.handshakeWithin(left.isNegative() || left.isZero() ? Duration.ofMillis(1) : left);
        return connection;
    }

    @Override
    public Listener listen(TransportUri uri) throws IOException {
        return listen(uri, TransportOptions.NONE);
    }

    @Override
    public Listener listen(TransportUri uri, TransportOptions options) throws IOException {
        Endpoint endpoint = endpoint(uri);
        SSLContext context = TlsContexts.server(options);
        TlsContexts.ClientAuth clientAuth = TlsContexts.clientAuth(options);
        return SocketListener.tcp(endpoint, accepted -> TlsConnection.server(accepted, context, clientAuth));
    }

    /**
     * The client context for {@code options}, made again only when they or their files change: reading a
     * PKCS12 key store costs tens of milliseconds of key derivation, which a frontend that connects to
     * several backends (or again) should pay once.
     */
    private SSLContext clientContext(TransportOptions options) throws IOException {
        Object key = TlsContexts.fingerprint(options);
        CachedContext c = lastClientContext;
        if (c != null && c.key().equals(key)) {
            return c.context();
        }
        SSLContext context = TlsContexts.client(options);
        lastClientContext = new CachedContext(key, context);
        return context;
    }

    private record CachedContext(Object key, SSLContext context) {
    }

    private volatile CachedContext lastClientContext;

    private static Endpoint endpoint(TransportUri uri) throws IOException {
        if (!uri.scheme().equals(TLS)) {
            throw new IllegalArgumentException("not a tls:// address: uri=" + uri);
        }
        return Endpoint.of(uri);
    }
}
