package io.gpusockets.transport.unix;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalInt;
import java.util.stream.Stream;
import jdk.net.ExtendedSocketOptions;

/**
 * The numeric uid of a unix-socket peer, from SO_PEERCRED.
 *
 * <p>The kernel reports a uid, but the JDK turns it into a user name ({@code getpwuid}) and keeps the
 * number internal. We map the name back without JDK internals, in this order: a name that is all
 * digits is the uid itself (the JDK's answer when no passwd entry exists); our own user name is our own
 * uid (the owner of /proc/self); any other name is looked up in /etc/passwd. Users that only a
 * directory service (LDAP, sssd) knows get no uid: {@code PeerInfo.uid} stays empty, so a backend that
 * authorizes by uid refuses them rather than guessing.
 */
public final class UnixPeerUid {
    private static final Path PASSWD = Path.of("/etc/passwd");

    private UnixPeerUid() {
    }

    /** The peer's uid, or empty where the platform does not report credentials. */
    public static OptionalInt of(SocketChannel channel) {
        String name;
        try {
            name = channel.getOption(ExtendedSocketOptions.SO_PEERCRED).user().getName();
        } catch (IOException | UnsupportedOperationException e) {
            return OptionalInt.empty();
        }
        return resolve(name, System.getProperty("user.name"), OwnUid.VALUE, PASSWD);
    }

    static OptionalInt resolve(String name, String ownName, OptionalInt ownUid, Path passwd) {
        if (isUid(name)) {
            return parseUid(name);
        }
        if (name.equals(ownName) && ownUid.isPresent()) {
            return ownUid;
        }
        return lookUp(name, passwd);
    }

    /** passwd(5): name:password:uid:gid:gecos:home:shell. */
    private static OptionalInt lookUp(String name, Path passwd) {
        try (Stream<String> lines = Files.lines(passwd, StandardCharsets.UTF_8)) {
            return lines.map(line -> line.split(":", -1))
                    .filter(fields -> fields.length >= 3 && fields[0].equals(name) && isUid(fields[2]))
                    .mapToInt(fields -> parseUid(fields[2]).orElse(-1))
                    .filter(uid -> uid >= 0)
                    .findFirst();
        } catch (IOException | UncheckedIOException e) {
            return OptionalInt.empty();
        }
    }

    private static boolean isUid(String text) {
        return !text.isEmpty() && text.length() <= 10 && text.chars().allMatch(c -> c >= '0' && c <= '9');
    }

    /** uids above Integer.MAX_VALUE exist in theory only; they come back empty rather than negative. */
    private static OptionalInt parseUid(String digits) {
        long uid = Long.parseLong(digits);
        return uid <= Integer.MAX_VALUE ? OptionalInt.of((int) uid) : OptionalInt.empty();
    }

    /** Our own uid, read once: /proc/self belongs to the process's effective uid. */
    private static final class OwnUid {
        static final OptionalInt VALUE = read();

        private static OptionalInt read() {
            try {
                return OptionalInt.of((Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
            } catch (IOException | UnsupportedOperationException e) {
                return OptionalInt.empty();
            }
        }
    }
}
