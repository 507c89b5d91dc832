package io.gpusockets.protocol.transport;

import java.util.OptionalInt;
import java.util.OptionalLong;

/**
 * What a transport knows about its peer.
 *
 * @param description printable address, e.g. "tcp://127.0.0.1:53122" or "unix (uid 1000)"
 * @param uid         the peer's user id where the transport can prove it (SO_PEERCRED), else empty
 * @param cid         the peer's vsock context id where the kernel reports it (getpeername), else empty
 */
public record PeerInfo(String description, OptionalInt uid, OptionalLong cid) {
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
}
