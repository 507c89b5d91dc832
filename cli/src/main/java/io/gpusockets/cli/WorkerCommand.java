package io.gpusockets.cli;

import io.gpusockets.backend.isolation.WorkerMain;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
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

    @Override
    public Integer call() throws Exception {
        io.gpusockets.backend.server.NativeHeapTrim.limitArenas(); // a worker started by hand; the front's env is inherited
        DriverHost host = device.open(libcuda);
        SessionLimits d = SessionLimits.DEFAULT;
        SessionLimits limits = new SessionLimits(maxLanes, d.bodyBudget(), d.maxCallBody(), d.chunkBytes(),
                d.maxBulkBytes(), d.maxOutBytes(), !noAsync);
        return WorkerMain.run(host, BackendSettings.fromSystemProperties().withLimits(limits), control);
    }
}
