package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.CheckpointRefused;
import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.PeerInfo;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link Workers#restore} when a worker refuses the restore for its own address space (issue H25: an address window
 * the image needs is taken there by the process's own memory, placed at random per process): the restore is tried
 * again in another worker process, {@value Workers#RESTORE_TRIES} at most, and the caller's {@code onEnd} runs once,
 * for the worker that serves the session (or for the last refusal), never for a worker let go. With a stand-in worker
 * ({@link WindowTakenWorker}) that refuses the first N restores it is asked for.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WorkersRestoreRetryTest {
    static {
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, "off");
    }

    private static final long SESSION = 77;

    private static List<String> command(Path tries, int refusals) {
        return List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-Xmx64m", "-Dtest.tries=" + tries, "-Dtest.refusals=" + refusals, "-cp", System.getProperty("java.class.path"),
                WindowTakenWorker.class.getName());
    }

    private static void awaitLive(Workers workers, int n) throws InterruptedException {
        while (workers.live() != n) {
            Thread.sleep(10);
        }
    }

    @Test
    void aRestoreRefusedForAWorkersOwnAddressSpaceIsTriedInAnotherWorker() throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-restore-retry");
        Path tries = dir.resolve("tries");
        Tenant tenant = new Tenant("t", TenantLimits.UNLIMITED);
        AtomicInteger ended = new AtomicInteger();
        try (Workers workers = new Workers(command(tries, 2), 0, 4)) {
            SessionTicket t = workers.restore(dir.resolve("image"), tenant, 0, SESSION, ended::incrementAndGet,
                    CheckpointProgress.NONE);
            assertEquals(SESSION, t.sessionId());
            List<String> pids = Files.readAllLines(tries);
            assertEquals(3, pids.size(), "two workers refused, the third restored");
            assertEquals(3, new HashSet<>(pids).size(), "each try in a worker of its own: " + pids);
            awaitLive(workers, 1); // the two that refused are gone
            assertEquals(0, ended.get(), "a worker let go does not end the restored session");
            assertEquals(t, workers.resumable(java.util.HexFormat.of().formatHex(t.resumeToken())));
        }
        assertEquals(1, awaitEnded(ended), "the serving worker's end runs onEnd, once");
        deleteAll(dir);
    }

    @Test
    void aRestoreRefusedByEveryTrySaysHowManyWorkersTriedAndEndsOnce() throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-restore-retry");
        Path tries = dir.resolve("tries");
        AtomicInteger ended = new AtomicInteger();
        try (Workers workers = new Workers(command(tries, 100), 0, 4)) {
            CheckpointRefused e = assertThrows(CheckpointRefused.class, () -> workers.restore(dir.resolve("image"),
                    new Tenant("t", TenantLimits.UNLIMITED), 0, SESSION, ended::incrementAndGet, CheckpointProgress.NONE));
            assertTrue(e.getMessage().startsWith("the address window of device 0 is taken at 0x7f4000000000"), e.getMessage());
            assertTrue(e.getMessage().contains("tried in " + Workers.RESTORE_TRIES + " worker processes"), e.getMessage());
            assertEquals(Workers.RESTORE_TRIES, Files.readAllLines(tries).size());
            awaitLive(workers, 0);
            assertEquals(1, ended.get(), "onEnd ran once, for the last refusal");
        }
        deleteAll(dir);
    }

    private static int awaitEnded(AtomicInteger ended) throws InterruptedException {
        while (ended.get() == 0) {
            Thread.sleep(10);
        }
        Thread.sleep(100); // a second run, were there one, would come from the same end
        return ended.get();
    }

    private static void deleteAll(Path dir) throws java.io.IOException {
        try (var files = Files.list(dir)) {
            for (Path p : files.toList()) {
                Files.deleteIfExists(p);
            }
        }
        Files.deleteIfExists(dir);
    }

    /**
     * A stand-in worker: answers its RESTORE with a refusal for its own address space (OUTCOME_REFUSED_HERE, the message
     * a real worker sends) while fewer than {@code test.refusals} workers have been asked (each appends its pid to the
     * file {@code test.tries}), else with the restored session's ticket (session {@value #SESSION}, resumable), then
     * waits for the front to stop it.
     */
    public static final class WindowTakenWorker {
        public static void main(String[] args) throws Exception {
            Connection control = Transports.connect(TransportUri.parse(args[args.length - 1]), Duration.ofSeconds(30));
            ByteBuffer ready = ControlMessages.start(ControlMessages.READY);
            ready.putLong(ProcessHandle.current().pid());
            control.write(ControlMessages.finish(ready));
            ByteBuffer m = ControlMessages.read(control);
            if (m.get() != ControlMessages.RESTORE) {
                Runtime.getRuntime().halt(2);
            }
            long request = m.getLong();
            ControlMessages.getString(m); // the image
            String tenant = ControlMessages.getString(m);
            TenantLimits limits = SessionTicket.getLimits(m);
            Path tries = Path.of(System.getProperty("test.tries"));
            Files.writeString(tries, ProcessHandle.current().pid() + "\n", StandardCharsets.US_ASCII,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            boolean refuse = Files.readAllLines(tries).size() <= Integer.getInteger("test.refusals");
            ByteBuffer a = ControlMessages.start(ControlMessages.RESTORED);
            a.putLong(request);
            if (refuse) {
                a.put(ControlMessages.OUTCOME_REFUSED_HERE);
                ControlMessages.putString(a, "the address window of device 0 is taken at 0x7f4000000000 (the driver offered"
                        + " 0x7f48a4000000); this process maps 1 range(s) there");
                control.write(ControlMessages.finish(a));
                control.close();
                return;
            }
            a.put(ControlMessages.OUTCOME_DONE);
            new SessionTicket(SESSION, 0, tenant, limits, PeerInfo.of("restored"), new byte[16], "", 60, 0).encode(a);
            control.write(ControlMessages.finish(a));
            try {
                while (true) {
                    ControlMessages.read(control);
                }
            } catch (java.io.IOException e) {
                control.close(); // the front stopped it
            }
        }
    }
}
