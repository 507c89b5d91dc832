package io.gpusockets.cli;

import io.gpusockets.backend.isolation.WorkerMain;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.ServerLimits;
import io.gpusockets.backend.session.SessionLimits;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code gpusockets worker}: one worker process of a backend in isolation mode process, started by the
 * backend itself (never by hand): serves the one session the backend hands it, then exits.
 */
@Command(name = "worker", hidden = true, description = "A backend's worker process (--isolation process); started by the backend.")
final class WorkerCommand implements Callable<Integer> {
    @Option(names = "--control", required = true, paramLabel = "URI", description = "The backend's control socket (fdunix://).")
    String control;

    @Option(names = "--device", paramLabel = "native|emulated", defaultValue = "emulated")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH")
    String libcuda;

    @Option(names = "--no-async")
    boolean noAsync;

    @Option(names = "--max-lanes", paramLabel = "N", defaultValue = "256")
    int maxLanes;

    @Option(names = "--max-handles", paramLabel = "N", defaultValue = "65536")
    int maxHandles;

    @Option(names = "--max-streams", paramLabel = "N", defaultValue = "8192")
    int maxStreams;

    @Option(names = "--idle-timeout", paramLabel = "SECONDS", defaultValue = "0")
    long idleTimeoutSeconds;

    @Option(names = "--emulated-uuid-seed", paramLabel = "N",
            description = "The backend's emulated device's UUID seed, so that every session sees the same device.")
    Long emulatedUuidSeed;

    @Override
    public Integer call() throws Exception {
        io.gpusockets.backend.server.NativeHeapTrim.limitArenas(); // a worker started by hand; the front's env is inherited
        DriverHost host = device.open(libcuda, emulatedUuidSeed);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync, maxHandles, maxStreams);
        ServerLimits s = ServerLimits.DEFAULT;
        return WorkerMain.run(host, BackendSettings.fromSystemProperties().withLimits(limits).withServerLimits(
                new ServerLimits(s.maxConnections(), s.maxHandshakes(), s.maxSessions(), idleTimeoutSeconds)), control);
    }
}
