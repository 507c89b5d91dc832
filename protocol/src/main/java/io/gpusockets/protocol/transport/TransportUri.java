package io.gpusockets.protocol.transport;

import java.util.Locale;
import java.util.Objects;

/**
 * A transport address. Grammar:
 * <pre>
 *   uri    = scheme "://" rest
 *   tcp    : "tcp://"   host ":" port          host may be a name, IPv4 or "[" IPv6 "]"; port 0 = any (listen only)
 *   tls    : "tls://"   host ":" port          as tcp, TLS 1.3 (certificates: {@link TlsOptions})
 *   unix   : "unix://"  absolute-path          e.g. unix:///run/gpusockets.sock
 *   vsock  : "vsock://" cid ":" port           cid "any" (listen only) or a number
 *   fdunix : "fdunix://" absolute-path         AF_UNIX through vsock's FFM socket layer
 *   ring   : "ring://"  name ["?" params]      name = [A-Za-z0-9._-]+; params size=, window= (RingTransport)
 *   vchan  : "vchan://" domid "/" path         the xenstore path of the vchan
 * </pre>
 * Parsing only checks the shape common to all ("scheme://rest"); each {@link Transport} checks the rest
 * with the helpers here, so an unknown scheme can still be reported by name.
 */
public final class TransportUri {
    private final String scheme;
    private final String rest;

    private TransportUri(String scheme, String rest) {
        this.scheme = scheme;
        this.rest = rest;
    }

    public static TransportUri parse(String text) {
        Objects.requireNonNull(text, "uri");
        int sep = text.indexOf("://");
        if (sep <= 0) {
            throw new IllegalArgumentException("not a transport URI (expected scheme://...): uri=" + text);
        }
        String scheme = text.substring(0, sep).toLowerCase(Locale.ROOT);
        if (!scheme.matches("[a-z][a-z0-9+.-]*")) {
            throw new IllegalArgumentException("bad scheme: uri=" + text);
        }
        String rest = text.substring(sep + 3);
        if (rest.isEmpty()) {
            throw new IllegalArgumentException("empty address: uri=" + text);
        }
        return new TransportUri(scheme, rest);
    }

    public String scheme() {
        return scheme;
    }

    /** Everything after "scheme://". */
    public String rest() {
        return rest;
    }

    /** Host part of a "host:port" address; brackets around an IPv6 literal are removed. */
    public String host() {
        int colon = portSeparator();
        String host = rest.substring(0, colon);
        boolean bracketed = host.startsWith("[") && host.endsWith("]");
        if (bracketed) {
            host = host.substring(1, host.length() - 1);
        }
        if (host.isEmpty()) {
            throw new IllegalArgumentException("missing host: uri=" + this);
        }
        if (!bracketed && (host.indexOf(':') >= 0 || host.indexOf('[') >= 0 || host.indexOf(']') >= 0)) {
            throw new IllegalArgumentException("an IPv6 host must be in brackets (tcp://[::1]:port): uri=" + this);
        }
        return host;
    }

    /** Port of a "host:port" address, 0..65535. */
    public int port() {
        String text = rest.substring(portSeparator() + 1);
        // Integer.parseInt alone would also take "+80" and non-ASCII digits.
        if (!text.matches("[0-9]{1,5}")) {
            throw new IllegalArgumentException("bad port: uri=" + this);
        }
        try {
            int port = Integer.parseInt(text);
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("port out of range: uri=" + this);
            }
            return port;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad port: uri=" + this);
        }
    }

    private int portSeparator() {
        int colon = rest.lastIndexOf(':');
        if (colon < 0 || (rest.startsWith("[") && colon < rest.indexOf(']'))) {
            throw new IllegalArgumentException("expected host:port: uri=" + this);
        }
        return colon;
    }

    /** Absolute path of a unix:// address. */
    public String path() {
        if (!rest.startsWith("/")) {
            throw new IllegalArgumentException("expected an absolute path (unix:///path): uri=" + this);
        }
        return rest;
    }

    public TransportUri withRest(String newRest) {
        return new TransportUri(scheme, newRest);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TransportUri u && u.scheme.equals(scheme) && u.rest.equals(rest);
    }

    @Override
    public int hashCode() {
        return scheme.hashCode() * 31 + rest.hashCode();
    }

    @Override
    public String toString() {
        return scheme + "://" + rest;
    }
}
