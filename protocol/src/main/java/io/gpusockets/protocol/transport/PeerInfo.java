package io.gpusockets.protocol.transport;

import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * What a transport knows about its peer: only facts the transport itself proved, never what the
 * peer claims. The backend maps these (and the handshake's PSK identity) to a tenant.
 *
 * @param description printable address, e.g. "tcp://127.0.0.1:53122" or "unix (uid 1000)"
 * @param uid         the peer's user id where the transport can prove it (SO_PEERCRED), else empty
 * @param cid         the peer's vsock context id where the kernel reports it (getpeername), else empty
 * @param domid       the peer's Xen domain id where the transport knows it (vchan), else empty
 * @param certificate the subject of the peer's verified TLS client certificate (RFC 2253 form), else empty
 * @param transport   the URI scheme the connection came in on ("tcp", "unix", "ring", ...), or "" when unknown
 */
public record PeerInfo(String description, OptionalInt uid, OptionalLong cid, OptionalLong domid,
                       Optional<String> certificate, String transport) {
    public PeerInfo {
        if (description == null || uid == null || cid == null || domid == null || certificate == null || transport == null) {
            throw new IllegalArgumentException("PeerInfo: null field");
        }
    }

    public PeerInfo(String description, OptionalInt uid, OptionalLong cid) {
        this(description, uid, cid, OptionalLong.empty(), Optional.empty(), schemeOf(description));
    }

    public PeerInfo(String description, OptionalInt uid) {
        this(description, uid, OptionalLong.empty());
    }

    public static PeerInfo of(String description) {
        return new PeerInfo(description, OptionalInt.empty());
    }

    /** A vsock peer: its CID is what the kernel says, the one thing a guest cannot forge. */
    public static PeerInfo vsock(String description, long cid) {
        return new PeerInfo(description, OptionalInt.empty(), OptionalLong.of(cid));
    }

    /** This peer with a Xen domain id (vchan). */
    public PeerInfo withDomid(long d) {
        return new PeerInfo(description, uid, cid, OptionalLong.of(d), certificate, transport);
    }

    /** This peer with the subject of its verified TLS client certificate. */
    public PeerInfo withCertificate(String subject) {
        return new PeerInfo(description, uid, cid, domid, Optional.of(subject), transport);
    }

    /** This peer as having come in over {@code scheme}. */
    public PeerInfo withTransport(String scheme) {
        return new PeerInfo(description, uid, cid, domid, certificate, scheme);
    }

    /** "tcp" of "tcp://1.2.3.4:5 (...)", or "" when the description does not start with a URI. */
    static String schemeOf(String description) {
        int i = description.indexOf("://");
        if (i <= 0) {
            return "";
        }
        String s = description.substring(0, i);
        return s.chars().allMatch(ch -> Character.isLetterOrDigit(ch) || ch == '+' || ch == '-' || ch == '.') ? s : "";
    }
}
