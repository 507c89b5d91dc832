package io.gpusockets.transport.unix;

import io.gpusockets.transport.tcp.Endpoint;
import java.io.IOException;
import java.net.BindException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.StandardProtocolFamily;
import java.nio.channels.SocketChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Objects;

/**
 * The file a unix listener binds. Binding fails while a file exists at the path, and a backend that
 * crashed leaves its socket file behind. So before binding, a socket file that refuses connections is
 * removed as stale; a socket that accepts (a live backend) and any file that is not a socket are left
 * alone and reported. On close the listener removes its file, but only if it is still the one it bound
 * (same inode), not one that a newer listener put there since.
 *
 * <p>Permissions: the file gets mode 0777 minus the process umask, and a client needs write permission
 * on it (and search permission on its directories) to connect; with the common umask 022 only the
 * owner (and root) can connect. Put the socket in a directory whose permissions admit exactly the
 * intended users, and authorize each connection by {@code PeerInfo.uid}.
 */
public final class UnixSocketFile {
    private static final int S_IFMT = 0170000;
    private static final int S_IFSOCK = 0140000;

    private final Path path;
    private final Object fileKey;

    private UnixSocketFile(Path path, Object fileKey) {
        this.path = path;
        this.fileKey = fileKey;
    }

    /** Removes a stale socket file at the endpoint's path; throws if the path is taken by anything else. */
    public static void removeIfStale(Endpoint endpoint) throws IOException {
        Path path = Path.of(endpoint.uri().path());
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        if (!isSocket(path)) {
            throw new FileAlreadyExistsException(path.toString(), null,
                    "exists and is not a socket, not removing it: uri=" + endpoint.uri());
        }
        if (acceptsConnections(endpoint)) {
            throw new BindException("address in use, a listener accepts on it: uri=" + endpoint.uri());
        }
        Files.deleteIfExists(path);
    }

    /** Remembers the file just bound at {@code path}. */
    public static UnixSocketFile bound(Path path) throws IOException {
        return new UnixSocketFile(path, fileKey(path));
    }

    /** Deletes the file if it is still the one this listener bound. Never throws. */
    public void deleteIfStillOurs() {
        try {
            if (Objects.equals(fileKey(path), fileKey)) {
                Files.deleteIfExists(path);
            }
        } catch (IOException ignored) {
            // already gone, or not ours to remove
        }
    }

    private static Object fileKey(Path path) throws IOException {
        return Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
    }

    private static boolean isSocket(Path path) throws IOException {
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        return (mode & S_IFMT) == S_IFSOCK;
    }

    /**
     * A non-blocking probe: a live listener with a full backlog answers EAGAIN instead of making us wait.
     * Only ECONNREFUSED proves that nobody holds the socket.
     */
    private static boolean acceptsConnections(Endpoint endpoint) throws IOException {
        try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            probe.configureBlocking(false);
            probe.connect(endpoint.address());
            return true;
        } catch (ConnectException refused) {
            return false;
        } catch (SocketException e) {
            throw new IOException("socket file exists and may be in use (" + e.getMessage()
                    + "), not removing it: uri=" + endpoint.uri(), e);
        }
    }
}
