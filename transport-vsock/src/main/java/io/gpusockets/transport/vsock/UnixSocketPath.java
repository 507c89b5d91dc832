package io.gpusockets.transport.vsock;

import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.net.BindException;
import java.net.ConnectException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.util.Objects;

/**
 * The file an fdunix listener binds. As for unix:// (transport-tcp): a stale socket file that refuses
 * connections is removed before binding, a live socket or any other file is left alone and reported, and
 * on close the listener removes its file only if it is still the one it bound (same inode).
 */
final class UnixSocketPath {
    private static final int S_IFMT = 0170000;
    private static final int S_IFSOCK = 0140000;

    private final TransportUri uri;
    private final Path path;

    private UnixSocketPath(TransportUri uri) {
        this.uri = uri;
        this.path = Path.of(uri.path());
    }

    static UnixSocketPath prepare(TransportUri uri) throws IOException {
        UnixSocketPath p = new UnixSocketPath(uri);
        p.removeIfStale();
        return p;
    }

    private void removeIfStale() throws IOException {
        if (!Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        int mode = (Integer) Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS);
        if ((mode & S_IFMT) != S_IFSOCK) {
            throw new FileAlreadyExistsException(path.toString(), null, "exists and is not a socket, not removing it: uri=" + uri);
        }
        try {
            new VsockTransport().connect(uri, Duration.ofMillis(200)).close();
        } catch (ConnectException refused) {
            Files.deleteIfExists(path); // nobody accepts on it: left behind by a crashed listener
            return;
        } catch (IOException e) {
            throw new IOException("socket file exists and may be in use (" + e.getMessage() + "), not removing it: uri=" + uri, e);
        }
        throw new BindException("address in use, a listener accepts on it: uri=" + uri);
    }

    Bound bound() throws IOException {
        return new Bound(path, fileKey(path));
    }

    private static Object fileKey(Path path) throws IOException {
        return Files.readAttributes(path, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS).fileKey();
    }

    /** The file as bound; {@link #deleteIfStillOurs()} never throws. */
    record Bound(Path path, Object key) {
        void deleteIfStillOurs() {
            try {
                if (Objects.equals(fileKey(path), key)) {
                    Files.deleteIfExists(path);
                }
            } catch (IOException ignored) {
                // already gone, or not ours to remove
            }
        }
    }
}
