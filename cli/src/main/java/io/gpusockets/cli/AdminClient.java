package io.gpusockets.cli;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;

/**
 * The client side of a backend's admin socket ({@code io.gpusockets.backend.status.AdminSocket}): where it is,
 * connecting with errors a user can act on, and the line-by-line answers of checkpoint and restore.
 */
final class AdminClient {
    /** Where services put the admin socket, and where the commands look when neither --socket nor the variable says. */
    static final String DEFAULT_SOCKET = "/run/gpusockets/admin.sock";
    static final String SOCKET_VARIABLE = "GPUSOCKETS_ADMIN_SOCKET";
    /** The longest line of a streamed answer. */
    static final int MAX_LINE = 1 << 20;

    private AdminClient() {
    }

    /** {@code --socket}, else the variable, else the default. */
    static Path socket(Path option) {
        return option != null ? option : Path.of(System.getenv().getOrDefault(SOCKET_VARIABLE, DEFAULT_SOCKET));
    }

    /** A connection to the admin socket at {@code path}; IOException with a message a user can act on. */
    static SocketChannel connect(Path path) throws IOException {
        if (!Files.exists(path)) {
            throw new IOException("no admin socket at " + path + ": is a backend running with --admin-socket "
                    + path + "? (or pass --socket PATH, or set " + SOCKET_VARIABLE + ")");
        }
        SocketChannel c = SocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            c.connect(UnixDomainSocketAddress.of(path));
            return c;
        } catch (IOException e) {
            c.close();
            String m = String.valueOf(e.getMessage());
            if (m.contains("Permission denied") || m.contains("Operation not permitted")) {
                throw new IOException("permission denied on " + path + ": only root, the backend's user and members"
                        + " of its --admin-group may use it", e);
            }
            if (m.contains("Connection refused")) {
                throw new IOException("nothing answers on " + path + " (a backend that is gone left it?)", e);
            }
            throw new IOException("cannot connect to " + path + ": " + m, e);
        }
    }

    static void send(SocketChannel c, String request) throws IOException {
        ByteBuffer req = ByteBuffer.wrap((request + "\n").getBytes(StandardCharsets.UTF_8));
        while (req.hasRemaining()) {
            c.write(req);
        }
    }

    /**
     * Sends a checkpoint or restore request and reads its answer: each {@code progress} line goes to
     * {@code progress}; the last line (ok, error or refused) is returned. No time limit: the action takes as
     * long as the memory it moves, and says so as it goes.
     */
    static String stream(Path path, String request, Consumer<String> progress) throws IOException {
        try (SocketChannel c = connect(path)) {
            send(c, request);
            ByteArrayOutputStream line = new ByteArrayOutputStream();
            ByteBuffer b = ByteBuffer.allocate(8 << 10);
            while (c.read(b.clear()) >= 0) {
                for (int i = 0; i < b.position(); i++) {
                    byte x = b.get(i);
                    if (x != '\n') {
                        if (line.size() >= MAX_LINE) {
                            throw new IOException("an answer line from " + path + " is over " + MAX_LINE + " bytes");
                        }
                        line.write(x);
                        continue;
                    }
                    String l = line.toString(StandardCharsets.UTF_8);
                    line.reset();
                    if (!l.startsWith("progress ")) {
                        return l;
                    }
                    progress.accept(l.substring("progress ".length()));
                }
            }
            throw new IOException("the backend on " + path + " closed without answering"
                    + (line.size() > 0 ? " (last: " + line.toString(StandardCharsets.UTF_8) + ")" : ""));
        }
    }
}
