package io.gpusockets.e2e;

import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * End-to-end tests against one backend process (emulated device) shared by the test class. These test the API's
 * semantics, not isolation, so they pin isolation mode context: their many short sessions would each start a
 * worker JVM in the default mode, and some check what one process guards between its sessions (another session's
 * pointers and handles, which in mode process live in another process anyway). The emulated device keeps a kernel
 * fault in its context here ({@code faultScope=context}), so that a test that faults on purpose does not poison
 * the shared backend for the tests after it. The default mode's own end-to-end coverage is in
 * {@link CudaProgramsTest}, {@link NativeProgramsTest}, {@link RuntimeProgramsTest}, {@link ProcessIsolationTest}
 * and {@link KernelFaultIsolationTest}.
 */
abstract class EmulatedBackendTest {
    static BackendProcess backend;

    @BeforeAll
    static void startBackend() throws Exception {
        backend = BackendProcess.start(java.util.List.of("-D" + io.gpusockets.emulated.FaultScope.PROP_NAME + "=context"),
                "--isolation", "context");
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
