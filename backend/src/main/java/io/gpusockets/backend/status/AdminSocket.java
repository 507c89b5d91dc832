package io.gpusockets.backend.status;

import java.io.IOException;
import java.lang.System.Logger.Level;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import jdk.net.ExtendedSocketOptions;
import jdk.net.UnixDomainPrincipal;

/**
 * The admin socket: a Unix socket that answers {@code gpusockets status}, {@code checkpoint},
 * {@code restore} and {@code migrate}. The protocol is one request line, an answer, then the backend closes:
 * <ul>
 *   <li>{@code status\n} is answered with the snapshot as JSON ({@link StatusJson}) and a newline;</li>
 *   <li>{@code checkpoint SESSION [stop] FILE\n} and {@code restore FILE\n} (FILE an absolute path, the
 *       rest of the line: it may hold spaces; sessions that share IPC memory together: {@code checkpoint
 *       SESSION,SESSION... [stop] FILE<TAB>FILE...\n}, one file per session, and {@code restore FILE<TAB>FILE...\n},
 *       at most {@value Request#MAX_GROUP}, {@link AdminActions#checkpointGroup}), and {@code migrate SESSION TARGET_URI [FRONTEND_URI]\n} (each URI
 *       one word of printable characters; sessions that share IPC memory together: {@code migrate
 *       SESSION,SESSION... TARGET_URI [FRONTEND_URI]\n}, at most {@value Request#MAX_GROUP},
 *       {@link AdminActions#migrateGroup}), {@code hand-over SESSION TARGET_ADMIN_SOCKET [FRONTEND_URI]\n} (sessions
 *       that share IPC memory or events together: {@code hand-over SESSION,SESSION... TARGET_ADMIN_SOCKET
 *       [FRONTEND_URI]\n}, at most {@value Request#MAX_GROUP}, {@link AdminActions#handOverGroup}) and
 *       {@code receive-hand-over SOURCE_SOCKET [FRONTEND_URI]\n} (absolute socket paths, one word each: the
 *       hand-over on one host, {@link AdminActions#handOver}), by {@code progress STAGE DONE TOTAL\n} lines as the action
 *       goes, then {@code ok JSON\n} or {@code error: ...\n} ({@link AdminActions}; a backend without
 *       actions answers them with an error);</li>
 *   <li>{@code take-over fdunix:///PATH ISOLATION\n} (a new backend asking to take this one over, {@code gpusockets
 *       backend --take-over}; PATH its take-over socket, owned by the requesting user) by {@code ok JSON\n} once
 *       everything is handed, or {@code error: ...\n} (refused: being taken over already, another isolation, ...);</li>
 *   <li>anything else with {@code error: ...\n}.</li>
 * </ul>
 * A peer that {@link AdminAccess} does not allow gets {@code refused: ...\n} and a log line.
 *
 * <p>Bounded: at most {@value #MAX_CLIENTS} clients are served at once (each on its own thread;
 * more are closed at once), a request line is at most {@value #MAX_REQUEST} bytes, and a client
 * that has not read its answer {@value #DEADLINE_SECONDS} s after connecting is disconnected, so a
 * slow or hostile client holds no more than that; a checkpoint, restore or migration, which takes as long as the
 * memory it moves, is exempt once its request is read (an allowed admin asked for it), and goes on to
 * its end even when its client leaves. The socket file is made with mode 0600 (0660 and the admin
 * group's ownership when one is configured) and removed on {@link #close} unless another backend's admin socket has
 * taken its place meanwhile ({@link #openInPlaceOf}: a backend that took this one over, at the same path).
 */
