package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.protocol.api.CudaDriver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;

/**
 * What the in-process checkpoint and migration tests share: each test runs with address-stable memory and resume on (the system
 * properties the backend and the frontend read, set back afterwards), a temporary folder for its images, and
 * backends on an emulated device (or a driver wrapping one) that keep a detached session a minute.
 */
abstract class CheckpointTestSupport {
    private String wasStable, wasResume;
    /** This test's folder for images and sockets. */
    Path dir;

    @BeforeEach
    void stableAndResumable() throws Exception {
        wasStable = System.setProperty("gpusockets.backend.stableAddresses", "true");
        wasResume = System.setProperty("gpusockets.resume", "true");
        dir = Files.createTempDirectory("gpusockets-" + getClass().getSimpleName());
    }

    @AfterEach
    void asBefore() {
        setBack("gpusockets.backend.stableAddresses", wasStable);
        setBack("gpusockets.resume", wasResume);
    }

    private static void setBack(String key, String was) {
        if (was == null) {
            System.clearProperty(key);
        } else {
            System.setProperty(key, was);
        }
    }

    /** A backend on {@code driver}, with a resume grace of 60 s. */
    static BackendServer server(CudaDriver driver) {
        BackendServer s = new BackendServer(DriverHost.initialise(driver, "emulated"), BackendSettings.fromSystemProperties());
        s.resumeGrace(Duration.ofSeconds(60));
        return s;
    }

    /** The id of the one session {@code s} has (fails if it has another number). */
    static long onlySession(BackendServer s) {
        assertEquals(1, s.sessions().size());
        return s.sessions().get(0).id();
    }
}
