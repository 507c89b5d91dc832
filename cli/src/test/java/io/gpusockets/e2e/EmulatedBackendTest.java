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
        startBackend(java.util.List.of());
    }

    /**
     * Starts the class's backend with these JVM options too. A subclass that needs other options calls this from a
     * {@code @BeforeAll} of its own: where JUnit runs this class's {@code startBackend} as well, the backend it
     * started is closed here instead of being left running past the test JVM (the field is one for every subclass).
     */
    static void startBackend(java.util.List<String> jvmOptions) throws Exception {
        if (backend != null) {
            backend.close();
            backend = null;
        }
        java.util.List<String> options = new java.util.ArrayList<>(jvmOptions);
        options.addFirst("-D" + io.gpusockets.emulated.FaultScope.PROP_NAME + "=context");
        backend = BackendProcess.start(options, "--isolation", "context");
    }

    @AfterAll
    static void stopBackend() throws Exception {
        if (backend != null) {
            backend.close();
            backend = null;
        }
    }

    /** A frontend connected over {@code scheme} ("tcp" or "unix"). */
    static RemoteCudaDriver connect(String scheme) throws IOException {
        return RemoteCudaDriver.connect(backend.address(scheme));
    }
}
