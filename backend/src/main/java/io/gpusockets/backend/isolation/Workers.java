package io.gpusockets.backend.isolation;

import io.gpusockets.backend.tenant.TenantAccount;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.transport.vsock.DescriptorPassing;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The front process's worker processes (isolation mode {@code process}): it starts them (the same java
 * and classpath, the {@code worker} command), keeps {@code idle} of them started ahead so that a session
 * does not wait for a JVM to start, hands each session's connection to one worker over that worker's control
 * socket (SCM_RIGHTS, {@link HandedConnection}: a socket, or a ring's shared file and set-up socket; relayed by
 * {@link FrameRelay} only where it cannot cross), answers the worker's tenant reserves against the real
 * {@link io.gpusockets.backend.tenant.Tenant} ({@link FrontTenantAccount} is the worker's side), and when
 * a worker ends, however it ends, gives back what its session still held of the tenant's quota and logs
 * how it ended. A worker serves one session and exits with it. A resumable session's worker is found by the
 * session's token ({@link #resumable}), and a resuming connection is handed to it the same way ({@link #resume},
 * control message RESUME) while the session waits detached in the worker. A checkpoint of a session is taken by its
 * worker ({@link #checkpoint}), and a restore is made by an idle worker, which then serves the restored session
 * ({@link #restore}); a migration of a session is run by its worker, which connects to the target itself
 * ({@link #migrate}); sessions that share IPC memory and events are checkpointed together, each by its worker, the
 * front leading them ({@link #checkpointGroup}), and restored together, each in a worker of its own held until the
 * group's shares are made again ({@link #restoreHeld}, {@link #reshare}); such a group migrates as a group checkpoint
 * with stop whose images the front sends to the target, each worker sending its frontend there and ending its session
 * once the target holds them all ({@link #migrateGroup}); all of these wait for the workers'
 * answers, or fail when one dies first or sends nothing for the quiet timeout ({@link #quietTimeout}: a worker that hangs, e.g. in a driver call that never returns, fails the caller
 * with a message instead of holding it forever; each progress message starts the timeout again, so a large image
 * that keeps moving is never cut off).
 *
 * <p>A take-over ({@code gpusockets backend --take-over}, {@link TakeOver}) moves workers between fronts: the old
 * front marks each serving worker's control stream and stops its idle ones ({@link #handOff}), the new front adopts
 * each worker from its control socket's descriptor, pid, ticket and quota held ({@link #adopt}): an adopted worker is
 * no child of this process, so its end is learnt from its control socket closing and its exit status is unknown.
 *
 * <p>What it owns: the worker processes (never more than {@code max}, idle ones included; adopted ones count too),
 * one reader thread per live worker, and a private directory (mode 0700) holding the control socket; all go in
 * {@link #close}. A worker whose front disappears (even by kill -9) sees its control socket close and ends
 * its session and itself; a front that hands its workers over closes its copies without shutdown, so the
 * socket stays open through the new front's copy.
 */
public final class Workers implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    /** How long a session waits for a worker that has to be started for it. */
    static final long START_SECONDS = 60;
    /** How long a stopping worker has to end its session before it is killed. */
    static final long STOP_SECONDS = 10;
    /** The property that sets {@link #quietTimeout}'s default, in seconds (0: wait for ever). */
    public static final String QUIET_PROPERTY = "gpusockets.worker.checkpointQuietSeconds";
    /** The quiet timeout's default: longer than a drain waiting for a long kernel usually takes. */
    static final long QUIET_SECONDS_DEFAULT = 300;

    private final List<String> command;
    private final int idleTarget;
    private final int max;
    private final Path dir;
    private final Listener controlListener;
    private final TransportUri controlUri;
    /** Every worker process not yet known to be gone, by pid. */
    private final Map<Long, Worker> live = new ConcurrentHashMap<>();
    /** The backend's shares between sessions (SHARE and LOOKUP of the workers), or null: every share refused. */
    private volatile io.gpusockets.backend.session.ShareRegistry shares;
    private final BlockingQueue<Worker> idle = new LinkedBlockingQueue<>();
    /** Workers serving a resumable session, by its token in hex; a worker leaves when it ends. */
    private final Map<String, Worker> resumable = new ConcurrentHashMap<>();
    private final AtomicLong handedOver = new AtomicLong();
    /** Sessions waiting for a worker now. */
    private final java.util.concurrent.atomic.AtomicInteger waiting = new java.util.concurrent.atomic.AtomicInteger();
    /** Workers starting at once at most. */
    private final int parallelStarts;
    /** The workers' AOT cache, or null for none ({@link WorkerAotCache}). */
    private final WorkerAotCache aot;
    private volatile boolean closed;
    /** Set once a backend takes this one over ({@link #handOff}): no worker starts, no session is handed over here. */
    private volatile boolean handingOff;
    /** Workers marked for a take-over and not yet released or taken back, by pid. */
    private final Map<Long, Worker> handing = new ConcurrentHashMap<>();
    /** Workers adopted from the backend this one took over ({@link #adopt}), so far. */
    private final AtomicLong adopted = new AtomicLong();
    /** How long a checkpoint, restore or migration waits for its worker's next message; 0: for ever. */
    private volatile long quietNanos = TimeUnit.SECONDS.toNanos(Math.max(0, Long.getLong(QUIET_PROPERTY, QUIET_SECONDS_DEFAULT)));

    /**
     * @param command the worker's command line (java, its options, the classpath, the main class and
     *                {@code worker} with its options); {@code --control URI} is added
     * @param idle    workers to keep started ahead
     * @param max     worker processes at most, idle ones included: sessions beyond it are refused
     */
    public Workers(List<String> command, int idle, int max) throws IOException {
        this(command, idle, max, Runtime.getRuntime().availableProcessors());
    }

    /** As {@link #Workers(List, int, int)}, starting at most {@code parallelStarts} workers at once (default: one per core). */
    public Workers(List<String> command, int idle, int max, int parallelStarts) throws IOException {
        if (command.isEmpty() || idle < 0 || max < 1 || idle > max || parallelStarts < 1) {
            throw new IllegalArgumentException("workers: command=" + command + " idle=" + idle + " max=" + max
                    + " parallelStarts=" + parallelStarts + " (need a command, 0 <= idle <= max, max >= 1, parallelStarts >= 1)");
        }
        this.command = List.copyOf(command);
        this.idleTarget = idle;
        this.max = max;
        this.parallelStarts = parallelStarts;
        this.dir = Files.createTempDirectory("gpusockets-workers"); // 0700: only this user reaches the socket
        this.controlUri = TransportUri.parse("fdunix://" + dir.resolve("control.sock"));
        this.controlListener = Transports.listen(controlUri);
        this.aot = WorkerAotCache.forCommand(this.command);
        Thread.ofPlatform().daemon().name("gpusockets-workers-accept").start(this::acceptLoop);
        replenish();
    }

    /** Worker processes at most, idle ones included: also the most sessions this backend serves at once. */
    public int max() {
        return max;
    }

    /**
     * How long a checkpoint, restore or migration waits for its worker's next message (progress or answer) before it
     * fails
     * saying the worker did not answer (default {@value #QUIET_SECONDS_DEFAULT} s, property {@value #QUIET_PROPERTY};
     * zero waits for ever). A drain waiting for a kernel sends nothing until the kernel ends, so the timeout must
     * exceed the longest kernel a checkpoint may wait for. A checkpoint that timed out leaves its worker as it is:
     * should it answer later, a checkpoint with stop that succeeded then freezes the session as it would have (its
     * token forgotten here; the image is complete), and anything else is logged. A restore that timed out ends its
     * worker, as a failed restore does. A migration that timed out goes on in its worker: should it succeed later,
     * the session moves as it would have (its token forgotten here), and anything else is logged.
     */
    public void quietTimeout(java.time.Duration timeout) {
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("quiet timeout " + timeout);
        }
        quietNanos = timeout.toNanos();
    }

    /** Workers serving a session now. */
    public int serving() {
        return (int) live.values().stream().filter(w -> w.sessionId != 0).count();
    }

    /** Worker processes alive now (serving, idle or starting). */
    public int live() {
        return live.size();
    }

    /** The pids of the live worker processes. */
    public List<Long> pids() {
        return List.copyOf(live.keySet());
    }

    /** The control socket workers connect to. */
    TransportUri controlAddress() {
        return controlUri;
    }

    /**
     * The sessions workers serve now, as `gpusockets status` shows them: their figures as of each worker's
     * last STATS message (at most a second old; zeros until the first).
     */
    public List<io.gpusockets.backend.status.SessionSnapshot> sessions() {
        long now = System.nanoTime();
        List<io.gpusockets.backend.status.SessionSnapshot> out = new java.util.ArrayList<>();
        for (Worker w : live.values()) {
            io.gpusockets.backend.status.SessionSnapshot s = w.shown ? w.snapshot(now) : null;
            if (s != null) {
                out.add(s);
            }
        }
        return out;
    }

    /**
     * Who is told when a worker's session ends, with its last figures and a step that takes it off
     * {@link #sessions} (see {@link io.gpusockets.backend.status.StatusBoard#ended(io.gpusockets.backend.status.SessionSnapshot, Runnable)}).
     */
    public void reportEndsTo(java.util.function.BiConsumer<io.gpusockets.backend.status.SessionSnapshot, Runnable> ended) {
        this.sessionEnded = ended;
    }

    private volatile java.util.function.BiConsumer<io.gpusockets.backend.status.SessionSnapshot, Runnable> sessionEnded =
            (last, forget) -> forget.run();

    /**
     * Sends every worker serving a session its tenant's limits as they are now (after a reload of the
     * tenants file): handle and stream caps apply to the running session from then on; device memory is
     * decided here in the front anyway, and the session's lanes stay as it started with.
     */
    public void limitsChanged() {
        for (Worker w : live.values()) {
            TenantAccount t = w.tenant;
            Connection ctl = w.control;
            if (w.sessionId == 0 || t == null || ctl == null) {
                continue;
            }
            ByteBuffer m = ControlMessages.start(ControlMessages.LIMITS);
            SessionTicket.putLimits(m, t.limits());
            try {
                ctl.write(ControlMessages.finish(m));
            } catch (IOException e) {
                // the worker is going: its read loop notices
            }
        }
    }

    /** Whether a connection handed to a worker keeps its shared window there (a ring:// connection does). */
    public static boolean keepsWindow(Connection c) {
        return HandedConnection.keepsWindow(c);
    }

    /** Sessions handed to workers so far. */
    public long handedOver() {
        return handedOver.get();
    }

    /**
     * Hands a connection whose handshake the front has done to a worker, which serves its session from
     * now on; the front keeps no copy of the socket. False (the connection closed, the reason logged) when
     * the transport cannot be handed over whole or no worker can be had.
     */
    public boolean handOver(Connection c, SessionTicket ticket, TenantAccount tenant) {
        return handOver(c, ticket, tenant, null);
    }

    /**
     * As {@link #handOver(Connection, SessionTicket, TenantAccount)}; {@code onEnd} (may be null) runs once when the
     * worker that took the session ends, however it ends (the server's session count and the tenant's session
     * go back then). It does not run when this returns false.
     */
    public boolean handOver(Connection c, SessionTicket ticket, TenantAccount tenant, Runnable onEnd) {
        long id = ticket.sessionId();
        Crossing x = crossing(c, id);
        if (x == null) {
            return false;
        }
        Worker w = take(id);
        if (w == null) {
            c.close();
            x.abandon();
            return false;
        }
        w.tenant = tenant;
        w.ticket = ticket;
        w.handedAtNanos = System.nanoTime();
        w.sessionId = id;
        w.onEnd = onEnd;
        w.shown = true;
        ByteBuffer m = ControlMessages.start(ControlMessages.SESSION);
        ticket.encode(m);
        if (!x.send(w, m, c, ticket)) {
            w.onEnd = null; // the caller gives back what the session held: this returns false
            w.handle.destroyForcibly();
            return false;
        }
        if (ticket.resumable()) {
            resumable.put(java.util.HexFormat.of().formatHex(ticket.resumeToken()), w);
        }
        handedOver.incrementAndGet();
        // the next idle worker starts after this session is on its way, not before
        Thread.ofPlatform().daemon().name("gpusockets-workers-start").start(this::replenish);
        LOG.log(Level.INFO, "session " + id + " handed to worker pid " + w.pid + " (peer " + ticket.peer().description()
                + (x.out.kind() == HandedConnection.RING ? ", the ring's shared memory mapped by the worker" : "") + ")");
        return true;
    }

    /**
     * The ticket of the resumable session whose token is {@code tokenHex} (hex), while the worker serving it lives;
     * else null.
     */
    public SessionTicket resumable(String tokenHex) {
        Worker w = resumable.get(tokenHex);
        return w == null || w.gone.get() ? null : w.ticket;
    }

    /**
     * Hands a connection that resumes the session of {@code tokenHex} (its handshake done by the front, WELCOME
     * sent) to the worker serving that session, which attaches it. False (the connection closed, the reason
     * logged) when that worker is gone or the connection cannot be handed. {@code features}: those the resume's
     * WELCOME granted; with {@code Handshake.FEATURE_WINDOW} the worker's session takes the ring's shared window,
     * which crosses with the connection.
     */
    public boolean resume(String tokenHex, Connection c, int features) {
        Worker w = resumable.get(tokenHex);
        SessionTicket t = w == null ? null : w.ticket;
        if (t == null || w.gone.get()) {
            c.close();
            return false;
        }
        Crossing x = crossing(c, t.sessionId());
        if (x == null) {
            return false;
        }
        SessionTicket next = t.withPeer(c.peer()).withFeatures(features);
        ByteBuffer m = ControlMessages.start(ControlMessages.RESUME);
        next.encode(m);
        if (!x.send(w, m, c, next)) {
            return false;
        }
        LOG.log(Level.INFO, "session " + t.sessionId() + ": resuming connection from " + c.peer().description()
                + " handed to worker pid " + w.pid);
        return true;
    }

    /**
     * A worker serving a session, handed from a backend being taken over to the backend that takes it over
     * ({@link TakeOver}): its pid, its session's ticket, what the session holds of its tenant's quota as granted by
     * the old front (exact: the old front read every reserve the worker sent before it answered the mark), how long
     * ago the session was handed to it, whether it was checkpointed with stop ({@code frozen}: never resumed, its token
     * not honoured), and the control socket ({@code control}: the old front's copy, let go of by {@link #release};
     * null on the receiving side, which has the descriptor instead).
     */
    public record Handed(long pid, SessionTicket ticket, long memoryBytes, long pinnedBytes, long ageMillis, boolean frozen,
                         Connection control) {
    }

    /**
     * For a take-over (the old backend's side): stops idle and starting workers (the new backend starts its own),
     * then asks every worker serving a session to mark its control stream (TAKEOVER_MARK); once a worker answers
     * MARKED this front reads nothing more from it, so the messages it sends next wait in its socket for the new
     * front. Returns the workers that answered within {@code timeout}, taken off this front's books (their end is
     * no longer reported here, their quota no longer given back here); one that did not answer stays here, logged.
     * From this call on no worker is started and none is handed a session. Workers whose frontend connection this
     * process relays (tls://, vchan://) are not handed: they stay here with their relay until they end. Refused while
     * a checkpoint, restore or migration runs in a worker.
     */
    public List<Handed> handOff(java.time.Duration timeout) throws IOException {
        synchronized (live) {
            if (closed || handingOff) {
                throw new IOException(closed ? "the workers are stopped" : "the workers are being handed over already");
            }
            if (busy()) {
                throw new IOException("a checkpoint or restore runs in a worker: take over when it is done");
            }
            handingOff = true;
        }
        for (Worker w : live.values()) {
            if (w.sessionId == 0 && w.claim()) {
                idle.remove(w);
                Connection ctl = w.control;
                if (ctl != null) {
                    ctl.close(); // an idle worker ends when its control socket closes
                } else {
                    w.handle.destroy(); // still starting
                }
            }
        }
        List<Worker> serving = new ArrayList<>();
        for (Worker w : live.values()) {
            if (w.sessionId == 0 || w.gone.get() || w.control == null) {
                continue;
            }
            if (w.relayed) {
                LOG.log(Level.INFO, "take-over: session " + w.sessionId + " stays with this backend until it ends: its "
                        + w.ticket.peer().transport() + ":// connection is relayed by this process");
                continue;
            }
            serving.add(w);
        }
        for (Worker w : serving) {
            ByteBuffer m = ControlMessages.start(ControlMessages.TAKEOVER_MARK);
            m.putLong(w.pid);
            try {
                w.control.write(ControlMessages.finish(m));
            } catch (IOException e) {
                // the worker is going: its reader ends it here
            }
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        List<Handed> out = new ArrayList<>();
        for (Worker w : serving) {
            try {
                w.marked.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                LOG.log(Level.WARNING, "worker pid " + w.pid + " of session " + w.sessionId + " did not answer the take-over's"
                        + " mark within " + timeout.toMillis() + " ms: it stays with this backend");
                continue;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted while the workers marked their control streams");
            }
            live.remove(w.pid);
            SessionTicket t = w.ticket;
            if (t.resumable()) {
                resumable.remove(java.util.HexFormat.of().formatHex(t.resumeToken()), w);
            }
            w.shown = false;
            handing.put(w.pid, w);
            out.add(new Handed(w.pid, t, w.memoryHeld.get(), w.pinnedHeld.get(),
                    TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - w.handedAtNanos), w.frozen, w.control));
        }
        return out;
    }

    /** After a take-over: lets go of this front's copies of the handed workers' control sockets (no shutdown). */
    public void release(List<Handed> handed) {
        for (Handed h : handed) {
            handing.remove(h.pid());
            if (h.control() != null) {
                DescriptorPassing.detach(h.control());
            }
        }
    }

    /**
     * After a take-over that failed before the new backend answered: this front serves the handed workers again (their
     * control streams read on from the mark: the new backend read nothing of them unless it failed while adopting)
     * and starts workers again.
     */
    public void takeBack(List<Handed> handed) {
        for (Handed h : handed) {
            Worker w = handing.remove(h.pid());
            if (w == null) {
                continue;
            }
            w.handedOff = false;
            w.shown = true;
            live.put(w.pid, w);
            if (w.ticket.resumable() && !w.frozen) {
                resumable.put(java.util.HexFormat.of().formatHex(w.ticket.resumeToken()), w);
            }
            Connection ctl = w.control;
            Thread.ofPlatform().daemon().name("gpusockets-worker-" + w.pid).start(() -> readLoop(w, ctl, true));
        }
        handingOff = false;
        replenish();
    }

    /**
     * For a take-over (the new backend's side): serves the worker {@code h}, whose control socket is {@code controlFd}
     * (received from the old backend, owned here from now on), as if this front had handed it its session: its
     * reserves are answered against {@code tenant} (which the caller charged with what the worker holds), its figures
     * listed by {@link #sessions} ("adopted from pid {@code from}"), a resume with its token handed to it, and its
     * end, seen as its control socket closing (it is not this process's child: no exit status), gives back its quota
     * and runs {@code onEnd}. Fails (the descriptor closed) when the worker is gone already.
     */
    public void adopt(Handed h, int controlFd, TenantAccount tenant, Runnable onEnd, long from) throws IOException {
        ProcessHandle ph = ProcessHandle.of(h.pid()).filter(ProcessHandle::isAlive).orElse(null);
        if (ph == null) {
            DescriptorPassing.close(controlFd);
            throw new IOException("worker pid " + h.pid() + " of session " + h.ticket().sessionId() + " is gone");
        }
        Connection ctl = DescriptorPassing.adopt(controlFd, new io.gpusockets.protocol.transport.PeerInfo("worker pid " + h.pid(),
                OptionalInt.empty(), java.util.OptionalLong.empty(), java.util.OptionalLong.empty(), java.util.Optional.empty(),
                "fdunix"));
        Worker w = new Worker(ph, from);
        w.claimed.set(true);
        w.ready.complete(null);
        w.control = ctl;
        w.tenant = tenant;
        w.ticket = h.ticket();
        w.sessionId = h.ticket().sessionId();
        w.handedAtNanos = System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(h.ageMillis());
        w.memoryHeld.set(h.memoryBytes());
        w.pinnedHeld.set(h.pinnedBytes());
        w.onEnd = onEnd;
        w.shown = true;
        w.frozen = h.frozen();
        synchronized (live) {
            if (closed) {
                ctl.close();
                throw new IOException("the workers are stopped");
            }
            live.put(w.pid, w);
        }
        if (h.ticket().resumable() && !h.frozen()) {
            resumable.put(java.util.HexFormat.of().formatHex(h.ticket().resumeToken()), w);
        }
        adopted.incrementAndGet();
        Thread.ofPlatform().daemon().name("gpusockets-worker-" + w.pid).start(() -> readLoop(w, ctl, true));
        LOG.log(Level.INFO, "session " + w.sessionId + " in worker pid " + w.pid + " adopted from backend pid " + from
                + " (tenant " + tenant.name() + ", holding " + h.memoryBytes() + " bytes of device memory)");
    }

    /** Workers adopted from a backend this one took over, so far. */
    public long adoptedCount() {
        return adopted.get();
    }

    /** Whether a checkpoint or restore runs in a worker now. */
    public boolean busy() {
        return !operations.isEmpty() || groups.get() > 0;
    }

    /** Group checkpoints and group restores' reshares under way: their sessions may be held between two answers. */
    private final java.util.concurrent.atomic.AtomicInteger groups = new java.util.concurrent.atomic.AtomicInteger();

    /**
     * The registry the workers' SHARE and LOOKUP messages are answered from (IPC and shareable handles between
     * sessions of one tenant; {@link io.gpusockets.backend.session.ShareRegistry}), speaking for each worker's session
     * and tenant.
     */
    public void shares(io.gpusockets.backend.session.ShareRegistry registry) {
        this.shares = registry;
    }

    /** Whether a worker not yet gone serves (or is restoring) session {@code sessionId}. */
    public boolean hasSession(long sessionId) {
        return live.values().stream().anyMatch(w -> w.sessionId == sessionId && !w.gone.get());
    }

    /**
     * Checkpoints session {@code sessionId}, served by a worker, to {@code file} (issue 22): the worker runs
     * {@link io.gpusockets.backend.session.Session#checkpoint} on its own driver (control message CHECKPOINT), its
     * progress comes back to {@code progress} (PROGRESS), then its result or refusal (CHECKPOINTED). With {@code stop}
     * the session stays frozen in its worker: no resume reaches it here (its token is forgotten at once), and it
     * ends when its grace period runs out or the backend stops. Refused for a session no worker serves; an
     * IOException when the worker dies or the front closes meanwhile.
     */
    public io.gpusockets.backend.session.CheckpointResult checkpoint(long sessionId, Path file, boolean stop,
            io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        Worker w = serving(sessionId);
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.CHECKPOINT);
        m.putLong(request).put((byte) (stop ? 1 : 0));
        ControlMessages.putString(m, file.toAbsolutePath().toString());
        Worker worker = w;
        ByteBuffer r = ask(w, request, m, progress, "the checkpoint of session " + sessionId, late -> {
            try {
                checkpointed(worker, sessionId, file, stop, late);
                LOG.log(Level.WARNING, "session " + sessionId + " in worker pid " + worker.pid + ": its checkpoint to " + file
                        + " succeeded after it had timed out" + (stop ? " (the session is frozen; the image is complete)" : ""));
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException e) {
                LOG.log(Level.WARNING, "session " + sessionId + " in worker pid " + worker.pid + ": its checkpoint, which had"
                        + " timed out, ended: " + e.getMessage());
            }
        });
        return checkpointed(w, sessionId, file, stop, r);
    }

    /** A CHECKPOINTED answer (after its request id): its result, the session frozen here after one with stop. */
    private io.gpusockets.backend.session.CheckpointResult checkpointed(Worker w, long sessionId, Path file, boolean stop,
                                                                       ByteBuffer r)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        try {
            byte outcome = r.get();
            if (outcome != ControlMessages.OUTCOME_DONE) {
                refused(outcome, ControlMessages.getString(r));
            }
            var result = new io.gpusockets.backend.session.CheckpointResult(r.getLong(), r.getInt(), r.getInt(), r.getLong(),
                    r.getLong());
            if (stop) {
                w.frozen = true;
                SessionTicket t = w.ticket;
                resumable.remove(java.util.HexFormat.of().formatHex(t.resumeToken()), w);
                LOG.log(Level.INFO, "session " + sessionId + " in worker pid " + w.pid + " checkpointed to " + file
                        + " and frozen: it resumes where the image is restored, not here");
            }
            return result;
        } catch (java.nio.BufferUnderflowException e) {
            throw new IOException("worker pid " + w.pid + ": bad CHECKPOINTED message: " + e);
        }
    }

    /**
     * The workers serving {@code sessionIds} for a group checkpoint or migration ({@code what}: "checkpointed",
     * "migrated"), their ids added to {@code ids}: refused for a session named twice, one no worker serves, and one
     * frozen by a checkpoint with stop.
     */
    private List<Worker> members(List<Long> sessionIds, java.util.Set<Long> ids, String what)
            throws io.gpusockets.backend.session.CheckpointRefused {
        List<Worker> group = new ArrayList<>();
        for (long id : sessionIds) {
            if (!ids.add(id)) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + id + " is named twice");
            }
            Worker w = serving(id);
            if (w.frozen) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + id + " cannot be " + what + ": it"
                        + " is frozen by a checkpoint with stop");
            }
            group.add(w);
        }
        return group;
    }

    /**
     * Checkpoints the sessions {@code sessionIds}, which share IPC memory and events, together to {@code files} (one each, in order),
     * each in its worker ({@link io.gpusockets.backend.session.GroupCheckpoint}'s group checkpoint across processes):
     * the front checks that every session linked to them by shares is named and that what they exported is carried
     * ({@link io.gpusockets.backend.session.GroupCheckpoint#checkFront}); every worker drains its session and holds it
     * (GROUP_DRAIN, answered GROUP_DRAINED), all at once; once all are drained the front checks again and tells each to
     * write its image with what it exported ({@code GROUP_STEP} write, answered CHECKPOINTED; the worker checks what its
     * session opened, {@link io.gpusockets.backend.session.GroupCheckpoint#writeMember}); once all are written each is
     * let go (commit): it runs on, or with {@code stop} stays frozen in its worker, to be restored with the others
     * ({@link #restoreHeld}). A refusal, a failure, a worker that dies or sends nothing for the quiet timeout lets every
     * session run on and deletes every image written, naming the session and why.
     */
    public List<io.gpusockets.backend.session.CheckpointResult> checkpointGroup(List<Long> sessionIds, List<Path> files,
            boolean stop, io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        io.gpusockets.backend.session.ShareRegistry registry = shares;
        if (sessionIds.isEmpty() || sessionIds.size() != files.size() || registry == null) {
            throw new IllegalArgumentException("sessions=" + sessionIds.size() + " files=" + files.size());
        }
        java.util.Set<Long> ids = new java.util.LinkedHashSet<>();
        List<Worker> group = members(sessionIds, ids, "checkpointed");
        if (new java.util.TreeSet<>(files.stream().map(p -> p.toAbsolutePath().normalize()).toList()).size() != files.size()) {
            throw new io.gpusockets.backend.session.CheckpointRefused("two sessions of the group would write one image file");
        }
        groups.incrementAndGet();
        try {
            return checkpointGroup(ids, group, files, stop, progress, registry, null);
        } finally {
            groups.decrementAndGet();
        }
    }

    /**
     * What a group migration does while its members are held drained with their images written
     * ({@link #migrateGroup}): sends them to the target and returns once it restored them all.
     */
    @FunctionalInterface
    public interface Send {
        void send() throws io.gpusockets.backend.session.CheckpointRefused, IOException;
    }

    /** A group checkpoint that is a migration: what sends the images, and where the frontends go once they are there. */
    private record Moving(Send send, String goesTo, java.util.function.Consumer<SessionTicket> moved) {
    }

    /**
     * Migrates the sessions {@code sessionIds}, which share IPC memory and events, together (isolation process at this
     * end; {@link io.gpusockets.backend.server.BackendServer#migrateGroup}): as {@link #checkpointGroup} with stop, the
     * front checking that every partner is named, each worker drains its session and writes its image to {@code files}
     * (one each, in order) and holds it drained; then {@code send} carries the images to the target and returns once
     * the target restored them all. Then each session is frozen here, its token answered by {@code moved} (the front
     * remembers where it went) and its worker told to send its frontend to {@code goesTo} and end the session
     * (GROUP_STEP move). A refusal, a failure of the drain, the images or {@code send}, a worker that dies: every session
     * runs on here and every image is deleted. Refused for a session frozen, not resumable, or not named
     * with its partners. The results: each session's drain and image.
     */
    public List<io.gpusockets.backend.session.CheckpointResult> migrateGroup(List<Long> sessionIds, List<Path> files,
            Send send, String goesTo, java.util.function.Consumer<SessionTicket> moved,
            io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        io.gpusockets.backend.session.ShareRegistry registry = shares;
        if (sessionIds.size() < 2 || sessionIds.size() != files.size() || registry == null) {
            throw new IllegalArgumentException("sessions=" + sessionIds.size() + " files=" + files.size());
        }
        if (goesTo.length() > io.gpusockets.backend.server.Migration.Result.MAX_TARGET) {
            throw new io.gpusockets.backend.session.CheckpointRefused("migration refused: a URI longer than "
                    + io.gpusockets.backend.server.Migration.Result.MAX_TARGET + " characters");
        }
        java.util.Set<Long> ids = new java.util.LinkedHashSet<>();
        List<Worker> group = members(sessionIds, ids, "migrated");
        for (Worker w : group) {
            if (!w.ticket.resumable()) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + w.sessionId + " cannot be migrated:"
                        + " it was not granted resume (its frontend could not follow it)");
            }
        }
        groups.incrementAndGet();
        try {
            return checkpointGroup(ids, group, files, true, progress, registry, new Moving(send, goesTo, moved));
        } finally {
            groups.decrementAndGet();
        }
    }

    /**
     * {@link #checkpointGroup(List, List, boolean, io.gpusockets.backend.session.CheckpointProgress)} of {@code group};
     * {@code moving}: a group migration's ({@link #migrateGroup}), else null.
     */
    private List<io.gpusockets.backend.session.CheckpointResult> checkpointGroup(java.util.Set<Long> ids, List<Worker> group,
            List<Path> files, boolean stop, io.gpusockets.backend.session.CheckpointProgress progress,
            io.gpusockets.backend.session.ShareRegistry registry, Moving moving)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        String what = moving == null ? "checkpoint" : "migration";
        String command = moving == null ? "gpusockets checkpoint %s --to DIR" : "gpusockets migrate %s --to URI";
        io.gpusockets.backend.session.GroupCheckpoint.checkFront(ids, registry, what, command);
        io.gpusockets.backend.session.CheckpointProgress p = progress == null
                ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress;
        long[] drains = new long[group.size()];
        LOG.log(Level.INFO, "group checkpoint of sessions " + ids + ": their workers drain them");
        List<Object> drained = inParallel(group, w -> {
            int i = group.indexOf(w);
            drains[i] = nextRequest.getAndIncrement();
            ByteBuffer m = ControlMessages.start(ControlMessages.GROUP_DRAIN);
            m.putLong(drains[i]).put((byte) (stop ? 1 : 0));
            ByteBuffer r = ask(w, drains[i], m, p, "the group checkpoint's drain of session " + w.sessionId,
                    late -> step(w, drains[i], ControlMessages.STEP_LET_GO)); // held drained: let it go
            byte outcome = r.get();
            if (outcome != ControlMessages.OUTCOME_DONE) {
                refused(outcome, ControlMessages.getString(r));
            }
            return r.getLong();
        });
        boolean written = false;
        try {
            throwFirst(drained);
            java.util.Set<Long> carried = io.gpusockets.backend.session.GroupCheckpoint.checkFront(ids, registry,
                    what, command); // again, drained: a session outside the group may have opened one meanwhile
            List<Object> results = inParallel(group, w -> {
                int i = group.indexOf(w);
                long write = nextRequest.getAndIncrement();
                ByteBuffer m = ControlMessages.start(ControlMessages.GROUP_STEP);
                m.putLong(drains[i]).put(ControlMessages.STEP_WRITE).putLong(write);
                ControlMessages.putString(m, files.get(i).toAbsolutePath().toString());
                putExports(m, registry.carried(w.sessionId, new ArrayList<>()), carried);
                ByteBuffer r = ask(w, write, m, p, "the group checkpoint's image of session " + w.sessionId, late -> { });
                byte outcome = r.get();
                if (outcome != ControlMessages.OUTCOME_DONE) {
                    refused(outcome, ControlMessages.getString(r));
                }
                return new io.gpusockets.backend.session.CheckpointResult(r.getLong(), r.getInt(), r.getInt(),
                        r.getLong(), r.getLong());
            });
            throwFirst(results);
            if (moving != null) {
                moving.send().send(); // the target restored them all: from here they go there
            }
            written = true;
            List<io.gpusockets.backend.session.CheckpointResult> out = new ArrayList<>();
            if (moving != null) {
                move(group, drains, moving, p);
            }
            for (int i = 0; i < group.size(); i++) {
                Worker w = group.get(i);
                if (moving != null) {
                    out.add((io.gpusockets.backend.session.CheckpointResult) results.get(i));
                    continue;
                }
                step(w, drains[i], ControlMessages.STEP_COMMIT);
                if (stop) {
                    w.frozen = true;
                    resumable.remove(java.util.HexFormat.of().formatHex(w.ticket.resumeToken()), w);
                }
                out.add((io.gpusockets.backend.session.CheckpointResult) results.get(i));
            }
            LOG.log(Level.INFO, "sessions " + ids + (moving != null ? " migrated together from their workers to "
                    + moving.goesTo() : " checkpointed together in their workers" + (stop ? " and frozen" : "")));
            return out;
        } finally {
            if (!written) {
                for (int i = 0; i < group.size(); i++) {
                    if (drained.get(i) instanceof Long) {
                        step(group.get(i), drains[i], ControlMessages.STEP_LET_GO);
                    }
                }
                for (Path f : files) {
                    Files.deleteIfExists(f);
                }
            }
        }
    }

    /** A GROUP_STEP without fields (let go, commit) to {@code w}'s session held drained by {@code drain}. */
    private static void step(Worker w, long drain, byte step) {
        ByteBuffer m = ControlMessages.start(ControlMessages.GROUP_STEP);
        m.putLong(drain).put(step);
        Connection ctl = w.control;
        try {
            if (ctl != null) {
                ctl.write(ControlMessages.finish(m));
            }
        } catch (IOException e) {
            // the worker is going: its session with it
        }
    }

    /**
     * The group migration's last step, once the target restored every member: a GROUP_STEP move to each session held
     * drained ({@code drains}), all at once; each worker keeps its session frozen, sends its frontend MOVED, answers
     * (GROUP_STEPPED) and ends the session; on its answer the session is frozen here and its token answered by
     * {@code moving.moved()}. A worker that no longer held its session (it gave up waiting for the step: it runs on
     * there) answers refused, and its token stays here: an IOException then names the sessions that run on here while
     * the others moved.
     */
    private void move(List<Worker> group, long[] drains, Moving moving,
                      io.gpusockets.backend.session.CheckpointProgress p) throws IOException {
        List<Object> answers = inParallel(group, w -> {
            int i = group.indexOf(w);
            long request = nextRequest.getAndIncrement();
            ByteBuffer m = ControlMessages.start(ControlMessages.GROUP_STEP);
            m.putLong(drains[i]).put(ControlMessages.STEP_MOVE).putLong(request);
            ControlMessages.putString(m, moving.goesTo());
            ByteBuffer r = ask(w, request, m, p, "the group migration's switch of session " + w.sessionId, late -> {
                try {
                    moved(w, late, moving);
                } catch (io.gpusockets.backend.session.CheckpointRefused | IOException e) {
                    LOG.log(Level.WARNING, "session " + w.sessionId + " in worker pid " + w.pid + ": " + e.getMessage());
                }
            });
            moved(w, r, moving);
            return null;
        });
        List<String> stayed = new ArrayList<>();
        for (int i = 0; i < group.size(); i++) {
            if (answers.get(i) instanceof Exception e) {
                stayed.add("session " + group.get(i).sessionId + " (" + e.getMessage() + ")");
            }
        }
        if (!stayed.isEmpty()) {
            throw new IOException("the target restored the group, but not every session moved there: " + stayed
                    + " run(s) on here; the shares between them and those that moved are broken");
        }
    }

    /** A GROUP_STEPPED answer to a move (after its request id): the session frozen here and its token answered. */
    private void moved(Worker w, ByteBuffer r, Moving moving) throws io.gpusockets.backend.session.CheckpointRefused,
            IOException {
        try {
            byte outcome = r.get();
            if (outcome != ControlMessages.OUTCOME_DONE) {
                refused(outcome, ControlMessages.getString(r));
            }
        } catch (java.nio.BufferUnderflowException e) {
            throw new IOException("worker pid " + w.pid + ": bad GROUP_STEPPED message");
        }
        w.frozen = true; // it ends in a moment; no resume reaches it meanwhile
        resumable.remove(java.util.HexFormat.of().formatHex(w.ticket.resumeToken()), w);
        moving.moved().accept(w.ticket);
    }

    /** A GROUP_STEP write's exports and the group's token ids ({@link ControlMessages}). */
    private static void putExports(ByteBuffer m, List<io.gpusockets.backend.session.ShareRegistry.Carried> exports,
                                   java.util.Set<Long> carried) throws io.gpusockets.backend.session.CheckpointRefused {
        if (exports.size() > ControlMessages.MAX_GROUP_EXPORTS || carried.size() > ControlMessages.MAX_GROUP_EXPORTS) {
            throw new io.gpusockets.backend.session.CheckpointRefused("a group checkpoint of more than "
                    + ControlMessages.MAX_GROUP_EXPORTS + " IPC exports in isolation process");
        }
        m.putInt(exports.size());
        for (io.gpusockets.backend.session.ShareRegistry.Carried c : exports) {
            m.put(c.kind()).putLong(c.id()).put(c.secret()).putLong(c.address()).putLong(c.size());
        }
        m.putInt(carried.size());
        carried.forEach(m::putLong);
    }

    /** Work on one worker of a group ({@link #inParallel}). */
    @FunctionalInterface
    private interface OnWorker {
        Object run(Worker w) throws io.gpusockets.backend.session.CheckpointRefused, IOException;
    }

    /**
     * Runs {@code work} on every worker of {@code group} at once (a platform thread each: a group is at most
     * {@link #max} workers), waiting for all; each one's result, or the exception it threw, in order.
     */
    private static List<Object> inParallel(List<Worker> group, OnWorker work) {
        Object[] out = new Object[group.size()];
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < group.size(); i++) {
            int k = i;
            threads.add(Thread.ofPlatform().daemon().name("gpusockets-group-" + group.get(i).pid).start(() -> {
                try {
                    out[k] = work.run(group.get(k));
                } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                    out[k] = e;
                }
            }));
        }
        boolean interrupted = false;
        for (Thread t : threads) {
            while (true) {
                try {
                    t.join(); // each ends: an ask ends at its worker's answer, end or quiet timeout
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return java.util.Arrays.asList(out);
    }

    /** Throws the first refusal of {@code results} ({@link #inParallel}), else its first failure. */
    private static void throwFirst(List<Object> results) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        for (Object o : results) {
            if (o instanceof io.gpusockets.backend.session.CheckpointRefused e) {
                throw e;
            }
        }
        for (Object o : results) {
            if (o instanceof IOException e) {
                throw e;
            }
            if (o instanceof RuntimeException e) {
                throw e;
            }
        }
    }

    /**
     * Migrates session {@code sessionId}, served by a worker, to the backend at {@code targetUri} (issue 23): the worker
     * runs the source's side of {@link io.gpusockets.backend.server.Migration} itself (control message MIGRATE),
     * connecting to the target with {@code psk} (null: none), its progress comes back to {@code progress} (PROGRESS,
     * which restarts the quiet timeout), then its result or why not (MIGRATED). On success the worker has sent the
     * session's frontend to {@code frontendUri} (null: {@code targetUri}) and ends the session; its token is no longer
     * offered here and {@code moved} gets the session's ticket (its token, identity and grace) at once. Refused for a
     * session no worker serves, one frozen or not resumable; an IOException when the migration fails in the worker
     * (its program runs on there), the worker dies (its session with it) or sends nothing for the quiet timeout.
     */
    public io.gpusockets.backend.server.Migration.Result migrate(long sessionId, String targetUri, String frontendUri,
            byte[] psk, io.gpusockets.backend.session.CheckpointProgress progress,
            java.util.function.Consumer<SessionTicket> moved)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        Worker w = serving(sessionId);
        SessionTicket t = w.ticket;
        if (w.frozen) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " cannot be migrated: it is"
                    + " frozen by a checkpoint with stop");
        }
        if (!t.resumable()) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " cannot be migrated: it was"
                    + " not granted resume (its frontend could not follow it)");
        }
        int max = io.gpusockets.backend.server.Migration.Result.MAX_TARGET;
        if (targetUri.length() > max || (frontendUri != null && frontendUri.length() > max)
                || (psk != null && psk.length > max)) {
            throw new io.gpusockets.backend.session.CheckpointRefused("migration refused: a URI or key longer than " + max
                    + " characters");
        }
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.MIGRATE);
        m.putLong(request);
        ControlMessages.putString(m, targetUri);
        ControlMessages.putString(m, frontendUri == null ? "" : frontendUri);
        m.putInt(psk == null ? -1 : psk.length);
        if (psk != null) {
            m.put(psk);
        }
        ByteBuffer r = ask(w, request, m, progress, "the migration of session " + sessionId, late -> {
            try {
                migrated(w, t, late, moved);
                LOG.log(Level.WARNING, "session " + sessionId + " in worker pid " + w.pid + ": its migration to " + targetUri
                        + " succeeded after it had timed out (the session is there now)");
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException e) {
                LOG.log(Level.WARNING, "session " + sessionId + " in worker pid " + w.pid + ": its migration, which had"
                        + " timed out, ended: " + e.getMessage());
            }
        });
        return migrated(w, t, r, moved);
    }

    /** A MIGRATED answer (after its request id): its result, the session's token forgotten here when it moved. */
    private io.gpusockets.backend.server.Migration.Result migrated(Worker w, SessionTicket t, ByteBuffer r,
            java.util.function.Consumer<SessionTicket> moved)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        io.gpusockets.backend.server.Migration.Result result;
        try {
            byte outcome = r.get();
            if (outcome != ControlMessages.OUTCOME_DONE) {
                refused(outcome, ControlMessages.getString(r));
            }
            result = io.gpusockets.backend.server.Migration.Result.decode(r);
        } catch (java.nio.BufferUnderflowException | io.gpusockets.protocol.wire.ProtocolException e) {
            throw new IOException("worker pid " + w.pid + ": bad MIGRATED message: " + e.getMessage());
        }
        w.frozen = true; // it ends in a moment; no resume reaches it meanwhile
        resumable.remove(java.util.HexFormat.of().formatHex(t.resumeToken()), w);
        moved.accept(t);
        return result;
    }

    /** The worker serving session {@code sessionId}; refused when none does. */
    private Worker serving(long sessionId) throws io.gpusockets.backend.session.CheckpointRefused {
        for (Worker x : live.values()) {
            if (x.sessionId == sessionId && x.ticket != null && !x.gone.get()) {
                return x;
            }
        }
        throw new io.gpusockets.backend.session.CheckpointRefused("no session " + sessionId + " in this backend");
    }

    /**
     * Restores the session checkpointed in {@code file} into a worker of its own (an idle one, else one started for
     * it): the worker runs {@link io.gpusockets.backend.session.SessionRestore} on its own driver (control message
     * RESTORE) charging {@code tenant}, then waits for the session's frontend; the session is registered here as
     * resumable under the image's token, identity and grace ({@link #resume} hands a resuming connection to that
     * worker) and shown by {@link #sessions}. {@code expectedId} is the id the image's header names (the worker
     * must restore that one). A worker that refuses the restore only because of its own address space (an address
     * window the image needs is taken there by the process's own memory: where Linux puts a process's libraries and
     * heap is random per process, so another worker may have it free) is let go and the restore tried again in
     * another worker, {@value #RESTORE_TRIES} workers at most; the last one's refusal says how many were tried.
     * {@code onEnd} runs once: when the worker that serves the session ends, or at once when the restore is refused
     * or fails (the worker then exits). Returns the restored session's ticket.
     */
    public SessionTicket restore(Path file, TenantAccount tenant, long retainBytes, long expectedId, Runnable onEnd,
                                 io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return restoreWorker(file, tenant, retainBytes, expectedId, onEnd, progress, null).ticket;
    }

    /**
     * {@link #restore} into a worker; with {@code reshares} (a group restore, {@link #restoreGroup}: the exports of the
     * image as the front read them) the session is held: not resumable until {@link #restoreGroup} made its shares.
     */
    private Worker restoreWorker(Path file, TenantAccount tenant, long retainBytes, long expectedId, Runnable onEnd,
                                 io.gpusockets.backend.session.CheckpointProgress progress,
                                 List<io.gpusockets.backend.session.ShareRegistry.Carried> reshares)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        Runnable once = once(onEnd);
        for (int attempt = 1; ; attempt++) {
            Worker w = restoreIn(file, tenant, retainBytes, expectedId, once, progress, attempt, reshares);
            if (w != null) {
                return w;
            }
        }
    }

    /** A group restore's session restored in its worker ({@link #restoreHeld}), held until {@link #reshare} lets it go. */
    public static final class Held {
        private final Worker worker;

        private Held(Worker worker) {
            this.worker = worker;
        }

        /** The restored session's id. */
        public long sessionId() {
            return worker.sessionId;
        }
    }

    /**
     * For a group restore (isolation process; the front's {@code BackendServer#restoreGroup}): {@link #restore} of one
     * image of the group, its session held (not resumable here) until {@link #reshare} makes the group's shares again;
     * {@code exports}: the image's exports as the front read them ({@link
     * io.gpusockets.backend.session.GroupCheckpoint#imageExports}), the only tokens its worker may register again. On a
     * refusal or failure nothing of this image is left ({@code onEnd} has run); the caller lets go of the others
     * ({@link #abandon}).
     */
    public Held restoreHeld(Path file, TenantAccount tenant, long retainBytes, long expectedId, Runnable onEnd,
                            io.gpusockets.backend.session.CheckpointProgress progress,
                            List<io.gpusockets.backend.session.ShareRegistry.Carried> exports)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return new Held(restoreWorker(file, tenant, retainBytes, expectedId, onEnd, progress, List.copyOf(exports)));
    }

    /**
     * The shares of the held sessions {@code group} made again, then each made resumable: first every session's exports
     * registered under their old tokens (RESHARE: its worker exports each IPC event again through its driver, and its
     * window memory as its physical allocations' descriptors), then what each opened is opened again through those
     * tokens (LOOKUP: cuIpcOpenEventHandle in the opener's worker, the event under its old handle id; the exporter's
     * physical allocations mapped in the opener's worker at its old address). A refusal or failure (a worker that
     * refuses, dies or sends nothing for the quiet timeout) ends every session of the group ({@link #abandon}), naming why.
     */
    public void reshare(List<Held> group) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        groups.incrementAndGet();
        try {
            reshareHeld(group);
        } finally {
            groups.decrementAndGet();
        }
    }

    private void reshareHeld(List<Held> group) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        try {
            for (byte step : new byte[] {ControlMessages.STEP_EXPORT, ControlMessages.STEP_OPEN}) {
                List<Worker> ws = group.stream().map(h -> h.worker).toList();
                List<Object> out = inParallel(ws, w -> {
                    long request = nextRequest.getAndIncrement();
                    ByteBuffer m = ControlMessages.start(ControlMessages.GROUP_RESHARE);
                    m.putLong(request).put(step);
                    ByteBuffer r = ask(w, request, m, null, "the group restore of session " + w.sessionId, late -> { });
                    byte outcome = r.get();
                    if (outcome != ControlMessages.OUTCOME_DONE) {
                        refused(outcome, ControlMessages.getString(r));
                    }
                    return null;
                });
                throwFirst(out);
            }
        } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
            abandon(group);
            throw e;
        }
        for (Held h : group) {
            Worker w = h.worker;
            w.reshares = null;
            resumable.put(java.util.HexFormat.of().formatHex(w.ticket.resumeToken()), w);
            if (w.gone.get()) { // it died as it was let go: gone() may have missed the token
                resumable.remove(java.util.HexFormat.of().formatHex(w.ticket.resumeToken()), w);
            }
            LOG.log(Level.INFO, "session " + w.sessionId + " restored with its group in worker pid " + w.pid
                    + "; waiting for its frontend to resume");
        }
    }

    /**
     * Ends the held sessions of a group restore that did not complete: their workers stop (each runs its onEnd), and
     * this returns once they are gone and their sessions off the list (at most {@link #STOP_SECONDS} each, then killed),
     * so that their ids are free again for the next restore and nothing of them shows.
     */
    public void abandon(List<Held> group) {
        for (Held h : group) {
            h.worker.reshares = null;
            h.worker.handle.destroy();
        }
        for (Held h : group) {
            Worker w = h.worker;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2 * STOP_SECONDS);
            // its reader sees the control socket close and runs gone(), which takes the session off the list: a
            // failed group restore answers only once nothing of it shows (seen in a test: the status still listed it)
            while (w.cleared.getCount() > 0 && System.nanoTime() < deadline) {
                if (System.nanoTime() > deadline - TimeUnit.SECONDS.toNanos(STOP_SECONDS)) {
                    w.handle.destroyForcibly();
                }
                sleepQuietly(10);
            }
        }
    }

    /** Workers a restore is tried in at most, when each refuses it for its own address space ({@link #restore}). */
    static final int RESTORE_TRIES = 3;

    /**
     * One worker's try of {@link #restore}: the worker, or null when another worker should try (attempt {@code attempt});
     * with {@code reshares} (a group restore) its session is held, not made resumable.
     */
    private Worker restoreIn(Path file, TenantAccount tenant, long retainBytes, long expectedId, Runnable once,
                             io.gpusockets.backend.session.CheckpointProgress progress, int attempt,
                             List<io.gpusockets.backend.session.ShareRegistry.Carried> reshares)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        Worker w = take(expectedId);
        if (w == null) {
            once.run();
            throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: no worker process could be had"
                    + " (--max-workers " + max + " all serve sessions, or none starts: see the log)");
        }
        w.tenant = tenant;
        w.sessionId = expectedId;
        w.onEnd = once;
        w.restoreTriesLeft = attempt < RESTORE_TRIES;
        long request = nextRequest.getAndIncrement();
        ByteBuffer m = ControlMessages.start(ControlMessages.RESTORE);
        m.putLong(request);
        ControlMessages.putString(m, file.toAbsolutePath().toString());
        ControlMessages.putString(m, tenant.name());
        SessionTicket.putLimits(m, tenant.limits());
        m.putLong(retainBytes);
        boolean ok = false, again = false;
        try {
            ByteBuffer r = ask(w, request, m, progress, "the restore of " + file, late -> { });
            byte outcome = r.get();
            if (outcome == ControlMessages.OUTCOME_REFUSED_HERE && attempt < RESTORE_TRIES) {
                // its reader let go of once (w.onEnd) before the worker could end: the next worker's end runs it
                again = true;
                LOG.log(Level.WARNING, "session " + expectedId + ": worker pid " + w.pid + " refused the restore of " + file
                        + " for its own address space; trying another worker (" + (attempt + 1) + " of " + RESTORE_TRIES
                        + "): " + ControlMessages.getString(r));
                return null;
            }
            if (outcome != ControlMessages.OUTCOME_DONE) {
                String why = ControlMessages.getString(r);
                refused(outcome, attempt == 1 ? why : why + " (the restore was tried in " + attempt + " worker processes,"
                        + " each refusing it for its own address space)");
            }
            SessionTicket t = SessionTicket.decode(r);
            if (t.sessionId() != expectedId || !t.tenant().equals(tenant.name()) || !t.resumable()) {
                throw new IOException("worker pid " + w.pid + " restored session " + t.sessionId() + " of tenant " + t.tenant()
                        + (t.resumable() ? "" : " without a resume token") + "; the image's header names session "
                        + expectedId + " of tenant " + tenant.name());
            }
            w.ticket = t;
            w.handedAtNanos = System.nanoTime();
            w.shown = true;
            if (reshares != null) { // a group's: resumable once the group's shares are made (reshare)
                Map<Long, io.gpusockets.backend.session.ShareRegistry.Carried> allowed = new ConcurrentHashMap<>();
                reshares.forEach(c -> allowed.put(c.id(), c));
                w.reshares = allowed;
            } else {
                resumable.put(java.util.HexFormat.of().formatHex(t.resumeToken()), w);
            }
            if (w.gone.get()) { // it died as it answered: gone() may have missed the token
                resumable.remove(java.util.HexFormat.of().formatHex(t.resumeToken()), w);
                throw new IOException("worker pid " + w.pid + " died after restoring session " + expectedId);
            }
            ok = true;
            LOG.log(Level.INFO, "session " + expectedId + " restored from " + file + " in worker pid " + w.pid
                    + (reshares != null ? "; held until its group's shares are made" : "; waiting for its frontend to resume"));
            return w;
        } finally {
            if (!ok) {
                w.handle.destroy(); // a worker whose restore failed has freed what it made and exits anyway
                if (!again) {
                    once.run();
                }
            }
            Thread.ofPlatform().daemon().name("gpusockets-workers-start").start(this::replenish);
        }
    }

    private static Runnable once(Runnable r) {
        AtomicBoolean ran = new AtomicBoolean();
        return () -> {
            if (r != null && ran.compareAndSet(false, true)) {
                r.run();
            }
        };
    }

    /** Throws a worker's refusal (CheckpointRefused) or failure (IOException) with its message. */
    private static void refused(byte outcome, String why) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (outcome == ControlMessages.OUTCOME_REFUSED || outcome == ControlMessages.OUTCOME_REFUSED_HERE) {
            throw new io.gpusockets.backend.session.CheckpointRefused(why);
        }
        throw new IOException(why);
    }

    /**
     * Sends {@code m} (a CHECKPOINT, RESTORE or MIGRATE with its {@code request}) to {@code w} and waits for its answer,
     * passing PROGRESS on; returns the answer after its request id (its outcome next). An IOException when the
     * worker dies first (its end said), sends nothing for the quiet timeout (then an answer that comes later goes to
     * {@code late}), the front closes or the caller is interrupted.
     */
    private ByteBuffer ask(Worker w, long request, ByteBuffer m, io.gpusockets.backend.session.CheckpointProgress progress,
                           String what, java.util.function.Consumer<ByteBuffer> late) throws IOException {
        Operation op = new Operation(w, progress == null ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress,
                late);
        operations.put(request, op);
        try {
            Connection ctl = w.control;
            if (ctl == null || w.gone.get() || closed) {
                throw new IOException(what + " failed: worker pid " + w.pid + " is gone");
            }
            try {
                ctl.write(ControlMessages.finish(m));
            } catch (IOException e) {
                throw new IOException(what + " failed: worker pid " + w.pid + " cannot be told: " + e.getMessage(), e);
            }
            try {
                while (true) {
                    long quiet = quietNanos;
                    if (quiet == 0) {
                        return op.reply.get();
                    }
                    long left = op.heard.get() + quiet - System.nanoTime();
                    try {
                        if (left > 0) {
                            return op.reply.get(left, TimeUnit.NANOSECONDS);
                        }
                    } catch (java.util.concurrent.TimeoutException e) {
                        continue; // progress may have come meanwhile: the deadline moves with it
                    }
                    synchronized (op) { // against the reader completing it now: then its answer is taken
                        if (!op.reply.isDone()) {
                            op.abandoned = true;
                            throw new IOException(what + " failed: worker pid " + w.pid + " sent nothing for "
                                    + TimeUnit.NANOSECONDS.toSeconds(quiet) + " s (no progress, no answer: it hangs, or"
                                    + " waits for a kernel that runs longer; -D" + QUIET_PROPERTY + "=SECONDS sets how long"
                                    + " to wait, 0 for ever)");
                        }
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException(what + ": interrupted while worker pid " + w.pid + " works on it");
            } catch (java.util.concurrent.ExecutionException e) {
                throw new IOException(what + " failed: " + e.getCause().getMessage(), e.getCause());
            }
        } finally {
            synchronized (op) {
                if (!op.abandoned) {
                    operations.remove(request); // an abandoned one stays for its late answer, or until its worker goes
                }
            }
        }
    }

    /**
     * A checkpoint, restore or migration a worker works on: its progress listener, its answer, when its worker was last
     * heard of (System.nanoTime), whether its caller gave up waiting (timed out: a late answer goes to {@code late}).
     */
    private static final class Operation {
        final Worker worker;
        final io.gpusockets.backend.session.CheckpointProgress progress;
        final CompletableFuture<ByteBuffer> reply = new CompletableFuture<>();
        final AtomicLong heard = new AtomicLong(System.nanoTime());
        final java.util.function.Consumer<ByteBuffer> late;
        /** Guarded by this object's monitor. */
        boolean abandoned;

        Operation(Worker worker, io.gpusockets.backend.session.CheckpointProgress progress,
                  java.util.function.Consumer<ByteBuffer> late) {
            this.worker = worker;
            this.progress = progress;
            this.late = late;
        }

        Worker worker() {
            return worker;
        }

        io.gpusockets.backend.session.CheckpointProgress progress() {
            return progress;
        }

        CompletableFuture<ByteBuffer> reply() {
            return reply;
        }
    }

    /** Checkpoints, restores and migrations waiting for their workers, by request id. */
    private final Map<Long, Operation> operations = new ConcurrentHashMap<>();
    private final AtomicLong nextRequest = new AtomicLong(1);

    /**
     * How a connection crosses to a worker: whole ({@link HandedConnection#of}), else through a socket pair whose
     * far end crosses while the front relays frames between the connection and the near end.
     */
    private final class Crossing {
        final HandedConnection.Outgoing out;
        final int[] pair;

        Crossing(HandedConnection.Outgoing out, int[] pair) {
            this.out = out;
            this.pair = pair;
        }

        /** Closes the relay pair of a crossing that will not happen. */
        void abandon() {
            if (pair != null) {
                DescriptorPassing.close(pair[0]);
                DescriptorPassing.close(pair[1]);
            }
        }

        /**
         * Sends {@code m} (a message started with its type and fields) with the connection's kind and descriptors to
         * {@code w}, then lets go of the front's copies or starts the relay. False (the connection closed, logged) on failure.
         */
        boolean send(Worker w, ByteBuffer m, Connection c, SessionTicket ticket) {
            long id = ticket.sessionId();
            out.put(m);
            try {
                DescriptorPassing.send(w.control, ControlMessages.finish(m), out.descriptors());
            } catch (IOException | RuntimeException e) {
                LOG.log(Level.WARNING, "session " + id + " lost: handing its connection to worker pid " + w.pid + " failed: "
                        + e.getMessage());
                c.close();
                abandon();
                return false;
            }
            out.release().run();
            if (pair != null) {
                Connection near;
                try {
                    near = DescriptorPassing.adopt(pair[0], ticket.peer());
                } catch (IOException e) {
                    LOG.log(Level.WARNING, "session " + id + " lost: cannot relay it: " + e.getMessage());
                    c.close();
                    return false;
                }
                w.relayed = true; // a take-over leaves this worker here: the relay lives in this process
                FrameRelay.start(id, c, near);
                LOG.log(Level.INFO, "session " + id + ": a " + ticket.peer().transport() + ":// connection cannot be handed over"
                        + " whole (its state lives in this process); the front relays its frames to the worker (one extra copy of"
                        + " every byte)");
            }
            return true;
        }
    }

    /** How {@code c} will cross, or null (the connection closed, the reason logged). */
    private Crossing crossing(Connection c, long id) {
        HandedConnection.Outgoing out;
        try {
            out = HandedConnection.of(c).orElse(null);
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.WARNING, "session " + id + " refused: its connection could not be found to hand over: " + e.getMessage());
            c.close();
            return null;
        }
        if (out != null) {
            return new Crossing(out, null);
        }
        int[] pair;
        try {
            pair = DescriptorPassing.socketPair();
        } catch (IOException e) {
            LOG.log(Level.WARNING, "session " + id + " refused: no socket pair to relay it through: " + e.getMessage());
            c.close();
            return null;
        }
        int workerEnd = pair[1];
        return new Crossing(HandedConnection.socket(workerEnd, () -> DescriptorPassing.close(workerEnd)), pair); // the worker has its own copy then
    }

    /**
     * An idle worker, else the first to become ready while this session waits (sessions waiting are counted, so
     * that enough workers start for them); null (logged) when none can be had within {@link #START_SECONDS}.
     */
    private Worker take(long sessionId) {
        for (Worker w; (w = idle.poll()) != null; ) {
            if (w.claim()) {
                return w;
            }
        }
        waiting.incrementAndGet();
        try {
            replenish();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(START_SECONDS);
            while (!closed) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    LOG.log(Level.ERROR, "session " + sessionId + " refused: no worker was ready within " + START_SECONDS + " s");
                    return null;
                }
                Worker w = idle.poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(100)), TimeUnit.NANOSECONDS);
                if (w != null && w.claim()) {
                    return w;
                }
                if (w == null && !anyUnclaimed()) {
                    replenish(); // one that was starting died, or a start failed: try again
                    if (!anyUnclaimed()) {
                        LOG.log(Level.ERROR, "session " + sessionId + " refused: no worker process can be started (see above)");
                        return null;
                    }
                }
            }
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } finally {
            waiting.decrementAndGet();
        }
    }

    private boolean anyUnclaimed() {
        return live.values().stream().anyMatch(w -> !w.claimed.get() && !w.gone.get());
    }

    /**
     * Starts workers until those idle or starting cover {@code idle} plus the sessions waiting for one, within
     * {@code max}, and never more than {@link #parallelStarts} starting at once: JVMs that start together share
     * the cores, so a burst of sessions is served one worker after another instead of all at the end.
     */
    private void replenish() {
        synchronized (live) { // one counter at a time, or two threads would each start the missing one
            while (!closed && !handingOff) {
                long unclaimed = live.values().stream().filter(w -> !w.claimed.get() && !w.gone.get()).count();
                long starting = live.values().stream().filter(w -> !w.gone.get() && !w.ready.isDone()).count();
                if (unclaimed >= idleTarget + waiting.get() || starting >= parallelStarts) {
                    return;
                }
                try {
                    if (spawn() == null) {
                        return;
                    }
                } catch (IOException e) {
                    LOG.log(Level.ERROR, "cannot start a worker: " + e.getMessage());
                    return;
                }
            }
        }
    }

    /** A new worker process (to wait idle until a session claims it); null at the cap. */
    private Worker spawn() throws IOException {
        synchronized (live) {
            if (closed || handingOff || live.size() >= max) {
                return null;
            }
            List<String> aotOptions = aot == null ? List.of() : aot.options();
            List<String> cmd = new ArrayList<>(command.subList(0, 1)); // java, then the cache's options before the others
            cmd.addAll(aotOptions);
            cmd.addAll(command.subList(1, command.size()));
            cmd.add("--control");
            cmd.add(controlUri.toString());
            Process p;
            try {
                p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.INHERIT)
                        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            } catch (IOException e) {
                if (aot != null) {
                    aot.exited(aotOptions);
                }
                throw e;
            }
            p.getOutputStream().close();
            Worker w = new Worker(p, aotOptions);
            live.put(w.pid, w);
            p.onExit().thenRun(() -> {
                if (w.control == null) {
                    gone(w); // died before it connected: no reader thread will notice
                }
            });
            return w;
        }
    }

    private void acceptLoop() {
        while (!closed) {
            Connection ctl;
            try {
                ctl = controlListener.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(Level.ERROR, "worker control socket: accept failed: " + e.getMessage());
                    sleepQuietly(100);
                }
                continue;
            }
            OptionalInt pid = DescriptorPassing.peerPid(ctl);
            Worker w;
            synchronized (live) {
                w = pid.isPresent() ? live.get((long) pid.getAsInt()) : null;
            }
            if (w == null || w.control != null) {
                LOG.log(Level.WARNING, "worker control socket: refused a process that is not a worker of ours (pid "
                        + (pid.isPresent() ? pid.getAsInt() : "unknown") + ")");
                ctl.close();
                continue;
            }
            w.control = ctl;
            Thread.ofPlatform().daemon().name("gpusockets-worker-" + w.pid).start(() -> readLoop(w, ctl, false));
        }
    }

    /**
     * Serves one worker's control messages until its socket closes, or until it answers a take-over's mark (then the
     * socket is left open for the backend that takes over). An adopted worker ({@code adopted}) said READY long ago.
     */
    private void readLoop(Worker w, Connection ctl, boolean adopted) {
        List<Integer> fds = new java.util.ArrayList<>(ControlMessages.MAX_DESCRIPTORS);
        try {
            ByteBuffer m;
            if (!adopted) {
                m = ControlMessages.read(ctl);
                if (m.get() != ControlMessages.READY) {
                    throw new IOException("expected READY");
                }
                w.ready.complete(null);
                idle.add(w);
                replenish(); // a start slot is free: the next worker starts, if one is wanted
            }
            while (true) {
                fds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close); // none left unclaimed
                fds.clear();
                m = ControlMessages.readWithDescriptors(ctl, ControlMessages.MAX_DESCRIPTORS, fds::add);
                byte type = m.get();
                TenantAccount t = w.tenant;
                if (t == null) {
                    throw new IOException("control message " + type + " before a session");
                }
                if (type != ControlMessages.SHARE && type != ControlMessages.RESHARE && !fds.isEmpty()) {
                    throw new IOException("control message " + type + " came with " + fds.size() + " descriptor(s)");
                }
                switch (type) {
                    case ControlMessages.SHARE -> share(w, t, ctl, m, fds);
                    case ControlMessages.LOOKUP -> lookup(w, t, ctl, m);
                    case ControlMessages.UNSHARE -> {
                        byte kind = m.get();
                        long object = m.getLong();
                        io.gpusockets.backend.session.ShareRegistry r = shares;
                        if (r != null && w.sessionId != 0) {
                            r.withdraw(w.sessionId, kind, object);
                        }
                    }
                    case ControlMessages.RESERVE -> {
                        long request = m.getLong();
                        byte kind = m.get();
                        long n = m.getLong();
                        boolean ok = n >= 0 && (kind == ControlMessages.KIND_MEMORY ? t.reserveMemory(n) : t.reservePinned(n));
                        if (ok) {
                            (kind == ControlMessages.KIND_MEMORY ? w.memoryHeld : w.pinnedHeld).addAndGet(n);
                        }
                        answer(ctl, request, ok ? 1 : 0);
                    }
                    case ControlMessages.RELEASE -> {
                        byte kind = m.get();
                        AtomicLong held = kind == ControlMessages.KIND_MEMORY ? w.memoryHeld : w.pinnedHeld;
                        long n = take(held, m.getLong());
                        if (kind == ControlMessages.KIND_MEMORY) {
                            t.releaseMemory(n);
                        } else {
                            t.releasePinned(n);
                        }
                    }
                    case ControlMessages.REJECTED -> t.rejected(ControlMessages.getString(m));
                    case ControlMessages.USED -> answer(ctl, m.getLong(), t.memoryUsed());
                    case ControlMessages.STATS -> w.figures = io.gpusockets.backend.status.SessionFigures.decode(m);
                    case ControlMessages.MARKED -> {
                        if (m.getLong() != w.pid) {
                            throw new IOException("a take-over mark that is not this worker's");
                        }
                        w.handedOff = true;
                        w.marked.complete(null);
                        return; // what the worker sends from now on is for the backend that takes over
                    }
                    case ControlMessages.PROGRESS -> {
                        Operation op = operations.get(m.getLong());
                        String stage = ControlMessages.getString(m);
                        long done = m.getLong();
                        long total = m.getLong();
                        if (op != null && op.worker() == w) {
                            op.heard.set(System.nanoTime());
                            try {
                                op.progress().progress(stage, done, total);
                            } catch (RuntimeException e) {
                                // a listener that fails hears no more; the operation goes on
                            }
                        }
                    }
                    case ControlMessages.RESHARE -> reshare(w, t, ctl, m, fds);
                    case ControlMessages.CHECKPOINTED, ControlMessages.RESTORED, ControlMessages.MIGRATED,
                         ControlMessages.GROUP_DRAINED, ControlMessages.GROUP_STEPPED -> {
                        long request = m.getLong();
                        Operation op = operations.get(request);
                        if (op == null || op.worker() != w) {
                            throw new IOException("an answer to no request of this worker");
                        }
                        boolean late;
                        synchronized (op) {
                            late = op.abandoned;
                            if (!late) {
                                if (type == ControlMessages.RESTORED && w.restoreTriesLeft
                                        && m.get(m.position()) == ControlMessages.OUTCOME_REFUSED_HERE) {
                                    w.onEnd = null; // the restore tries another worker, whose end runs it (before ours can)
                                    w.sessionId = 0; // nor do the session's shares end with this worker
                                }
                                op.reply().complete(m);
                            }
                        }
                        if (late) {
                            operations.remove(request);
                            op.late.accept(m);
                        }
                    }
                    default -> throw new IOException("unknown control message " + type);
                }
            }
        } catch (IOException | RuntimeException e) {
            if (!(e instanceof java.io.EOFException) && !closed && w.handle.isAlive()) {
                LOG.log(Level.WARNING, "worker pid " + w.pid + ": control socket: " + e.getMessage() + "; stopping it");
            }
        } finally {
            fds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close); // a message's that was not taken
            if (!w.handedOff) {
                ctl.close();
                gone(w);
            }
        }
    }

    /**
     * A worker's SHARE: registers its session's export. The descriptors that came with it ({@code fds}) are a VMM
     * share's one, or window memory's, one a piece ({@link ControlMessages#getWindow}); what the registry takes is
     * its own, the rest stays in {@code fds} for the caller to close. Descriptors that fit neither are a broken worker.
     */
    private void share(Worker w, TenantAccount t, Connection ctl, ByteBuffer m, List<Integer> fds) throws IOException {
        long request;
        byte kind;
        long size;
        long object;
        byte[] bytes;
        io.gpusockets.backend.session.ShareRegistry.Window window;
        int fd = -1;
        try {
            request = m.getLong();
            kind = m.get();
            size = m.getLong();
            object = m.getLong();
            bytes = ControlMessages.getShareBytes(m);
            window = ControlMessages.getWindow(m, fds); // takes the pieces' descriptors off fds
            if (window == null && fds.size() > 1 || window != null && (kind != io.gpusockets.backend.session.ShareRegistry.KIND_MEMORY
                    || bytes.length != 0)) {
                io.gpusockets.backend.session.ShareRegistry.closeAll(window);
                throw new IOException("a SHARE of kind " + kind + " with " + (window == null ? fds.size() + " descriptors"
                        : "window memory"));
            }
        } catch (IOException | java.nio.BufferUnderflowException e) {
            throw new IOException("bad SHARE: " + e.getMessage(), e);
        }
        if (window == null && !fds.isEmpty()) {
            fd = fds.remove(0);
        }
        ByteBuffer a = ControlMessages.start(ControlMessages.SHARED);
        a.putLong(request);
        io.gpusockets.backend.session.ShareRegistry r = shares;
        try {
            if (r == null || w.sessionId == 0) {
                if (fd >= 0) {
                    io.gpusockets.transport.vsock.DescriptorPassing.close(fd);
                }
                io.gpusockets.backend.session.ShareRegistry.closeAll(window);
                throw new io.gpusockets.backend.session.ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                        "this backend keeps no shares between sessions");
            }
            // the registry takes fd and window's descriptors, closing them when it refuses
            byte[] token = r.share(w.sessionId, t.name(), kind, bytes.length == 0 ? null : bytes, size, fd, window, object);
            a.put(ControlMessages.OUTCOME_DONE).putLong(w.sessionId).putLong(size).putInt(token.length).put(token);
        } catch (io.gpusockets.backend.session.ShareRegistry.Refused e) {
            a.put(ControlMessages.OUTCOME_REFUSED).putInt(e.result());
            ControlMessages.putString(a, String.valueOf(e.getMessage()), WorkerMain.MESSAGE_CHARS);
        }
        ctl.write(ControlMessages.finish(a));
    }

    /**
     * A worker's LOOKUP: what a token names for its session (a VMM share's descriptor, or a new descriptor of each piece
     * of window memory, goes with the answer).
     */
    private void lookup(Worker w, TenantAccount t, Connection ctl, ByteBuffer m) throws IOException {
        long request;
        byte kind;
        byte[] token = new byte[io.gpusockets.backend.session.ShareRegistry.TOKEN_BYTES];
        try {
            request = m.getLong();
            kind = m.get();
            m.get(token);
        } catch (java.nio.BufferUnderflowException e) {
            throw new IOException("bad LOOKUP: " + e, e);
        }
        ByteBuffer a = ControlMessages.start(ControlMessages.SHARED);
        a.putLong(request);
        io.gpusockets.backend.session.ShareRegistry r = shares;
        int fd = -1;
        io.gpusockets.backend.session.ShareRegistry.Window window = null;
        int[] send = new int[0];
        try {
            if (r == null || w.sessionId == 0) {
                throw new io.gpusockets.backend.session.ShareRegistry.Refused(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE,
                        "this backend keeps no shares between sessions");
            }
            io.gpusockets.backend.session.ShareRegistry.Found f = r.lookup(w.sessionId, t.name(), kind, token);
            fd = f.fd();
            window = f.window();
            byte[] bytes = f.driverBytes() == null ? new byte[0] : f.driverBytes();
            a.put(ControlMessages.OUTCOME_DONE).putLong(f.exporter()).putLong(f.size()).putInt(bytes.length).put(bytes);
            send = ControlMessages.putWindow(a, window);
            if (fd >= 0) {
                send = new int[] {fd};
            }
        } catch (io.gpusockets.backend.session.ShareRegistry.Refused e) {
            a.put(ControlMessages.OUTCOME_REFUSED).putInt(e.result());
            ControlMessages.putString(a, String.valueOf(e.getMessage()), WorkerMain.MESSAGE_CHARS);
        }
        try {
            if (send.length > 0) {
                io.gpusockets.transport.vsock.DescriptorPassing.send(ctl, ControlMessages.finish(a), send);
            } else {
                ctl.write(ControlMessages.finish(a));
            }
        } finally {
            if (fd >= 0) {
                io.gpusockets.transport.vsock.DescriptorPassing.close(fd); // the worker has its own copy now
            }
            io.gpusockets.backend.session.ShareRegistry.closeAll(window);
        }
    }

    /**
     * A worker's RESHARE (a group restore, {@link #restoreGroup}): registers an export of its restored session again
     * under its old token, with the driver's new IPC bytes. Taken only for a token of the image that worker restored
     * (its kind, id and secret as the front read them from the image), once; anything else is refused.
     */
    private void reshare(Worker w, TenantAccount t, Connection ctl, ByteBuffer m, List<Integer> fds) throws IOException {
        long request;
        byte kind;
        long id;
        byte[] secret = new byte[16];
        long object;
        long size;
        byte[] bytes;
        io.gpusockets.backend.session.ShareRegistry.Window window;
        try {
            request = m.getLong();
            kind = m.get();
            id = m.getLong();
            m.get(secret);
            object = m.getLong();
            size = m.getLong();
            bytes = ControlMessages.getShareBytes(m);
            window = ControlMessages.getWindow(m, fds); // takes the pieces' descriptors off fds
            if (!fds.isEmpty()) {
                io.gpusockets.backend.session.ShareRegistry.closeAll(window);
                throw new IOException(fds.size() + " descriptors beyond its window");
            }
        } catch (IOException | java.nio.BufferUnderflowException e) {
            throw new IOException("bad RESHARE: " + e.getMessage(), e);
        }
        ByteBuffer a = ControlMessages.start(ControlMessages.SHARED);
        a.putLong(request);
        io.gpusockets.backend.session.ShareRegistry r = shares;
        try {
            Map<Long, io.gpusockets.backend.session.ShareRegistry.Carried> allowed = w.reshares;
            io.gpusockets.backend.session.ShareRegistry.Carried c = allowed == null ? null : allowed.remove(id);
            boolean memory = kind == io.gpusockets.backend.session.ShareRegistry.KIND_MEMORY;
            if (r == null || w.sessionId == 0 || c == null || c.kind() != kind
                    || !java.security.MessageDigest.isEqual(c.secret(), secret)
                    || (memory ? window == null || bytes.length != 0 || size != c.size()
                    : kind != io.gpusockets.backend.session.ShareRegistry.KIND_EVENT || window != null)) {
                io.gpusockets.backend.session.ShareRegistry.closeAll(window);
                throw new io.gpusockets.backend.session.ShareRegistry.Refused(
                        io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE, "worker pid " + w.pid + ": token "
                        + id + " is no IPC export of the image it restores as sent (its kind, secret and size), or is"
                        + " registered already");
            }
            if (memory) { // the registry takes the window's descriptors, closing them when it refuses
                r.restore(w.sessionId, t.name(), id, secret, size, window, object);
            } else {
                r.restoreDriverEvent(w.sessionId, t.name(), id, secret, bytes, object);
            }
            a.put(ControlMessages.OUTCOME_DONE).putLong(w.sessionId).putLong(size).putInt(0);
        } catch (io.gpusockets.backend.session.ShareRegistry.Refused e) {
            a.put(ControlMessages.OUTCOME_REFUSED).putInt(e.result());
            ControlMessages.putString(a, String.valueOf(e.getMessage()), WorkerMain.MESSAGE_CHARS);
        }
        ctl.write(ControlMessages.finish(a));
    }

    /** Up to {@code n} of {@code held}, taken off it: a worker never gives back more than it was granted. */
    private static long take(AtomicLong held, long n) {
        long want = Math.max(0, n);
        while (true) {
            long h = held.get();
            long t = Math.min(h, want);
            if (held.compareAndSet(h, h - t)) {
                return t;
            }
        }
    }

    private static void answer(Connection ctl, long request, long value) throws IOException {
        ByteBuffer b = ControlMessages.start(ControlMessages.ANSWER);
        b.putLong(request).putLong(value);
        ctl.write(ControlMessages.finish(b));
    }

    /** A worker ended (or its control socket broke): it is stopped, its session's quota given back, its end logged. Once. */
    private void gone(Worker w) {
        if (!w.gone.compareAndSet(false, true)) {
            return;
        }
        w.ready.completeExceptionally(new IOException("worker pid " + w.pid + " exited before it was ready"));
        idle.remove(w);
        SessionTicket ticket = w.ticket;
        if (ticket != null && ticket.resumable()) {
            resumable.remove(java.util.HexFormat.of().formatHex(ticket.resumeToken()), w);
        }
        Integer exit = null;
        boolean stopped = false;
        try {
            // a worker that trains the AOT cache writes it as it exits: give it the time that takes
            long wait = w.aotOptions.stream().anyMatch(o -> o.startsWith("-XX:AOTCacheOutput")) ? 6 * STOP_SECONDS : STOP_SECONDS;
            if (w.process != null) {
                exit = w.process.onExit().get(wait, TimeUnit.SECONDS).exitValue();
            } else {
                w.handle.onExit().get(wait, TimeUnit.SECONDS); // adopted: not our child, its status is not ours to read
            }
            stopped = true;
        } catch (Exception e) {
            w.handle.destroyForcibly();
        }
        failOperations(w);
        io.gpusockets.backend.session.ShareRegistry registry = shares;
        if (registry != null && w.sessionId != 0) {
            registry.sessionEnded(w.sessionId); // its exports go; what others opened of them stays, as the driver keeps it
        }
        if (aot != null) {
            aot.exited(w.aotOptions);
        }
        TenantAccount t = w.tenant;
        long memory = w.memoryHeld.getAndSet(0);
        long pinned = w.pinnedHeld.getAndSet(0);
        if (t != null) {
            t.releaseMemory(memory);
            t.releasePinned(pinned);
        }
        io.gpusockets.backend.status.SessionSnapshot last = w.shown ? w.snapshot(System.nanoTime()) : null;
        if (last != null) {
            sessionEnded.accept(last, () -> w.shown = false);
        }
        w.shown = false;
        live.remove(w.pid);
        Runnable ended = w.onEnd;
        w.onEnd = null;
        if (ended != null) {
            ended.run();
        }
        w.cleared.countDown();
        String what = w.sessionId == 0 ? "idle worker pid " + w.pid : "worker pid " + w.pid + " of session " + w.sessionId;
        String how = exit == null ? (stopped ? "exited (status unknown: adopted from pid " + w.adoptedFrom + ", not our child)"
                : "killed (would not stop)") : "exit " + exit + (exit > 128 ? " (signal " + (exit - 128) + ")" : "");
        String quota = memory + pinned == 0 ? "" : "; gave back " + memory + " bytes of device and " + pinned
                + " of pinned memory to tenant " + t.name();
        if (exit != null && exit == 0 || exit == null && stopped) {
            LOG.log(Level.INFO, what + " ended: " + how + quota);
        } else if (!closed) {
            LOG.log(Level.WARNING, what + " died: " + how + "; only its session ended, the driver frees its contexts" + quota);
        }
        replenish();
    }

    /** Fails the checkpoints, restores and migrations {@code w} works on: it is gone. */
    private void failOperations(Worker w) {
        for (Operation op : operations.values()) {
            if (op.worker() == w) {
                String how = w.handle.isAlive() || w.process == null ? "its control socket closed" : "it exited with status "
                        + w.process.exitValue() + (w.process.exitValue() > 128 ? " (signal " + (w.process.exitValue() - 128) + ")" : "");
                op.reply().completeExceptionally(new IOException("worker pid " + w.pid
                        + (w.sessionId == 0 ? "" : " of session " + w.sessionId) + " is gone (" + how + ")"));
            }
        }
        operations.values().removeIf(op -> {
            synchronized (op) {
                return op.worker() == w && op.abandoned; // timed out: no answer will come
            }
        });
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops every worker (their sessions end as on a backend shutdown), killing those that do not stop in time. */
    @Override
    public void close() {
        synchronized (live) {
            if (closed) {
                return;
            }
            closed = true;
        }
        controlListener.close();
        operations.values().forEach(op -> op.reply().completeExceptionally(new IOException("the backend is shutting down")));
        List<Worker> all = List.copyOf(live.values());
        all.forEach(w -> w.handle.destroy());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STOP_SECONDS);
        for (Worker w : all) {
            try {
                w.handle.onExit().get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException e) {
                w.handle.destroyForcibly();
                try {
                    w.handle.onExit().get(STOP_SECONDS, TimeUnit.SECONDS);
                } catch (Exception ignored) {
                    // left to the kernel
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                w.handle.destroyForcibly();
            }
        }
        try {
            Files.deleteIfExists(dir.resolve("control.sock"));
            Files.deleteIfExists(dir);
        } catch (IOException ignored) {
            // left in the temporary directory
        }
    }

    /** One worker process and what the front knows of it. */
    private static final class Worker {
        /** The process, or null for a worker adopted from another backend (not our child: {@link #handle} only). */
        final Process process;
        final ProcessHandle handle;
        final long pid;
        /** The pid of the backend this worker was adopted from ({@link #adopt}), else 0. */
        final long adoptedFrom;
        /** Completed when the worker answers TAKEOVER_MARK: this front reads no more of its control socket. */
        final CompletableFuture<Void> marked = new CompletableFuture<>();
        /** Handed to a backend that takes this one over: its reader stopped without closing or ending anything. */
        volatile boolean handedOff;
        /** Its frontend's connection is relayed by this process ({@link FrameRelay}): a take-over leaves it here. */
        volatile boolean relayed;
        /** Taken for a session from the idle queue; set once. */
        final AtomicBoolean claimed = new AtomicBoolean();
        final CompletableFuture<Void> ready = new CompletableFuture<>();
        final AtomicBoolean gone = new AtomicBoolean();
        /** Counted down once {@link #gone} has given back all the worker held and taken its session off the list. */
        final java.util.concurrent.CountDownLatch cleared = new java.util.concurrent.CountDownLatch(1);
        /** What the worker's session holds of its tenant's quota, as granted by the front. */
        final AtomicLong memoryHeld = new AtomicLong();
        final AtomicLong pinnedHeld = new AtomicLong();
        volatile Connection control;
        volatile TenantAccount tenant;
        /** Run once when this worker ends, if it took a session ({@link #handOver}). */
        volatile Runnable onEnd;
        /** 0 until a session is handed to it. */
        volatile long sessionId;
        /** Its restore is not the last try ({@link Workers#restore}): a refusal for its own address space is tried again. */
        volatile boolean restoreTriesLeft;
        /** Its session's ticket and when it was handed over, once it has one. */
        volatile SessionTicket ticket;
        volatile long handedAtNanos;
        /**
         * A group restore's exports of the image it restored that it may register again ({@link Workers#reshare}), by
         * token id; each taken once. Null: none.
         */
        volatile Map<Long, io.gpusockets.backend.session.ShareRegistry.Carried> reshares;
        /** Checkpointed with stop: its session waits frozen in the worker, never resumed here. */
        volatile boolean frozen;
        /** Listed by {@link Workers#sessions} (from the hand-over until its end is reported). */
        volatile boolean shown;
        /** What the worker's last STATS message said of its session. */
        volatile io.gpusockets.backend.status.SessionFigures figures = io.gpusockets.backend.status.SessionFigures.NONE;

        /** Its session as status shows it, or null when it has none. */
        io.gpusockets.backend.status.SessionSnapshot snapshot(long nowNanos) {
            SessionTicket t = ticket;
            if (t == null) {
                return null;
            }
            return figures.snapshot(t.sessionId(), t.tenant(), t.peer().transport(),
                    t.peer().description() + (adoptedFrom == 0 ? "" : ", adopted from pid " + adoptedFrom),
                    (nowNanos - handedAtNanos) / 1e9, t.limits().stableAddresses().resolve(t.stableAddresses()));
        }

        /** The AOT cache options it was started with. */
        final List<String> aotOptions;

        Worker(Process process, List<String> aotOptions) {
            this.process = process;
            this.handle = process.toHandle();
            this.pid = process.pid();
            this.adoptedFrom = 0;
            this.aotOptions = aotOptions;
        }

        /** A worker another backend started ({@code handle}), adopted from that backend's process {@code from}. */
        Worker(ProcessHandle handle, long from) {
            this.process = null;
            this.handle = handle;
            this.pid = handle.pid();
            this.adoptedFrom = from;
            this.aotOptions = List.of();
        }

        /** Takes this worker for a session: true once, and only while it is alive. */
        boolean claim() {
            return !gone.get() && claimed.compareAndSet(false, true);
        }
    }
}