public final class AdminSocket implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    static final int MAX_CLIENTS = 4;
    static final int MAX_REQUEST = 4352;
    static final int DEADLINE_SECONDS = 5;

    /** Where the socket file is (it moves once, in {@link #openInPlaceOf}). */
    private volatile Path path;
    private final ServerSocketChannel server;
    /** Why a peer is refused, or null ({@link AdminAccess#refusal}). */
    private final Function<UnixDomainPrincipal, String> access;
    private final Supplier<ServerSnapshot> snapshots;
    /** Checkpoint and restore, or null: refused. */
    private final AdminActions actions;
    private final Semaphore slots = new Semaphore(MAX_CLIENTS);
    private final ScheduledExecutorService deadlines = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-admin-deadline").factory());
    private volatile boolean closed;
    /** The socket file's identity (inode) when this socket made it: {@link #close} removes only that file. */
    private volatile Object fileKey;
    private long lastRefusalLog;
    private long refusalsNotLogged;

    private AdminSocket(Path path, ServerSocketChannel server, Function<UnixDomainPrincipal, String> access,
                        Supplier<ServerSnapshot> snapshots, AdminActions actions) {
        this.path = path;
        this.server = server;
        this.access = access;
        this.snapshots = snapshots;
        this.actions = actions;
    }

    /**
     * Binds {@code path} (a stale socket file left by a backend that is gone is replaced; one a live
     * backend answers on is not) and starts answering. {@code group}: the admin group's name, or null.
     */
    public static AdminSocket open(Path path, String group, Supplier<ServerSnapshot> snapshots) throws IOException {
        return open(path, group, snapshots, null, null);
    }

    /** As {@link #open(Path, String, Supplier)}, answering checkpoint and restore with {@code actions} (null: refused). */
    public static AdminSocket open(Path path, String group, Supplier<ServerSnapshot> snapshots, AdminActions actions)
            throws IOException {
        return open(path, group, snapshots, actions, null);
    }

    /**
     * As {@link #open(Path, String, Supplier, AdminActions)}; {@code check}, when not null, replaces
     * {@link AdminAccess#refusal} (tests, which run as one user, use it to be refused).
     */
    static AdminSocket open(Path path, String group, Supplier<ServerSnapshot> snapshots, AdminActions actions,
                            Function<UnixDomainPrincipal, String> check) throws IOException {
        path = path.toAbsolutePath();
        if (Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            if (!Files.readAttributes(path, java.nio.file.attribute.BasicFileAttributes.class, java.nio.file.LinkOption.NOFOLLOW_LINKS).isOther()) {
                throw new IOException("admin socket path " + path + " exists and is not a socket");
            }
            boolean live;
            try (SocketChannel probe = SocketChannel.open(UnixDomainSocketAddress.of(path))) {
                live = true;
            } catch (IOException e) {
                live = false;
            }
            if (live) {
                throw new IOException("admin socket " + path + " is in use by another process");
            }
            Files.delete(path); // left by a backend that is gone
        }
        if (path.getParent() != null) {
            Files.createDirectories(path.getParent());
        }
        ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        try {
            server.bind(UnixDomainSocketAddress.of(path), MAX_CLIENTS);
            UserPrincipal owner = Files.getOwner(path);
            if (group != null) {
                GroupPrincipal g;
                try {
                    g = path.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByGroupName(group);
                } catch (IOException e) {
                    throw new IOException("admin group " + group + " does not exist: " + e.getMessage(), e);
                }
                try {
                    Files.setAttribute(path, "posix:group", g);
                } catch (IOException e) {
                    throw new IOException("cannot give the admin socket " + path + " to group " + group
                            + " (the backend's user must be root or a member of it): " + e, e);
                }
                Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-rw----"));
            } else {
                Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
            }
            AdminSocket a = new AdminSocket(path, server,
                    check != null ? check : new AdminAccess(owner, group, AdminAccess::groupFileMembers)::refusal, snapshots,
                    actions);
            a.fileKey = Files.readAttributes(path, java.nio.file.attribute.BasicFileAttributes.class,
                    java.nio.file.LinkOption.NOFOLLOW_LINKS).fileKey();
            Thread.ofPlatform().daemon().name("gpusockets-admin").start(a::acceptLoop);
            LOG.log(Level.INFO, "admin socket on " + path + (group != null ? " (group " + group + ")" : ""));
            return a;
        } catch (IOException | RuntimeException e) {
            server.close();
            Files.deleteIfExists(path);
            throw e;
        }
    }

    public Path path() {
        return path;
    }

    /**
     * As {@link #open(Path, String, Supplier, AdminActions)}, for a backend that took over the one whose admin socket
     * is at {@code path}: binds a temporary path beside it, then renames it over {@code path} (rename(2): a client
     * finds one socket or the other there, never none). The old backend's socket, reachable no more by that path,
     * does not remove the new one when it closes.
     */
    public static AdminSocket openInPlaceOf(Path path, String group, Supplier<ServerSnapshot> snapshots, AdminActions actions)
            throws IOException {
        path = path.toAbsolutePath();
        Path temporary = path.resolveSibling(path.getFileName() + ".take-over-" + ProcessHandle.current().pid());
        AdminSocket a = open(temporary, group, snapshots, actions, null);
        try {
            Files.move(temporary, path, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            a.close();
            throw e;
        }
        a.path = path; // the same file (inode), now at its place
        return a;
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel c;
            try {
                c = server.accept();
            } catch (IOException e) {
                if (closed) {
                    return;
                }
                LOG.log(Level.WARNING, "admin socket: accept failed: " + e.getMessage());
                sleepQuietly(); // e.g. out of descriptors: try again, do not spin
                continue;
            }
            if (!slots.tryAcquire()) {
                closeQuietly(c); // MAX_CLIENTS are being answered already
                continue;
            }
            java.util.concurrent.ScheduledFuture<?> deadline;
            try {
                deadline = deadlines.schedule(() -> closeQuietly(c), DEADLINE_SECONDS, TimeUnit.SECONDS);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                closeQuietly(c); // closing
                slots.release();
                return;
            }
            Thread.ofPlatform().daemon().name("gpusockets-admin-client").start(() -> {
                try {
                    answer(c, deadline);
                } finally {
                    deadline.cancel(false);
                    closeQuietly(c);
                    slots.release();
                }
            });
        }
    }

    private void answer(SocketChannel c, java.util.concurrent.Future<?> deadline) {
        try {
            UnixDomainPrincipal peer = c.getOption(ExtendedSocketOptions.SO_PEERCRED);
            String request = readLine(c); // read first, even to refuse: closing on unread bytes would reset the answer
            String refusal = access.apply(peer);
            if (refusal != null) {
                logRefusal(refusal);
                write(c, "refused: " + refusal + "\n");
            } else if (request == null) {
                write(c, "error: request line longer than " + MAX_REQUEST + " bytes or not ended by a newline\n");
            } else if (request.strip().equals("status")) {
                write(c, StatusJson.write(snapshots.get()) + "\n");
            } else if (request.startsWith("take-over ")) {
                takeOver(c, request.substring("take-over ".length()), peer, deadline);
            } else if (request.startsWith("checkpoint ") || request.startsWith("restore ")
                    || request.startsWith("migrate ") || request.startsWith("hand-over ")
                    || request.startsWith("receive-hand-over ")) {
                act(c, request, deadline);
            } else {
                write(c, "error: unknown request '" + printable(request) + "' (known: status, checkpoint, restore,"
                        + " migrate, hand-over, receive-hand-over, take-over)\n");
            }
        } catch (IOException e) {
            if (!closed) {
                LOG.log(Level.DEBUG, "admin socket: client gone: " + e.getMessage());
            }
        } catch (RuntimeException e) {
            LOG.log(Level.ERROR, "admin socket: cannot answer", e);
        }
    }

    /**
     * Runs a checkpoint, restore or migrate request: progress lines while it goes (a client that left is no longer
     * written to; the action goes on), then its answer.
     */
    private void act(SocketChannel c, String request, java.util.concurrent.Future<?> deadline) throws IOException {
        Request r;
        try {
            r = Request.parse(request);
        } catch (IllegalArgumentException e) {
            write(c, "error: " + e.getMessage() + "\n");
            return;
        }
        if (actions == null) {
            write(c, "error: this backend does not checkpoint, restore or migrate sessions\n");
            return;
        }
        deadline.cancel(false);
        boolean[] gone = {false};
        AdminActions.Progress progress = (stage, done, total) -> {
            if (!gone[0]) {
                try {
                    write(c, "progress " + stage.replaceAll("\\s", "_") + " " + done + " " + total + "\n");
                } catch (IOException e) {
                    gone[0] = true;
                }
            }
        };
        String answer;
        try {
            answer = switch (r.verb()) {
                case CHECKPOINT -> actions.checkpoint(r.session(), r.file(), r.stop(), progress);
                case RESTORE -> actions.restore(r.file(), progress);
                case MIGRATE -> actions.migrate(r.session(), r.target(), r.frontend(), progress);
                case HAND_OVER -> actions.handOver(r.session(), r.file(), r.frontend(), progress);
                case RECEIVE_HAND_OVER -> actions.receiveHandOver(r.file(), r.frontend(), progress);
                case CHECKPOINT_GROUP -> actions.checkpointGroup(r.sessions(), r.files(), r.stop(), progress);
                case RESTORE_GROUP -> actions.restoreGroup(r.files(), progress);
                case MIGRATE_GROUP -> actions.migrateGroup(r.sessions(), r.target(), r.frontend(), progress);
                case HAND_OVER_GROUP -> actions.handOverGroup(r.sessions(), r.file(), r.frontend(), progress);
            };
            LOG.log(Level.INFO, "admin socket: " + r.describe() + ": " + answer);
            answer = "ok " + answer.strip().replace('\n', ' ');
        } catch (Exception e) {
            String m = String.valueOf(e.getMessage()).strip().replace('\n', ' ');
            LOG.log(Level.WARNING, "admin socket: " + r.describe() + " failed: " + m);
            answer = "error: " + m;
        }
        if (!gone[0]) {
            write(c, answer + "\n");
        }
    }

    /** A take-over request: {@code fdunix:///PATH ISOLATION}; answered once everything is handed (no deadline then). */
    private void takeOver(SocketChannel c, String rest, UnixDomainPrincipal peer, java.util.concurrent.Future<?> deadline)
            throws IOException {
        String[] w = rest.strip().split(" ");
        if (w.length != 2 || !w[0].startsWith("fdunix://") || !w[1].matches("[a-z]{1,16}")) {
            write(c, "error: usage: take-over fdunix:///PATH ISOLATION\n");
            return;
        }
        Path socket;
        try {
            socket = Path.of(w[0].substring("fdunix://".length()));
        } catch (java.nio.file.InvalidPathException e) {
            write(c, "error: not a socket path: '" + printable(w[0]) + "'\n");
            return;
        }
        if (actions == null) {
            write(c, "error: this backend cannot be taken over\n");
            return;
        }
        deadline.cancel(false);
        String answer;
        try {
            answer = "ok " + actions.takeOver(socket, w[1], peer.user()).strip().replace('\n', ' ');
            LOG.log(Level.INFO, "admin socket: take-over by the backend listening on " + socket + ": " + answer);
        } catch (Exception e) {
            String m = String.valueOf(e.getMessage()).strip().replace('\n', ' ');
            LOG.log(Level.WARNING, "admin socket: take-over refused or failed: " + m);
            answer = "error: " + m;
        }
        write(c, answer + "\n");
    }

    /** What a request asks for. */
    enum Verb {
        CHECKPOINT, RESTORE, MIGRATE, HAND_OVER, RECEIVE_HAND_OVER, CHECKPOINT_GROUP, RESTORE_GROUP, MIGRATE_GROUP,
        HAND_OVER_GROUP
    }

    /**
     * A checkpoint ({@code session}, {@code stop}, {@code file}), restore ({@code file}) or migrate ({@code session},
     * {@code target}, {@code frontend} or null) request, parsed and checked.
     */
    record Request(Verb verb, long session, boolean stop, Path file, String target, String frontend, List<Long> sessions,
                   List<Path> files) {
        /** The longest URI a migrate request may name. */
        static final int MAX_URI = 1024;
        /** The most sessions a checkpoint or restore of sessions together may name. */
        static final int MAX_GROUP = 64;

        Request(Verb verb, long session, boolean stop, Path file, String target, String frontend) {
            this(verb, session, stop, file, target, frontend, List.of(), List.of());
        }

        /** For the log. */
        String describe() {
            return switch (verb) {
                case CHECKPOINT -> "checkpoint of session " + session + " " + file;
                case RESTORE -> "restore " + file;
                case MIGRATE -> "migration of session " + session + " to " + target
                        + (frontend != null ? " (frontend to " + frontend + ")" : "");
                case HAND_OVER -> "hand-over of session " + session + " to the backend at " + file
                        + (frontend != null ? " (frontend to " + frontend + ")" : "");
                case RECEIVE_HAND_OVER -> "hand-over received from " + file;
                case CHECKPOINT_GROUP -> "checkpoint of sessions " + sessions + " together " + files;
                case RESTORE_GROUP -> "restore together " + files;
                case MIGRATE_GROUP -> "migration of sessions " + sessions + " together to " + target
                        + (frontend != null ? " (frontend to " + frontend + ")" : "");
                case HAND_OVER_GROUP -> "hand-over of sessions " + sessions + " together to the backend at " + file
                        + (frontend != null ? " (frontend to " + frontend + ")" : "");
            };
        }

        static Request parse(String line) {
            if (line.startsWith("migrate ")) {
                return parseMigrate(line.substring("migrate ".length()));
            }
            if (line.startsWith("hand-over ")) {
                return parseHandOver(line.substring("hand-over ".length()), true);
            }
            if (line.startsWith("receive-hand-over ")) {
                return parseHandOver(line.substring("receive-hand-over ".length()), false);
            }
            String rest;
            boolean checkpoint = line.startsWith("checkpoint ");
            rest = line.substring(checkpoint ? "checkpoint ".length() : "restore ".length());
            String usage = "usage: " + (checkpoint ? "checkpoint SESSION [stop] FILE (sessions together: checkpoint"
                    + " SESSION,SESSION... [stop] FILE<TAB>FILE...)" : "restore FILE (sessions together: restore"
                    + " FILE<TAB>FILE...)");
            List<Long> sessions = new ArrayList<>();
            boolean stop = false;
            if (checkpoint) {
                int sp = rest.indexOf(' ');
                if (sp <= 0) {
                    throw new IllegalArgumentException(usage);
                }
                String[] ids = rest.substring(0, sp).split(",", -1);
                if (ids.length > MAX_GROUP) {
                    throw new IllegalArgumentException("at most " + MAX_GROUP + " sessions together");
                }
                for (String id : ids) {
                    sessions.add(sessionId(id));
                }
                rest = rest.substring(sp + 1);
                if (rest.startsWith("stop ")) {
                    stop = true;
                    rest = rest.substring("stop ".length());
                }
            }
            String[] names = rest.split("\t", -1);
            if (names.length > MAX_GROUP || checkpoint && names.length != sessions.size()) {
                throw new IllegalArgumentException(usage + " (one file per session)");
            }
            List<Path> files = new ArrayList<>();
            for (String name : names) {
                if (name.isEmpty() || name.chars().anyMatch(ch -> ch < 0x20)) {
                    throw new IllegalArgumentException(usage);
                }
                Path file;
                try {
                    file = Path.of(name);
                } catch (java.nio.file.InvalidPathException e) {
                    throw new IllegalArgumentException("not a file path: '" + printable(name) + "'");
                }
                if (!file.isAbsolute()) {
                    throw new IllegalArgumentException("the file must be an absolute path (the backend resolves no other): '"
                            + printable(name) + "'");
                }
                files.add(file.normalize());
            }
            if (files.size() > 1) {
                return new Request(checkpoint ? Verb.CHECKPOINT_GROUP : Verb.RESTORE_GROUP, 0, stop, null, null, null,
                        List.copyOf(sessions), List.copyOf(files));
            }
            return new Request(checkpoint ? Verb.CHECKPOINT : Verb.RESTORE, checkpoint ? sessions.get(0) : 0, stop,
                    files.get(0), null, null);
        }

        /**
         * {@code SESSION TARGET_URI [FRONTEND_URI]}, single spaces apart, each URI printable ASCII; SESSION may be
         * {@code SESSION,SESSION...} (at most {@link #MAX_GROUP}: sessions that migrate together).
         */
        private static Request parseMigrate(String rest) {
            String[] w = rest.split(" ", -1);
            if (w.length < 2 || w.length > 3) {
                throw new IllegalArgumentException("usage: migrate SESSION[,SESSION...] TARGET_URI [FRONTEND_URI]");
            }
            String[] ids = w[0].split(",", -1);
            if (ids.length > MAX_GROUP) {
                throw new IllegalArgumentException("at most " + MAX_GROUP + " sessions together");
            }
            List<Long> sessions = new ArrayList<>();
            for (String id : ids) {
                sessions.add(sessionId(id));
            }
            for (int i = 1; i < w.length; i++) {
                if (w[i].isEmpty() || w[i].length() > MAX_URI || !w[i].chars().allMatch(ch -> ch > 0x20 && ch < 0x7f)) {
                    throw new IllegalArgumentException("not a URI: '" + printable(w[i])
                            + "' (usage: migrate SESSION TARGET_URI [FRONTEND_URI])");
                }
            }
            if (sessions.size() > 1) {
                return new Request(Verb.MIGRATE_GROUP, 0, false, null, w[1], w.length == 3 ? w[2] : null,
                        List.copyOf(sessions), List.of());
            }
            return new Request(Verb.MIGRATE, sessions.get(0), false, null, w[1], w.length == 3 ? w[2] : null);
        }

        /**
         * {@code SESSION SOCKET [FRONTEND_URI]} ({@code withSession}; SESSION may be {@code SESSION,SESSION...}, at most
         * {@link #MAX_GROUP}: sessions handed over together) or {@code SOCKET [FRONTEND_URI]}, single spaces apart:
         * SOCKET an absolute path, each word printable ASCII.
         */
        private static Request parseHandOver(String rest, boolean withSession) {
            String usage = withSession ? "usage: hand-over SESSION[,SESSION...] TARGET_ADMIN_SOCKET [FRONTEND_URI]"
                    : "usage: receive-hand-over SOURCE_SOCKET [FRONTEND_URI]";
            String[] w = rest.split(" ", -1);
            int first = withSession ? 1 : 0;
            if (w.length < first + 1 || w.length > first + 2) {
                throw new IllegalArgumentException(usage);
            }
            for (String x : w) {
                if (x.isEmpty() || x.length() > MAX_URI || !x.chars().allMatch(ch -> ch > 0x20 && ch < 0x7f)) {
                    throw new IllegalArgumentException("not one printable word: '" + printable(x) + "' (" + usage + ")");
                }
            }
            List<Long> sessions = new ArrayList<>();
            if (withSession) {
                String[] ids = w[0].split(",", -1);
                if (ids.length > MAX_GROUP) {
                    throw new IllegalArgumentException("at most " + MAX_GROUP + " sessions together");
                }
                for (String id : ids) {
                    sessions.add(sessionId(id));
                }
            }
            Path socket;
            try {
                socket = Path.of(w[first]);
            } catch (java.nio.file.InvalidPathException e) {
                throw new IllegalArgumentException("not a socket path: '" + printable(w[first]) + "'");
            }
            if (!socket.isAbsolute()) {
                throw new IllegalArgumentException("the socket must be an absolute path: '" + printable(w[first]) + "'");
            }
            String frontend = w.length == first + 2 ? w[first + 1] : null;
            if (sessions.size() > 1) {
                return new Request(Verb.HAND_OVER_GROUP, 0, false, socket.normalize(), null, frontend,
                        List.copyOf(sessions), List.of());
            }
            return new Request(withSession ? Verb.HAND_OVER : Verb.RECEIVE_HAND_OVER, withSession ? sessions.get(0) : 0,
                    false, socket.normalize(), null, frontend);
        }

        private static long sessionId(String s) {
            try {
                return Long.parseLong(s);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("not a session id: '" + printable(s) + "'");
            }
        }
    }

    /** One log line per refusal, at most one a second (the rest are counted into the next line). */
    private synchronized void logRefusal(String refusal) {
        long now = System.nanoTime();
        if (lastRefusalLog != 0 && now - lastRefusalLog < TimeUnit.SECONDS.toNanos(1)) {
            refusalsNotLogged++;
            return;
        }
        lastRefusalLog = now;
        LOG.log(Level.WARNING, "admin socket: refused " + refusal
                + (refusalsNotLogged > 0 ? " (and " + refusalsNotLogged + " refusals not logged)" : ""));
        refusalsNotLogged = 0;
    }

    /** The request line without its newline, or null when none came within {@value #MAX_REQUEST} bytes. */
    private static String readLine(SocketChannel c) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(MAX_REQUEST);
        while (b.hasRemaining()) {
            if (c.read(b) < 0) {
                break;
            }
            for (int i = 0; i < b.position(); i++) {
                if (b.get(i) == '\n') {
                    return new String(b.array(), 0, i, StandardCharsets.UTF_8);
                }
            }
        }
        return null;
    }

    private static String printable(String s) {
        String t = s.length() > 40 ? s.substring(0, 40) + "..." : s;
        return t.replaceAll("[^\\x20-\\x7e]", "?");
    }

    private static void write(SocketChannel c, String s) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    private static void closeQuietly(SocketChannel c) {
        try {
            c.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    private static void sleepQuietly() {
        try {
            Thread.sleep(100);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops answering and removes the socket file. */
    @Override
    public void close() {
        closed = true;
        try {
            server.close();
        } catch (IOException ignored) {
            // closing
        }
        deadlines.shutdownNow();
        try {
            Object key = Files.readAttributes(path, java.nio.file.attribute.BasicFileAttributes.class,
                    java.nio.file.LinkOption.NOFOLLOW_LINKS).fileKey();
            if (key != null && key.equals(fileKey)) {
                Files.deleteIfExists(path);
            }
        } catch (java.nio.file.NoSuchFileException e) {
            // gone already
        } catch (IOException e) {
            LOG.log(Level.WARNING, "admin socket: cannot remove " + path + ": " + e.getMessage());
        }
    }
}
