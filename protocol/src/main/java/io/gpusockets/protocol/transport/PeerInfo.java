package io.gpusockets.protocol.transport;

import java.util.OptionalInt;

/**
 * What a transport knows about its peer.
 *
 * @param description printable address, e.g. "tcp://127.0.0.1:53122" or "unix (uid 1000)"
 * @param uid         the peer's user id where the transport can prove it (SO_PEERCRED), else empty
 */
public record PeerInfo(String description, OptionalInt uid) {
    public static PeerInfo of(String description) {
        return new PeerInfo(description, OptionalInt.empty());
    }
}
