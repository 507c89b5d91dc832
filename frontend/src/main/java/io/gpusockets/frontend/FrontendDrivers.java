package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The driver a frontend program (or our libcuda.so.1) uses: one backend as a {@link RemoteCudaDriver},
 * several ({@code GPUSOCKETS_SERVER=uri1,uri2}) merged into one device list by a {@link MultiBackendDriver}.
 * Either way the result is also {@link AutoCloseable}.
 */
public final class FrontendDrivers {
    private FrontendDrivers() {
    }

    /** Connects to every backend of {@code config}; fails, closing what it opened, if any cannot be reached. */
    public static CudaDriver connect(FrontendConfig config) throws IOException {
        List<String> servers = config.servers();
        if (servers.size() == 1) {
            return RemoteCudaDriver.connect(config);
        }
        if (servers.size() > MultiBackendDriver.MAX_BACKENDS) {
            throw new IllegalArgumentException(FrontendConfig.SERVER_ENV + " names " + servers.size()
                    + " backends; at most " + MultiBackendDriver.MAX_BACKENDS + " can be merged");
        }
        List<RemoteCudaDriver> drivers = new ArrayList<>(servers.size());
        try {
            for (String uri : servers) {
                drivers.add(RemoteCudaDriver.connect(config.withServers(List.of(uri))));
            }
        } catch (IOException | RuntimeException e) {
            drivers.forEach(RemoteCudaDriver::close);
            throw e;
        }
        return new MultiBackendDriver(drivers);
    }

    /** Connects to GPUSOCKETS_SERVER (one URI or several, comma-separated). */
    public static CudaDriver fromEnvironment() throws IOException {
        return connect(FrontendConfig.fromEnvironment(Map.of()));
    }
}
