package io.gpusockets.backend.server;

import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.ContextPool;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.Session;
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
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The backend: listens on one or more transport URIs, runs the handshake with each frontend and
 * serves it as a {@link Session} on its own thread. A failing session never affects another.
 */
public final class BackendServer implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    private final DriverHost host;
    private final BackendSettings settings;
    /** Contexts made ahead for sessions, or null. */
    private final ContextPool contextPool;
    private final List<Listener> listeners = new ArrayList<>();
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();
    private final java.util.concurrent.atomic.LongAdder windowBytes = new java.util.concurrent.atomic.LongAdder();
    private final AtomicLong nextSessionId = new AtomicLong(1);
    private final SecureRandom random = new SecureRandom();
    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("gpusockets-handshake-timer").factory());
    private volatile boolean closed;
    /** The tenant of every session until tenants are configured. */
    private final io.gpusockets.backend.tenant.Tenant defaultTenant =
            new io.gpusockets.backend.tenant.Tenant("default", io.gpusockets.backend.tenant.TenantLimits.UNLIMITED);

    /** Isolation mode process: the worker processes that serve sessions after the handshake, else null. */
    private volatile io.gpusockets.backend.isolation.Workers workers;

    /** Isolation mode shared: each tenant's one context per device, else null. */
    private volatile io.gpusockets.backend.session.SharedContexts sharedContexts;

    public BackendServer(DriverHost host, BackendSettings settings) {
        this.host = host;
        this.settings = settings;
        this.contextPool = settings.warmContexts() > 0 ? new ContextPool(host, settings.warmContexts()) : null;
    }

    public DriverHost host() {
        return host;
    }

    /** Binds a listener and starts accepting on it; returns the address clients use. */
    public synchronized TransportUri listen(TransportUri uri) throws IOException {
        Listener l = Transports.listen(uri);
        listeners.add(l);
        Thread.ofPlatform().daemon().name("gpusockets-accept-" + uri.scheme()).start(() -> acceptLoop(l));
        LOG.log(Level.INFO, "listening on " + l.address() + " (" + host.description() + ")");
        return l.address();
    }

    public synchronized List<TransportUri> addresses() {
        return listeners.stream().map(Listener::address).toList();
    }

    public int sessionCount() {
        io.gpusockets.backend.isolation.Workers w = workers;
        return sessions.size() + (w == null ? 0 : w.serving());
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
        this.workers = w;
    }

    private void acceptLoop(Listener l) {
        while (!closed) {
            Connection c;
            try {
                c = l.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(Level.ERROR, "accept failed on " + l.address() + ": " + e.getMessage());
                }
                return;
            }
            // A platform thread: its blocking reads wake it directly, without the virtual-thread poller's extra hop.
            Thread.ofPlatform().daemon().name("gpusockets-session").start(() -> serve(c));
        }
    }

    private void serve(Connection c) {
        long id = nextSessionId.getAndIncrement();
        FrameChannel channel = new FrameChannel(c);
        String peer = c.peer().description();
        ScheduledFuture<?> timeout = timers.schedule(c::close, settings.handshakeMillis(), TimeUnit.MILLISECONDS);
        Integer features;
        try {
            features = handshake(channel, c, id);
        } catch (java.io.EOFException e) {
            // a port probe or a client that gave up: nothing was said, nothing to warn about
            LOG.log(Level.DEBUG, "peer " + peer + " closed before its handshake");
            c.close();
            return;
        } catch (IOException | RuntimeException e) {
            LOG.log(Level.WARNING, "handshake with " + peer + " failed: " + e.getMessage());
            c.close();
            return;
        } finally {
            timeout.cancel(false);
        }
        if (features == null || closed) {
            c.close();
            return;
        }
        io.gpusockets.backend.isolation.Workers w = workers;
        if (w != null) {
            w.handOver(c, new io.gpusockets.backend.isolation.SessionTicket(id, features, defaultTenant.name(),
                    defaultTenant.limits(), c.peer()), defaultTenant);
            return;
        }
        // The shared window, when the frontend asked for it and this end of the connection has one too.
        SharedWindow window = (features & Handshake.FEATURE_WINDOW) != 0 ? c.takeSharedWindow().orElse(null) : null;
        Session s = new Session(id, channel, host, settings, peer, (features & Handshake.FEATURE_ASYNC) != 0, window,
                contextPool, defaultTenant);
        if (sharedContexts != null) {
            s.shareContexts(sharedContexts);
        }
        sessions.add(s);
        LOG.log(Level.INFO, "session " + id + " started, peer " + peer);
        try {
            s.serve();
        } finally {
            sessions.remove(s);
            windowBytes.add(s.windowBytes());
        }
    }

    /** Runs the handshake; returns the features granted (Handshake.FEATURE_*), or null when refused. */
    private Integer handshake(FrameChannel channel, Connection c, long sessionId) throws IOException {
        byte[] nonce = new byte[Handshake.NONCE_BYTES];
        random.nextBytes(nonce);
        int auth = settings.preSharedKey() != null ? Handshake.AUTH_PSK : Handshake.AUTH_NONE;
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
                && !Handshake.proofMatches(settings.preSharedKey(), nonce, hello.identity(), hello.proof())) {
            refusal = "authentication failed: the pre-shared key does not match";
        } else if (!settings.allowedUids().isEmpty()
                && (c.peer().uid().isEmpty() || !settings.allowedUids().contains(c.peer().uid().getAsInt()))) {
            refusal = "peer uid " + (c.peer().uid().isPresent() ? c.peer().uid().getAsInt() : "unknown")
                    + " is not allowed";
        } else {
            refusal = cidRefusal(settings.allowedCids(), c.peer());
        }
        if (refusal != null) {
            LOG.log(Level.WARNING, "refused " + c.peer().description() + " (" + hello.identity() + "): " + refusal);
            channel.send(Opcodes.REFUSE, 0, 0, 0, Handshake.encodeString(refusal));
            return null;
        }
        boolean async = settings.limits().asyncAllowed() && (hello.features() & Handshake.FEATURE_ASYNC) != 0;
        // a worker (isolation mode process) cannot map the window of a connection the front relays for it
        boolean window = (hello.features() & Handshake.FEATURE_WINDOW) != 0 && c.hasSharedWindow() && workers == null;
        int features = (async ? Handshake.FEATURE_ASYNC : 0) | (window ? Handshake.FEATURE_WINDOW : 0);
        ByteBuffer welcome = new Handshake.Welcome(sessionId, host.driverVersion(), host.deviceCount(), features,
                host.description()).encode();
        channel.send(Opcodes.WELCOME, 0, 0, 0, welcome);
        return features;
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

    /** Bulk bytes that went through shared windows, both ways, in sessions that have ended. */
    public long windowBytesCarried() {
        return windowBytes.sum();
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
        if (contextPool != null) {
            contextPool.close();
        }
    }
}
