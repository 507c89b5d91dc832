package io.gpusockets.e2e;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** End-to-end tests against one backend process (emulated device) shared by the test class. */
abstract class EmulatedBackendTest {
    static BackendProcess backend;

    @BeforeAll
    static void startBackend() throws Exception {
        backend = BackendProcess.start();
    }

    @AfterAll
    static void stopBackend() throws Exception {
        backend.close();
    }

    /** A frontend connected over {@code scheme} ("tcp" or "unix"). */
    static RemoteCudaDriver connect(String scheme) throws IOException {
        return RemoteCudaDriver.connect(backend.address(scheme));
    }
}
