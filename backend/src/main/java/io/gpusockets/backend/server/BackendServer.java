package io.gpusockets.backend.server;

import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.ContextPool;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.RateLimitedLog;
import io.gpusockets.backend.session.ServerLimits;
import io.gpusockets.backend.session.Session;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.backend.status.ServerSnapshot;
import io.gpusockets.backend.status.SessionSnapshot;
import io.gpusockets.backend.status.StatusBoard;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.SharedWindow;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import io.gpusockets.protocol.wire.FrameChannel;
import io.gpusockets.protocol.wire.FrameHeader;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import io.gpusockets.protocol.wire.ProtocolException;
import java.io.IOException;
import java.lang.System.Logger.Level;
import java.nio.ByteBuffer;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The backend: listens on one or more transport URIs, runs the handshake with each frontend and
 * serves it as a {@link Session} on its own thread. A failing session never affects another.
 * What peers can make it hold is bounded by {@link ServerLimits}: connections (closed at once past the
 * cap), handshakes in progress ({@link Handshakes} drops the oldest), sessions (refused past the cap),
 * and idle sessions (ended after the idle timeout); failed accepts are retried, never fatal. A new backend may take
 * this one over ({@link #handOffTo} here, {@link #takeOver} there; {@link io.gpusockets.backend.isolation.TakeOver}):
 * listeners and workers' sessions move, then each session of this process that can be handed over ({@link HandOver};
 * sessions that share IPC memory or events together, {@link #handOverGroup}); the rest stay until they end
 * ({@link #takenOver()}).
 */
public final class BackendServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    /** The first pause after a failed accept; it doubles while accepts keep failing. */
    static final long ACCEPT_BACKOFF_MIN_MILLIS = 10;
    static final long ACCEPT_BACKOFF_MAX_MILLIS = 1000;
    /** Listener schemes whose peers' uid the kernel proves (SO_PEERCRED): where {@code --allow-uid} applies. */
    static final Set<String> UID_SCHEMES = Set.of("unix", "ring", "fdunix");
    /**
     * Listener schemes whose connections' reads park a virtual thread without holding its carrier (JDK
     * socket channels; the vsock module's poller): their handshakes run on virtual threads. The ring polls
     * shared memory and vchan polls natively, so theirs run on platform threads.
     */
    static final Set<String> VIRTUAL_THREAD_SCHEMES = Set.of("tcp", "unix", "vsock", "fdunix");

    private final DriverHost host;
    private final BackendSettings settings;
    /** Contexts made ahead for sessions, or null. */
    private final ContextPool contextPool;
    private final List<Listener> listeners = new ArrayList<>();
    /** Each listener's accept thread. */
    private final Map<Listener, Thread> acceptThreads = new ConcurrentHashMap<>();
    /** Listeners let go of for a backend that took this one over: their accept loops end. */
    private final Set<Listener> handedListeners = ConcurrentHashMap.newKeySet();
    /** Connections accepted whose handshake has not ended yet (a take-over waits for them). */
    private final AtomicInteger admitting = new AtomicInteger();
    /** Set when another backend asks to take this one over ({@link #handOffTo}); never cleared once it went ahead. */
    private final java.util.concurrent.atomic.AtomicBoolean takingOver = new java.util.concurrent.atomic.AtomicBoolean();
    /** Taken over: serving only the sessions of this process until they end, then {@link #onTakenOver}'s hook runs. */
    private volatile boolean handedOff;
    private volatile java.util.function.Consumer<io.gpusockets.backend.isolation.TakeOver.Summary> takenOverHook = summary -> { };
    /** Take-overs this backend made (it took another over), and the sessions it adopted by them. */
    private final java.util.concurrent.atomic.LongAdder takeOvers = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder adoptedSessions = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder takeOverBytes = new java.util.concurrent.atomic.LongAdder();
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();
    private final java.util.concurrent.atomic.LongAdder windowBytes = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder resumedWindowBytes = new java.util.concurrent.atomic.LongAdder();
    /** The counter of the next session id ({@link io.gpusockets.backend.session.SessionIds}). */
    private final AtomicLong nextSessionId = new AtomicLong(1);
    /** {@code --fleet-id}: the fleet id in the session ids this backend issues. */
    private volatile int fleetId;
    private final SecureRandom random = new SecureRandom();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-handshake-timer").factory());
    private volatile boolean closed;
    /** Set by {@link #drainTo}: new sessions, restores and incoming migrations are refused; resumes still come in. */
    private volatile boolean draining;
    private final ServerLimits serverLimits;
    /** Connections held: accepted and not yet closed. */
    private final AtomicInteger connections = new AtomicInteger();
    /** Sessions welcomed or about to be: reserved at the handshake, released when the session ends. */
    private final AtomicInteger sessionSlots = new AtomicInteger();
    private final Handshakes handshakes;
    /** Connections closed or refused at the door, and failed handshakes: what unauthenticated peers cause. */
    private final RateLimitedLog refusals = new RateLimitedLog(LOG, "backend", "refused or failed connections");
    /** Who each peer is and what it may hold ({@code --tenants}); one unlimited "default" tenant without a file. */
    private final TenantRegistry tenants;
    private final StatusBoard status;

    /** Isolation mode process: the worker processes that serve sessions after the handshake, else null. */
    private volatile io.gpusockets.backend.isolation.Workers workers;
    /** IPC and shareable handles between sessions of one tenant (issue 24 item 1), whatever the isolation mode. */
    private final io.gpusockets.backend.session.ShareRegistry shares = io.gpusockets.backend.session.ShareRegistry.configured();
    /** Sessions that may be resumed, by their token in hex. */
    private final Map<String, Session> resumable = new ConcurrentHashMap<>();
    /**
     * Sessions that moved to another backend ({@link #sessionMoved}), by their token in hex: a resume with the token
     * (by the identity it was issued to) is answered MOVED with where it went, for the session's grace period; at most
     * {@link #MAX_MOVED_REMEMBERED}, the oldest forgotten first.
     */
    private final Map<String, MovedSession> moved = new ConcurrentHashMap<>();
    /** Bound of {@link #moved}. */
    static final int MAX_MOVED_REMEMBERED = 4096;

    private record MovedSession(String uri, String identity, long untilNanos) {
    }

    /** Tokens sent in a WELCOME whose session is not yet in {@link #resumable} (a resume may arrive that soon). */
    private final Set<String> issuing = ConcurrentHashMap.newKeySet();
    /** How long a session whose connection was lost waits for its frontend to resume; zero: no resume. */
    private volatile java.time.Duration resumeGrace = java.time.Duration.ofSeconds(RESUME_GRACE_SECONDS_DEFAULT);
    /** Bytes of replies a resumable session keeps until acknowledged. */
    private volatile long resumeRetainBytes = 8L << 20;
    private final java.util.concurrent.atomic.LongAdder resumeRefusals = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder resumes = new java.util.concurrent.atomic.LongAdder();
    /** Checkpoints and restores by outcome: done, refused, failed ({@link ServerSnapshot.Operations}). */
    private final java.util.concurrent.atomic.LongAdder[] checkpoints = adders(3), restores = adders(3);
    /** Migrations from here by result (done, refused, failed), and the memory bytes they sent. */
    private final java.util.concurrent.atomic.LongAdder[] migrations = adders(3);
    private final java.util.concurrent.atomic.LongAdder migrationBytes = new java.util.concurrent.atomic.LongAdder();
    /** Moves from here that completed (migrations and hand-overs), and the sum of their downtimes in nanoseconds. */
    private final java.util.concurrent.atomic.LongAdder downtimes = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder downtimeNanos = new java.util.concurrent.atomic.LongAdder();
    /** Sessions migrating from here now. */
    private final Set<Long> migrating = ConcurrentHashMap.newKeySet();
    private volatile boolean acceptMigrations;
    private volatile long migrationBufferBytes = 256L << 20;

    /** Default of {@code --resume-grace}. */
    public static final int RESUME_GRACE_SECONDS_DEFAULT = 60;

    /**
     * Sessions whose connection is lost wait this long for their frontend to resume them (the frontend asks
     * for it), unless their tenant sets its own {@code resume-grace}. Zero
     * turns resume off.
     */
    public void resumeGrace(java.time.Duration grace) {
        this.resumeGrace = grace;
    }

    /**
     * The fleet id ({@code --fleet-id}, 0 to {@value io.gpusockets.backend.session.SessionIds#MAX_FLEET}, default 0)
     * this backend puts in the ids of the sessions it starts from now on
     * ({@link io.gpusockets.backend.session.SessionIds}), and so in their address windows' bases: backends of a fleet
     * with distinct fleet ids issue distinct ids. Set it before the first session.
     */
    public void fleetId(int fleet) {
        io.gpusockets.backend.session.SessionIds.of(fleet, 0); // checks the range
        this.fleetId = fleet;
    }

    /** Bytes of unacknowledged replies a resumable session keeps ({@link Session.Resume}); a resume needing more is refused. */
    public void resumeRetainBytes(long bytes) {
        this.resumeRetainBytes = bytes;
    }

    /** Resume attempts refused (unknown, expired or guessed token, another identity). */
    public long resumeRefusals() {
        return resumeRefusals.sum();
    }

    /** Connections that resumed a session. */
    public long resumesAccepted() {
        return resumes.sum();
    }

    /** Isolation mode shared: each tenant's one context per device, else null. */
    private volatile io.gpusockets.backend.session.SharedContexts sharedContexts;

    public BackendServer(DriverHost host, BackendSettings settings) {
        this(host, settings, TenantRegistry.unconfigured());
    }

    public BackendServer(DriverHost host, BackendSettings settings, TenantRegistry tenants) {
        this.tenants = tenants;
        this.host = host;
        this.settings = settings;
        this.contextPool = settings.warmContexts() > 0 ? new ContextPool(host, settings.warmContexts()) : null;
        this.serverLimits = settings.serverLimits();
        this.handshakes = new Handshakes(serverLimits.maxHandshakes(), dropped -> refusals.log(Level.WARNING,
                () -> "handshake of " + dropped.peer().description() + " dropped to make room: "
                        + serverLimits.maxHandshakes() + " in progress (the maximum)"));
        this.status = new StatusBoard(host, sessions, connections::get, tenants::tenants);
        status.operations(() -> new ServerSnapshot.Operations(checkpoints[0].sum(), checkpoints[1].sum(), checkpoints[2].sum(),
                restores[0].sum(), restores[1].sum(), restores[2].sum(), resumes.sum(), resumeRefusals.sum(),
                migrations[0].sum(), migrations[1].sum(), migrations[2].sum(), migrationBytes.sum(), takeOvers.sum(),
                adoptedSessions.sum(), takeOverBytes.sum(), downtimes.sum(), downtimeNanos.sum()));
        status.migrating(migrating::contains);
        status.shares(shares::count);
        timers.scheduleAtFixedRate(status::sample, 1, 1, TimeUnit.SECONDS);
        if (NativeHeapTrim.available()) {
            timers.scheduleWithFixedDelay(NativeHeapTrim::trim, NativeHeapTrim.INTERVAL_SECONDS,
                    NativeHeapTrim.INTERVAL_SECONDS, TimeUnit.SECONDS);
        }
        if (serverLimits.idleTimeoutSeconds() > 0) {
            long period = Math.min(1000, TimeUnit.SECONDS.toMillis(serverLimits.idleTimeoutSeconds()) / 2);
            timers.scheduleWithFixedDelay(this::closeIdleSessions, period, period, TimeUnit.MILLISECONDS);
        }
    }

    /** The tenants (reloadable: {@link TenantRegistry#reload()}). */
    public TenantRegistry tenants() {
        return tenants;
    }

    public DriverHost host() {
        return host;
    }

    /** Binds a listener and starts accepting on it; returns the address clients use. */
    public synchronized TransportUri listen(TransportUri uri) throws IOException {
        return listen(uri, io.gpusockets.protocol.transport.TransportOptions.NONE);
    }

    /** As {@link #listen(TransportUri)}, with options for the transport (certificates for tls://). */
    public synchronized TransportUri listen(TransportUri uri, io.gpusockets.protocol.transport.TransportOptions options)
            throws IOException {
        Listener l = Transports.listen(uri, options);
        serve(l);
        LOG.log(Level.INFO, "listening on " + l.address() + " (" + host.description() + ")");
        return l.address();
    }

    /** Accepts on {@code l} from now on (it is closed with this server). */
    private synchronized void serve(Listener l) {
        listeners.add(l);
        acceptThreads.put(l, Thread.ofPlatform().daemon().name("gpusockets-accept-" + l.address().scheme()).start(() -> acceptLoop(l)));
    }

    public synchronized List<TransportUri> addresses() {
        return listeners.stream().map(Listener::address).toList();
    }

    public int sessionCount() {
        io.gpusockets.backend.isolation.Workers w = workers;
        return sessions.size() + (w == null ? 0 : w.serving());
    }

    /** The isolation mode this server runs: "process", "shared" or "context" (a take-over needs both alike). */
    public String isolationName() {
        return workers != null ? "process" : sharedContexts != null ? "shared" : "context";
    }

    /** Whether this backend was taken over and serves only its own in-process sessions until they end. */
    public boolean takenOver() {
        return handedOff;
    }

    /**
     * Who is told once this backend was taken over ({@link #handOffTo}) and the last session it serves itself ended:
     * the CLI exits then.
     */
    public void onTakenOver(java.util.function.Consumer<io.gpusockets.backend.isolation.TakeOver.Summary> then) {
        this.takenOverHook = then;
    }

    /**
     * The old backend's side of a take-over ({@link io.gpusockets.backend.isolation.TakeOver}): asked on the admin
     * socket by a user allowed there, whose take-over socket is {@code socket} (it must belong to {@code requester}).
     * Refused (nothing changed) when this backend is being taken over already, runs another isolation than
     * {@code isolation}, or runs a checkpoint, restore or migration. Then: stops accepting (listening sockets kept for
     * the new backend), lets accepted handshakes finish, hands every worker and listener over, then each session of
     * this process that can be handed over ({@link #handOverSessions}), and keeps serving the rest (draining) until
     * they end, when {@link #onTakenOver} runs.
     */
    public io.gpusockets.backend.isolation.TakeOver.Summary handOffTo(java.nio.file.Path socket, String isolation,
                                                                      java.nio.file.attribute.UserPrincipal requester)
            throws IOException {
        if (!takingOver.compareAndSet(false, true)) {
            throw new IOException("this backend is being taken over already");
        }
        Connection to = null;
        try {
            String mine = isolationName();
            if (!mine.equals(isolation)) {
                throw new IOException("isolation mismatch: this backend runs isolation " + mine + ", the new one " + isolation
                        + " (start it with --isolation " + mine + ")");
            }
            if (draining) {
                throw new IOException("this backend is moving its sessions to another backend (--drain-to)");
            }
            io.gpusockets.backend.isolation.Workers w = workers;
            if (w != null && w.busy() || !migrating.isEmpty()) {
                throw new IOException("a checkpoint, restore or migration runs: take over when it is done");
            }
            if (!socket.isAbsolute()) {
                throw new IOException("the take-over socket must be an absolute path: " + socket);
            }
            java.nio.file.attribute.UserPrincipal owner = java.nio.file.Files.getOwner(socket, java.nio.file.LinkOption.NOFOLLOW_LINKS);
            if (requester != null && !owner.equals(requester)) {
                throw new IOException("the take-over socket " + socket + " belongs to " + owner.getName() + ", not to the requester "
                        + requester.getName());
            }
            to = Transports.connect(TransportUri.parse("fdunix://" + socket), java.time.Duration.ofSeconds(10));
        } catch (IOException | RuntimeException e) {
            takingOver.set(false);
            throw e instanceof IOException io ? io : new IOException(e.toString(), e);
        }
        try {
            return handOff(to);
        } finally {
            to.close();
        }
    }

    private io.gpusockets.backend.isolation.TakeOver.Summary handOff(Connection to) throws IOException {
        long began = System.nanoTime();
        // 1. stop accepting; the listening sockets stay bound (their copies go to the new backend), so a program that
        // connects meanwhile waits in the backlog and is accepted there
        List<io.gpusockets.backend.isolation.TakeOver.ListenerFd> passed = new ArrayList<>();
        List<Listener> mine;
        synchronized (this) {
            mine = List.copyOf(listeners);
            listeners.clear();
        }
        io.gpusockets.backend.isolation.Workers w = workers;
        List<io.gpusockets.backend.isolation.Workers.Handed> handed = List.of();
        int kept = 0;
        long bytes;
        try {
            for (Listener l : mine) {
                handedListeners.add(l);
                java.util.OptionalInt fd = listeningDescriptor(l);
                if (fd.isPresent()) {
                    passed.add(new io.gpusockets.backend.isolation.TakeOver.ListenerFd(l.address(),
                            io.gpusockets.transport.vsock.DescriptorPassing.duplicate(fd.getAsInt())));
                    l.closeLeavingSocket();
                } else {
                    l.close();
                    LOG.log(Level.WARNING, "take-over: listener " + l.address() + " cannot be handed over (only tcp:// and unix://"
                            + " listening sockets cross): closed; the new backend listens on it anew where its --listen names it");
                }
            }
            for (Listener l : mine) {
                Thread t = acceptThreads.remove(l);
                if (t != null) {
                    try {
                        t.join(TimeUnit.SECONDS.toMillis(5));
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }
            // 2. connections accepted before: their handshakes end here (handed to a worker, or a session of this process)
            LOG.log(Level.INFO, "take-over: stopped accepting (" + passed.size() + " listening socket(s) kept for the new"
                    + " backend), " + admitting.get() + " handshake(s) in progress to finish first");
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.handshakeMillis() + 1000);
            while (admitting.get() > 0 && System.nanoTime() < deadline) {
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            // 3. the workers, marked; idle ones stopped
            if (w != null) {
                handed = w.handOff(java.time.Duration.ofSeconds(10));
            }
            // 4. sessions this process serves (isolation context or shared; in process: workers whose connection this
            // process relays): handed over after DONE where they can be (step 6), the rest stay here until they end
            kept = sessions.size() + (w == null ? 0 : w.serving());
            bytes = io.gpusockets.backend.isolation.TakeOver.give(to, passed, handed, ProcessHandle.current().pid(),
                    nextSessionId.get(), kept);
        } catch (IOException | RuntimeException e) {
            // the new backend failed before it answered (or this one could not hand something): this one goes on as it
            // was, with the same sockets and workers
            takeBack(passed, handed, w);
            throw new IOException("take-over failed, this backend serves on: " + e.getMessage(), e);
        }
        // 5. let go of our copies: the new backend holds the sockets
        passed.forEach(p -> io.gpusockets.transport.vsock.DescriptorPassing.close(p.fd()));
        if (w != null) {
            w.release(handed);
        }
        handedOff = true;
        long handedAt = System.nanoTime();
        // 6. the sessions of this process, each that can be handed over by shareable handles (HandOver, one after another
        // on the take-over connection): their frontends resume at the addresses they used, which the new backend serves
        HandedOver moved = handOverSessions(to, w, kept);
        kept = moved.kept();
        status.note(" (taken over by another backend: draining, serving only the sessions of this process until they end)");
        var summary = new io.gpusockets.backend.isolation.TakeOver.Summary(ProcessHandle.current().pid(), passed.size(),
                handed.size(), kept, bytes, moved.sessions(), moved.handedBytes(), moved.copiedBytes(), 0, 0, 0);
        LOG.log(Level.INFO, "taken over: handed " + handed.size() + " session(s) in workers and " + passed.size()
                + " listener(s) in " + TimeUnit.NANOSECONDS.toMillis(handedAt - began) + " ms, " + bytes
                + " bytes on the take-over connection; handed over " + moved.sessions() + " session(s) of this process ("
                + moved.handedBytes() + " bytes of device memory mapped there, " + moved.copiedBytes() + " bytes copied,"
                + " longest pause " + TimeUnit.NANOSECONDS.toMillis(moved.longestPauseNanos()) + " ms) in "
                + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - handedAt) + " ms; " + (kept == 0 ? "exiting"
                : "serving the " + kept + " session(s) of this process until they end (draining)"));
        Thread.ofPlatform().daemon().name("gpusockets-drain").start(() -> {
            try {
                Thread.sleep(200); // the admin socket answers the new backend first
                while (!sessions.isEmpty() || w != null && w.serving() > 0) {
                    Thread.sleep(100);
                }
            } catch (InterruptedException e) {
                return;
            }
            if (summary.sessionsKept() > 0) {
                LOG.log(Level.INFO, "taken over: the last session of this process ended");
            }
            takenOverHook.accept(summary);
        });
        return summary;
    }

    /** What step 6 of a take-over did: sessions handed over, their bytes mapped and copied, the longest pause, kept. */
    private record HandedOver(int sessions, long handedBytes, long copiedBytes, long longestPauseNanos, int kept) {
    }

    /**
     * A take-over's step 6, after the new backend's DONE: each session of this process that can be (resumable,
     * address-stable memory on devices that export POSIX descriptors; isolation context or shared) is handed over on
     * {@code to} ({@link HandOver}, announced by {@link io.gpusockets.backend.isolation.TakeOver#handOverNext}), and its
     * frontend resumes at the address it used; sessions that share IPC memory or events ({@link
     * io.gpusockets.backend.session.ShareRegistry#group}) are handed over together, as one group ({@link #handOverGroup},
     * announced by its first session), after the sessions alone. A session or group that cannot be handed over (checked
     * before anything of it is sent: {@link HandOver#check}, a migration of it running, what a group move does not
     * carry) stays here until it ends, logged with why, and the rest go on. The first hand-over that fails once
     * announced ends them (the connection's state is not known then): it and the sessions not handed yet stay (so does
     * a group whose target turned out not to take groups, an older backend); one that takes longer than
     * {@link io.gpusockets.backend.isolation.TakeOver#STEP_TIMEOUT} fails (the connection is closed, the drain let go).
     * Ends with FINISHED (what moved, how many stay), unless a hand-over failed.
     */
    private HandedOver handOverSessions(Connection to, io.gpusockets.backend.isolation.Workers w, int keptBefore) {
        int n = 0;
        long handedBytes = 0, copiedBytes = 0, longest = 0;
        List<Session> mine = w != null ? List.of() : List.copyOf(sessions);
        // the sessions alone first, then each group of sessions that share (a target that takes no groups ends there)
        List<List<Long>> units = new ArrayList<>();
        List<List<Long>> groups = new ArrayList<>();
        java.util.Set<Long> placed = new java.util.HashSet<>();
        for (Session s : mine) {
            if (placed.contains(s.id())) {
                continue;
            }
            List<Long> group = List.copyOf(shares.group(java.util.Set.of(s.id())));
            placed.addAll(group);
            (group.size() == 1 ? units : groups).add(group);
        }
        units.addAll(groups);
        boolean open = true;
        for (List<Long> unit : units) {
            List<Session> members = new ArrayList<>();
            String why = null;
            for (long id : unit) {
                Session s = session(id);
                if (s == null) {
                    why = unit.size() == 1 ? "" : "session " + id + " of its group is not served here (ended)";
                    break;
                }
                members.add(s);
            }
            if ("".equals(why)) {
                continue; // it ended meanwhile (one that ends during its hand-over fails it, ending the hand-overs)
            }
            String who = unit.size() == 1 ? "session " + unit.getFirst() : "sessions " + unit + " (they share IPC memory"
                    + " or events)";
            if (why == null) {
                try {
                    for (Session s : members) {
                        HandOver.check(s, members.size() > 1);
                        if (migrating.contains(s.id())) {
                            throw new io.gpusockets.backend.session.CheckpointRefused("a checkpoint or migration of"
                                    + " session " + s.id() + " runs");
                        }
                    }
                    if (members.size() > HandOver.MAX_GROUP) {
                        throw new io.gpusockets.backend.session.CheckpointRefused("a group hand-over carries at most "
                                + HandOver.MAX_GROUP + " sessions");
                    }
                    if (members.size() > 1) {
                        io.gpusockets.backend.session.GroupCheckpoint.checkTogether(members, shares, "hand-over",
                                "gpusockets migrate %s --hand-over-to ADMIN_SOCKET");
                    } else {
                        notSharing(unit.getFirst(), "handed over"); // one that began sharing since
                    }
                } catch (io.gpusockets.backend.session.CheckpointRefused e) {
                    why = e.getMessage();
                }
            }
            if (why != null) {
                LOG.log(Level.WARNING, "take-over: " + who + (unit.size() == 1 ? " stays" : " stay") + " here until"
                        + (unit.size() == 1 ? " it ends: " : " they end: ") + why);
                continue;
            }
            java.util.concurrent.atomic.AtomicBoolean over = new java.util.concurrent.atomic.AtomicBoolean();
            java.util.concurrent.CompletableFuture.delayedExecutor(io.gpusockets.backend.isolation.TakeOver.STEP_TIMEOUT
                    .toMillis(), TimeUnit.MILLISECONDS).execute(() -> {
                        if (!over.get()) {
                            to.close(); // a new backend that hangs does not hold the drained sessions for ever
                        }
                    });
            try {
                io.gpusockets.backend.isolation.TakeOver.handOverNext(to, unit.getFirst());
                List<HandOver.Result> rs = handOverGroup(unit, to, HandOver.SAME_ADDRESS, null);
                over.set(true);
                for (HandOver.Result r : rs) {
                    n++;
                    handedBytes += r.handedBytes();
                    copiedBytes += r.copiedBytes();
                    longest = Math.max(longest, r.downtimeNanos());
                }
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                over.set(true);
                LOG.log(Level.WARNING, "take-over: " + who + " could not be handed over (" + e.getMessage()
                        + "): it and the sessions not handed over yet stay here until they end");
                open = false;
                break;
            }
        }
        int kept = Math.max(0, keptBefore - n);
        if (open) {
            try {
                io.gpusockets.backend.isolation.TakeOver.finished(to, n, handedBytes, copiedBytes, kept);
            } catch (IOException e) {
                LOG.log(Level.WARNING, "take-over: the new backend was not told that the hand-overs ended: " + e.getMessage());
            }
        }
        return new HandedOver(n, handedBytes, copiedBytes, longest, kept);
    }

    /** A take-over that failed: serves the listening sockets and the workers again, ready to be taken over anew. */
    private void takeBack(List<io.gpusockets.backend.isolation.TakeOver.ListenerFd> passed,
                          List<io.gpusockets.backend.isolation.Workers.Handed> handed, io.gpusockets.backend.isolation.Workers w) {
        if (w != null) {
            w.takeBack(handed);
        }
        for (io.gpusockets.backend.isolation.TakeOver.ListenerFd p : passed) {
            try {
                serve(io.gpusockets.transport.vsock.DescriptorPassing.adoptListener(p.fd(), p.uri()));
            } catch (IOException | RuntimeException e) {
                LOG.log(Level.ERROR, "take-over failed and listener " + p.uri() + " cannot be served again: " + e.getMessage());
            }
        }
        LOG.log(Level.WARNING, "take-over failed before the new backend answered: serving on with " + handed.size()
                + " session(s) in workers and " + passed.size() + " listener(s) taken back");
        takingOver.set(false);
    }

    /** The descriptor of {@code l}'s listening socket, where it can cross to another process. */
    private static java.util.OptionalInt listeningDescriptor(Listener l) throws IOException {
        String scheme = l.address().scheme();
        if (!scheme.equals("tcp") && !scheme.equals("unix")) {
            return java.util.OptionalInt.empty(); // what the new backend can serve from a descriptor
        }
        java.util.OptionalInt own = io.gpusockets.transport.vsock.DescriptorPassing.listenerDescriptor(l);
        if (own.isPresent() || l.serverChannel().isEmpty()) {
            return own;
        }
        return io.gpusockets.transport.vsock.DescriptorPassing.findListeningSocket(l.serverChannel().get().getLocalAddress());
    }

    /**
     * The new backend's side of a take-over, once the old backend connected ({@link
     * io.gpusockets.backend.isolation.TakeOver#ask}): receives, adopts every worker (its tenant charged with what it
     * holds: a tenant this backend's tenants file does not name keeps the limits it had, as a tenant of its own,
     * logged), serves the listeners, and answers DONE; then receives each session the old backend hands over from its
     * own process ({@link HandOver#receive}, no {@code --accept-migrations} needed) until FINISHED. Sessions ids issued
     * from then on follow the old backend's.
     */
    public io.gpusockets.backend.isolation.TakeOver.Summary takeOver(io.gpusockets.backend.isolation.TakeOver.Request request)
            throws IOException {
        long t0 = System.nanoTime();
        io.gpusockets.backend.isolation.TakeOver.Received r = io.gpusockets.backend.isolation.TakeOver.take(request.from());
        long received = System.nanoTime();
        io.gpusockets.backend.isolation.Workers w = workers;
        if (w == null && !r.workers().isEmpty()) {
            r.workers().forEach(x -> io.gpusockets.transport.vsock.DescriptorPassing.close(x.fd()));
            r.listeners().forEach(x -> io.gpusockets.transport.vsock.DescriptorPassing.close(x.fd()));
            throw new IOException("the old backend handed workers to a backend without isolation process");
        }
        nextSessionId.accumulateAndGet(r.nextSessionCounter(), Math::max);
        int adopted = 0;
        for (io.gpusockets.backend.isolation.TakeOver.ReceivedWorker x : r.workers()) {
            var h = x.handed();
            String name = h.ticket().tenant();
            Tenant t = tenants.tenant(name);
            if (t == null) {
                t = new Tenant(name, h.ticket().limits());
                LOG.log(Level.WARNING, "take-over: session " + h.ticket().sessionId() + " belongs to tenant " + name + ", which"
                        + " this backend's tenants file does not name: it keeps the limits it had, charged apart ("
                        + h.memoryBytes() + " bytes of device memory held)");
            }
            Tenant tenant = t;
            tenant.adoptSession(h.memoryBytes(), h.pinnedBytes());
            sessionSlots.incrementAndGet();
            Runnable ended = () -> {
                sessionSlots.decrementAndGet();
                tenant.closeSession();
            };
            try {
                w.adopt(h, x.fd(), tenant, ended, r.fromPid());
                adopted++;
            } catch (IOException e) {
                tenant.releaseMemory(h.memoryBytes());
                tenant.releasePinned(h.pinnedBytes());
                ended.run();
                LOG.log(Level.WARNING, "take-over: " + e.getMessage());
            }
        }
        for (io.gpusockets.backend.isolation.TakeOver.ListenerFd l : r.listeners()) {
            Listener listener;
            try {
                listener = io.gpusockets.transport.vsock.DescriptorPassing.adoptListener(l.fd(), l.uri());
            } catch (IOException | RuntimeException e) {
                LOG.log(Level.ERROR, "take-over: cannot serve listener " + l.uri() + " received from pid " + r.fromPid() + ": "
                        + e.getMessage() + " (listen on it with --listen)"); // the adopted sessions are served all the same
                continue;
            }
            serve(listener);
            LOG.log(Level.INFO, "listening on " + listener.address() + " (taken over from pid " + r.fromPid() + ")");
        }
        io.gpusockets.backend.isolation.TakeOver.done(request.from(), r.bytes());
        takeOvers.increment();
        adoptedSessions.add(adopted);
        takeOverBytes.add(r.bytes());
        long doneAt = System.nanoTime();
        // the old backend's own sessions: each it can hand over comes now, one after another, then FINISHED
        int handedIn = 0;
        io.gpusockets.backend.isolation.TakeOver.Next end = null;
        while (end == null) {
            io.gpusockets.backend.isolation.TakeOver.Next next;
            try {
                next = io.gpusockets.backend.isolation.TakeOver.next(request.from());
            } catch (IOException e) {
                LOG.log(Level.WARNING, "take-over: the old backend hands no more sessions over (" + e.getMessage() + ")");
                break;
            }
            if (next.finished()) {
                end = next;
                break;
            }
            try {
                List<Long> ids = HandOver.receive(request.from(), this, HandOver.SAME_ADDRESS, true);
                handedIn += ids.size();
                adoptedSessions.add(ids.size());
                LOG.log(Level.INFO, "take-over: " + (ids.size() == 1 ? "session " + ids.getFirst() : "sessions " + ids
                        + " (sharing IPC memory or events, together)") + " of pid " + r.fromPid() + " handed over here");
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                LOG.log(Level.WARNING, "take-over: session " + next.sessionId() + " of pid " + r.fromPid() + " could not be"
                        + " handed over (" + e.getMessage() + "): it and the sessions after it stay there until they end");
                break;
            }
        }
        return new io.gpusockets.backend.isolation.TakeOver.Summary(r.fromPid(), r.listeners().size(), adopted,
                end != null ? end.sessionsKept() : Math.max(0, r.sessionsKept() - handedIn), r.bytes(), handedIn,
                end != null ? end.handedBytes() : 0, end != null ? end.copiedBytes() : 0, received - t0, doneAt - received,
                System.nanoTime() - doneAt);
    }

    /** Isolation mode shared: from now on the sessions of one tenant share one context per device. */
    public void shareContextsPerTenant() {
        this.sharedContexts = new io.gpusockets.backend.session.SharedContexts(host.driver());
    }

    /**
     * Isolation mode process: from now on every session, once through its handshake here, is served by one
     * of {@code w}'s worker processes, which {@link #close} stops.
     */
    public void handSessionsTo(io.gpusockets.backend.isolation.Workers w) {
        w.shares(shares);
        status.remoteSessions(w::sessions);
        w.reportEndsTo(status::ended);
        tenants.onReload(w::limitsChanged);
        this.workers = w;
    }

    /** The live sessions, by id ({@link StatusBoard#sessions}). */
    public List<SessionSnapshot> sessions() {
        return status.sessions();
    }

    /** Devices, tenants, sessions and traffic totals now ({@link StatusBoard#snapshot}); safe from any thread. */
    public ServerSnapshot snapshot() {
        return status.snapshot();
    }

    /** Connections held now: those in their handshake and those in session. */
    public int connectionCount() {
        return connections.get();
    }

    /** Handshakes in progress now. */
    public int handshakeCount() {
        return handshakes.count();
    }

    /**
     * Accepts until the server closes. Every failure is survived, whatever its cause (descriptors run out,
     * a thread cannot be made, the transport reports an error): it is logged, rate-limited, and accept is
     * retried after a pause that doubles from {@link #ACCEPT_BACKOFF_MIN_MILLIS} to
     * {@link #ACCEPT_BACKOFF_MAX_MILLIS} while failures go on, so the process keeps serving once the cause
     * is gone. Only {@link #close()} ends the loop.
     */
    private void acceptLoop(Listener l) {
        RateLimitedLog failures = new RateLimitedLog(LOG, "accept on " + l.address(), "accept failures");
        long backoff = 0;
        while (!closed && !handedListeners.contains(l)) {
            try {
                Connection c = l.accept();
                backoff = 0;
                start(c, l.address().scheme());
            } catch (IOException | RuntimeException | OutOfMemoryError e) {
                if (closed || handedListeners.contains(l)) {
                    return;
                }
                backoff = Math.min(Math.max(ACCEPT_BACKOFF_MIN_MILLIS, backoff * 2), ACCEPT_BACKOFF_MAX_MILLIS);
                String cause = e.getMessage() != null ? e.getMessage() : e.toString();
                long pause = backoff;
                failures.log(Level.WARNING, () -> "failed (" + cause + "); retrying in " + pause + " ms");
                try {
                    Thread.sleep(backoff);
                } catch (InterruptedException stop) {
                    return;
                }
            }
        }
    }

    /**
     * Takes an accepted connection on, unless {@link ServerLimits#maxConnections} are held already (then it
     * is closed at once). Its handshake runs on a thread of its own: a virtual one where the transport's
     * reads park without holding a carrier ({@link #VIRTUAL_THREAD_SCHEMES}), so that peers that connect and
     * say nothing cost no platform thread; a platform one elsewhere (those reads poll or block natively).
     */
    private void start(Connection c, String scheme) {
        int held = connections.incrementAndGet();
        if (held > serverLimits.maxConnections()) {
            connections.decrementAndGet();
            String peer = c.peer().description();
            c.close();
            refusals.log(Level.WARNING, () -> "connection from " + peer + " closed at once: "
                    + serverLimits.maxConnections() + " connections held (the maximum)");
            return;
        }
        try {
            Thread.Builder builder = VIRTUAL_THREAD_SCHEMES.contains(scheme)
                    ? Thread.ofVirtual().name("gpusockets-handshake")
                    : Thread.ofPlatform().daemon().name("gpusockets-handshake");
            admitting.incrementAndGet();
            builder.start(() -> handle(c, scheme));
        } catch (RuntimeException | OutOfMemoryError e) {
            admitting.decrementAndGet();
            connections.decrementAndGet();
            c.close();
            throw e;
        }
    }

    /** Runs the handshake, then the session: on a platform thread of its own when this one is virtual. */
    private void handle(Connection c, String scheme) {
        boolean handedOn = false;
        try {
            Session s;
            try {
                s = admit(c, scheme);
            } finally {
                admitting.decrementAndGet(); // handed to a worker by now, or a session of this process, or closed
            }
            if (s == null) {
                return;
            }
            if (!Thread.currentThread().isVirtual()) {
                handedOn = true;
                run(s);
                return;
            }
            try {
                // A platform thread: its blocking reads wake it directly, without the virtual-thread poller's extra hop.
                Thread.ofPlatform().daemon().name("gpusockets-session-" + s.id()).start(() -> run(s));
                handedOn = true;
            } catch (RuntimeException | OutOfMemoryError e) {
                s.end("no thread for the session: " + e);
                sessions.remove(s);
                sessionSlots.decrementAndGet();
            }
        } finally {
            if (!handedOn) {
                connections.decrementAndGet();
            }
        }
    }

    private void run(Session s) {
        try {
            s.serve();
        } finally {
            Session.Resume r = s.resume();
            if (r != null) {
                resumable.remove(java.util.HexFormat.of().formatHex(r.token()));
            }
            status.ended(s, () -> sessions.remove(s));
            shares.sessionEnded(s.id());
            sessionSlots.decrementAndGet();
            windowBytes.add(s.windowBytes());
            resumedWindowBytes.add(s.resumedWindowBytes());
            connections.decrementAndGet();
            if (s.tenant() instanceof Tenant t) {
                t.closeSession();
            }
        }
    }

    /** The handshake, bounded in time and in number; returns the session it starts, or null (connection closed). */
    private Session admit(Connection c, String scheme) {
        long id = io.gpusockets.backend.session.SessionIds.of(fleetId, nextSessionId.getAndIncrement());
        FrameChannel channel = new FrameChannel(c);
        String peer = c.peer().description();
        handshakes.begin(c);
        ScheduledFuture<?> timeout = timers.schedule(c::close, settings.handshakeMillis(), TimeUnit.MILLISECONDS);
        Admitted admitted;
        try {
            admitted = handshake(channel, c, id, scheme);
        } catch (java.io.EOFException e) {
            // a port probe or a client that gave up: nothing was said, nothing to warn about
            LOG.log(Level.DEBUG, "peer " + peer + " closed before its handshake");
            c.close();
            return null;
        } catch (IOException | RuntimeException e) {
            if (handshakes.end(c)) {
                refusals.log(Level.WARNING, () -> "handshake with " + peer + " failed: " + e.getMessage());
            }
            c.close();
            return null;
        } finally {
            timeout.cancel(false);
            handshakes.end(c);
        }
        if (admitted == RESUMED) {
            return null; // the connection now serves a session that was waiting for it
        }
        if (admitted == MIGRATING) {
            receiveMigration(channel, c);
            return null;
        }
        if (admitted == null) {
            c.close();
            return null;
        }
        try {
            // The handshake may have run on a virtual thread; the session's reader and lanes are platform
            // threads, which the transport may now let wait in the kernel (one system call per read).
            c.platformThreadsOnly();
        } catch (IOException | RuntimeException e) {
            refusals.log(Level.WARNING, () -> "session with " + peer + " not started: " + e.getMessage());
            sessionSlots.decrementAndGet();
            admitted.tenant().closeSession();
            forgetIssued(admitted);
            c.close();
            return null;
        }
        if (closed) {
            sessionSlots.decrementAndGet();
            admitted.tenant().closeSession();
            forgetIssued(admitted);
            c.close();
            return null;
        }
        int features = admitted.features();
        io.gpusockets.backend.isolation.Workers w = workers;
        if (w != null && channel.readAhead() > 0) {
            // a frontend waits for WELCOME before its first call: bytes already here would be lost to the worker
            refusals.log(Level.WARNING, () -> "session with " + peer + " not started: " + channel.readAhead()
                    + " bytes sent before the handshake's answer");
            sessionSlots.decrementAndGet();
            admitted.tenant().closeSession();
            forgetIssued(admitted);
            c.close();
            return null;
        }
        if (w != null) {
            // isolation mode process: a worker serves the session; the slot and the tenant's session go back when it ends
            Tenant t = admitted.tenant();
            Runnable ended = () -> {
                sessionSlots.decrementAndGet();
                t.closeSession();
            };
            var ticket = admitted.token() == null
                    ? new io.gpusockets.backend.isolation.SessionTicket(id, features, t.name(), t.limits(), c.peer())
                    : new io.gpusockets.backend.isolation.SessionTicket(id, features, t.name(), t.limits(), c.peer(),
                            admitted.token(), admitted.identity(), (int) admitted.grace().toSeconds(), resumeRetainBytes);
            ticket = ticket.withStableAddresses(settings.stableAddresses());
            if (admitted.managedRange() != null) {
                ticket = ticket.withManagedRange(admitted.managedRange()[0], admitted.managedRange()[1]);
            }
            boolean handed = w.handOver(c, ticket, t, ended);
            forgetIssued(admitted); // known to the workers from here, or never
            if (!handed) {
                ended.run();
            }
            return null;
        }
        // The shared window, when the frontend asked for it and this end of the connection has one too.
        SharedWindow window = (features & Handshake.FEATURE_WINDOW) != 0 ? c.takeSharedWindow().orElse(null) : null;
        Session s;
        try {
            s = new Session(id, channel, host, settings, peer, (features & Handshake.FEATURE_ASYNC) != 0, window,
                    contextPool, admitted.tenant());
            if (admitted.managedRange() != null) {
                s.managedRange(admitted.managedRange()[0], admitted.managedRange()[1]); // before its first call
            }
            if (admitted.token() != null) {
                s.resumable(new Session.Resume(admitted.token(), admitted.identity(), admitted.grace(), features,
                        resumeRetainBytes));
                resumable.put(java.util.HexFormat.of().formatHex(admitted.token()), s);
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            if (admitted.token() != null) {
                issuing.remove(java.util.HexFormat.of().formatHex(admitted.token()));
            }
            sessionSlots.decrementAndGet();
            admitted.tenant().closeSession();
            c.close();
            throw e;
        }
        if (admitted.token() != null) {
            issuing.remove(java.util.HexFormat.of().formatHex(admitted.token()));
        }
        try {
            s.deviceShare(tenants.deviceShare());
            s.shares(shares.broker(id, admitted.tenant().name()));
            if (sharedContexts != null) {
                s.shareContexts(sharedContexts);
            }
        } catch (RuntimeException | OutOfMemoryError e) {
            sessionSlots.decrementAndGet();
            admitted.tenant().closeSession();
            c.close();
            throw e;
        }
        status.started(s, c.peer().transport());
        sessions.add(s);
        LOG.log(Level.INFO, "session " + id + " started, peer " + peer + ", tenant " + admitted.tenant().name());
        return s;
    }

    /** Ends the sessions idle for {@link ServerLimits#idleTimeoutSeconds} (run by the timer). */
    private void closeIdleSessions() {
        long limit = TimeUnit.SECONDS.toNanos(serverLimits.idleTimeoutSeconds());
        long now = System.nanoTime();
        for (Session s : sessions) {
            if (s.idleNanos(now) >= limit) {
                s.expire("idle for " + serverLimits.idleTimeoutSeconds() + " s (no frame received, no call running)");
            }
        }
    }

    /**
     * Takes one of {@link ServerLimits#maxSessions} (in isolation mode process at most one per worker process
     * the backend may run); returns why none is left, or null when one was taken.
     */
    private String reserveSession() {
        io.gpusockets.backend.isolation.Workers w = workers;
        int max = w == null ? serverLimits.maxSessions() : Math.min(serverLimits.maxSessions(), w.max());
        while (true) {
            int n = sessionSlots.get();
            if (n >= max) {
                return max < serverLimits.maxSessions()
                        ? "no worker process for a new session: isolation mode process serves each session in a worker"
                        + " process of its own and all " + max + " the backend may run (--max-workers) serve sessions"
                        : "too many sessions: " + max + " in progress (the maximum)";
            }
            if (sessionSlots.compareAndSet(n, n + 1)) {
                return null;
            }
        }
    }

    /** Runs the handshake; returns the features granted (Handshake.FEATURE_*), or null when refused. */
    /** A peer let in: the features granted (Handshake.FEATURE_*) and its tenant, on which a session was opened. */
    private record Admitted(int features, Tenant tenant, byte[] token, String identity, java.time.Duration grace,
                            long[] managedRange) {
        /** {@code managedRange}: the guest's managed range {base, size} granted (FEATURE_MANAGED_RANGE), or null. */
        Admitted(int features, Tenant tenant, byte[] token, String identity, java.time.Duration grace) {
            this(features, tenant, token, identity, grace, null);
        }
    }

    private void forgetIssued(Admitted a) {
        if (a.token() != null) {
            issuing.remove(java.util.HexFormat.of().formatHex(a.token()));
        }
    }

    /** {@link #handshake}'s answer when the connection resumed a session (handed to it, not closed). */
    private static final Admitted RESUMED = new Admitted(0, null, null, null, null);
    /** {@link #handshake}'s answer for a migration's connection (a source backend): see {@link #receiveMigration}. */
    private static final Admitted MIGRATING = new Admitted(Handshake.FEATURE_MIGRATION, null, null, null, null);

    /**
     * The identities the handshake proved, as a resume token is bound to them: the pre-shared-key identity
     * (when the key checked it), the client certificate, the kernel-proven uid, CID and domid.
     */
    static String provenIdentity(PeerInfo peer, boolean psk, String helloIdentity) {
        return "psk=" + (psk ? helloIdentity : "") + ";cert=" + peer.certificate().orElse("")
                + ";uid=" + (peer.uid().isPresent() ? Integer.toUnsignedString(peer.uid().getAsInt()) : "")
                + ";cid=" + (peer.cid().isPresent() ? peer.cid().getAsLong() : "")
                + ";domid=" + (peer.domid().isPresent() ? peer.domid().getAsLong() : "");
    }

    /**
     * A HELLO with a resume token: authenticated as any (the checks before tenants and session slots),
     * then the session the token names, which must be waiting and belong to the same proven identity,
     * gets the connection. Everything else is refused, logged and counted.
     */
    private Admitted resumeSession(FrameChannel channel, Connection c, Handshake.Hello hello, boolean psk, String refusal)
            throws IOException {
        Session s = null;
        if (refusal == null) {
            String key = java.util.HexFormat.of().formatHex(hello.resumeToken());
            MovedSession m = moved.get(key);
            if (m != null && m.untilNanos() - System.nanoTime() > 0
                    && m.identity().equals(provenIdentity(c.peer(), psk, hello.identity()))) {
                channel.send(Opcodes.MOVED, 0, 0, 0, new Handshake.Moved(m.uri()).encode());
                return null; // the frontend resumes there
            }
            io.gpusockets.backend.isolation.Workers w = workers;
            for (int i = 0; i < 200 && issuing.contains(key) && !resumable.containsKey(key)
                    && (w == null || w.resumable(key) == null); i++) {
                try {
                    Thread.sleep(10); // its WELCOME went out a moment ago; the session is being set up
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            if (w != null) {
                return resumeInWorker(channel, c, hello, psk, w, key);
            }
            s = resumable.get(key);
            if (s == null || s.ended() || s.resume() == null) {
                refusal = Handshake.REFUSAL_UNKNOWN_SESSION + " (its session ended, its grace period ran out, no such"
                        + " token was issued, or its checkpoint is not restored here yet)";
            } else if (!s.resume().identity().equals(provenIdentity(c.peer(), psk, hello.identity()))) {
                refusal = "resume refused: the session token was issued to another identity";
            }
        }
        if (refusal != null) {
            refuseResume(channel, c, hello, refusal);
            return null;
        }
        Session.Resume r = s.resume();
        int features = resumedFeatures(r.features(), hello, c);
        channel.send(Opcodes.WELCOME, 0, 0, 0, new Handshake.Welcome(s.id(), host.driverVersion(), host.deviceCount(),
                features, host.description(), r.token(), (int) r.grace().toSeconds()).encode());
        c.platformThreadsOnly();
        SharedWindow window = (features & Handshake.FEATURE_WINDOW) != 0 ? c.takeSharedWindow().orElse(null) : null;
        if (!s.attach(channel, window)) {
            return null;
        }
        resumes.increment();
        return RESUMED;
    }

    /**
     * The features a resume grants: those of the session's first handshake, but the shared window per connection
     * (each ring has its own): granted when the resuming frontend asks for it and this connection has one that the
     * session can use (in isolation mode process, one that crosses to the worker with the connection).
     */
    private int resumedFeatures(int granted, Handshake.Hello hello, Connection c) {
        boolean window = (hello.features() & Handshake.FEATURE_WINDOW) != 0 && c.hasSharedWindow()
                && (workers == null || io.gpusockets.backend.isolation.Workers.keepsWindow(c));
        return granted & ~Handshake.FEATURE_WINDOW | (window ? Handshake.FEATURE_WINDOW : 0);
    }

    /** Refuses a resume: counted, logged (rate-limited) and said to the peer. */
    private void refuseResume(FrameChannel channel, Connection c, Handshake.Hello hello, String refusal) throws IOException {
        resumeRefusals.increment();
        refusals.log(Level.WARNING, () -> "refused " + c.peer().description() + " (" + hello.identity() + "): " + refusal);
        channel.send(Opcodes.REFUSE, 0, 0, 0, Handshake.encodeString(refusal));
    }

    /**
     * {@link #resumeSession} in isolation mode process: the session lives in a worker; the front checks the token and
     * identity against the worker's ticket, sends WELCOME, and hands the connection to that worker.
     */
    private Admitted resumeInWorker(FrameChannel channel, Connection c, Handshake.Hello hello, boolean psk,
                                    io.gpusockets.backend.isolation.Workers w, String key) throws IOException {
        io.gpusockets.backend.isolation.SessionTicket t = w.resumable(key);
        String refusal = t == null ? Handshake.REFUSAL_UNKNOWN_SESSION + " (its session ended, its grace period ran out,"
                + " no such token was issued, or its checkpoint is not restored here yet)"
                : !t.identity().equals(provenIdentity(c.peer(), psk, hello.identity()))
                ? "resume refused: the session token was issued to another identity"
                : channel.readAhead() > 0 ? "resume refused: bytes sent before the handshake's answer" : null;
        if (refusal != null) {
            refuseResume(channel, c, hello, refusal);
            return null;
        }
        int features = resumedFeatures(t.features(), hello, c);
        channel.send(Opcodes.WELCOME, 0, 0, 0, new Handshake.Welcome(t.sessionId(), host.driverVersion(), host.deviceCount(),
                features, host.description(), t.resumeToken(), t.graceSeconds()).encode());
        // as admit() does before a hand-over: the handshake's virtual thread left the channel non-blocking, and the
        // JDK would shut a non-blocking channel's socket down when the front lets go of its copy
        c.platformThreadsOnly();
        if (!w.resume(key, c, features)) {
            return RESUMED; // closed by the workers, the reason logged
        }
        resumes.increment();
        return RESUMED;
    }

    private Admitted handshake(FrameChannel channel, Connection c, long sessionId, String scheme) throws IOException {
        byte[] nonce = new byte[Handshake.NONCE_BYTES];
        random.nextBytes(nonce);
        int auth = settings.preSharedKey() != null || tenants.hasKeys() ? Handshake.AUTH_PSK : Handshake.AUTH_NONE;
        channel.send(Opcodes.SERVER_HELLO, 0, 0, 0,
                new Handshake.ServerHello(Handshake.PROTOCOL_VERSION, Handshake.PROTOCOL_VERSION, auth, nonce).encode());
        FrameHeader h = channel.readHeader();
        if (h.opcode() != Opcodes.HELLO || h.length() > 16 << 10) {
            throw new ProtocolException("expected HELLO, got " + h);
        }
        Handshake.Hello hello = Handshake.Hello.decode(channel.readBody(h.length()));
        String refusal = null;
        if (hello.version() != Handshake.PROTOCOL_VERSION) {
            refusal = "unsupported protocol version " + hello.version() + " (this backend speaks version "
                    + Handshake.PROTOCOL_VERSION + ")";
        } else if (auth == Handshake.AUTH_PSK
                && !tenants.proofMatches(settings.preSharedKey(), nonce, hello.identity(), hello.proof())) {
            refusal = "authentication failed: the pre-shared key does not match";
        } else {
            refusal = uidRefusal(settings.allowedUids(), scheme, c.peer());
            if (refusal == null) {
                refusal = cidRefusal(settings.allowedCids(), c.peer());
            }
            if (refusal == null && workers == null) {
                refusal = host.health().refusal(); // sessions in this process: none once a kernel fault poisoned the driver
            }
        }
        if (refusal == null && hello.hasManagedRange() && !hello.resumes()) {
            // the frontend reserved it in the guest; a range it cannot be is a broken frontend, named, never guessed at
            refusal = io.gpusockets.protocol.api.ManagedRange.check(hello.managedBase(), hello.managedSize());
        }
        if ((hello.features() & Handshake.FEATURE_MIGRATION) != 0) {
            if (refusal == null) {
                refusal = migrationRefusal(c, scheme, nonce, hello);
            }
            if (refusal != null) {
                String why = refusal;
                refusals.log(Level.WARNING, () -> "refused a migration from " + c.peer().description() + ": " + why);
                channel.send(Opcodes.REFUSE, 0, 0, 0, Handshake.encodeString(refusal));
                return null;
            }
            // sessions that migrate together: restored together (in isolation process, each in a worker of its own)
            int granted = Handshake.FEATURE_MIGRATION | ((hello.features() & Handshake.FEATURE_MIGRATION_GROUP) != 0
                    ? Handshake.FEATURE_MIGRATION_GROUP : 0);
            channel.send(Opcodes.WELCOME, 0, 0, 0, new Handshake.Welcome(0, host.driverVersion(), host.deviceCount(),
                    granted, host.description()).encode());
            return MIGRATING;
        }
        if (hello.resumes()) {
            return resumeSession(channel, c, hello, auth == Handshake.AUTH_PSK, refusal);
        }
        if (refusal == null && draining) {
            refusal = "the backend is shutting down (its sessions are moving to another backend)";
        }
        TenantRegistry.Admission admission = null;
        if (refusal == null) {
            admission = tenants.admit(c.peer(), auth == Handshake.AUTH_PSK ? hello.identity() : null);
            refusal = admission.refusal();
        }
        if (refusal == null && (refusal = reserveSession()) != null) {
            admission.tenant().closeSession();
        }
        if (refusal != null) {
            String why = refusal;
            refusals.log(Level.WARNING, () -> "refused " + c.peer().description() + " (" + hello.identity() + "): " + why);
            channel.send(Opcodes.REFUSE, 0, 0, 0, Handshake.encodeString(refusal));
            return null;
        }
        try {
            java.time.Duration grace = admission.tenant().limits().resumeGrace(resumeGrace);
            byte[] token = resumeToken(c, hello, grace);
            int granted = welcome(channel, c, sessionId, hello, token, grace);
            long[] range = (granted & Handshake.FEATURE_MANAGED_RANGE) != 0
                    ? new long[] {hello.managedBase(), hello.managedSize()} : null;
            return new Admitted(granted, admission.tenant(), token,
                    token == null ? null : provenIdentity(c.peer(), auth == Handshake.AUTH_PSK, hello.identity()), grace,
                    range);
        } catch (IOException | RuntimeException e) {
            sessionSlots.decrementAndGet();
            admission.tenant().closeSession();
            throw e;
        }
    }

    /**
     * A new session's token when its frontend asks for resume and this backend can offer it, else null
     * (with a log line saying why not): any transport, any isolation mode, unless the grace is 0. A ring's
     * shared window is no obstacle: each resume brings a new ring, whose window the session takes
     * ({@link #resumedFeatures}).
     */
    private byte[] resumeToken(Connection c, Handshake.Hello hello, java.time.Duration grace) {
        if ((hello.features() & Handshake.FEATURE_RESUME) == 0) {
            return null;
        }
        String no = grace.isZero() ? "the resume grace (--resume-grace, or the tenant's resume-grace) is 0" : null;
        if (no != null) {
            LOG.log(Level.INFO, "resume not granted to " + c.peer().description() + ": " + no
                    + "; the session ends with its connection");
            return null;
        }
        byte[] token = new byte[Handshake.TOKEN_BYTES];
        random.nextBytes(token);
        issuing.add(java.util.HexFormat.of().formatHex(token));
        return token;
    }

    /** Grants the features and sends WELCOME; returns the features granted. */
    private int welcome(FrameChannel channel, Connection c, long sessionId, Handshake.Hello hello, byte[] token,
                        java.time.Duration grace) throws IOException {
        boolean async = settings.limits().asyncAllowed() && (hello.features() & Handshake.FEATURE_ASYNC) != 0;
        // isolation mode process: a ring:// connection crosses to its worker whole, shared window included
        boolean window = (hello.features() & Handshake.FEATURE_WINDOW) != 0 && c.hasSharedWindow()
                && (workers == null || io.gpusockets.backend.isolation.Workers.keepsWindow(c));
        int features = (async ? Handshake.FEATURE_ASYNC : 0) | (window ? Handshake.FEATURE_WINDOW : 0)
                | (token != null ? Handshake.FEATURE_RESUME : 0)
                | (hello.hasManagedRange() ? Handshake.FEATURE_MANAGED_RANGE : 0); // checked by handshake()
        ByteBuffer welcome = new Handshake.Welcome(sessionId, host.driverVersion(), host.deviceCount(), features,
                host.description(), token == null ? new byte[0] : token, token == null ? 0 : (int) grace.toSeconds()).encode();
        channel.send(Opcodes.WELCOME, 0, 0, 0, welcome);
        return features;
    }

    /**
     * Why a peer is refused by the uid allow-list, or null. It applies to the transports whose kernel
     * proves the peer's uid ({@link #UID_SCHEMES}); there a peer whose uid is unknown is refused. Other
     * transports know no uid (tcp relies on the pre-shared key or TLS, vsock on the CID list).
     */
    static String uidRefusal(Set<Integer> allowedUids, String scheme, PeerInfo peer) {
        if (allowedUids.isEmpty() || !UID_SCHEMES.contains(scheme)) {
            return null;
        }
        if (peer.uid().isPresent() && allowedUids.contains(peer.uid().getAsInt())) {
            return null;
        }
        return "peer uid " + (peer.uid().isPresent() ? peer.uid().getAsInt() : "unknown") + " is not allowed";
    }

    /**
     * Why a vsock peer is refused by the CID allow-list, or null. Only peers whose transport reports a CID
     * are checked; the allow-list does not apply to tcp or unix peers (they have their own checks).
     */
    static String cidRefusal(Set<Long> allowedCids, PeerInfo peer) {
        if (allowedCids.isEmpty() || peer.cid().isEmpty() || allowedCids.contains(peer.cid().getAsLong())) {
            return null;
        }
        return "peer CID " + peer.cid().getAsLong() + " is not allowed (allowed: "
                + allowedCids.stream().sorted().map(String::valueOf).collect(java.util.stream.Collectors.joining(", ")) + ")";
    }

    /**
     * Checkpoints session {@code sessionId} to {@code file} (issue 22; {@link Session#checkpoint}): drains it, writes
     * its image and resumes it, or with {@code stop} leaves it frozen, to be restored elsewhere
     * ({@link #restore}). Refused (the message names why, every feature that cannot be captured included; the
     * session keeps running) for an unknown session or for what cannot be captured. In isolation mode process the
     * session's worker process takes the checkpoint on its own driver ({@link io.gpusockets.backend.isolation.Workers#checkpoint}).
     */
    public io.gpusockets.backend.session.CheckpointResult checkpoint(long sessionId, java.nio.file.Path file, boolean stop,
                                                                   io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return counted(checkpoints, () -> checkpointSession(sessionId, file, stop, p));
    }

    /**
     * Checkpoints the sessions {@code sessionIds}, which share IPC memory, together to {@code files} (one each, in
     * order; {@link io.gpusockets.backend.session.GroupCheckpoint}): every session linked to them by shares must be
     * named, and all are drained before any image is written; with {@code stop} they stay frozen, to be restored together
     * ({@link #restoreGroup}). One session is {@link #checkpoint}. In isolation mode process each session's worker
     * drains it and writes its image, the front leading them ({@link io.gpusockets.backend.isolation.Workers#checkpointGroup}).
     * Refused (every session running on) for an unknown session
     * and for what a group checkpoint cannot carry (the message names it).
     */
    public List<io.gpusockets.backend.session.CheckpointResult> checkpointGroup(List<Long> sessionIds,
            List<java.nio.file.Path> files, boolean stop, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (sessionIds.size() != files.size() || sessionIds.isEmpty()) {
            throw new IllegalArgumentException("sessions=" + sessionIds.size() + " files=" + files.size());
        }
        if (sessionIds.size() == 1) {
            return List.of(checkpoint(sessionIds.get(0), files.get(0), stop, p));
        }
        return counted(checkpoints, () -> {
            io.gpusockets.backend.isolation.Workers w = workers;
            if (w != null) { // isolation mode process: each session's worker drains and writes it, the front leads
                return w.checkpointGroup(sessionIds, files, stop, p);
            }
            List<Session> group = groupOf(sessionIds, "checkpointing");
            try {
                return io.gpusockets.backend.session.GroupCheckpoint.checkpoint(group, shares, files, stop,
                        p == null ? io.gpusockets.backend.session.CheckpointProgress.NONE : p);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted during the checkpoint of sessions " + sessionIds);
            }
        });
    }

    /** Refuses a migration whose frontend URI (null: the target's own) a frontend could not be told to follow. */
    private static void checkFrontendUri(String frontendUri) throws io.gpusockets.backend.session.CheckpointRefused {
        if (frontendUri != null) {
            try {
                Handshake.Moved.check(frontendUri);
            } catch (IllegalArgumentException e) {
                throw new io.gpusockets.backend.session.CheckpointRefused("migration refused: frontend URI "
                        + frontendUri + ": " + e.getMessage());
            }
        }
    }

    /**
     * The sessions named for {@code doing} ("checkpointing", "migrating") together: refused in isolation mode process
     * (each lives in a worker of its own) and for a session this backend does not have.
     */
    private List<Session> groupOf(List<Long> sessionIds, String doing) throws io.gpusockets.backend.session.CheckpointRefused {
        if (workers != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused(doing + " sessions together is not supported"
                    + " in isolation mode process yet (each lives in a worker of its own)");
        }
        List<Session> group = new ArrayList<>();
        for (long id : sessionIds) {
            Session s = session(id);
            if (s == null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("no session " + id + " in this backend");
            }
            group.add(s);
        }
        return group;
    }

    /**
     * Refused when another live session opened one of {@code sessionId}'s IPC or shareable exports, or it opened one of
     * another's ({@link io.gpusockets.backend.session.ShareRegistry#movingRefusal}).
     */
    private void notSharing(long sessionId, String what) throws io.gpusockets.backend.session.CheckpointRefused {
        String why = shares.movingRefusal(sessionId, what);
        if (why != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused(why);
        }
    }

    /** The IPC and shareable handles between this backend's sessions. */
    public io.gpusockets.backend.session.ShareRegistry shares() {
        return shares;
    }

    /**
     * Runs {@code op} with the sessions {@code sessionIds} marked as moving ({@link #migrating}): refused for one that is
     * already; those it marked are unmarked however {@code op} ends.
     */
    private <T> T whileMigrating(List<Long> sessionIds, Operation<T> op)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        List<Long> added = new ArrayList<>();
        try {
            for (long id : sessionIds) {
                if (!migrating.add(id)) {
                    throw new io.gpusockets.backend.session.CheckpointRefused("session " + id + " is migrating already");
                }
                added.add(id);
            }
            return op.run();
        } finally {
            migrating.removeAll(added);
        }
    }

    /** Runs a checkpoint or restore, counting its outcome in {@code by}: done, refused, failed. */
    private static <T> T counted(java.util.concurrent.atomic.LongAdder[] by, Operation<T> op)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        try {
            T t = op.run();
            by[0].increment();
            return t;
        } catch (io.gpusockets.backend.session.CheckpointRefused e) {
            by[1].increment();
            throw e;
        } catch (IOException | RuntimeException e) {
            by[2].increment();
            throw e;
        }
    }

    @FunctionalInterface
    private interface Operation<T> {
        T run() throws io.gpusockets.backend.session.CheckpointRefused, IOException;
    }

    private static java.util.concurrent.atomic.LongAdder[] adders(int n) {
        java.util.concurrent.atomic.LongAdder[] a = new java.util.concurrent.atomic.LongAdder[n];
        java.util.Arrays.setAll(a, i -> new java.util.concurrent.atomic.LongAdder());
        return a;
    }

    private io.gpusockets.backend.session.CheckpointResult checkpointSession(long sessionId, java.nio.file.Path file,
            boolean stop, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        notSharing(sessionId, "checkpointed");
        io.gpusockets.backend.isolation.Workers w = workers;
        if (w != null) { // isolation mode process: the session's worker checkpoints it
            return w.checkpoint(sessionId, file, stop, p);
        }
        Session s = session(sessionId);
        if (s == null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("no session " + sessionId + " in this backend");
        }
        try {
            return s.checkpoint(file, stop, p == null ? io.gpusockets.backend.session.CheckpointProgress.NONE : p);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted during the checkpoint of session " + sessionId);
        }
    }

    /**
     * The session {@code sessionId} this process serves (isolation modes context and shared), or null (none, or it
     * lives in a worker process): for the operations on one session beyond checkpoints, such as a migration's
     * pre-copy ({@link io.gpusockets.backend.session.PreCopy}).
     */
    public Session session(long sessionId) {
        for (Session x : sessions) {
            if (x.id() == sessionId) {
                return x;
            }
        }
        return null;
    }

    /**
     * Sends session {@code sessionId}, frozen by a checkpoint with stop and restored (or migrated) to the backend at
     * {@code uri}, on its way: its frontend is told ({@link Session#moved}: a MOVED frame on its connection) and
     * resumes there, the session ends here (its memory and contexts freed), and for its grace period a resume with
     * its token is answered with the same MOVED. {@code uri} is the target's address as the frontend reaches it.
     * Refused (nothing changes) for an unknown session, one not frozen, a URI a MOVED frame cannot carry, and in
     * isolation mode process (not built yet: the session lives in a worker).
     */
    public void sessionMoved(long sessionId, String uri) throws io.gpusockets.backend.session.CheckpointRefused {
        if (workers != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("sending a session to another backend is not"
                    + " supported in isolation mode process yet");
        }
        try {
            Handshake.Moved.check(uri);
        } catch (IllegalArgumentException e) {
            throw new io.gpusockets.backend.session.CheckpointRefused("cannot send session " + sessionId + " to " + uri
                    + ": " + e.getMessage());
        }
        Session s = session(sessionId);
        if (s == null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("no session " + sessionId + " in this backend");
        }
        Session.Resume r = s.resume();
        if (r == null || !s.frozen()) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " cannot be sent to " + uri
                    + ": it is not frozen by a checkpoint with stop (or a migration)");
        }
        rememberMoved(r.token(), uri, r.identity(), r.grace());
        try {
            s.moved(uri);
        } catch (IllegalStateException e) {
            throw new io.gpusockets.backend.session.CheckpointRefused(e.getMessage());
        }
        s.end("moved to " + uri);
        LOG.log(Level.INFO, "session " + sessionId + " moved to " + uri);
    }

    /**
     * Ends session {@code sessionId}, frozen by a hand-over to the backend that took this one over: its connection is
     * closed with no MOVED, and its frontend resumes at the address it used, which that backend serves now.
     */
    void sessionResumesElsewhere(long sessionId) throws io.gpusockets.backend.session.CheckpointRefused {
        Session s = session(sessionId);
        if (s == null || s.resume() == null || !s.frozen()) {
            throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " cannot be let go: it is "
                    + (s == null ? "not here" : "not frozen by a hand-over"));
        }
        s.end("handed over to the backend that took this one over (it resumes there, at the address it used)");
        LOG.log(Level.INFO, "session " + sessionId + " handed over: its frontend resumes at the address it used");
    }

    /** From now on, for {@code grace}, a resume with {@code token} by {@code identity} is answered MOVED to {@code uri}. */
    private void rememberMoved(byte[] token, String uri, String identity, java.time.Duration grace) {
        long now = System.nanoTime();
        moved.values().removeIf(e -> e.untilNanos() - now <= 0);
        while (moved.size() >= MAX_MOVED_REMEMBERED) {
            moved.entrySet().stream().min(java.util.Map.Entry.comparingByValue(
                    java.util.Comparator.comparingLong(MovedSession::untilNanos)))
                    .ifPresent(e -> moved.remove(e.getKey()));
        }
        moved.put(java.util.HexFormat.of().formatHex(token), new MovedSession(uri, identity, now + grace.toNanos()));
    }

    /**
     * Whether this backend accepts migrations from other backends (issue 23, {@code --accept-migrations}; off by
     * default): a connection whose HELLO asks for {@link Handshake#FEATURE_MIGRATION} is refused unless this is on
     * and the peer proved the backend's own pre-shared key (not a tenant's), a TLS client certificate, or, over unix,
     * this process's own uid.
     */
    public void acceptMigrations(boolean on) {
        acceptMigrations = on;
    }

    /** Host memory a migration's target keeps received chunks in before it spills them to a temp file (256 MiB). */
    public void migrationBufferBytes(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("migrationBufferBytes=" + bytes);
        }
        migrationBufferBytes = bytes;
    }

    /** Migrations from this backend by result: [done, refused, failed]. */
    public long[] migrations() {
        return new long[] {migrations[0].sum(), migrations[1].sum(), migrations[2].sum()};
    }

    /** Memory bytes sent by the migrations from this backend that completed (every round's chunks). */
    public long migrationBytes() {
        return migrationBytes.sum();
    }

    /** Whether session {@code id} is migrating from this backend now. */
    public boolean migrating(long id) {
        return migrating.contains(id);
    }

    /** Why a migration's HELLO is refused, or null (see {@link #acceptMigrations}). */
    private String migrationRefusal(Connection c, String scheme, byte[] nonce, Handshake.Hello hello) {
        if (!acceptMigrations) {
            return "this backend does not accept migrations (start it with --accept-migrations)";
        }
        if (closed || draining) {
            return "the backend is shutting down";
        }
        byte[] key = settings.preSharedKey();
        if (key != null && Handshake.proofMatches(key, nonce, hello.identity(), hello.proof())) {
            return null;
        }
        if (c.peer().certificate().isPresent()) {
            return null;
        }
        if ("unix".equals(scheme) && c.peer().uid().isPresent()) {
            try {
                Object own = java.nio.file.Files.getAttribute(java.nio.file.Path.of("/proc/self"), "unix:uid");
                if (own instanceof Integer u && u == c.peer().uid().getAsInt()) {
                    return null;
                }
            } catch (IOException | RuntimeException e) {
                // not provable: refused below
            }
        }
        return "a migration must be proven by this backend's pre-shared key (--psk-file), a TLS client certificate,"
                + " or, over unix, this backend's own uid";
    }

    /** Serves a migration's connection to its end ({@link MigrationTarget}), on the handshake's thread. */
    private void receiveMigration(FrameChannel channel, Connection c) {
        String peer = c.peer().description();
        try (MigrationTarget t = new MigrationTarget(this, channel, migrationBufferBytes)) {
            try {
                t.receive();
            } catch (IOException | RuntimeException e) {
                String why = e.getMessage() != null ? e.getMessage() : e.toString();
                LOG.log(Level.WARNING, "migration from " + peer + " failed: " + why);
                t.fail(why);
            }
        } catch (IOException e) {
            LOG.log(Level.WARNING, "migration from " + peer + " not received: " + e.getMessage());
        } finally {
            c.close();
        }
    }

    /**
     * Migrates session {@code sessionId} to the backend listening at {@code targetUri} while its program runs
     * ({@link Migration}: pre-copy rounds, a short stop, the target restores it, the frontend is sent there and
     * resumes at {@code frontendUri}, or {@code targetUri} when null). The target must accept migrations from this
     * backend ({@link #acceptMigrations}); this backend proves itself with its own pre-shared key when it has one.
     * Refused (the session runs on here) for an unknown session, one without address-stable memory or resume, what a
     * checkpoint cannot capture, one that shares IPC memory or events with another (they move together:
     * {@link #migrateGroup}), a target that refuses; a failure before the target's OK leaves the program running
     * here too. In isolation mode process the session's worker process runs the source's side itself, connecting to
     * the target directly ({@link io.gpusockets.backend.isolation.Workers#migrate}), and the result is the same; a
     * worker that dies meanwhile fails the migration (its session ended with it), one that sends nothing for the
     * workers' quiet timeout fails it with a message (the worker goes on: see
     * {@link io.gpusockets.backend.isolation.Workers#quietTimeout}).
     */
    public Migration.Result migrate(long sessionId, String targetUri, String frontendUri,
                                    io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return counted(migrations, () -> {
            checkFrontendUri(frontendUri);
            notSharing(sessionId, "migrated");
            io.gpusockets.backend.isolation.Workers w = workers;
            Session s = w != null ? null : session(sessionId);
            if (w == null && s == null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("no session " + sessionId + " in this backend");
            }
            if (s != null && s.resume() == null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " cannot be migrated:"
                        + " it was not granted resume (its frontend could not follow it)");
            }
            if (!migrating.add(sessionId)) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " is migrating already");
            }
            long[] sent = {0};
            io.gpusockets.backend.session.CheckpointProgress p = progress == null
                    ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress;
            try {
                String goesTo = frontendUri != null ? frontendUri : targetUri;
                Migration.Result r = w != null // isolation mode process: the session's worker migrates it
                        ? w.migrate(sessionId, targetUri, frontendUri, settings.preSharedKey(), p, t -> rememberMoved(
                                t.resumeToken(), goesTo, t.identity(), java.time.Duration.ofSeconds(t.graceSeconds())))
                        : Migration.run(this::sessionMoved, s, targetUri, frontendUri, settings.preSharedKey(), p);
                sent[0] = r.bytes();
                downtimes.increment();
                downtimeNanos.add(r.downtimeNanos());
                LOG.log(Level.INFO, "session " + sessionId + " migrated to " + targetUri + ": " + r.rounds().size()
                        + " rounds, " + r.bytes() + " bytes, downtime " + r.downtimeNanos() / 1_000_000 + " ms");
                return r;
            } finally {
                migrationBytes.add(sent[0]);
                migrating.remove(sessionId);
            }
        });
    }

    /**
     * Migrates the sessions {@code sessionIds}, which share IPC memory or events, together to the backend listening at
     * {@code targetUri} (issue 24 item 1; {@link Migration#runGroup}): every session linked to them by shares must be
     * named (refused, naming those left out, as a group checkpoint is:
     * {@link io.gpusockets.backend.session.GroupCheckpoint#checkTogether}); each is pre-copied while the programs run,
     * then all are drained together, checked again, and their final rounds and images (with the shares) sent; the
     * target restores them all, makes the shares again under their old tokens and at their old addresses, and only
     * then may any resume; then each frontend is sent there ({@code frontendUri}, or {@code targetUri}). One session
     * is {@link #migrate}. In isolation mode process at this end the workers drain and write the images and the front
     * sends them, stop and copy ({@link #migrateGroupInWorkers}). Refused (every session running on here) by a target
     * that does not take groups (an older backend), and as {@link #migrate} refuses;
     * a failure before the target's OK leaves every program running here and nothing at the target. Counted as one
     * migration. Returns one result per session, in order.
     */
    public List<Migration.Result> migrateGroup(List<Long> sessionIds, String targetUri, String frontendUri,
                                               io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (sessionIds.isEmpty()) {
            throw new IllegalArgumentException("no sessions");
        }
        if (sessionIds.size() == 1) {
            return List.of(migrate(sessionIds.get(0), targetUri, frontendUri, progress));
        }
        return counted(migrations, () -> {
            checkFrontendUri(frontendUri);
            io.gpusockets.backend.isolation.Workers w = workers;
            if (w != null) { // isolation mode process: the workers drain and write, the front sends the images
                return whileMigrating(sessionIds, () -> migrateGroupInWorkers(w, sessionIds, targetUri, frontendUri,
                        progress == null ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress));
            }
            List<Session> group = groupOf(sessionIds, "migrating");
            io.gpusockets.backend.session.GroupCheckpoint.checkTogether(group, shares, "migration",
                    "gpusockets migrate %s --to URI");
            return whileMigrating(sessionIds, () -> {
                List<Migration.Result> results = Migration.runGroup(this::sessionMoved, group, targetUri, frontendUri,
                        settings.preSharedKey(), progress == null ? io.gpusockets.backend.session.CheckpointProgress.NONE
                                : progress, shares);
                long bytes = 0;
                for (Migration.Result r : results) {
                    bytes += r.bytes();
                }
                migrationBytes.add(bytes);
                downtimes.increment();
                downtimeNanos.add(results.get(0).downtimeNanos());
                LOG.log(Level.INFO, "sessions " + sessionIds + " migrated together to " + targetUri + ": " + bytes
                        + " bytes, downtime " + results.get(0).downtimeNanos() / 1_000_000 + " ms");
                return results;
            });
        });
    }

    /**
     * {@link #migrateGroup} in isolation mode process at this end: stop and copy. The connection to the target is made
     * first (a target that does not take groups is refused with nothing drained); then, as a group checkpoint with
     * stop, each session's worker drains it and writes its image (with what it shares) into a temp folder and holds it
     * drained ({@link io.gpusockets.backend.isolation.Workers#migrateGroup}); the front sends the images
     * ({@link Migration.ImageSender}: no pre-copy, so the downtime covers the whole memory) and, once the target answers
     * that it restored them all, each worker sends its frontend there and ends its session; the tokens are answered
     * MOVED here for their grace periods. Anything before that OK lets every session run on here. The images are
     * deleted however it ends. Each result has one round: the stop's, with the member's memory bytes sent.
     */
    private List<Migration.Result> migrateGroupInWorkers(io.gpusockets.backend.isolation.Workers w, List<Long> sessionIds,
            String targetUri, String frontendUri, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        int n = sessionIds.size();
        if (n > MigrationTarget.MAX_GROUP) {
            throw new io.gpusockets.backend.session.CheckpointRefused("a group of " + n + " sessions migrating together"
                    + " (at most " + MigrationTarget.MAX_GROUP + ")");
        }
        java.nio.file.Path dir = null;
        try {
            String goesTo = frontendUri != null ? frontendUri : targetUri;
            long[] sent = new long[2 + n];
            long[] sentAt = {0};
            long t0;
            List<io.gpusockets.backend.session.CheckpointResult> images;
            try (Migration.ImageSender sender = Migration.ImageSender.open(targetUri, settings.preSharedKey())) {
                t0 = System.nanoTime(); // the drains begin now
                dir = java.nio.file.Files.createTempDirectory("gpusockets-group-migration");
                List<java.nio.file.Path> files = new ArrayList<>();
                for (long id : sessionIds) {
                    files.add(dir.resolve("session-" + id + ".ckpt"));
                }
                images = w.migrateGroup(sessionIds, files, () -> {
                    long[] r = sender.send(files, p);
                    System.arraycopy(r, 0, sent, 0, r.length);
                    sentAt[0] = System.nanoTime();
                }, goesTo, t -> rememberMoved(t.resumeToken(), goesTo, t.identity(),
                        java.time.Duration.ofSeconds(t.graceSeconds())), p);
            }
            long now = System.nanoTime();
            List<Migration.Result> results = new ArrayList<>(n);
            long bytes = 0;
            for (int i = 0; i < n; i++) {
                io.gpusockets.backend.session.CheckpointResult c = images.get(i);
                long b = sent[2 + i];
                bytes += b;
                int chunks = (int) ((b + Migration.CHUNK_BYTES - 1) / Migration.CHUNK_BYTES);
                results.add(new Migration.Result(sessionIds.get(i), targetUri,
                        List.of(new io.gpusockets.backend.session.PreCopy.Round(0, true, chunks, b, chunks, b, 0,
                                c.imageNanos())),
                        c.drainNanos(), 0, c.imageNanos(), sent[0], now - sentAt[0], now - t0, sent[1]));
            }
            migrationBytes.add(bytes);
            downtimes.increment();
            downtimeNanos.add(now - t0);
            LOG.log(Level.INFO, "sessions " + sessionIds + " migrated together from their workers to " + targetUri + ": "
                    + bytes + " bytes, downtime " + (now - t0) / 1_000_000 + " ms (stop and copy)");
            return List.copyOf(results);
        } finally {
            if (dir != null) {
                try (var files = java.nio.file.Files.list(dir)) {
                    for (java.nio.file.Path f : (Iterable<java.nio.file.Path>) files::iterator) {
                        java.nio.file.Files.deleteIfExists(f);
                    }
                    java.nio.file.Files.deleteIfExists(dir);
                } catch (IOException e) {
                    LOG.log(Level.WARNING, "group migration: temp folder " + dir + " not removed: " + e.getMessage());
                }
            }
        }
    }

    /**
     * A group migration's member received here ({@link MigrationTarget}): its image restored, with its landed memory
     * ({@code landed}, null: none; {@code adopted} runs once the restore took it), into {@code made} without resuming
     * ({@link #reshareMigrated} then lets the group resume). Not in isolation mode process.
     */
    long restoreMigratedMember(java.nio.file.Path file, List<io.gpusockets.backend.session.PhysicalMemory> landed,
                               Runnable adopted, List<Session> made)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (workers != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("a group migration in isolation mode process");
        }
        return restoreSession(file, io.gpusockets.backend.session.CheckpointProgress.NONE, List.of(),
                landed == null ? null : new io.gpusockets.backend.session.SessionRestore.Landed(landed, adopted), made);
    }

    /**
     * The members of a group migration, all restored ({@link #restoreMigratedMember}): their shares made again as a
     * group restore makes them ({@link #restoreGroup}), then they may resume. Refused (none left) when one of their ids
     * came to life here meanwhile or a share cannot be made again. Counted as one restore.
     */
    void reshareMigrated(List<Session> made) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        counted(restores, () -> {
            synchronized (restoring) {
                for (Session s : made) {
                    if (session(s.id()) != null) {
                        unmake(made, "restore of its group refused");
                        throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: session " + s.id()
                                + " is live in this backend");
                    }
                }
                reshare(made);
                return null;
            }
        });
    }

    /** Ends the members of a group migration that failed here (restored, never resumable). */
    void unmakeMigrated(List<Session> made, String why) {
        synchronized (restoring) {
            unmake(made, why);
        }
    }

    /**
     * What {@link #drainTo} did: the migrations that completed, and each session that did not move with why (refused,
     * failed, or still migrating when the time ran out).
     */
    public record Drain(List<Migration.Result> moved, Map<Long, String> notMoved) {
    }

    /** How long {@link #drainTo} waits for the migrations it interrupted when its time ran out. */
    static final long DRAIN_STOP_SECONDS = 10;

    /**
     * Moves every session this backend serves to the backend at {@code targetUri} before it stops (issue 23,
     * {@code gpusockets backend --drain-to URI}): from now on new sessions, restores and incoming migrations are
     * refused (resumes still come in, and a moved session's frontend that asks here is answered MOVED); each session is
     * migrated ({@link #migrate}, its frontend sent to {@code targetUri}; sessions that share IPC memory or events
     * together, {@link #migrateGroup}) on one of {@code parallel} threads, sessions that came in meanwhile too, until
     * every one has been tried or {@code timeout} has passed (then the migrations
     * still running are interrupted: they fail and their programs run on here until {@link #close}). Each result is
     * logged. Sessions that could not move (not resumable, frozen, refused by the target, failed) run on until
     * {@link #close} ends them as any shutdown does.
     */
    public Drain drainTo(String targetUri, java.time.Duration timeout, int parallel) throws InterruptedException {
        if (parallel < 1 || timeout.isNegative()) {
            throw new IllegalArgumentException("drainTo: parallel=" + parallel + " timeout=" + timeout);
        }
        draining = true;
        long deadline = System.nanoTime() + timeout.toNanos();
        List<Migration.Result> moved = java.util.Collections.synchronizedList(new ArrayList<>());
        Map<Long, String> notMoved = new ConcurrentHashMap<>();
        Map<Long, java.util.concurrent.Future<?>> tried = new java.util.LinkedHashMap<>();
        var pool = Executors.newFixedThreadPool(parallel, Thread.ofPlatform().daemon().name("gpusockets-drain-", 0).factory());
        try {
            while (true) {
                for (SessionSnapshot x : sessions()) {
                    if (tried.containsKey(x.id())) {
                        continue;
                    }
                    // sessions that share IPC memory or events move together, as one group migration
                    List<Long> group = shares.group(java.util.Set.of(x.id())).stream()
                            .filter(id -> !tried.containsKey(id)).toList();
                    java.util.concurrent.Future<?> f = pool.submit(() -> {
                        try {
                            for (Migration.Result r : migrateGroup(group, targetUri, null, null)) {
                                moved.add(r);
                                LOG.log(Level.INFO, "drain: session " + r.sessionId() + " moved to " + targetUri
                                        + " (downtime " + r.downtimeNanos() / 1_000_000 + " ms, " + r.bytes() + " bytes)");
                            }
                        } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                            for (long id : group) {
                                notMoved.put(id, String.valueOf(e.getMessage()));
                                LOG.log(Level.WARNING, "drain: session " + id + " not moved to " + targetUri + ": "
                                        + e.getMessage() + " (it ends when the backend stops)");
                            }
                        }
                    });
                    group.forEach(id -> tried.put(id, f));
                }
                boolean allDone = true;
                for (java.util.concurrent.Future<?> f : tried.values()) {
                    long left = deadline - System.nanoTime();
                    try {
                        f.get(Math.max(0, left), TimeUnit.NANOSECONDS);
                    } catch (java.util.concurrent.TimeoutException e) {
                        allDone = false;
                        break;
                    } catch (java.util.concurrent.ExecutionException e) {
                        // caught inside: not thrown
                    }
                }
                if (!allDone || sessions().stream().allMatch(x -> tried.containsKey(x.id()))) {
                    break; // the time ran out, or every session has been tried
                }
            }
        } finally {
            pool.shutdownNow(); // migrations still running are interrupted: they fail, their programs run on here
        }
        pool.awaitTermination(DRAIN_STOP_SECONDS, TimeUnit.SECONDS);
        for (var e : tried.entrySet()) {
            if (!e.getValue().isDone()) {
                notMoved.putIfAbsent(e.getKey(), "still migrating when the drain's " + timeout.toSeconds() + " s ran out");
                LOG.log(Level.WARNING, "drain: session " + e.getKey() + " not moved to " + targetUri + " within "
                        + timeout.toSeconds() + " s (it ends when the backend stops)");
            }
        }
        return new Drain(List.copyOf(moved), Map.copyOf(notMoved));
    }

    /**
     * Restores the session checkpointed in {@code file} into this backend ({@link io.gpusockets.backend.session.SessionRestore}):
     * under its own id (refused when a session here has it) and tenant (which must exist here and have room for a
     * session), with every handle id and device address as it was; then it waits, detached and resumable under its
     * token for the grace period in the image, for its frontend to resume. Returns the session id. A refused or
     * failed restore leaves nothing. In isolation mode process a worker process of its own restores and serves the
     * session ({@link io.gpusockets.backend.isolation.Workers#restore}).
     */
    public long restore(java.nio.file.Path file, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return restoreGroup(List.of(file), p).get(0); // an image of a group's, alone: its shares are made (or refused) there
    }

    /**
     * Whether a migration's target here lands the session's memory as it receives it ({@link MigrationTarget},
     * {@link io.gpusockets.backend.session.MigrationLanding}): isolation modes context and shared. Mode process: not
     * built (a worker process restores the session from the whole image).
     */
    boolean landsMigrations() {
        return workers == null;
    }

    /**
     * {@link #restore} of a migration's image whose window memory this process landed ({@code landed}, by the
     * source's addresses: the restore adopts it, {@link io.gpusockets.backend.session.SessionRestore.Landed};
     * {@code adopted} runs once it did). Not in isolation mode process.
     */
    long restoreLanded(java.nio.file.Path file, java.util.List<io.gpusockets.backend.session.PhysicalMemory> landed,
                       Runnable adopted, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (workers != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("a landed migration in isolation mode process");
        }
        return counted(restores, () -> restoreSession(file, p, java.util.List.of(),
                new io.gpusockets.backend.session.SessionRestore.Landed(landed, adopted)));
    }

    /**
     * Why this backend refuses a hand-over into it now, or null; {@code takingOver}: one on a take-over's connection
     * (which the old backend's admin socket allowed), that needs no {@code --accept-migrations}.
     */
    String handOverRefusal(boolean takingOver) {
        if (!acceptMigrations && !takingOver) {
            return "this backend does not accept migrations (start it with --accept-migrations)";
        }
        if (workers != null) {
            return "a hand-over into isolation mode process is not supported yet (run the target with --isolation context)";
        }
        return closed || draining ? "the backend is shutting down" : null;
    }

    /**
     * {@link #restore} of a hand-over's image ({@link HandOver#receive}): the session's window memory is imported from
     * {@code handed} (the source's exported allocations) and mapped where it was, not made and filled. Refused unless
     * this backend accepts migrations ({@link #acceptMigrations}); in isolation mode process: refused (not built yet).
     */
    public long restoreHandedOver(java.nio.file.Path file, java.util.List<io.gpusockets.backend.session.SessionRestore.Handed> handed,
                                  io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return restoreHandedOver(file, handed, p, false);
    }

    long restoreHandedOver(java.nio.file.Path file, java.util.List<io.gpusockets.backend.session.SessionRestore.Handed> handed,
                           io.gpusockets.backend.session.CheckpointProgress p, boolean takingOver)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        String refusal = handOverRefusal(takingOver);
        if (refusal != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused(refusal);
        }
        return counted(restores, () -> restoreSession(file, p, handed, null));
    }

    /**
     * {@link #restoreHandedOver} of a group handed over together ({@link HandOver#receive}): each image restored with
     * its allocations imported from {@code handed} (one list per image, in order) and not yet resumable, then their
     * shares made again as a group restore makes them ({@link #restoreGroup}: exports under their old tokens, each
     * opened range mapped at its old address from the exporter's handed allocations), and only then may they resume. A
     * refusal or failure of any leaves none of them. Returns their ids, in the images' order.
     */
    List<Long> restoreHandedOverGroup(List<java.nio.file.Path> files,
                                      List<List<io.gpusockets.backend.session.SessionRestore.Handed>> handed,
                                      boolean takingOver) throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        String refusal = handOverRefusal(takingOver);
        if (refusal != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused(refusal);
        }
        if (files.size() != handed.size() || files.isEmpty()) {
            throw new IllegalArgumentException("images=" + files.size() + " handed=" + handed.size());
        }
        return counted(restores, () -> {
            synchronized (restoring) {
                List<Session> made = new ArrayList<>();
                for (int i = 0; i < files.size(); i++) {
                    try {
                        restoreSession(files.get(i), io.gpusockets.backend.session.CheckpointProgress.NONE, handed.get(i),
                                null, made);
                    } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                        unmake(made, "hand-over of its group failed");
                        throw e;
                    }
                }
                reshare(made);
                return made.stream().map(Session::id).toList();
            }
        });
    }

    /**
     * Hands the sessions {@code sessionIds}, which share IPC memory or events, over together to another backend process
     * on this host and GPU through {@code c} ({@link HandOver#sendGroup}: no memory copied, the shares made again
     * there); each frontend is sent to {@code frontendUri}, or to the address the target answers
     * ({@link HandOver#SAME_ADDRESS}: each resumes where it was). Every session linked to them by shares must be named
     * (refused, naming those left out). One session is {@link #handOver}. Counted as one migration. Refused (every
     * session running on here) as {@link #handOver} refuses, by a target that does not take groups (an older backend),
     * and for what a group move does not carry; a failure before the target's OK leaves every program running here and
     * nothing at the target. Returns one result per session, in order.
     */
    public List<HandOver.Result> handOverGroup(List<Long> sessionIds, Connection c, String frontendUri,
                                               io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (sessionIds.isEmpty()) {
            throw new IllegalArgumentException("no sessions");
        }
        if (sessionIds.size() == 1) {
            return List.of(handOver(sessionIds.get(0), c, frontendUri, progress));
        }
        return counted(migrations, () -> {
            if (workers != null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("hand-over is not supported in isolation mode"
                        + " process yet: run the backend with --isolation context");
            }
            handOverFrontendUri(frontendUri);
            List<Session> group = groupOf(sessionIds, "handing over");
            return whileMigrating(sessionIds, () -> {
                List<HandOver.Result> results = HandOver.sendGroup(this, group, c, frontendUri, progress == null
                        ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress, shares);
                long copied = 0, handed = 0;
                for (HandOver.Result r : results) {
                    copied += r.copiedBytes();
                    handed += r.handedBytes();
                }
                migrationBytes.add(copied);
                downtimes.increment();
                downtimeNanos.add(results.get(0).downtimeNanos());
                LOG.log(Level.INFO, String.format(java.util.Locale.ROOT, "sessions %s handed over together to %s: %d bytes"
                        + " mapped there, %d bytes copied, downtime %.1f ms", sessionIds, results.get(0).frontendUri()
                        .isEmpty() ? "the backend that took this one over" : results.get(0).frontendUri(), handed, copied,
                        results.get(0).downtimeNanos() / 1e6));
                return results;
            });
        });
    }

    /** Refuses a hand-over whose frontend URI (null: the target's; {@link HandOver#SAME_ADDRESS}) a frontend could not follow. */
    private static void handOverFrontendUri(String frontendUri) throws io.gpusockets.backend.session.CheckpointRefused {
        if (frontendUri != null && !frontendUri.equals(HandOver.SAME_ADDRESS)) {
            try {
                Handshake.Moved.check(frontendUri);
            } catch (IllegalArgumentException e) {
                throw new io.gpusockets.backend.session.CheckpointRefused("hand-over refused: frontend URI "
                        + frontendUri + ": " + e.getMessage());
            }
        }
    }

    /**
     * Hands session {@code sessionId} over to another backend process on this host and GPU through {@code c}, a
     * connection to it that carries descriptors ({@link HandOver}: no memory copied); its frontend is sent to
     * {@code frontendUri}, or to the address the target answers. Counted with the migrations. Refused (the session
     * runs on here) as a migration is, and for a session whose device cannot export its memory; a failure before the
     * target's OK leaves the program running here.
     */
    public HandOver.Result handOver(long sessionId, Connection c, String frontendUri,
                                    io.gpusockets.backend.session.CheckpointProgress progress)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return counted(migrations, () -> {
            notSharing(sessionId, "handed over");
            if (workers != null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("hand-over is not supported in isolation mode"
                        + " process yet: run the backend with --isolation context");
            }
            handOverFrontendUri(frontendUri);
            Session s = session(sessionId);
            if (s == null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("no session " + sessionId + " in this backend");
            }
            if (!migrating.add(sessionId)) {
                throw new io.gpusockets.backend.session.CheckpointRefused("session " + sessionId + " is migrating already");
            }
            try {
                HandOver.Result r = HandOver.send(this, s, c, frontendUri, progress == null
                        ? io.gpusockets.backend.session.CheckpointProgress.NONE : progress);
                migrationBytes.add(r.copiedBytes());
                downtimes.increment();
                downtimeNanos.add(r.downtimeNanos());
                LOG.log(Level.INFO, String.format(java.util.Locale.ROOT, "session %d handed over to %s: %d allocations"
                        + " (%d bytes) mapped there, %d bytes copied, downtime %.1f ms (drain %.1f, export %.1f, image %.1f,"
                        + " restore %.1f, switch %.1f)", sessionId, r.frontendUri().isEmpty()
                        ? "the backend that took this one over" : r.frontendUri(), r.handles(), r.handedBytes(),
                        r.copiedBytes(), r.downtimeNanos() / 1e6, r.drainNanos() / 1e6, r.exportNanos() / 1e6,
                        r.imageNanos() / 1e6, r.restoreNanos() / 1e6, r.switchNanos() / 1e6));
                return r;
            } finally {
                migrating.remove(sessionId);
            }
        });
    }

    /**
     * The target's side of a hand-over ({@link HandOver#receive}) on {@code c}: the session restored here with its
     * memory mapped from the source's, its frontend told to resume at {@code frontendUri} (null: this backend's first
     * listening address). Returns the session id.
     */
    public long receiveHandOver(Connection c, String frontendUri) throws io.gpusockets.backend.session.CheckpointRefused,
            IOException {
        return receiveHandOvers(c, frontendUri).getFirst();
    }

    /**
     * {@link #receiveHandOver} of one session or of sessions handed over together ({@link #handOverGroup}): returns
     * every session id received, in the order sent.
     */
    public List<Long> receiveHandOvers(Connection c, String frontendUri) throws io.gpusockets.backend.session.CheckpointRefused,
            IOException {
        String uri = frontendUri;
        if (uri == null) {
            List<TransportUri> at = addresses();
            uri = at.isEmpty() ? "" : at.getFirst().toString();
        }
        return HandOver.receiveAll(c, this, uri);
    }

    /** A session slot and one of the tenant's sessions for a session being restored; refused when either is full. */
    private void reserveRestored(Tenant tenant) throws io.gpusockets.backend.session.CheckpointRefused {
        String refusal = reserveSession();
        if (refusal != null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: " + refusal);
        }
        if (!tenant.openSession()) {
            sessionSlots.decrementAndGet();
            throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: tenant " + tenant.name()
                    + " holds as many sessions as it may");
        }
    }

    private long restoreSession(java.nio.file.Path file, io.gpusockets.backend.session.CheckpointProgress p,
                                java.util.List<io.gpusockets.backend.session.SessionRestore.Handed> handed,
                                io.gpusockets.backend.session.SessionRestore.Landed landed)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        synchronized (restoring) {
            if (workers != null) {
                return restoreSession(file, p, handed, landed, null);
            }
            List<Session> made = new ArrayList<>();
            restoreSession(file, p, handed, landed, made);
            reshare(made);
            return made.get(0).id();
        }
    }

    /**
     * Restores the sessions checkpointed together ({@link #checkpointGroup}) from {@code files}, in any order: each is
     * restored, then their IPC memory shares are made again (exports under their old tokens, then every opened range at
     * its address: {@link io.gpusockets.backend.session.GroupCheckpoint}), and only then may they resume. A refusal or
     * failure of any leaves none of them. Returns their ids, in the files' order. In isolation mode process each image
     * goes to a worker of its own ({@link #restoreGroupInWorkers}).
     */
    public List<Long> restoreGroup(List<java.nio.file.Path> files, io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        return counted(restores, () -> {
            if (files.size() == 1 && (workers == null || !io.gpusockets.backend.session.SessionRestore.peek(files.get(0))
                    .shares())) {
                return List.of(restoreSession(files.get(0), p, List.of(), null));
            }
            if (workers != null) {
                return restoreGroupInWorkers(workers, files, p);
            }
            synchronized (restoring) {
                List<Session> made = new ArrayList<>();
                for (java.nio.file.Path f : files) {
                    try {
                        restoreSession(f, p, List.of(), null, made);
                    } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                        unmake(made, "restore of its group failed");
                        throw e;
                    }
                }
                reshare(made);
                return made.stream().map(Session::id).toList();
            }
        });
    }

    /**
     * {@link #restoreGroup} in isolation mode process: each image restored by a worker of its own and held there
     * ({@link io.gpusockets.backend.isolation.Workers#restoreHeld}: not resumable yet), the exports it may register
     * again read from the image here; then the workers make the group's shares again, exports first (each IPC event
     * exported again through its worker's driver, and window memory as its physical allocations, under its old token),
     * then what each opened (cuIpcOpenEventHandle in the opener's worker under its old handle id; the exporter's
     * physical allocations mapped at the old address), and only then may the sessions resume
     * ({@link io.gpusockets.backend.isolation.Workers#reshare}). A refusal or failure of any leaves none of them.
     */
    private List<Long> restoreGroupInWorkers(io.gpusockets.backend.isolation.Workers w, List<java.nio.file.Path> files,
                                             io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (closed || draining) {
            throw new io.gpusockets.backend.session.CheckpointRefused("the backend is shutting down");
        }
        List<io.gpusockets.backend.session.SessionRestore.Identity> who = new ArrayList<>();
        List<List<io.gpusockets.backend.session.ShareRegistry.Carried>> imageExports = new ArrayList<>();
        List<Tenant> tenantsOf = new ArrayList<>();
        java.util.Set<Long> ids = new java.util.HashSet<>();
        for (java.nio.file.Path f : files) {
            var id = io.gpusockets.backend.session.SessionRestore.peek(f);
            var exports = io.gpusockets.backend.session.GroupCheckpoint.imageExports(f);
            Tenant tenant = tenants.tenant(id.tenant());
            if (tenant == null) {
                throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: the image's tenant "
                        + id.tenant() + " is not configured on this backend");
            }
            if (!ids.add(id.sessionId())) {
                throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: two images of session "
                        + id.sessionId());
            }
            who.add(id);
            imageExports.add(exports);
            tenantsOf.add(tenant);
        }
        synchronized (restoring) {
            List<io.gpusockets.backend.isolation.Workers.Held> held = new ArrayList<>();
            try {
                for (int i = 0; i < files.size(); i++) {
                    long id = who.get(i).sessionId();
                    Tenant tenant = tenantsOf.get(i);
                    nextSessionId.updateAndGet(v -> Math.max(v, id + 1)); // no new session takes the id meanwhile
                    if (w.hasSession(id)) {
                        throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: session " + id
                                + " is live in this backend");
                    }
                    reserveRestored(tenant);
                    Runnable ended = () -> {
                        sessionSlots.decrementAndGet();
                        tenant.closeSession();
                    };
                    held.add(w.restoreHeld(files.get(i).toAbsolutePath(), tenant, resumeRetainBytes, id, ended, p,
                            imageExports.get(i))); // runs ended itself when it fails
                }
                w.reshare(held); // ends them all itself when it fails
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                w.abandon(held);
                throw e;
            }
            return held.stream().map(io.gpusockets.backend.isolation.Workers.Held::sessionId).toList();
        }
    }

    /**
     * Makes the shares of the restored sessions {@code made} again ({@link io.gpusockets.backend.session.GroupCheckpoint})
     * and lets them resume; on a refusal or failure none is left.
     */
    private void reshare(List<Session> made) throws io.gpusockets.backend.session.CheckpointRefused {
        try {
            java.util.Set<Long> ids = new java.util.HashSet<>();
            for (Session s : made) {
                io.gpusockets.backend.session.GroupCheckpoint.reExport(s, shares);
                ids.add(s.id());
            }
            for (Session s : made) {
                io.gpusockets.backend.session.GroupCheckpoint.reOpen(s, ids);
            }
        } catch (io.gpusockets.backend.session.CheckpointRefused | RuntimeException e) {
            unmake(made, "restore refused");
            throw e;
        }
        for (Session s : made) {
            publishRestored(s);
        }
    }

    /** Ends restored sessions that were never published (their slots and tenant sessions given back). */
    private void unmake(List<Session> made, String why) {
        for (Session s : made) {
            shares.sessionEnded(s.id());
            s.end(why);
            sessionSlots.decrementAndGet();
            if (s.tenant() instanceof Tenant t) {
                t.closeSession();
            }
        }
        made.clear();
    }

    /**
     * Restores {@code file}'s session; in isolation context and shared it is added to {@code made} unpublished (not yet
     * resumable: {@link #publishRestored}), else (a worker restores it) it is served at once.
     */
    private long restoreSession(java.nio.file.Path file, io.gpusockets.backend.session.CheckpointProgress p,
                                java.util.List<io.gpusockets.backend.session.SessionRestore.Handed> handed,
                                io.gpusockets.backend.session.SessionRestore.Landed landed, List<Session> made)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        if (closed || draining) {
            throw new io.gpusockets.backend.session.CheckpointRefused("the backend is shutting down");
        }
        var who = io.gpusockets.backend.session.SessionRestore.peek(file);
        Tenant tenant = tenants.tenant(who.tenant());
        if (tenant == null) {
            throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: the image's tenant " + who.tenant()
                    + " is not configured on this backend");
        }
        synchronized (restoring) {
            io.gpusockets.backend.isolation.Workers w = workers;
            if (w != null && who.shares()) { // restoreGroup takes these
                throw new io.gpusockets.backend.session.CheckpointRefused("restore of session " + who.sessionId()
                        + " refused: its image shares IPC memory or events with the sessions checkpointed with it:"
                        + " restore them together (gpusockets restore FILE...)");
            }
            if (w != null) {
                return restoreInWorker(w, file, who.sessionId(), tenant, p);
            }
            if (session(who.sessionId()) != null || made.stream().anyMatch(x -> x.id() == who.sessionId())) {
                throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: session " + who.sessionId()
                        + " is live in this backend");
            }
            reserveRestored(tenant);
            Session s;
            try {
                s = restoreOnOwnThread(file, tenant, p == null ? io.gpusockets.backend.session.CheckpointProgress.NONE : p,
                        handed, landed);
                s.deviceShare(tenants.deviceShare());
                s.shares(shares.broker(s.id(), tenant.name()));
                if (sharedContexts != null) {
                    s.shareContexts(sharedContexts);
                }
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                sessionSlots.decrementAndGet();
                tenant.closeSession();
                throw e;
            }
            if (io.gpusockets.backend.session.SessionIds.fleet(who.sessionId()) == fleetId) {
                // one of this fleet id's: new ids go above it (an id of another fleet id's never meets ours)
                long counter = io.gpusockets.backend.session.SessionIds.counter(who.sessionId());
                nextSessionId.updateAndGet(v -> Math.max(v, counter + 1));
            }
            made.add(s);
            return s.id();
        }
    }

    /** A restored session joins this backend's sessions and waits, resumable, for its frontend. */
    private void publishRestored(Session s) {
        synchronized (restoring) {
            status.started(s, "restored");
            sessions.add(s);
            moved.remove(java.util.HexFormat.of().formatHex(s.resume().token())); // back here (a migration back): no MOVED
            resumable.put(java.util.HexFormat.of().formatHex(s.resume().token()), s);
            Thread.ofPlatform().daemon().name("gpusockets-session-" + s.id()).start(() -> {
                connections.incrementAndGet(); // run() gives one back, as for a session that came with its connection
                run(s);
            });
        }
    }

    private final Object restoring = new Object();

    /**
     * {@link #restoreSession} in isolation mode process: a worker of its own restores the session on its driver
     * ({@link io.gpusockets.backend.isolation.Workers#restore}) and serves it; the session holds a session slot and
     * its tenant's session until that worker ends, and the front hands a resuming frontend to that worker.
     */
    private long restoreInWorker(io.gpusockets.backend.isolation.Workers w, java.nio.file.Path file, long id, Tenant tenant,
                                 io.gpusockets.backend.session.CheckpointProgress p)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        nextSessionId.updateAndGet(v -> Math.max(v, id + 1)); // before the check: no new session takes the id meanwhile
        if (w.hasSession(id)) {
            throw new io.gpusockets.backend.session.CheckpointRefused("restore refused: session " + id + " is live in this backend");
        }
        reserveRestored(tenant);
        Runnable ended = () -> {
            sessionSlots.decrementAndGet();
            tenant.closeSession();
        };
        io.gpusockets.backend.isolation.SessionTicket t = w.restore(file.toAbsolutePath(), tenant, resumeRetainBytes, id,
                ended, p); // runs ended itself when it fails
        moved.remove(java.util.HexFormat.of().formatHex(t.resumeToken())); // back here (a migration back): no MOVED
        return id;
    }

    /**
     * Runs {@link io.gpusockets.backend.session.SessionRestore#restore} on a platform thread of its own (the replay
     * changes its thread's driver context stack), waiting for it.
     */
    private Session restoreOnOwnThread(java.nio.file.Path file, Tenant tenant, io.gpusockets.backend.session.CheckpointProgress p,
                                       java.util.List<io.gpusockets.backend.session.SessionRestore.Handed> handed,
                                       io.gpusockets.backend.session.SessionRestore.Landed landed)
            throws io.gpusockets.backend.session.CheckpointRefused, IOException {
        Object[] out = new Object[1];
        Thread t = Thread.ofPlatform().daemon().name("gpusockets-restore").start(() -> {
            try {
                out[0] = io.gpusockets.backend.session.SessionRestore.restore(file, host, settings, contextPool, tenant,
                        resumeRetainBytes, p, handed, landed).session();
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException | RuntimeException e) {
                out[0] = e;
            }
        });
        boolean interrupted = false;
        while (true) {
            try {
                t.join(); // not cut short: a restore half made would be nobody's
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (out[0] instanceof io.gpusockets.backend.session.CheckpointRefused e) {
            throw e;
        } else if (out[0] instanceof IOException e) {
            throw e;
        } else if (out[0] instanceof RuntimeException e) {
            throw e;
        }
        return (Session) out[0];
    }

    /** Bulk bytes that went through shared windows, both ways, in sessions that have ended. */
    public long windowBytesCarried() {
        return windowBytes.sum();
    }

    /**
     * Of {@link #windowBytesCarried}, those through windows that sessions took when they resumed on a new ring
     * (a resume re-creates the shared window).
     */
    public long resumedWindowBytesCarried() {
        return resumedWindowBytes.sum();
    }

    @Override
    public void close() {
        closed = true;
        synchronized (this) {
            for (Listener l : listeners) {
                l.close();
            }
        }
        for (Session s : sessions) {
            s.end("backend shutting down");
        }
        if (workers != null) {
            workers.close();
        }
        timers.shutdownNow();
        status.close();
        if (contextPool != null) {
            contextPool.close();
        }
    }
}
