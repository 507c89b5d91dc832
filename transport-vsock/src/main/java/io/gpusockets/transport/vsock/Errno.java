package io.gpusockets.transport.vsock;

import java.io.IOException;
import java.net.BindException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.util.Map;

/** Linux errno values (x86_64 and aarch64 share them) and their mapping onto Java's socket exceptions. */
final class Errno {
    static final int ENOENT = 2;
    static final int EINTR = 4;
    static final int EBADF = 9;
    static final int EAGAIN = 11;
    static final int EACCES = 13;
    static final int ENODEV = 19;
    static final int EINVAL = 22;
    static final int EPIPE = 32;
    static final int ENOTSOCK = 88;
    static final int EAFNOSUPPORT = 97;
    static final int EADDRINUSE = 98;
    static final int EADDRNOTAVAIL = 99;
    static final int ENETUNREACH = 101;
    static final int ECONNABORTED = 103;
    static final int ECONNRESET = 104;
    static final int ENOTCONN = 107;
    static final int ETIMEDOUT = 110;
    static final int ECONNREFUSED = 111;
    static final int EHOSTUNREACH = 113;
    static final int EALREADY = 114;
    static final int EINPROGRESS = 115;

    private static final Map<Integer, String> NAMES = Map.ofEntries(
            Map.entry(ENOENT, "ENOENT"), Map.entry(EINTR, "EINTR"), Map.entry(EBADF, "EBADF"),
            Map.entry(EAGAIN, "EAGAIN"), Map.entry(EACCES, "EACCES"), Map.entry(ENODEV, "ENODEV"),
            Map.entry(EINVAL, "EINVAL"), Map.entry(EPIPE, "EPIPE"), Map.entry(ENOTSOCK, "ENOTSOCK"),
            Map.entry(EAFNOSUPPORT, "EAFNOSUPPORT"), Map.entry(EADDRINUSE, "EADDRINUSE"),
            Map.entry(EADDRNOTAVAIL, "EADDRNOTAVAIL"), Map.entry(ENETUNREACH, "ENETUNREACH"),
            Map.entry(ECONNABORTED, "ECONNABORTED"), Map.entry(ECONNRESET, "ECONNRESET"),
            Map.entry(ENOTCONN, "ENOTCONN"), Map.entry(ETIMEDOUT, "ETIMEDOUT"),
            Map.entry(ECONNREFUSED, "ECONNREFUSED"), Map.entry(EHOSTUNREACH, "EHOSTUNREACH"),
            Map.entry(EALREADY, "EALREADY"), Map.entry(EINPROGRESS, "EINPROGRESS"));

    private Errno() {
    }

    /** "ECONNREFUSED", or "errno 1234" for one we have no name for. */
    static String name(int errno) {
        return NAMES.getOrDefault(errno, "errno " + errno);
    }

    /** "Connection refused (ECONNREFUSED)": glibc's text and the symbolic name. */
    static String describe(int errno) {
        return NativeSockets.strerror(errno) + " (" + name(errno) + ")";
    }

    /** An exception for a failed call, e.g. "cannot connect to vsock://3:7070: Connection refused (ECONNREFUSED)". */
    static IOException exception(String what, int errno) {
        String message = what + ": " + describe(errno);
        return switch (errno) {
            case ECONNREFUSED, ENETUNREACH, EHOSTUNREACH -> new ConnectException(message);
            case EADDRINUSE, EADDRNOTAVAIL -> new BindException(message);
            case ETIMEDOUT -> new SocketTimeoutException(message);
            case EPIPE, ECONNRESET, ENOTCONN, ECONNABORTED -> new SocketException(message);
            default -> new IOException(message);
        };
    }
}
