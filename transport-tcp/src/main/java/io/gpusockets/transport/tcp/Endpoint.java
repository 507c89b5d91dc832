package io.gpusockets.transport.tcp;

import io.gpusockets.protocol.transport.TransportUri;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ProtocolFamily;
import java.net.SocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.net.UnknownHostException;

/**
 * A {@code tcp://host:port}, {@code tls://host:port} or {@code unix:///path} URI resolved to what the JDK socket channels take.
 * Host names are resolved here, before any connect deadline starts.
 */
public record Endpoint(TransportUri uri, SocketAddress address, ProtocolFamily family) {

    static Endpoint of(TransportUri uri) throws UnknownHostException {
        return switch (uri.scheme()) {
            case SocketTransport.TCP, TlsTransport.TLS -> tcp(uri);
            case SocketTransport.UNIX ->
                    new Endpoint(uri, UnixDomainSocketAddress.of(uri.path()), StandardProtocolFamily.UNIX);
            default -> throw new IllegalArgumentException("not a tcp://, tls:// or unix:// address: uri=" + uri);
        };
    }

    private static Endpoint tcp(TransportUri uri) throws UnknownHostException {
        InetAddress host;
        try {
            host = InetAddress.getByName(uri.host());
        } catch (UnknownHostException e) {
            throw new UnknownHostException("unknown host: uri=" + uri);
        }
        ProtocolFamily family = host.getAddress().length == 4 ? StandardProtocolFamily.INET : StandardProtocolFamily.INET6;
        return new Endpoint(uri, new InetSocketAddress(host, uri.port()), family);
    }

    boolean isUnix() {
        return family == StandardProtocolFamily.UNIX;
    }

    /** "tcp://host:port" for an IP socket address, with IPv6 literals in brackets. */
    static String tcpText(InetSocketAddress address) {
        return ipText(SocketTransport.TCP, address);
    }

    /** "scheme://host:port" for an IP socket address, with IPv6 literals in brackets. */
    static String ipText(String scheme, InetSocketAddress address) {
        String host = address.getHostString();
        return scheme + "://" + (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + address.getPort();
    }
}
