package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The frontend follows its session to another backend (issue 23 item 1, MOVED): a session checkpointed with stop in
 * backend A and restored in backend B (each on its own emulated device, both running, listening at different URIs)
 * is sent on by A ({@link BackendServer#sessionMoved}); the program (the list walker of {@link CheckpointRestoreTest})
 * goes on in B with its data as an uninterrupted run has it, later resumes go to B, and A has freed the session.
 * A frontend that was detached when the session moved hears where it went when it asks A to resume.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SessionMovedTest extends CheckpointTestSupport {
    @Test
    void aConnectedFrontendFollowsItsSessionToTheBackendItMovedTo() throws Exception {
        Path image = dir.resolve("s.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String uriA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String uriB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uriA)) {
                CheckpointRestoreTest.Program p = new CheckpointRestoreTest.Program(d);
                p.build();
                p.walk();
                long id = onlySession(serverA);
                CheckpointRefused notFrozen = assertThrows(CheckpointRefused.class, () -> serverA.sessionMoved(id, uriB));
                assertTrue(notFrozen.getMessage().contains("not frozen"), notFrozen.getMessage());
                p.walk();
                p.check(); // the refused move changed nothing
                serverA.checkpoint(id, image, true, null);
                assertEquals(id, serverB.restore(image, null));
                assertThrows(CheckpointRefused.class, () -> serverA.sessionMoved(id, "no uri"));
                serverA.sessionMoved(id, uriB);
                p.check(); // the program reads MOVED while it waits for a reply, and resumes on B
                p.walk();
                p.check();
                assertEquals(uriB, d.backendUri(), "the frontend keeps the new URI");
                assertEquals(1, serverB.resumesAccepted());
                d.dropConnection(); // a later resume goes to B, not A
                p.walk();
                p.check();
                assertEquals(2, serverB.resumesAccepted());
                assertEquals(0, serverA.resumesAccepted());
                while (!serverA.sessions().isEmpty()) {
                    Thread.sleep(10); // A ended it: its thread removes it once released (bounded by the test's timeout)
                }
            }
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aDetachedFrontendLearnsWhereItsSessionWentWhenItAsksToResume() throws Exception {
        Path image = dir.resolve("s.ckpt");
        EmulatedDevice a = new EmulatedDevice(), b = new EmulatedDevice();
        try (BackendServer serverA = server(a); BackendServer serverB = server(b)) {
            String uriA = serverA.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String uriB = serverB.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uriA)) {
                CheckpointRestoreTest.Program p = new CheckpointRestoreTest.Program(d);
                p.build();
                p.walk();
                long id = onlySession(serverA);
                serverA.checkpoint(id, image, true, null);
                serverB.restore(image, null);
                d.dropConnection(); // lost before the move: the frontend resumes at A, which knows where it went
                serverA.sessionMoved(id, uriB);
                p.walk();
                p.check();
                assertEquals(uriB, d.backendUri());
                assertEquals(1, serverB.resumesAccepted());
            }
        } finally {
            a.close();
            b.close();
        }
    }
}
