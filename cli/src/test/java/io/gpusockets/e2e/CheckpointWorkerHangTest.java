package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.isolation.Workers;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Isolation mode process: a checkpoint whose worker does not answer (its processes stopped with SIGSTOP) fails after
 * the quiet timeout with a message naming the worker and the setting, instead of waiting for ever; once the workers
 * go on (SIGCONT) the late answer is taken and dropped, the session runs on, and the next checkpoint succeeds.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CheckpointWorkerHangTest extends CheckpointTestSupport {
    /** This JVM's worker processes, sent {@code signal} with kill(1). */
    private static void signalWorkers(String signal) throws Exception {
        List<ProcessHandle> workers = ProcessHandle.current().children()
                .filter(p -> p.info().arguments().map(a -> List.of(a).contains("worker")).orElse(false)).toList();
        assertFalse(workers.isEmpty(), "the backend's worker processes");
        for (ProcessHandle p : workers) {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(p.pid())).inheritIO().start();
            assertEquals(0, kill.waitFor(), "kill -" + signal + " " + p.pid());
        }
    }

    @Test
    void aCheckpointWhoseWorkerDoesNotAnswerFailsAfterTheQuietTimeoutAndTheSessionGoesOnAfterwards() throws Exception {
        EmulatedDevice device = new EmulatedDevice();
        Workers workers = new Workers(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-Xmx256m", "-Dgpusockets.backend.stableAddresses=true", "-Dgpusockets.worker.aotCacheDir=off",
                "-cp", System.getProperty("java.class.path"), io.gpusockets.cli.Main.class.getName(), "worker",
                "--device", "emulated"), 1, 2);
        workers.quietTimeout(Duration.ofSeconds(2));
        try (BackendServer server = new BackendServer(DriverHost.initialise(device, "emulated"),
                BackendSettings.fromSystemProperties())) {
            server.resumeGrace(Duration.ofSeconds(60));
            server.handSessionsTo(workers);
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                CheckpointRestoreTest.Program p = new CheckpointRestoreTest.Program(d);
                p.build();
                p.walk();
                long id = server.sessions().get(0).id();
                signalWorkers("STOP");
                IOException e;
                try {
                    e = assertThrows(IOException.class, () -> server.checkpoint(id, dir.resolve("hung.ckpt"), false, null));
                } finally {
                    signalWorkers("CONT");
                }
                assertTrue(e.getMessage().contains("sent nothing for 2 s"), e.getMessage());
                assertTrue(e.getMessage().contains(Workers.QUIET_PROPERTY), e.getMessage());
                p.walk(); // the worker goes on: its late answer is dropped, the session is unharmed
                p.check();
                workers.quietTimeout(Duration.ofSeconds(60));
                Path image = dir.resolve("later.ckpt");
                CheckpointResult r = server.checkpoint(id, image, false, null);
                assertEquals(Files.size(image), r.bytesWritten(), "a later checkpoint of the same session succeeds");
                p.walk();
                p.check();
            }
        } finally {
            device.close();
        }
    }
}
