package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.SessionIds;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.ServerLimits;
import io.gpusockets.backend.session.SessionLimits;
import io.gpusockets.backend.tenant.TenantConfig;
import io.gpusockets.backend.tenant.TenantRegistry;
import io.gpusockets.protocol.transport.TlsOptions;
import io.gpusockets.protocol.transport.TransportOptions;
import io.gpusockets.backend.status.AdminSocket;
import io.gpusockets.backend.status.MetricsEndpoint;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code gpusockets backend}: serves this machine's GPU (or the emulated device) until stopped. */
@Command(name = "backend", mixinStandardHelpOptions = true,
        description = "Serve the GPU to remote frontends until interrupted (SIGINT/SIGTERM; with --drain-to, SIGTERM"
                + " first moves every session to another backend).")
final class BackendCommand implements Callable<Integer> {
    @Option(names = "--listen", paramLabel = "URI",
            description = "Where to listen, repeatable: tcp://HOST:PORT (port 0 = any), tls://HOST:PORT (TLS 1.3, needs --tls-key-store), unix:///PATH, vsock://CID|any:PORT. Default: ${DEFAULT-VALUE}.",
            defaultValue = "tcp://127.0.0.1:7070")
    List<String> listen;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver to serve: native (libcuda.so.1), emulated (no GPU), or auto (native when a GPU is present). Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "libcuda.so.1 to load (default: found by the dynamic loader).")
    String libcuda;

    @Option(names = "--psk-file", paramLabel = "FILE", description = "Require frontends to prove they hold the key in FILE (recommended for tcp).")
    Path pskFile;

    @Option(names = "--tenants", paramLabel = "FILE",
            description = "Tenants: which proven identities (PSK identity, TLS certificate, uid, vsock CID, vchan domid) get which"
                    + " limits (README, Tenants). Re-read on SIGHUP without dropping sessions.")
    Path tenantsFile;

    @Option(names = "--allow-uid", paramLabel = "UID", description = "Only these uids may connect over unix://, ring:// and fdunix://, where the kernel proves"
            + " the peer's uid (repeatable; default: any). Not applied to tcp://, which has no uid: use --psk-file there.")
    Set<Integer> allowUids = Set.of();

    @Option(names = "--allow-cid", paramLabel = "CID", description = "Only these vsock CIDs may connect over vsock:// (repeatable; default: any).")
    Set<Long> allowCids = Set.of();

    @picocli.CommandLine.Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Option(names = "--tls-key-store", paramLabel = "FILE",
            description = "tls:// listeners: the server's certificate and private key (PKCS12).")
    Path tlsKeyStore;

    @Option(names = "--tls-key-store-password-file", paramLabel = "FILE",
            description = "The file holding --tls-key-store's password (first line).")
    Path tlsKeyStorePasswordFile;

    @Option(names = "--tls-client-ca", paramLabel = "FILE",
            description = "tls:// listeners: ask frontends for a client certificate and verify it against these CA"
                    + " certificates (PEM or PKCS12); its subject is the frontend's identity.")
    Path tlsClientCa;

    @Option(names = "--tls-client-ca-password-file", paramLabel = "FILE",
            description = "The file holding a PKCS12 --tls-client-ca's password.")
    Path tlsClientCaPasswordFile;

    @Option(names = "--tls-require-client-cert", description = "tls:// listeners: refuse frontends without a valid client certificate (needs --tls-client-ca).")
    boolean tlsRequireClientCert;

    @Option(names = "--no-async", description = "Refuse pipelining: every call waits for its reply (debugging).")
    boolean noAsync;

    @Option(names = "--max-lanes", paramLabel = "N", defaultValue = "256", description = "Client threads per session. Default: ${DEFAULT-VALUE}.")
    int maxLanes;

    @Option(names = "--max-handles", paramLabel = "N", defaultValue = "65536",
            description = "Handles (contexts, modules, streams, events, graphs, ...) a session may hold at once; a call past it"
                    + " gets CUDA_ERROR_OUT_OF_MEMORY. Default: ${DEFAULT-VALUE}.")
    int maxHandles;

    @Option(names = "--max-streams", paramLabel = "N", defaultValue = "8192",
            description = "Streams a session may hold at once (within --max-handles). Default: ${DEFAULT-VALUE}.")
    int maxStreams;

    @Option(names = "--warm-contexts", paramLabel = "N", defaultValue = "0",
            description = "Contexts to keep made ahead per device, so that a session's first context does not wait for the"
                    + " driver to make one (each serves one session, which destroys it). On the H200 only the first session"
                    + " after the backend starts gained (about 50 ms). Default: ${DEFAULT-VALUE}.")
    int warmContexts;

    @Option(names = "--max-connections", paramLabel = "N", defaultValue = "" + ServerLimits.MAX_CONNECTIONS_DEFAULT,
            description = "Connections held at once, also before their handshake; a new one past it is closed at once."
                    + " Default: ${DEFAULT-VALUE}.")
    int maxConnections;

    @Option(names = "--max-handshakes", paramLabel = "N", defaultValue = "" + ServerLimits.MAX_HANDSHAKES_DEFAULT,
            description = "Handshakes in progress at once; past it the oldest is dropped. Default: ${DEFAULT-VALUE}.")
    int maxHandshakes;

    @Option(names = "--max-sessions", paramLabel = "N", defaultValue = "" + ServerLimits.MAX_SESSIONS_DEFAULT,
            description = "Sessions at once; past it a frontend is refused ('too many sessions'). With --isolation process"
                    + " (the default) at most --max-workers. Default: ${DEFAULT-VALUE}.")
    int maxSessions;

    @Option(names = "--idle-timeout", paramLabel = "SECONDS", defaultValue = "" + ServerLimits.IDLE_TIMEOUT_SECONDS_DEFAULT,
            description = "End a session that has sent no frame for this long and has no call running; 0 = never."
                    + " Default: ${DEFAULT-VALUE}.")
    long idleTimeoutSeconds;

    @Option(names = "--resume-grace", paramLabel = "SECONDS",
            defaultValue = "" + BackendServer.RESUME_GRACE_SECONDS_DEFAULT,
            description = "How long a session whose connection was lost waits, detached, for its frontend to resume it"
                    + " (frontends that ask: GPUSOCKETS_RESUME=1); it still counts against its tenant meanwhile. 0 = no"
                    + " resume. Offered in every isolation mode and over every transport (ring:// without its shared"
                    + " window). Default: ${DEFAULT-VALUE}.")
    long resumeGraceSeconds;

    @Option(names = "--stable-addresses",
            description = "Give new sessions address-stable memory (each session's allocations in an address window of"
                    + " its own, which a checkpoint needs), unless their tenant's stable-addresses says otherwise. Off by"
                    + " default: it makes allocation and free up to a quarter slower (README, Address-stable memory)."
                    + " Without it, -Dgpusockets.backend.stableAddresses=true turns it on.")
    boolean stableAddresses;

    @Option(names = "--fleet-id", paramLabel = "N", defaultValue = "0",
            description = "This backend's id in a fleet of backends, 0 to " + SessionIds.MAX_FLEET + ": the session ids it"
                    + " issues carry it (fleet id * 2^" + SessionIds.FLEET_SHIFT + " + a counter), and so do their address"
                    + " windows, so that a session checkpointed here can be restored on another backend of the fleet."
                    + " Give each backend of a fleet its own. Default: ${DEFAULT-VALUE}.")
    int fleetId;

    @Option(names = "--admin-socket", paramLabel = "PATH",
            description = "Serve status, checkpoint, restore and migrate (gpusockets status|checkpoint|restore|migrate) on this Unix"
                    + " socket, mode 0600 (0660 with --admin-group); only root, this user and the admin group may use it."
                    + " Default: none. Services use " + StatusCommand.DEFAULT_SOCKET + ", where those commands look first.")
    Path adminSocket;

    @Option(names = "--restore", paramLabel = "FILE",
            description = "Before listening, restore the session checkpointed in FILE (gpusockets checkpoint --stop);"
                    + " its program's frontend then resumes it here. Repeatable: restored together, so that sessions"
                    + " checkpointed together share their IPC memory and events again (isolation process: their IPC"
                    + " events, each image in a worker of its own). A restore that"
                    + " fails stops the backend.")
    List<Path> restoreFiles = new ArrayList<>();

    @Option(names = "--accept-migrations",
            description = "Accept sessions migrated here from other backends (gpusockets migrate), proven by this backend's"
                    + " own --psk-file key, a TLS client certificate, or, over unix, this backend's own uid. In every"
                    + " isolation mode (process: an idle worker restores each). Off by default.")
    boolean acceptMigrations;

    @Option(names = "--drain-to", paramLabel = "URI",
            description = "On SIGTERM, before stopping: refuse new sessions and migrate every session to the backend"
                    + " listening at URI (started with --accept-migrations; a session moves when it has resume and"
                    + " address-stable memory), " + DRAIN_PARALLEL + " at a time, then exit (status 0) once all are done"
                    + " or --drain-timeout has passed; a session that cannot move ends as at any shutdown (logged with"
                    + " why). SIGINT, or a second SIGTERM, stops at once. Default: none (SIGTERM stops at once).")
    String drainTo;

    @Option(names = "--drain-timeout", paramLabel = "SECONDS", defaultValue = "300",
            description = "With --drain-to: how long the drain may take before the backend stops anyway."
                    + " Default: ${DEFAULT-VALUE}.")
    long drainTimeoutSeconds;

    /** Sessions a --drain-to migrates at once. */
    static final int DRAIN_PARALLEL = 4;

    @Option(names = "--migration-buffer", paramLabel = "MIB", defaultValue = "256",
            description = "With --accept-migrations: host memory an incoming migration keeps its received chunks in,"
                    + " beyond which they go to a temp file. Default: ${DEFAULT-VALUE}.")
    long migrationBufferMib;

    @Option(names = "--take-over", paramLabel = "ADMIN_SOCKET",
            description = "Take over the running backend whose --admin-socket is ADMIN_SOCKET (a rolling upgrade): its"
                    + " listeners (tcp://, unix://) and the sessions its workers serve move here, no program failing and no"
                    + " GPU memory copied; the old backend then exits (after the sessions it serves itself end). Needs the"
                    + " same --isolation. Without --listen, serves what the old backend listened on. README, Upgrading a"
                    + " backend with no program failing.")
    Path takeOver;

    @Option(names = "--admin-group", paramLabel = "NAME", description = "Members of this group may read the admin socket too.")
    String adminGroup;

    @Option(names = "--metrics", paramLabel = "tcp://HOST:PORT",
            description = "Serve Prometheus metrics on http://HOST:PORT/metrics (tenant-level; port 0 = any). Default: none.")
    String metrics;

    @Option(names = "--isolation", paramLabel = "context|process|shared",
            defaultValue = io.gpusockets.backend.isolation.Isolation.DEFAULT_NAME,
            converter = IsolationConverter.class,
            description = "How sessions are kept apart: process (a worker process per session: a faulting kernel or a crash"
                    + " ends only its session), context (own contexts in one process: a faulting kernel poisons the driver"
                    + " and new sessions are refused until a restart), shared (a tenant's sessions share one context)."
                    + " Default: ${DEFAULT-VALUE}.")
    io.gpusockets.backend.isolation.Isolation isolation;

    @Option(names = "--idle-workers", paramLabel = "N", defaultValue = "1",
            description = "With --isolation process: worker processes kept started ahead, so that a session does not wait"
                    + " for a JVM to start. Default: ${DEFAULT-VALUE}.")
    int idleWorkers;

    @Option(names = "--max-workers", paramLabel = "N", defaultValue = "64",
            description = "With --isolation process: worker processes at most, idle ones included, so also the sessions at"
                    + " once; a session beyond is refused at its handshake. Default: ${DEFAULT-VALUE}.")
    int maxWorkers;

    static final class IsolationConverter implements picocli.CommandLine.ITypeConverter<io.gpusockets.backend.isolation.Isolation> {
        @Override
        public io.gpusockets.backend.isolation.Isolation convert(String value) {
            return io.gpusockets.backend.isolation.Isolation.parse(value);
        }
    }

    /**
     * The command line of a worker process: this JVM's java and classpath, its options less those that size this
     * JVM plus the workers' own ({@link io.gpusockets.backend.isolation.WorkerJvmOptions}), serving the same driver.
     */
    private List<String> workerCommand(DriverHost host) {
        List<String> cmd = new java.util.ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(io.gpusockets.backend.isolation.WorkerJvmOptions.of(
                java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments(),
                io.gpusockets.backend.isolation.WorkerJvmOptions.extra()));
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName(), "worker", "--device",
                host.driver() instanceof io.gpusockets.backend.driver.NativeCudaDriver ? "native" : "emulated",
                "--max-lanes", String.valueOf(maxLanes), "--max-handles", String.valueOf(maxHandles),
                "--max-streams", String.valueOf(maxStreams), "--idle-timeout", String.valueOf(idleTimeoutSeconds)));
        if (host.driver() instanceof io.gpusockets.emulated.EmulatedDevice e) {
            cmd.addAll(List.of("--emulated-uuid-seed", String.valueOf(e.uuidSeed())));
        }
        if (libcuda != null) {
            cmd.addAll(List.of("--libcuda", libcuda));
        }
        if (noAsync) {
            cmd.add("--no-async");
        }
        return cmd;
    }

    @Override
    public Integer call() throws Exception {
        io.gpusockets.backend.server.NativeHeapTrim.limitArenas(); // when the launcher has not (MALLOC_ARENA_MAX)
        if (adminGroup != null && adminSocket == null) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--admin-group needs --admin-socket");
        }
        TransportUri metricsUri = metrics == null ? null : TransportUri.parse(metrics);
        if (metricsUri != null && !metricsUri.scheme().equals("tcp")) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--metrics takes tcp://HOST:PORT: " + metrics);
        }
        if (fleetId < 0 || fleetId > SessionIds.MAX_FLEET) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--fleet-id must be 0 to " + SessionIds.MAX_FLEET + ": " + fleetId);
        }
        if (warmContexts < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--warm-contexts must be 0 or more: " + warmContexts);
        }
        ServerLimits serverLimits;
        try {
            serverLimits = new ServerLimits(maxConnections, maxHandshakes, maxSessions, idleTimeoutSeconds);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), e.getMessage());
        }
        if (maxHandles < 1 || maxStreams < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--max-handles must be 1 or more and --max-streams 0 or more: " + maxHandles + ", " + maxStreams);
        }
        TenantRegistry tenants;
        try {
            TenantConfig config = tenantsFile == null ? TenantConfig.unlimited() : TenantConfig.read(tenantsFile);
            String refused = isolation.tenantsRefusal(config);
            if (refused != null) {
                System.err.println("gpusockets backend: --tenants file refused: " + refused);
                return 2;
            }
            tenants = new TenantRegistry(config);
        } catch (IllegalArgumentException | java.io.IOException e) {
            System.err.println("gpusockets backend: bad --tenants file: " + (e instanceof java.io.IOException ? tenantsFile + ": " + e : e.getMessage()));
            return 2;
        }
        TransportOptions transportOptions = tlsOptions();
        if (warmContexts > 0 && isolation != io.gpusockets.backend.isolation.Isolation.CONTEXT) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--warm-contexts is for"
                    + " --isolation context: in mode process each idle worker makes its session's context ahead, in mode"
                    + " shared a tenant's sessions share one");
        }
        if (migrationBufferMib < 0 || migrationBufferMib > (Long.MAX_VALUE >> 20)) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "--migration-buffer must be 0 or more MiB: " + migrationBufferMib);
        }
        if (drainTo != null) {
            try {
                TransportUri.parse(drainTo);
            } catch (IllegalArgumentException e) {
                throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--drain-to " + drainTo + ": "
                        + e.getMessage());
            }
        }
        if (drainTimeoutSeconds < 1) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "--drain-timeout must be 1 or more seconds: " + drainTimeoutSeconds);
        }
        DriverHost host = device.open(libcuda);
        byte[] psk = pskFile == null ? null : Files.readString(pskFile).strip().getBytes(StandardCharsets.UTF_8);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync, maxHandles, maxStreams);
        BackendSettings settings = BackendSettings.fromSystemProperties().withLimits(limits)
                .withServer(psk, allowUids, allowCids, BackendSettings.HANDSHAKE_MILLIS_DEFAULT, warmContexts)
                .withServerLimits(serverLimits);
        if (stableAddresses) {
            settings = settings.withStableAddresses(true);
        }
        BackendServer server = new BackendServer(host, settings, tenants);
        server.fleetId(fleetId);
        if (resumeGraceSeconds < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--resume-grace must be 0 or more seconds: " + resumeGraceSeconds);
        }
        server.resumeGrace(java.time.Duration.ofSeconds(resumeGraceSeconds));
        server.acceptMigrations(acceptMigrations);
        server.migrationBufferBytes(migrationBufferMib << 20);
        if (tenantsFile != null) {
            tenants.checkReloadsWith(isolation::tenantsRefusal);
            reloadOnHangup(tenants);
        }
        if (isolation == io.gpusockets.backend.isolation.Isolation.PROCESS) {
            if (idleWorkers < 0 || maxWorkers < 1 || idleWorkers > maxWorkers) {
                throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                        "need 0 <= --idle-workers <= --max-workers and --max-workers >= 1: " + idleWorkers + ", " + maxWorkers);
            }
            server.handSessionsTo(new io.gpusockets.backend.isolation.Workers(workerCommand(host), idleWorkers, maxWorkers));
        }
        if (isolation == io.gpusockets.backend.isolation.Isolation.SHARED) {
            server.shareContextsPerTenant();
        }
        CountDownLatch stopped = new CountDownLatch(1);
        if (restoreFiles.size() > 1) {
            // together: sessions checkpointed together share memory and events again before any resumes (any order)
            List<Path> all = restoreFiles.stream().map(Path::toAbsolutePath).toList();
            try {
                List<Long> ids = server.restoreGroup(all, null);
                for (int i = 0; i < ids.size(); i++) {
                    System.out.println("gpusockets backend: session " + ids.get(i) + " restored from " + restoreFiles.get(i)
                            + ", waiting for its frontend");
                }
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException e) {
                server.close();
                throw new picocli.CommandLine.ExecutionException(spec.commandLine(), "cannot restore " + restoreFiles + ": "
                        + e.getMessage(), e);
            }
        }
        for (Path image : restoreFiles.size() > 1 ? List.<Path>of() : restoreFiles) {
            try {
                long id = server.restore(image.toAbsolutePath(), null);
                System.out.println("gpusockets backend: session " + id + " restored from " + image + ", waiting for its frontend");
            } catch (io.gpusockets.backend.session.CheckpointRefused | IOException e) {
                server.close();
                throw new picocli.CommandLine.ExecutionException(spec.commandLine(), "cannot restore " + image + ": "
                        + e.getMessage(), e);
            }
        }
        java.util.Set<String> takenListeners = new java.util.HashSet<>();
        if (takeOver != null) {
            io.gpusockets.backend.isolation.TakeOver.Summary taken;
            long t0 = System.nanoTime();
            long tAsked;
            long tEnd;
            try (io.gpusockets.backend.isolation.TakeOver.Request request = io.gpusockets.backend.isolation.TakeOver.ask(
                    takeOver.toAbsolutePath(), isolation.name().toLowerCase(java.util.Locale.ROOT))) {
                tAsked = System.nanoTime();
                taken = server.takeOver(request);
                tEnd = System.nanoTime();
                String answer = request.answer();
                if (!answer.startsWith("ok ")) {
                    System.err.println("gpusockets backend: the old backend reported after the take-over: " + answer);
                }
            } catch (IOException e) {
                server.close();
                System.err.println("gpusockets backend: take-over failed: " + e.getMessage());
                return 2;
            }
            takenListeners.addAll(server.addresses().stream().map(TransportUri::toString).toList());
            System.out.printf(java.util.Locale.ROOT, "gpusockets backend: took over pid %d: %d session(s) adopted, %d"
                            + " listener(s), %d bytes on the take-over connection, %d session(s) handed over (%d bytes of"
                            + " device memory mapped, %d copied), in %.1f ms (request %.1f, the old backend's stop and"
                            + " hand %.1f, adoption %.1f, hand-overs %.1f); %d session(s) stay in the old backend until"
                            + " they end%n", taken.fromPid(), taken.sessions(), taken.listeners(), taken.bytes(),
                    taken.handedOver(), taken.handedBytes(), taken.copiedBytes(), (tEnd - t0) / 1e6, (tAsked - t0) / 1e6,
                    taken.handNanos() / 1e6, taken.adoptNanos() / 1e6, taken.handOverNanos() / 1e6, taken.sessionsKept());
        }
        server.onTakenOver(summary -> {
            System.out.println("gpusockets backend: taken over: handed " + summary.sessions() + " session(s) and "
                    + summary.listeners() + " listener(s), " + summary.bytes() + " bytes on the take-over connection, "
                    + summary.handedOver() + " session(s) handed over (" + summary.handedBytes() + " bytes of device memory"
                    + " mapped there, " + summary.copiedBytes() + " copied); exiting");
            System.out.flush();
            Thread.ofPlatform().start(() -> System.exit(0));
        });
        AdminSocket admin = adminSocket == null ? null
                : takeOver != null && adminSocket.toAbsolutePath().equals(takeOver.toAbsolutePath())
                ? AdminSocket.openInPlaceOf(adminSocket, adminGroup, server::snapshot, new SessionActions(server))
                : AdminSocket.open(adminSocket, adminGroup, server::snapshot, new SessionActions(server));
        MetricsEndpoint endpoint = metricsUri == null ? null
                : MetricsEndpoint.start(server::snapshot, metricsUri.host(), metricsUri.port());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (admin != null) {
                admin.close();
            }
            if (endpoint != null) {
                endpoint.close();
            }
            server.close();
            stopped.countDown();
        }, "gpusockets-shutdown"));
        if (drainTo != null) {
            drainOnTerminate(server, stopped);
        }
        System.out.println("gpusockets backend: " + host.description() + ", " + host.deviceCount() + " device(s), isolation "
                + isolation + (isolation == io.gpusockets.backend.isolation.Isolation.PROCESS ? " (a worker process per session, at most "
                + maxWorkers + " at once, " + idleWorkers + " kept started ahead)" : ""));
        // the old backend's sockets, taken over: reported with the others, once the admin socket answers (a script that
        // waits for "listening on" and then asks for status finds it, as after a fresh start)
        for (String uri : takenListeners) {
            System.out.println("gpusockets backend: listening on " + uri);
        }
        boolean listenGiven = spec.commandLine().getParseResult() != null
                && spec.commandLine().getParseResult().hasMatchedOption("--listen");
        for (String uri : takeOver != null && !listenGiven ? List.<String>of() : listen) {
            if (takenListeners.contains(TransportUri.parse(uri).toString())) {
                continue; // taken over from the old backend
            }
            TransportUri bound = server.listen(TransportUri.parse(uri), transportOptions);
            System.out.println("gpusockets backend: listening on " + bound);
        }
        if (admin != null) {
            System.out.println("gpusockets backend: admin socket " + admin.path());
        }
        if (endpoint != null) {
            String h = metricsUri.host().indexOf(':') >= 0 ? "[" + metricsUri.host() + "]" : metricsUri.host();
            System.out.println("gpusockets backend: metrics on http://" + h + ":" + endpoint.port() + "/metrics");
        }
        System.out.flush();
        stopped.await();
        return 0;
    }

    /**
     * --drain-to: SIGTERM (sun.misc.Signal, as for SIGHUP) starts {@link BackendServer#drainTo} on a thread of its own,
     * prints each session that did not move and a summary, and then lets {@link #call} return 0 (the shutdown hook
     * closes the rest); a second SIGTERM exits at once (status 143, as without --drain-to). SIGINT is left as it is.
     */
    private void drainOnTerminate(BackendServer server, CountDownLatch stopped) {
        java.util.concurrent.atomic.AtomicBoolean started = new java.util.concurrent.atomic.AtomicBoolean();
        try {
            sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> {
                if (!started.compareAndSet(false, true)) {
                    System.out.println("gpusockets backend: second SIGTERM: stopping now, sessions not moved yet end");
                    System.out.flush();
                    Thread.ofPlatform().name("gpusockets-exit").start(() -> System.exit(143));
                    return;
                }
                Thread.ofPlatform().name("gpusockets-drain").start(() -> {
                    int n = server.sessions().size();
                    System.out.println("gpusockets backend: SIGTERM: moving " + n + " session(s) to " + drainTo
                            + " (at most " + drainTimeoutSeconds + " s), then stopping");
                    System.out.flush();
                    try {
                        BackendServer.Drain d = server.drainTo(drainTo, java.time.Duration.ofSeconds(drainTimeoutSeconds),
                                DRAIN_PARALLEL);
                        for (var r : d.moved()) {
                            System.out.println("gpusockets backend: session " + r.sessionId() + " moved to " + r.target()
                                    + " (" + r.bytes() + " bytes, downtime " + r.downtimeNanos() / 1_000_000 + " ms)");
                        }
                        for (var e : new java.util.TreeMap<>(d.notMoved()).entrySet()) {
                            System.out.println("gpusockets backend: session " + e.getKey() + " not moved: " + e.getValue()
                                    + "; it ends now");
                        }
                        System.out.println("gpusockets backend: drained: " + d.moved().size() + " session(s) moved to "
                                + drainTo + ", " + d.notMoved().size() + " not moved");
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    } finally {
                        System.out.flush();
                        stopped.countDown();
                    }
                });
            });
        } catch (IllegalArgumentException e) {
            System.err.println("gpusockets backend: SIGTERM cannot be handled here (" + e.getMessage()
                    + "); --drain-to does nothing, SIGTERM stops at once");
        }
    }

    /**
     * SIGHUP re-reads the tenants file (sun.misc.Signal, module jdk.unsupported: the JDK has no supported API for
     * it). A file that fails to parse leaves the previous configuration in force; the reason is logged.
     */
    private static void reloadOnHangup(TenantRegistry tenants) {
        try {
            sun.misc.SignalHandler before = sun.misc.Signal.handle(new sun.misc.Signal("HUP"), sig -> Thread.ofPlatform().daemon()
                    .name("gpusockets-tenants-reload").start(() -> {
                        String failure = tenants.reload();
                        System.out.println("gpusockets backend: tenants " + (failure == null
                                ? "reloaded from " + tenants.file() : "not reloaded: " + failure));
                        System.out.flush();
                    }));
            if (before == sun.misc.SignalHandler.SIG_IGN) {
                // the JVM leaves a signal its process was started ignoring (nohup does that) ignored, handler or not
                System.err.println("gpusockets backend: SIGHUP is ignored in this process (started under nohup?), so it"
                        + " cannot reload the tenants file; start the backend without nohup (a service manager, setsid)");
            }
        } catch (IllegalArgumentException e) {
            System.err.println("gpusockets backend: SIGHUP cannot be handled here (" + e.getMessage()
                    + "); the tenants file is read once");
        }
    }

    /** The --tls-* options for the transports; refused when no --listen is tls:// (they would protect nothing). */
    private TransportOptions tlsOptions() {
        TransportOptions o = TransportOptions.NONE
                .with(TlsOptions.KEY_STORE, tlsKeyStore)
                .with(TlsOptions.KEY_STORE_PASSWORD_FILE, tlsKeyStorePasswordFile)
                .with(TlsOptions.TRUST, tlsClientCa)
                .with(TlsOptions.TRUST_PASSWORD_FILE, tlsClientCaPasswordFile)
                .with(TlsOptions.REQUIRE_CLIENT_CERTIFICATE, tlsRequireClientCert ? Boolean.TRUE : null);
        boolean anyTls = listen.stream().anyMatch(u -> TransportUri.parse(u).scheme().equals("tls"));
        if (!o.isEmpty() && !anyTls) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "--tls-* options are given but no --listen address is tls://HOST:PORT (tcp:// is plaintext)");
        }
        if (anyTls && tlsKeyStore == null) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "a tls:// listener needs --tls-key-store FILE.p12 (its certificate and key)");
        }
        return o;
    }
}
