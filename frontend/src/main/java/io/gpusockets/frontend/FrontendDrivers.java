package io.gpusockets.frontend;

import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;

/** Connects the frontend to its backend(s) as configured. */
public final class FrontendDrivers {
    private FrontendDrivers() {
    }

    /** The driver for {@code config}: a {@link RemoteCudaDriver} for its first server. */
    public static CudaDriver connect(FrontendConfig config) throws IOException {
        return RemoteCudaDriver.connect(config);
    }
}
