package io.gpusockets.backend.isolation;

import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.ContextPool;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.Session;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.transport.SharedWindow;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A worker process's life (isolation mode {@code process}): it connects to the front's control socket,
 * says it is ready, waits for one session's connection and ticket ({@link HandedConnection}), serves that session with the ordinary
 * {@link Session} on this process's own driver, and returns when the session ends. The session charges
 * its tenant through {@link FrontTenantAccount}. When the control socket closes (the front stopped or
 * died) the session ends at once; a SIGTERM ends it as a backend shutdown does. Checkpoint and restore (issue 22)
 * run here, on this process's driver: a CHECKPOINT message checkpoints the session on a thread of its own (PROGRESS,
 * then CHECKPOINTED back); a RESTORE message, sent instead of SESSION to an idle worker, restores an image as this
 * worker's session, which then waits detached for its frontend to resume through the front (RESTORED back first).
 * A group checkpoint (sessions that share IPC memory and events) drains the session on GROUP_DRAIN and holds it for
 * the front's GROUP_STEP (write its image, then commit, let go, or, in a group migration, move: its frontend sent
 * to the target with MOVED and the session ended, GROUP_STEPPED back first); a group restore's worker registers its session's
 * exports again and opens again what it opened on GROUP_RESHARE ({@link Workers#checkpointGroup},
 * {@link Workers#reshare}).
 * A MIGRATE message (issue 23) migrates the session from here: this worker runs the source's side of the migration,
 * connecting to the target backend itself, and ends its session once the target holds it (MIGRATED back first).
 * When a new backend takes the front's place ({@code --take-over}, {@link TakeOver}), the old front sends TAKEOVER_MARK
 * and this worker answers MARKED; the control socket itself stays open (the new front holds a copy of the old one's
 * end), so the session never notices: "front gone" means the last copy of that end closed.
 */
public final class WorkerMain {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    private WorkerMain() {
    }

    /** Serves one session handed over through {@code controlUri}; returns the process's exit status. */
    public static int run(DriverHost host, BackendSettings settings, String controlUri) throws IOException {
        // While idle: the session's context is made ahead, and the session's code is loaded by a session
        // that ends at once, so that the handed-over session starts as fast as one in a warm backend.
        host.health().servesOneSession(); // a kernel fault poisons this worker alone: said so, not as for a backend
        ContextPool contexts = new ContextPool(host, 1);
        warmUp(host, settings);
        Connection control = Transports.connect(TransportUri.parse(controlUri), Duration.ofSeconds(30));
        ByteBuffer ready = ControlMessages.start(ControlMessages.READY);
        ready.putLong(ProcessHandle.current().pid());
        control.write(ControlMessages.finish(ready));
        java.util.List<Integer> firstFds = new java.util.ArrayList<>(HandedConnection.MAX_DESCRIPTORS);
        ByteBuffer first;
        try {
            first = ControlMessages.readWithDescriptors(control, firstFds::add);
        } catch (java.io.EOFException e) {
            firstFds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close);
            control.close();
            return 0; // stopped while idle
        }
        byte firstType = first.get();
        if (firstType == ControlMessages.RESTORE) {
            firstFds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close);
            return restoreAndServe(host, settings, contexts, control, first);
        }
        if (firstType != ControlMessages.SESSION) {
            firstFds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close);
            control.close();
            throw new IOException("the front sent control message " + firstType + " instead of a session");
        }
        HandedConnection.Received received = HandedConnection.session(first, firstFds);
        SessionTicket t = received.ticket();
        Connection connection = received.connection();
        FrontTenantAccount tenant = new FrontTenantAccount(t.tenant(), t.limits(), control);
        connection.platformThreadsOnly(); // the session's reader and lanes are platform threads: reads wait in the kernel
        // a ring:// connection crosses whole: its shared window is this worker's (pinned here, charged through the front)
        SharedWindow window = (t.features() & Handshake.FEATURE_WINDOW) != 0 ? connection.takeSharedWindow().orElse(null) : null;
        // the front's --stable-addresses, which this process's options do not carry; the tenant's setting, in its limits, wins
        Session s = new Session(t.sessionId(), new FrameChannel(connection), host,
                settings.withStableAddresses(t.stableAddresses()), t.peer().description(),
                (t.features() & Handshake.FEATURE_ASYNC) != 0, window, contexts, tenant);
        if (t.managedSize() != 0) {
            s.managedRange(t.managedBase(), t.managedSize()); // the HELLO's, checked by the front; before the first call
        }
        if (t.resumable()) {
            s.resumable(new Session.Resume(t.resumeToken(), t.identity(), Duration.ofSeconds(t.graceSeconds()), t.features(),
                    t.retainBytes()));
        }
        WorkerShares shares = new WorkerShares(control);
        s.shares(shares);
        java.util.concurrent.atomic.AtomicReference<Session> served = new java.util.concurrent.atomic.AtomicReference<>(s);
        readControl(control, tenant, shares, served);
        return serve(s, t, tenant, control, settings);
    }

    /**
     * A worker whose first control message is RESTORE: restores the image it names (SessionRestore, on this process's
     * driver, charging the tenant through the front), answers RESTORED (the session's ticket, or why not), and
     * serves the restored session, which waits for its frontend to resume through the front (RESUME). A worker
     * whose restore fails exits (everything the restore made is freed).
     */
    private static int restoreAndServe(DriverHost host, BackendSettings settings, ContextPool contexts, Connection control,
                                       ByteBuffer m) throws IOException {
        long request;
        java.nio.file.Path file;
        String tenantName;
        io.gpusockets.backend.tenant.TenantLimits limits;
        long retain;
        try {
            request = m.getLong();
            file = java.nio.file.Path.of(ControlMessages.getString(m));
            tenantName = ControlMessages.getString(m);
            limits = SessionTicket.getLimits(m);
            retain = m.getLong();
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            control.close();
            throw new IOException("bad RESTORE message: " + e, e);
        }
        FrontTenantAccount tenant = new FrontTenantAccount(tenantName, limits, control);
        java.util.concurrent.atomic.AtomicReference<Session> served = new java.util.concurrent.atomic.AtomicReference<>();
        WorkerShares shares = new WorkerShares(control);
        readControl(control, tenant, shares, served); // the restore's reserves are answered through it
        Object[] out = new Object[1];
        // a platform thread of its own: the replay changes its thread's driver context stack
        Thread r = Thread.ofPlatform().daemon().name("gpusockets-restore").start(() -> {
            try {
                out[0] = io.gpusockets.backend.session.SessionRestore.restore(file, host, settings, contexts, tenant, retain,
                        (stage, done, total) -> progress(tenant, request, stage, done, total)).session();
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                out[0] = e;
            }
        });
        try {
            r.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            control.close();
            return 1;
        }
        ByteBuffer a = ControlMessages.start(ControlMessages.RESTORED);
        a.putLong(request);
        if (!(out[0] instanceof Session s)) {
            Exception e = (Exception) out[0];
            a.put(e instanceof io.gpusockets.backend.session.CheckpointRefused c
                    ? (c.anotherProcessMay() ? ControlMessages.OUTCOME_REFUSED_HERE : ControlMessages.OUTCOME_REFUSED)
                    : ControlMessages.OUTCOME_FAILED);
            ControlMessages.putString(a, String.valueOf(e.getMessage()), MESSAGE_CHARS);
            tenant.send(a);
            LOG.log(Level.WARNING, "worker pid " + ProcessHandle.current().pid() + ": " + e.getMessage());
            control.close();
            return 0;
        }
        s.shares(shares);
        Session.Resume resume = s.resume();
        SessionTicket t = new SessionTicket(s.id(), resume.features(), tenantName, limits,
                new io.gpusockets.protocol.transport.PeerInfo("restored from " + file, java.util.OptionalInt.empty(),
                        java.util.OptionalLong.empty(), java.util.OptionalLong.empty(), java.util.Optional.empty(), "restored"),
                resume.token(), resume.identity(), (int) resume.grace().toSeconds(), retain);
        served.set(s);
        a.put(ControlMessages.OUTCOME_DONE);
        t.encode(a);
        if (!tenant.send(a)) {
            s.end("the backend's front process is gone");
            control.close();
            return 0;
        }
        return serve(s, t, tenant, control, settings);
    }

    /** Refusals and failures sent to the front are cut to this many characters (a control message's bound). */
    static final int MESSAGE_CHARS = 16 << 10;

    /** Sends a PROGRESS message of the checkpoint or restore {@code request}. */
    private static void progress(FrontTenantAccount front, long request, String stage, long done, long total) {
        ByteBuffer p = ControlMessages.start(ControlMessages.PROGRESS);
        p.putLong(request);
        ControlMessages.putString(p, stage, 256);
        p.putLong(done).putLong(total);
        front.send(p);
    }

    /**
     * Reads the front's control messages on a thread of its own until the control socket closes (then the session
     * ends at once): answers to the tenant's reserves, new limits, resuming connections, checkpoints. {@code served}
     * holds the session once there is one (a restore makes it later).
     */
    private static void readControl(Connection control, FrontTenantAccount tenant, WorkerShares shares,
                                    java.util.concurrent.atomic.AtomicReference<Session> served) {
        // a group checkpoint's steps for the session it holds drained, by the drain's request
        java.util.Map<Long, java.util.concurrent.BlockingQueue<ByteBuffer>> steps = new java.util.concurrent.ConcurrentHashMap<>();
        Thread.ofPlatform().daemon().name("gpusockets-worker-control").start(() -> {
            java.util.List<Integer> fds = new java.util.ArrayList<>(ControlMessages.MAX_DESCRIPTORS);
            try {
                while (true) {
                    ByteBuffer a = ControlMessages.readWithDescriptors(control, ControlMessages.MAX_DESCRIPTORS, fds::add);
                    byte type = a.get();
                    if (type != ControlMessages.RESUME && type != ControlMessages.SHARED && !fds.isEmpty()) {
                        throw new IOException("control message " + type + " came with descriptors");
                    }
                    Session s = served.get();
                    switch (type) {
                        case ControlMessages.ANSWER -> tenant.answered(a.getLong(), a.getLong());
                        case ControlMessages.SHARED -> {
                            java.util.List<Integer> taken = java.util.List.copyOf(fds); // the broker's from here
                            fds.clear();
                            shares.answered(a, taken);
                        }
                        case ControlMessages.LIMITS -> tenant.setLimits(SessionTicket.getLimits(a));
                        case ControlMessages.RESUME -> {
                            if (s == null) {
                                throw new IOException("a resuming connection before the session was restored");
                            }
                            resume(s, a, fds);
                        }
                        case ControlMessages.CHECKPOINT -> checkpoint(s, tenant, a);
                        case ControlMessages.GROUP_DRAIN -> groupDrain(s, tenant, a, steps);
                        case ControlMessages.GROUP_STEP -> {
                            long drain = a.getLong();
                            java.util.concurrent.BlockingQueue<ByteBuffer> q = steps.get(drain);
                            boolean taken = false;
                            if (q != null) {
                                synchronized (q) { // against the drain's thread giving up now (it removes q under it)
                                    taken = steps.get(drain) == q && q.offer(a);
                                }
                            }
                            if (!taken) {
                                notHeld(tenant, a);
                            }
                        }
                        case ControlMessages.GROUP_RESHARE -> groupReshare(s, tenant, a);
                        case ControlMessages.MIGRATE -> migrate(s, tenant, a);
                        case ControlMessages.TAKEOVER_MARK -> {
                            // a new backend takes over this worker's control socket: what follows MARKED is read there
                            ByteBuffer marked = ControlMessages.start(ControlMessages.MARKED);
                            marked.putLong(a.getLong());
                            tenant.send(marked);
                        }
                        default -> throw new IOException("unexpected control message");
                    }
                }
            } catch (IOException | RuntimeException e) {
                fds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close);
                tenant.frontGone();
                shares.frontGone();
                Session s = served.get();
                if (s != null) {
                    s.end("the backend's front process is gone");
                }
            }
        });
    }

    /**
     * A CHECKPOINT message: checkpoints the session on a thread of its own (the control reader goes on answering
     * the tenant's reserves meanwhile), sending PROGRESS and then CHECKPOINTED with the result or why not.
     */
    private static void checkpoint(Session s, FrontTenantAccount front, ByteBuffer m) throws IOException {
        long request = m.getLong();
        boolean stop = m.get() != 0;
        String file = ControlMessages.getString(m);
        Thread.ofPlatform().daemon().name("gpusockets-worker-checkpoint").start(() -> {
            ByteBuffer a = ControlMessages.start(ControlMessages.CHECKPOINTED);
            a.putLong(request);
            try {
                if (s == null) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("the worker has no session yet");
                }
                io.gpusockets.backend.session.CheckpointResult r = s.checkpoint(java.nio.file.Path.of(file), stop,
                        (stage, done, total) -> progress(front, request, stage, done, total));
                a.put(ControlMessages.OUTCOME_DONE).putLong(r.bytesWritten()).putInt(r.allocations()).putInt(r.records())
                        .putLong(r.drainNanos()).putLong(r.imageNanos());
            } catch (io.gpusockets.backend.session.CheckpointRefused e) {
                a.put(ControlMessages.OUTCOME_REFUSED);
                ControlMessages.putString(a, String.valueOf(e.getMessage()), MESSAGE_CHARS);
            } catch (IOException | RuntimeException | InterruptedException e) {
                a.put(ControlMessages.OUTCOME_FAILED);
                ControlMessages.putString(a, "checkpoint of session " + (s == null ? "?" : s.id()) + " failed in worker pid "
                        + ProcessHandle.current().pid() + ": " + e.getMessage(), MESSAGE_CHARS);
            }
            front.send(a);
        });
    }

    /** How long a session held drained for its group's checkpoint waits for the front's next step before it runs on. */
    static final long GROUP_STEP_SECONDS = Workers.QUIET_SECONDS_DEFAULT * 2;

    /**
     * A GROUP_DRAIN message (a group checkpoint, {@link Workers#checkpointGroup}): on a thread of its own, drains the
     * session ({@link io.gpusockets.backend.session.Session#drained}, holding its new calls), answers GROUP_DRAINED and
     * holds it drained for the front's GROUP_STEP: write (its image with what the front says it exported, answered by
     * CHECKPOINTED; {@link io.gpusockets.backend.session.GroupCheckpoint#writeMember}), then commit (it runs on, or
     * with stop stays frozen) or let go (it runs on; the image written is deleted). A refusal before the drain is done
     * answers GROUP_DRAINED with why; no step within {@link #GROUP_STEP_SECONDS} lets it go.
     */
    private static void groupDrain(Session s, FrontTenantAccount front, ByteBuffer m,
                                   java.util.Map<Long, java.util.concurrent.BlockingQueue<ByteBuffer>> steps) {
        long request = m.getLong();
        boolean stop = m.get() != 0;
        java.util.concurrent.BlockingQueue<ByteBuffer> q = new java.util.concurrent.LinkedBlockingQueue<>(2);
        steps.put(request, q);
        Thread.ofPlatform().daemon().name("gpusockets-worker-group-checkpoint").start(() -> {
            boolean[] drained = {false};
            java.nio.file.Path[] written = {null};
            String[] movedTo = {null};
            long[] moveRequest = {-1};
            try {
                if (s == null) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("the worker has no session yet");
                }
                io.gpusockets.backend.session.GroupCheckpoint.requireCheckpointable(s);
                s.drained(stop, (stage, done, total) -> progress(front, request, stage, done, total), drainNanos -> {
                    ByteBuffer d = ControlMessages.start(ControlMessages.GROUP_DRAINED);
                    d.putLong(request).put(ControlMessages.OUTCOME_DONE).putLong(drainNanos);
                    drained[0] = true;
                    if (!front.send(d)) {
                        throw new IOException("the backend's front process is gone");
                    }
                    ByteBuffer step = nextStep(q, s, ControlMessages.STEP_WRITE);
                    long write = step.getLong();
                    java.nio.file.Path file = java.nio.file.Path.of(ControlMessages.getString(step));
                    java.util.List<io.gpusockets.backend.session.ShareRegistry.Carried> exports = getExports(step);
                    java.util.Set<Long> carried = getIds(step);
                    ByteBuffer a = ControlMessages.start(ControlMessages.CHECKPOINTED);
                    a.putLong(write);
                    try {
                        io.gpusockets.backend.session.CheckpointResult r = io.gpusockets.backend.session.GroupCheckpoint
                                .writeMember(s, file, (stage, done, total) -> progress(front, write, stage, done, total),
                                        drainNanos, exports, carried);
                        written[0] = file;
                        a.put(ControlMessages.OUTCOME_DONE).putLong(r.bytesWritten()).putInt(r.allocations())
                                .putInt(r.records()).putLong(r.drainNanos()).putLong(r.imageNanos());
                        front.send(a);
                    } catch (io.gpusockets.backend.session.CheckpointRefused e) {
                        a.put(ControlMessages.OUTCOME_REFUSED);
                        ControlMessages.putString(a, String.valueOf(e.getMessage()), MESSAGE_CHARS);
                        front.send(a);
                        throw e;
                    } catch (IOException | RuntimeException e) {
                        a.put(ControlMessages.OUTCOME_FAILED);
                        ControlMessages.putString(a, "the image of session " + s.id() + " failed in worker pid "
                                + ProcessHandle.current().pid() + ": " + e.getMessage(), MESSAGE_CHARS);
                        front.send(a);
                        throw e;
                    }
                    ByteBuffer last = nextStep(q, s, ControlMessages.STEP_COMMIT, ControlMessages.STEP_MOVE);
                    if (last.get(last.position() - 1) == ControlMessages.STEP_MOVE) { // the step's kind, just read
                        moveRequest[0] = last.getLong();
                        movedTo[0] = ControlMessages.getString(last);
                    }
                    return null; // returning freezes it with stop
                }, stop ? "checkpointed with its group and stopped (frozen: it resumes where the image is restored)"
                        : "checkpointed with its group");
                if (movedTo[0] != null) { // a group migration: the target holds it now
                    try {
                        Handshake.Moved.check(movedTo[0]);
                        s.moved(movedTo[0]); // MOVED to the frontend
                    } catch (IllegalArgumentException | IllegalStateException e) {
                        LOG.log(Level.WARNING, "session " + s.id() + ": MOVED not sent (" + e.getMessage() + "); its"
                                + " frontend hears it when it asks the backend to resume");
                    }
                    LOG.log(Level.INFO, "session " + s.id() + " migrated with its group to " + movedTo[0]
                            + " from worker pid " + ProcessHandle.current().pid());
                    ByteBuffer a = ControlMessages.start(ControlMessages.GROUP_STEPPED);
                    a.putLong(moveRequest[0]).put(ControlMessages.OUTCOME_DONE);
                    front.send(a);
                    s.end("moved to " + movedTo[0]); // after the answer: this worker exits with its session
                }
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException
                     | InterruptedException e) {
                if (written[0] != null) {
                    try {
                        java.nio.file.Files.deleteIfExists(written[0]);
                    } catch (IOException ignored) {
                        // the front deletes the group's images too
                    }
                }
                if (!drained[0]) {
                    ByteBuffer d = ControlMessages.start(ControlMessages.GROUP_DRAINED);
                    d.putLong(request).put(e instanceof io.gpusockets.backend.session.CheckpointRefused
                            ? ControlMessages.OUTCOME_REFUSED : ControlMessages.OUTCOME_FAILED);
                    ControlMessages.putString(d, String.valueOf(e.getMessage()), MESSAGE_CHARS);
                    front.send(d);
                } else {
                    LOG.log(Level.INFO, "session " + (s == null ? "?" : s.id()) + " runs on: its group's checkpoint did"
                            + " not complete (" + e.getMessage() + ")");
                }
                if (moveRequest[0] >= 0) { // it runs on here: the front must not send its frontend away
                    ByteBuffer a = ControlMessages.start(ControlMessages.GROUP_STEPPED);
                    a.putLong(moveRequest[0]).put(ControlMessages.OUTCOME_REFUSED);
                    ControlMessages.putString(a, "session " + (s == null ? "?" : s.id()) + " runs on: " + e.getMessage(),
                            MESSAGE_CHARS);
                    front.send(a);
                }
            } finally {
                synchronized (q) { // no step is taken for this drain from here on
                    steps.remove(request);
                }
                for (ByteBuffer left; (left = q.poll()) != null; ) {
                    notHeld(front, left);
                }
            }
        });
    }

    /**
     * A GROUP_STEP for no drain held here (its thread gave up waiting, or ended): logged; a move is answered refused,
     * so that the front does not send away the frontend of a session that runs on here.
     */
    private static void notHeld(FrontTenantAccount front, ByteBuffer step) {
        LOG.log(Level.WARNING, "worker pid " + ProcessHandle.current().pid() + ": a group checkpoint's step for no drain"
                + " held here (it gave up waiting)");
        if (step.remaining() > 1 + 8 && step.get() == ControlMessages.STEP_MOVE) {
            ByteBuffer a = ControlMessages.start(ControlMessages.GROUP_STEPPED);
            a.putLong(step.getLong()).put(ControlMessages.OUTCOME_REFUSED);
            ControlMessages.putString(a, "the session runs on in worker pid " + ProcessHandle.current().pid() + ": it was"
                    + " no longer held drained for its group (no step within " + GROUP_STEP_SECONDS + " s)", MESSAGE_CHARS);
            front.send(a);
        }
    }

    /**
     * The front's next GROUP_STEP for a drained session (after its request id, its step read), which must be
     * {@code expected} (a write's fields follow); a let-go or none within {@link #GROUP_STEP_SECONDS} is refused, another
     * step fails (the session runs on either way).
     */
    private static ByteBuffer nextStep(java.util.concurrent.BlockingQueue<ByteBuffer> q, Session s, byte expected)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return nextStep(q, s, expected, expected);
    }

    /** {@link #nextStep}, where {@code expected} or {@code or} is due (the kind is the byte before the buffer's position). */
    private static ByteBuffer nextStep(java.util.concurrent.BlockingQueue<ByteBuffer> q, Session s, byte expected, byte or)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        ByteBuffer step;
        try {
            step = q.poll(GROUP_STEP_SECONDS, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while held for the group's checkpoint");
        }
        if (step == null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + s.id() + ": the front sent no step of"
                    + " the group's checkpoint within " + GROUP_STEP_SECONDS + " s");
        }
        byte kind = step.get();
        if (kind == ControlMessages.STEP_LET_GO) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + s.id() + ": the group's checkpoint was"
                    + " called off");
        }
        if (kind != expected && kind != or) {
            throw new IOException("a group checkpoint step " + kind + " where " + expected + " was due");
        }
        return step;
    }

    /** A GROUP_STEP write's exports ({@link ControlMessages}). */
    private static java.util.List<io.gpusockets.backend.session.ShareRegistry.Carried> getExports(ByteBuffer m)
            throws IOException {
        int n = m.getInt();
        if (n < 0 || n > ControlMessages.MAX_GROUP_EXPORTS) {
            throw new IOException("a group checkpoint step with " + n + " exports");
        }
        java.util.List<io.gpusockets.backend.session.ShareRegistry.Carried> out = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            byte kind = m.get();
            long id = m.getLong();
            byte[] secret = new byte[16];
            m.get(secret);
            out.add(new io.gpusockets.backend.session.ShareRegistry.Carried(kind, id, secret, m.getLong(), m.getLong(),
                    java.util.Set.of()));
        }
        return out;
    }

    /** A GROUP_STEP write's token ids. */
    private static java.util.Set<Long> getIds(ByteBuffer m) throws IOException {
        int n = m.getInt();
        if (n < 0 || n > ControlMessages.MAX_GROUP_EXPORTS) {
            throw new IOException("a group checkpoint step with " + n + " token ids");
        }
        java.util.Set<Long> out = new java.util.HashSet<>();
        for (int i = 0; i < n; i++) {
            out.add(m.getLong());
        }
        return out;
    }

    /**
     * A GROUP_RESHARE message (a group restore, {@link Workers#restoreGroup}): on a thread of its own, registers the
     * restored session's exports again under their old tokens ({@link
     * io.gpusockets.backend.session.GroupCheckpoint#reExportInWorker}) or opens again what it opened ({@link
     * io.gpusockets.backend.session.GroupCheckpoint#reOpen}), answering GROUP_STEPPED.
     */
    private static void groupReshare(Session s, FrontTenantAccount front, ByteBuffer m) {
        long request = m.getLong();
        byte step = m.get();
        Thread.ofPlatform().daemon().name("gpusockets-worker-group-restore").start(() -> {
            ByteBuffer a = ControlMessages.start(ControlMessages.GROUP_STEPPED);
            a.putLong(request);
            try {
                if (s == null) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("the worker has no session yet");
                }
                if (step == ControlMessages.STEP_EXPORT) {
                    io.gpusockets.backend.session.GroupCheckpoint.reExportInWorker(s);
                } else if (step == ControlMessages.STEP_OPEN) {
                    io.gpusockets.backend.session.GroupCheckpoint.reOpen(s);
                } else {
                    throw new IOException("a group restore step " + step);
                }
                a.put(ControlMessages.OUTCOME_DONE);
            } catch (io.gpusockets.backend.session.CheckpointRefused e) {
                a.put(ControlMessages.OUTCOME_REFUSED);
                ControlMessages.putString(a, String.valueOf(e.getMessage()), MESSAGE_CHARS);
            } catch (IOException | RuntimeException e) {
                a.put(ControlMessages.OUTCOME_FAILED);
                ControlMessages.putString(a, "the group restore of session " + (s == null ? "?" : s.id()) + " failed in"
                        + " worker pid " + ProcessHandle.current().pid() + ": " + e.getMessage(), MESSAGE_CHARS);
            }
            front.send(a);
        });
    }

    /**
     * A MIGRATE message: migrates the session to the target backend ({@link io.gpusockets.backend.server.Migration#run},
     * this worker connecting to the target itself with the key the front sent) on a thread of its own, sending
     * PROGRESS and then MIGRATED with the result or why not. Once the target holds the session its frontend is sent
     * there (MOVED), MIGRATED goes to the front, and then the session ends here (and with it this worker); a refusal
     * or failure before the target's OK leaves the program running here.
     */
    private static void migrate(Session s, FrontTenantAccount front, ByteBuffer m) throws IOException {
        long request = m.getLong();
        String target = ControlMessages.getString(m);
        String frontend = ControlMessages.getString(m);
        int n = m.getInt();
        if (n < -1 || n > m.remaining()) {
            throw new IOException("MIGRATE: a key of " + n + " bytes, " + m.remaining() + " left");
        }
        byte[] psk = n < 0 ? null : new byte[n];
        if (psk != null) {
            m.get(psk);
        }
        String goesTo = frontend.isEmpty() ? target : frontend;
        Thread.ofPlatform().daemon().name("gpusockets-worker-migration").start(() -> {
            ByteBuffer a = ControlMessages.start(ControlMessages.MIGRATED);
            a.putLong(request);
            boolean moved = false;
            try {
                if (s == null) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("the worker has no session yet");
                }
                if (s.resume() == null) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("session " + s.id() + " cannot be migrated:"
                            + " it was not granted resume (its frontend could not follow it)");
                }
                io.gpusockets.backend.server.Migration.Result r = io.gpusockets.backend.server.Migration.run((id, uri) -> {
                    try {
                        Handshake.Moved.check(uri);
                        s.moved(uri); // MOVED to the frontend; the session ends once the front knows
                    } catch (IllegalArgumentException | IllegalStateException e) {
                        throw new io.gpusockets.backend.session.CheckpointRefused("cannot send session " + id + " to "
                                + uri + ": " + e.getMessage());
                    }
                }, s, target, frontend.isEmpty() ? null : frontend, psk,
                        (stage, done, total) -> progress(front, request, stage, done, total));
                moved = true;
                a.put(ControlMessages.OUTCOME_DONE);
                r.encode(a);
            } catch (io.gpusockets.backend.session.CheckpointRefused e) {
                a.put(ControlMessages.OUTCOME_REFUSED);
                ControlMessages.putString(a, String.valueOf(e.getMessage()), MESSAGE_CHARS);
            } catch (IOException | RuntimeException e) {
                a.put(ControlMessages.OUTCOME_FAILED);
                ControlMessages.putString(a, "migration of session " + (s == null ? "?" : s.id()) + " failed in worker pid "
                        + ProcessHandle.current().pid() + ": " + e.getMessage(), MESSAGE_CHARS);
            }
            front.send(a);
            if (moved) {
                LOG.log(Level.INFO, "session " + s.id() + " migrated to " + target + " from worker pid "
                        + ProcessHandle.current().pid());
                s.end("moved to " + goesTo); // after MIGRATED: this worker exits with its session
            }
        });
    }

    /** Serves {@code s} (its figures sent to the front once a second) until it ends; returns the exit status. */
    private static int serve(Session s, SessionTicket t, FrontTenantAccount tenant, Connection control,
                             BackendSettings settings) {
        // The session's figures for the front's `gpusockets status` and metrics, once a second while it lives.
        Thread.ofPlatform().daemon().name("gpusockets-worker-stats").start(() -> {
            while (!s.ended() && sendStats(s, tenant)) {
                try {
                    Thread.sleep(STATS_MILLIS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        long idleSeconds = settings.serverLimits().idleTimeoutSeconds();
        if (idleSeconds > 0) { // --idle-timeout, as the front applies it to the sessions it serves itself
            long period = Math.min(1000, TimeUnit.SECONDS.toMillis(idleSeconds) / 2);
            Thread.ofPlatform().daemon().name("gpusockets-worker-idle").start(() -> {
                while (!s.ended()) {
                    try {
                        Thread.sleep(period);
                    } catch (InterruptedException e) {
                        return;
                    }
                    if (s.idleNanos(System.nanoTime()) >= TimeUnit.SECONDS.toNanos(idleSeconds)) {
                        s.expire("idle for " + idleSeconds + " s (no frame received, no call running)");
                    }
                }
            });
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> s.end("backend shutting down"), "gpusockets-worker-stop"));
        LOG.log(Level.INFO, "session " + t.sessionId() + " started in worker pid " + ProcessHandle.current().pid()
                + ", peer " + t.peer().description() + ", tenant " + t.tenant());
        s.serve();
        sendStats(s, tenant); // its last figures: the front folds them into its tenant's totals
        control.close();
        return 0;
    }

    /**
     * A RESUME message: the connection of a frontend resuming this worker's session (the front checked its
     * token and identity and sent WELCOME); the session attaches it, with the ring's shared window where the
     * WELCOME granted it (the ticket's features), or it is closed when the session cannot take it (not waiting
     * for one, or ended).
     */
    private static void resume(Session s, ByteBuffer m, java.util.List<Integer> fds) throws IOException {
        SessionTicket next = SessionTicket.decode(m);
        Connection c = HandedConnection.adopt(m, next, fds);
        try {
            c.platformThreadsOnly();
        } catch (IOException | RuntimeException e) {
            c.close();
            LOG.log(Level.WARNING, "session " + next.sessionId() + ": resuming connection from " + next.peer().description()
                    + " not taken: " + e.getMessage());
            return;
        }
        SharedWindow window = (next.features() & Handshake.FEATURE_WINDOW) != 0 ? c.takeSharedWindow().orElse(null) : null;
        boolean ok = s.attach(new FrameChannel(c), window);
        if (!ok) {
            c.close();
            LOG.log(Level.WARNING, "session " + next.sessionId() + ": resuming connection from " + next.peer().description()
                    + " refused: the session is not waiting for one");
        }
    }

    /** How often a worker tells the front its session's figures. */
    static final long STATS_MILLIS = 1000;

    /** Sends one STATS message with the session's figures now; false when the front is gone. */
    static boolean sendStats(Session s, FrontTenantAccount front) {
        long now = System.nanoTime();
        s.stats().sample(now);
        ByteBuffer m = ControlMessages.start(ControlMessages.STATS);
        io.gpusockets.backend.status.SessionFigures.of(s, now).encode(m);
        return front.send(m);
    }

    /** Makes a session over a connection that is already gone: it loads and initialises what every session uses. */
    private static void warmUp(DriverHost host, BackendSettings settings) {
        Connection gone = new Connection() {
            @Override
            public void write(ByteBuffer... srcs) throws IOException {
                throw new IOException("warm-up");
            }

            @Override
            public void readFully(ByteBuffer dst) throws IOException {
                throw new java.io.EOFException("warm-up");
            }

            @Override
            public io.gpusockets.protocol.transport.PeerInfo peer() {
                return io.gpusockets.protocol.transport.PeerInfo.of("warm-up");
            }

            @Override
            public void close() {
            }
        };
        // made, never served: its dispatcher, lanes and tables are loaded; it holds nothing of the driver's
        new Session(0, new FrameChannel(gone), host, settings, "warm-up", false, null, null,
                new io.gpusockets.backend.tenant.Tenant("warm-up", io.gpusockets.backend.tenant.TenantLimits.UNLIMITED));
    }
}
