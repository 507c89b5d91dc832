package io.gpusockets.backend.isolation;

import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The take-over connection: how a running backend A hands its listeners and its sessions to a new backend B
 * ({@code gpusockets backend --take-over A_ADMIN_SOCKET}), no GPU memory copied: a session in a worker process
 * (isolation mode {@code process}) holds its program's connection and all its GPU state, so B only has to become that
 * worker's front; a session A serves in its own process (isolation {@code context} or {@code shared}) is handed over
 * after that ({@link io.gpusockets.backend.server.HandOver}: its memory exported as shareable handles and mapped at
 * the same addresses in B).
 *
 * <ol>
 *   <li>B listens on a fresh {@code fdunix://} socket in a private directory (mode 0700), connects to A's admin
 *       socket (with this module's socket layer, so that it learns A's pid) and asks
 *       {@code take-over fdunix://PATH ISOLATION} (the admin socket's access rules apply).</li>
 *   <li>A checks the request (not being taken over already, the same isolation, no checkpoint or migration
 *       running, the socket owned by the requesting user), connects to PATH; B checks that the peer is A's pid.</li>
 *   <li>A stops accepting: each tcp:// and unix:// listening socket is duplicated and its listener closed without
 *       shutdown or unlink, so the socket stays bound and connections queue in its backlog, refused by no one
 *       (other listeners are closed: B listens on them anew when its --listen names them). A lets the handshakes
 *       already accepted finish (handed to a worker), marks every worker's control stream (TAKEOVER_MARK/MARKED,
 *       {@link Workers#handOff}) and stops its idle ones.</li>
 *   <li>A sends, on the take-over connection (little-endian, {@link ControlMessages} framing, descriptors by
 *       SCM_RIGHTS):
 * <pre>
 *   LISTENER  string uri                                    + 1 descriptor: the listening socket
 *   WORKER    long pid, long memoryBytes, long pinnedBytes,  + 1 descriptor: the worker's control socket
 *             long ageMillis, byte frozen, SessionTicket
 *   END       long fromPid, long nextSessionCounter, int sessionsKept
 * B sends back
 *   DONE      long bytesReceived
 * </pre>
 *       B adopts every worker (tenant charges re-made from what each holds), then serves the listeners
 *       ({@link DescriptorPassing#adoptListener}) and answers DONE; A closes its copies of everything it sent.</li>
 *   <li>A hands over, one after another on the same connection, each session of its own process that can be
 *       (resumable, address-stable memory, a device that exports POSIX descriptors), then each group of sessions
 *       that share IPC memory or events together (a group hand-over, announced by its first session), then says
 *       FINISHED:
 * <pre>
 *   HAND_OVER long sessionId                                 then a {@link io.gpusockets.backend.server.HandOver}
 *   FINISHED  int handedOver, long handedBytes, long copiedBytes, int sessionsKept
 * </pre>
 *       A closes each handed session's connection and its frontend resumes at the address it used, B's now. A session
 *       or group that cannot be handed over is checked before its HAND_OVER and stays with A (logged with why); the
 *       rest go on. The first hand-over that fails once announced ends them (no FINISHED): that session or group and
 *       those not handed yet stay with A, as do connections A relays in process mode. A exits once
 *       the sessions it still serves end.</li>
 * </ol>
 * What crosses is a few hundred bytes per session, whatever memory the sessions hold ({@link Summary#bytes}).
 * What it owns: the connection and the descriptors of one take-over while it runs; bounded by one message of
 * {@link ControlMessages#MAX_BYTES} at a time and at most {@link #MAX_ITEMS} listeners and workers.
 */
public final class TakeOver {
    static final byte LISTENER = 1;
    static final byte WORKER = 2;
    static final byte END = 3;
    static final byte DONE = 4;
    static final byte HAND_OVER = 5;
    static final byte FINISHED = 6;
    /** Listeners and workers one take-over carries at most (a broken or hostile peer sends no more). */
    static final int MAX_ITEMS = 65536;
    /** How long each side waits for the other at each step. */
    public static final Duration STEP_TIMEOUT = Duration.ofSeconds(60);

    private TakeOver() {
    }

    /** A listening socket that crosses: the address its listener serves and the descriptor (a copy the sender owns). */
    public record ListenerFd(TransportUri uri, int fd) {
    }

    /** A worker received by the new backend: as handed, and its control socket's descriptor (the receiver's). */
    public record ReceivedWorker(Workers.Handed handed, int fd) {
    }

    /** What the new backend received: everything to adopt, and what the old backend said of itself. */
    public record Received(List<ListenerFd> listeners, List<ReceivedWorker> workers, long fromPid, long nextSessionCounter,
                           int sessionsKept, long bytes) {
    }

    /**
     * What a take-over moved, as both backends log and report it: listeners, sessions in workers adopted, sessions of
     * the old backend's process handed over by shareable handles ({@code handedOver}: their memory mapped by the new
     * backend, {@code handedBytes}; {@code copiedBytes} went in their images), the sessions left with the old backend,
     * and the bytes the take-over connection carried before the hand-overs. On the new backend's side, the time split:
     * {@code handNanos} waiting for what the old backend hands (its stop, mark and send), {@code adoptNanos} adopting
     * it (until DONE), {@code handOverNanos} the hand-overs that followed; the old backend's reports 0 for these.
     */
    public record Summary(long fromPid, int listeners, int sessions, int sessionsKept, long bytes, int handedOver,
                          long handedBytes, long copiedBytes, long handNanos, long adoptNanos, long handOverNanos) {
        /** One line of JSON, as the admin socket and the CLI print it. */
        public String json() {
            return "{\"fromPid\":" + fromPid + ",\"listeners\":" + listeners + ",\"sessions\":" + sessions + ",\"sessionsKept\":"
                    + sessionsKept + ",\"bytes\":" + bytes + ",\"handedOver\":" + handedOver + ",\"handedBytes\":"
                    + handedBytes + ",\"copiedBytes\":" + copiedBytes + "}";
        }
    }

    /**
     * What the old backend says after DONE, once per session of its own process: either the session that a {@link
     * io.gpusockets.backend.server.HandOver} on this connection moves next ({@code finished} false), or that no more
     * follow, with how many sessions it handed over and keeps ({@code finished} true).
     */
    public record Next(boolean finished, long sessionId, int handedOver, long handedBytes, long copiedBytes, int sessionsKept) {
    }

    /** The old backend's side, after DONE: a hand-over of session {@code sessionId} follows on {@code to}. */
    public static void handOverNext(Connection to, long sessionId) throws IOException {
        ByteBuffer m = ControlMessages.start(HAND_OVER);
        m.putLong(sessionId);
        to.write(ControlMessages.finish(m));
    }

    /** The old backend's side: no more hand-overs; what they moved and how many sessions it keeps until they end. */
    public static void finished(Connection to, int handedOver, long handedBytes, long copiedBytes, int sessionsKept)
            throws IOException {
        ByteBuffer m = ControlMessages.start(FINISHED);
        m.putInt(handedOver).putLong(handedBytes).putLong(copiedBytes).putInt(sessionsKept);
        to.write(ControlMessages.finish(m));
    }

    /**
     * The new backend's side, after DONE and after each hand-over: what the old backend does next, waited for at most
     * {@link #STEP_TIMEOUT} (then the connection is closed and this fails). An old backend that closes the connection
     * after DONE (one that hands no sessions over) fails this too: the caller takes it as FINISHED.
     */
    public static Next next(Connection from) throws IOException {
        java.util.concurrent.atomic.AtomicBoolean answered = new java.util.concurrent.atomic.AtomicBoolean();
        CompletableFuture.delayedExecutor(STEP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).execute(() -> {
            if (!answered.get()) {
                from.close();
            }
        });
        ByteBuffer m;
        try {
            m = ControlMessages.read(from);
        } finally {
            answered.set(true);
        }
        byte type = m.get();
        if (type == HAND_OVER && m.remaining() == 8) {
            return new Next(false, m.getLong(), 0, 0, 0, 0);
        }
        if (type == FINISHED && m.remaining() == 24) {
            int handed = m.getInt();
            long handedBytes = m.getLong(), copied = m.getLong();
            int kept = m.getInt();
            if (handed < 0 || handedBytes < 0 || copied < 0 || kept < 0) {
                throw new IOException("take-over: FINISHED with negative counts");
            }
            return new Next(true, 0, handed, handedBytes, copied, kept);
        }
        throw new IOException("take-over: message " + type + " of " + (m.remaining() + 1) + " bytes after DONE");
    }

    /**
     * The old backend's side, after it stopped accepting and marked its workers: sends everything to {@code to} and
     * waits for the new backend's DONE. Returns the bytes sent. The caller lets go of its copies afterwards.
     */
    public static long give(Connection to, List<ListenerFd> listeners, List<Workers.Handed> workers, long fromPid,
                            long nextSessionCounter, int sessionsKept) throws IOException {
        long bytes = 0;
        for (ListenerFd l : listeners) {
            ByteBuffer m = ControlMessages.start(LISTENER);
            ControlMessages.putString(m, l.uri().toString());
            bytes += send(to, m, l.fd());
        }
        for (Workers.Handed w : workers) {
            ByteBuffer m = ControlMessages.start(WORKER);
            m.putLong(w.pid()).putLong(w.memoryBytes()).putLong(w.pinnedBytes()).putLong(w.ageMillis())
                    .put((byte) (w.frozen() ? 1 : 0));
            w.ticket().encode(m);
            OptionalInt fd = DescriptorPassing.descriptorOf(w.control());
            if (fd.isEmpty()) {
                throw new IOException("worker pid " + w.pid() + ": its control socket has no descriptor to pass");
            }
            bytes += send(to, m, fd.getAsInt());
        }
        ByteBuffer end = ControlMessages.start(END);
        end.putLong(fromPid).putLong(nextSessionCounter).putInt(sessionsKept);
        bytes += send(to, end);
        java.util.concurrent.atomic.AtomicBoolean answered = new java.util.concurrent.atomic.AtomicBoolean();
        CompletableFuture.delayedExecutor(STEP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).execute(() -> {
            if (!answered.get()) {
                to.close(); // a new backend that hangs does not hold this one for ever
            }
        });
        ByteBuffer done;
        try {
            done = ControlMessages.read(to);
        } finally {
            answered.set(true);
        }
        if (done.get() != DONE) {
            throw new IOException("the new backend answered something else than DONE");
        }
        long received = done.getLong();
        if (received != bytes) {
            throw new IOException("the new backend received " + received + " bytes of the " + bytes + " sent");
        }
        return bytes;
    }

    private static long send(Connection to, ByteBuffer m, int... fds) throws IOException {
        ByteBuffer b = ControlMessages.finish(m);
        int n = b.remaining();
        DescriptorPassing.send(to, b, fds);
        return n;
    }

    /**
     * The new backend's side: reads what the old backend sends until END. Descriptors received belong to the caller
     * (closed here when the stream is broken).
     */
    public static Received take(Connection from) throws IOException {
        List<ListenerFd> listeners = new ArrayList<>();
        List<ReceivedWorker> workers = new ArrayList<>();
        List<Integer> fds = new ArrayList<>(HandedConnection.MAX_DESCRIPTORS);
        long bytes = 0;
        try {
            while (true) {
                fds.clear();
                ByteBuffer m = ControlMessages.readWithDescriptors(from, fds::add);
                bytes += 4 + m.remaining();
                byte type = m.get();
                if (type == END) {
                    if (!fds.isEmpty()) {
                        throw new IOException("take-over: END came with descriptors");
                    }
                    return new Received(listeners, workers, m.getLong(), m.getLong(), m.getInt(), bytes);
                }
                if (fds.size() != 1 || listeners.size() + workers.size() >= MAX_ITEMS) {
                    throw new IOException("take-over: message " + type + " with " + fds.size() + " descriptors (1 expected),"
                            + " or more than " + MAX_ITEMS + " items");
                }
                int fd = fds.removeFirst();
                try {
                    switch (type) {
                        case LISTENER -> listeners.add(new ListenerFd(TransportUri.parse(ControlMessages.getString(m)), fd));
                        case WORKER -> {
                            long pid = m.getLong();
                            long memory = m.getLong();
                            long pinned = m.getLong();
                            long age = m.getLong();
                            byte frozen = m.get();
                            SessionTicket t = SessionTicket.decode(m);
                            if (pid <= 0 || memory < 0 || pinned < 0 || age < 0 || frozen < 0 || frozen > 1) {
                                throw new IOException("take-over: worker pid=" + pid + " memory=" + memory + " pinned=" + pinned);
                            }
                            workers.add(new ReceivedWorker(new Workers.Handed(pid, t, memory, pinned, age, frozen == 1, null), fd));
                        }
                        default -> throw new IOException("take-over: unknown message " + type);
                    }
                } catch (IOException | RuntimeException e) {
                    DescriptorPassing.close(fd);
                    throw e instanceof IOException io ? io : new IOException("take-over: bad message " + type + ": " + e, e);
                }
            }
        } catch (IOException | RuntimeException e) {
            fds.forEach(DescriptorPassing::close);
            listeners.forEach(l -> DescriptorPassing.close(l.fd()));
            workers.forEach(w -> DescriptorPassing.close(w.fd()));
            throw e instanceof IOException io ? io : new IOException("take-over: " + e, e);
        }
    }

    /** The new backend's answer once it adopted everything: the bytes it received. */
    public static void done(Connection from, long bytes) throws IOException {
        ByteBuffer m = ControlMessages.start(DONE);
        m.putLong(bytes);
        from.write(ControlMessages.finish(m));
    }

    /** What the new backend has once the old one connected: the take-over connection and the old backend's pid. */
    public record Request(Connection admin, CompletableFuture<String> answerLine, Connection from, long fromPid, Path dir)
            implements AutoCloseable {
        /** The old backend's last answer on its admin socket ("ok {...}" or "error: ..."). */
        public String answer() throws IOException {
            try {
                return answerLine.get(STEP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                throw new IOException("the old backend did not answer on its admin socket: " + e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted");
            }
        }

        @Override
        public void close() {
            admin.close();
            from.close();
            try {
                Files.deleteIfExists(dir.resolve(SOCKET_NAME));
                Files.deleteIfExists(dir);
            } catch (IOException ignored) {
                // left in the temporary directory
            }
        }
    }

    static final String SOCKET_NAME = "take-over.sock";

    /**
     * The new backend's first step: asks the backend whose admin socket is {@code adminSocket} to hand itself over
     * (running isolation {@code isolation}) and waits for it to connect back. Fails with the old backend's own
     * refusal when it refuses (being taken over already, another isolation, ...), or with what went wrong (no such
     * socket, not a backend's admin socket, no answer within {@link #STEP_TIMEOUT}).
     */
    public static Request ask(Path adminSocket, String isolation) throws IOException {
        if (!Files.exists(adminSocket, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            throw new IOException("--take-over " + adminSocket + ": no such file (it must be the running backend's --admin-socket)");
        }
        Path dir = Files.createTempDirectory("gpusockets-take-over"); // 0700: only this user reaches the socket
        TransportUri uri = TransportUri.parse("fdunix://" + dir.resolve(SOCKET_NAME).toAbsolutePath());
        Listener listener = Transports.listen(uri);
        Connection admin = null;
        try {
            try {
                admin = Transports.connect(TransportUri.parse("fdunix://" + adminSocket.toAbsolutePath()), Duration.ofSeconds(10));
            } catch (IOException e) {
                throw new IOException("--take-over " + adminSocket + ": cannot connect (" + e.getMessage()
                        + "); is a backend running with that --admin-socket?", e);
            }
            OptionalInt pid = DescriptorPassing.peerPid(admin);
            admin.write(ByteBuffer.wrap(("take-over " + uri + " " + isolation + "\n").getBytes(StandardCharsets.UTF_8)));
            Connection a = admin;
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return listener.accept();
                } catch (IOException e) {
                    throw new java.util.concurrent.CompletionException(e);
                }
            }, r -> Thread.ofPlatform().daemon().name("gpusockets-take-over-accept").start(r));
            CompletableFuture<String> refused = CompletableFuture.supplyAsync(() -> {
                try {
                    return readLine(a);
                } catch (IOException e) {
                    return "error: the old backend closed its admin connection (" + e.getMessage() + ")";
                }
            }, r -> Thread.ofPlatform().daemon().name("gpusockets-take-over-answer").start(r));
            try {
                CompletableFuture.anyOf(accepted, refused).get(STEP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new IOException("--take-over " + adminSocket + ": the backend did not answer within " + STEP_TIMEOUT.toSeconds() + " s");
            } catch (java.util.concurrent.ExecutionException | InterruptedException e) {
                // the accept failed: said below
            }
            if (!accepted.isDone() || accepted.isCompletedExceptionally()) {
                String why = refused.getNow(null);
                throw new IOException("--take-over " + adminSocket + ": " + (why == null ? "the backend did not connect back" : why));
            }
            Connection from = accepted.join();
            OptionalInt peer = DescriptorPassing.peerPid(from);
            if (pid.isEmpty() || peer.isEmpty() || peer.getAsInt() != pid.getAsInt()) {
                from.close();
                throw new IOException("--take-over: the take-over socket was reached by pid " + (peer.isPresent() ? peer.getAsInt() : "?")
                        + ", not by the backend (pid " + (pid.isPresent() ? pid.getAsInt() : "?") + ")");
            }
            if (refused.isDone()) {
                from.close();
                throw new IOException("--take-over " + adminSocket + ": " + refused.join());
            }
            return new Request(admin, refused, from, pid.getAsInt(), dir);
        } catch (IOException | RuntimeException e) {
            if (admin != null) {
                admin.close();
            }
            Files.deleteIfExists(dir.resolve(SOCKET_NAME));
            Files.deleteIfExists(dir);
            throw e;
        } finally {
            listener.close();
        }
    }

    /** One line (without its newline) of at most 64 KiB; the rest of the stream stays unread. */
    private static String readLine(Connection c) throws IOException {
        java.io.ByteArrayOutputStream line = new java.io.ByteArrayOutputStream();
        ByteBuffer one = ByteBuffer.allocateDirect(1);
        while (line.size() < (64 << 10)) {
            one.clear();
            c.readFully(one);
            byte b = one.get(0);
            if (b == '\n') {
                return line.toString(StandardCharsets.UTF_8);
            }
            line.write(b);
        }
        throw new IOException("an answer line longer than 64 KiB");
    }
}
