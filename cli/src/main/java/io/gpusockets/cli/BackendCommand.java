package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.SessionLimits;
import io.gpusockets.backend.status.AdminSocket;
import io.gpusockets.backend.status.MetricsEndpoint;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code gpusockets backend}: serves this machine's GPU (or the emulated device) until stopped. */
@Command(name = "backend", mixinStandardHelpOptions = true,
        description = "Serve the GPU to remote frontends until interrupted (SIGINT/SIGTERM).")
final class BackendCommand implements Callable<Integer> {
    @Option(names = "--listen", paramLabel = "URI",
            description = "Where to listen, repeatable: tcp://HOST:PORT (port 0 = any), unix:///PATH, vsock://CID|any:PORT. Default: ${DEFAULT-VALUE}.",
            defaultValue = "tcp://127.0.0.1:7070")
    List<String> listen;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver to serve: native (libcuda.so.1), emulated (no GPU), or auto (native when a GPU is present). Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "libcuda.so.1 to load (default: found by the dynamic loader).")
    String libcuda;

    @Option(names = "--psk-file", paramLabel = "FILE", description = "Require frontends to prove they hold the key in FILE (recommended for tcp).")
    Path pskFile;

    @Option(names = "--allow-uid", paramLabel = "UID", description = "Only these uids may connect over unix:// (repeatable; default: any).")
    Set<Integer> allowUids = Set.of();

    @Option(names = "--allow-cid", paramLabel = "CID", description = "Only these vsock CIDs may connect over vsock:// (repeatable; default: any).")
    Set<Long> allowCids = Set.of();

    @Option(names = "--no-async", description = "Refuse pipelining: every call waits for its reply (debugging).")
    boolean noAsync;

    @Option(names = "--max-lanes", paramLabel = "N", defaultValue = "256", description = "Client threads per session. Default: ${DEFAULT-VALUE}.")
    int maxLanes;

    @Option(names = "--warm-contexts", paramLabel = "N", defaultValue = "0",
            description = "Contexts to keep made ahead per device, so that a session's first context does not wait for the"
                    + " driver to make one (each serves one session, which destroys it). On the H200 only the first session"
                    + " after the backend starts gained (about 50 ms). Default: ${DEFAULT-VALUE}.")
    int warmContexts;

    @Option(names = "--admin-socket", paramLabel = "PATH",
            description = "Serve status (gpusockets status) on this Unix socket, mode 0600 (0660 with --admin-group);"
                    + " only root, this user and the admin group may read it. Default: none. Services use "
                    + StatusCommand.DEFAULT_SOCKET + ", where gpusockets status looks first.")
    Path adminSocket;

    @Option(names = "--admin-group", paramLabel = "NAME", description = "Members of this group may read the admin socket too.")
    String adminGroup;

    @Option(names = "--metrics", paramLabel = "tcp://HOST:PORT",
            description = "Serve Prometheus metrics on http://HOST:PORT/metrics (tenant-level; port 0 = any). Default: none.")
    String metrics;

    @Override
    public Integer call() throws Exception {
        if (adminGroup != null && adminSocket == null) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--admin-group needs --admin-socket");
        }
        TransportUri metricsUri = metrics == null ? null : TransportUri.parse(metrics);
        if (metricsUri != null && !metricsUri.scheme().equals("tcp")) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--metrics takes tcp://HOST:PORT: " + metrics);
        }
        if (warmContexts < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--warm-contexts must be 0 or more: " + warmContexts);
        }
        DriverHost host = device.open(libcuda);
        byte[] psk = pskFile == null ? null : Files.readString(pskFile).strip().getBytes(StandardCharsets.UTF_8);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync);
        BackendServer server = new BackendServer(host, BackendSettings.fromSystemProperties().withLimits(limits)
                .withServer(psk, allowUids, allowCids, BackendSettings.HANDSHAKE_MILLIS_DEFAULT, warmContexts));
        CountDownLatch stopped = new CountDownLatch(1);
        AdminSocket admin = adminSocket == null ? null : AdminSocket.open(adminSocket, adminGroup, server::snapshot);
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
        System.out.println("gpusockets backend: " + host.description() + ", " + host.deviceCount() + " device(s)");
        for (String uri : listen) {
            TransportUri bound = server.listen(TransportUri.parse(uri));
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
}
