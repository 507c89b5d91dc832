package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.SessionLimits;
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

    @Option(names = "--isolation", paramLabel = "context|process|shared", defaultValue = "context",
            converter = IsolationConverter.class,
            description = "How sessions are kept apart: context (own contexts, one process), process (a worker process per"
                    + " session: a crash ends only its session), shared (a tenant's sessions share one context). Default: ${DEFAULT-VALUE}.")
    io.gpusockets.backend.isolation.Isolation isolation;

    @Option(names = "--idle-workers", paramLabel = "N", defaultValue = "1",
            description = "With --isolation process: worker processes kept started ahead, so that a session does not wait"
                    + " for a JVM to start. Default: ${DEFAULT-VALUE}.")
    int idleWorkers;

    @Option(names = "--max-workers", paramLabel = "N", defaultValue = "64",
            description = "With --isolation process: worker processes at most, idle ones included; sessions beyond are"
                    + " refused. Default: ${DEFAULT-VALUE}.")
    int maxWorkers;

    static final class IsolationConverter implements picocli.CommandLine.ITypeConverter<io.gpusockets.backend.isolation.Isolation> {
        @Override
        public io.gpusockets.backend.isolation.Isolation convert(String value) {
            return io.gpusockets.backend.isolation.Isolation.parse(value);
        }
    }

    /** The command line of a worker process: this JVM's java, options and classpath, serving the same driver. */
    private List<String> workerCommand(DriverHost host) {
        List<String> cmd = new java.util.ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), Main.class.getName(), "worker", "--device",
                host.driver() instanceof io.gpusockets.backend.driver.NativeCudaDriver ? "native" : "emulated",
                "--max-lanes", String.valueOf(maxLanes)));
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
        if (warmContexts < 0) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--warm-contexts must be 0 or more: " + warmContexts);
        }
        if (warmContexts > 0 && isolation != io.gpusockets.backend.isolation.Isolation.CONTEXT) {
            throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), "--warm-contexts is for"
                    + " --isolation context: in mode process each idle worker makes its session's context ahead, in mode"
                    + " shared a tenant's sessions share one");
        }
        DriverHost host = device.open(libcuda);
        byte[] psk = pskFile == null ? null : Files.readString(pskFile).strip().getBytes(StandardCharsets.UTF_8);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync);
        BackendServer server = new BackendServer(host, BackendSettings.fromSystemProperties().withLimits(limits)
                .withServer(psk, allowUids, allowCids, BackendSettings.HANDSHAKE_MILLIS_DEFAULT, warmContexts));
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
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.close();
            stopped.countDown();
        }, "gpusockets-shutdown"));
        System.out.println("gpusockets backend: " + host.description() + ", " + host.deviceCount() + " device(s), isolation "
                + isolation);
        for (String uri : listen) {
            TransportUri bound = server.listen(TransportUri.parse(uri));
            System.out.println("gpusockets backend: listening on " + bound);
        }
        System.out.flush();
        stopped.await();
        return 0;
    }
}
