package io.gpusockets.cli.doctor;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.Set;

/**
 * Checks a file that holds a secret (a pre-shared key, a key store, a password): it exists, this user can
 * read it, nobody but its owner (and perhaps its group) can, and it belongs to the user the service runs
 * as. A world-readable secret fails; a group-readable one warns (root:gpusockets 0640 may be meant).
 */
public final class SecretFiles {
    /** How to make a key the backend and frontends share (any bytes work; 32 random ones in base64 print safely). */
    public static final String MAKE_KEY = "(umask 077; head -c 32 /dev/urandom | base64 > FILE)";

    private SecretFiles() {
    }

    /**
     * @param what        e.g. "PSK file (--psk-file)"
     * @param serviceUser the user that must own it, or null for no owner check
     * @param makeIt      how to make a missing file (null: say to fix the path)
     */
    public static Check check(String what, Path file, String serviceUser, String makeIt) {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(file, PosixFileAttributes.class);
        } catch (NoSuchFileException e) {
            return Check.fail(what, file + " does not exist",
                    makeIt != null ? "create it: " + makeIt.replace("FILE", file.toString()) + ", or correct the path"
                            : "correct the path, or put the file there");
        } catch (IOException | UnsupportedOperationException e) {
            return Check.fail(what, "cannot read the attributes of " + file + ": " + e.getMessage(),
                    "make " + file + " and its directories accessible to " + user(serviceUser));
        }
        if (!a.isRegularFile()) {
            return Check.fail(what, file + " is not a regular file", "point it at the file itself");
        }
        if (!Files.isReadable(file)) {
            return Check.fail(what, file + " is not readable by " + System.getProperty("user.name")
                    + " (owner " + a.owner().getName() + ", mode " + mode(a.permissions()) + ")",
                    "run doctor as the service user, or: chown " + user(serviceUser) + " " + file + " && chmod 600 " + file);
        }
        try {
            if (Files.size(file) == 0 || Files.readString(file).isBlank()) {
                return Check.fail(what, file + " is empty", makeIt != null ? "fill it: " + makeIt.replace("FILE", file.toString())
                        : "put the secret in it");
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            // a binary key store is not text: only its size matters here
        }
        Set<PosixFilePermission> p = a.permissions();
        String desc = file + " (owner " + a.owner().getName() + ", group " + a.group().getName() + ", mode " + mode(p) + ")";
        if (p.contains(PosixFilePermission.OTHERS_READ) || p.contains(PosixFilePermission.OTHERS_WRITE)) {
            return Check.fail(what, desc + " is " + (p.contains(PosixFilePermission.OTHERS_READ) ? "readable" : "writable")
                    + " by every user", "chmod 600 " + file + " (and give it a new key: anyone could have read this one)");
        }
        if (serviceUser != null && !a.owner().getName().equals(serviceUser)) {
            return Check.warn(what, desc + " is not owned by " + serviceUser + ", the user the service runs as",
                    "chown " + serviceUser + " " + file + " (or pass --user NAME if the service runs as another user)");
        }
        if (p.contains(PosixFilePermission.GROUP_READ) || p.contains(PosixFilePermission.GROUP_WRITE)) {
            return Check.warn(what, desc + " is readable by group " + a.group().getName(),
                    "chmod 600 " + file + ", unless only the service's users are in group " + a.group().getName());
        }
        return Check.ok(what, desc + ", private");
    }

    static String mode(Set<PosixFilePermission> p) {
        int m = 0;
        for (PosixFilePermission x : p) {
            m |= 1 << (8 - x.ordinal());
        }
        return String.format("%04o", m);
    }

    private static String user(String serviceUser) {
        return serviceUser != null ? serviceUser : System.getProperty("user.name");
    }

    /** Whether {@code path} exists without following a final link (a socket file counts). */
    static boolean exists(Path path) {
        return Files.exists(path, LinkOption.NOFOLLOW_LINKS);
    }
}
