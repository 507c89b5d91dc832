package io.gpusockets.transport.ring;

import java.io.IOException;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import jdk.net.ExtendedSocketOptions;

/**
 * Who is on the other end of the set-up socket (SO_PEERCRED) and whether we admit them. By default only
 * our own uid: the shared file is ours (0600) and the peer maps it. System property
 * {@value #PEER_UID_PROP_NAME}: {@code self} (default), {@code any}, or a numeric uid.
 */
final class PeerCredentials {
    static final String PEER_UID_PROP_NAME = "gpusockets.ring.peerUid";
    static final OptionalInt OWN_UID = ownUid();

    private PeerCredentials() {
    }

    /**
     * The peer's uid as far as it can be proven: the JDK reports a user name (or the number where no
     * passwd entry exists); our own name is our own uid.
     */
    static OptionalInt uidOf(SocketChannel channel) throws IOException {
        String name = channel.getOption(ExtendedSocketOptions.SO_PEERCRED).user().getName();
        if (name.matches("[0-9]{1,9}")) {
            return OptionalInt.of(Integer.parseInt(name));
        }
        return name.equals(System.getProperty("user.name")) ? OWN_UID : OptionalInt.empty();
    }

    /** Throws unless the policy admits {@code uid}. */
    static void check(OptionalInt uid, String who) throws IOException {
        String policy = System.getProperty(PEER_UID_PROP_NAME, "self");
        if (policy.equals("any")) {
            return;
        }
        OptionalInt wanted = policy.equals("self") ? OWN_UID : OptionalInt.of(Integer.parseInt(policy));
        if (wanted.isEmpty() || uid.isEmpty() || uid.getAsInt() != wanted.getAsInt()) {
            throw new IOException("peer uid " + (uid.isPresent() ? uid.getAsInt() : "unknown") + " is not admitted ("
                    + PEER_UID_PROP_NAME + "=" + policy + "): " + who);
        }
    }

    private static OptionalInt ownUid() {
        try {
            return OptionalInt.of((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException e) {
            return OptionalInt.empty();
        }
    }
}
