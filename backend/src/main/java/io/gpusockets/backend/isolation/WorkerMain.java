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
 * died) the session ends at once; a SIGTERM ends it as a backend shutdown does.
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
        HandedConnection.Received received = HandedConnection.receive(control);
        if (received == null) {
            control.close();
            return 0; // stopped while idle
        }
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
        if (t.resumable()) {
            s.resumable(new Session.Resume(t.resumeToken(), t.identity(), Duration.ofSeconds(t.graceSeconds()), t.features(),
                    t.retainBytes()));
        }
        Thread.ofPlatform().daemon().name("gpusockets-worker-control").start(() -> {
            java.util.List<Integer> fds = new java.util.ArrayList<>(HandedConnection.MAX_DESCRIPTORS);
            try {
                while (true) {
                    ByteBuffer a = ControlMessages.readWithDescriptors(control, fds::add);
                    byte type = a.get();
                    if (type != ControlMessages.RESUME && !fds.isEmpty()) {
                        throw new IOException("control message " + type + " came with descriptors");
                    }
                    switch (type) {
                        case ControlMessages.ANSWER -> tenant.answered(a.getLong(), a.getLong());
                        case ControlMessages.LIMITS -> tenant.setLimits(SessionTicket.getLimits(a));
                        case ControlMessages.RESUME -> resume(s, a, fds);
                        default -> throw new IOException("unexpected control message");
                    }
                }
            } catch (IOException | RuntimeException e) {
                fds.forEach(io.gpusockets.transport.vsock.DescriptorPassing::close);
                tenant.frontGone();
                s.end("the backend's front process is gone");
            }
        });
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
     * token and identity and sent WELCOME); the session attaches it, or it is closed when the session cannot
     * take it (not waiting for one, or ended).
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
        boolean ok = s.attach(new FrameChannel(c));
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
