package io.gpusockets.backend.isolation;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.tenant.Tenant;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.transport.Connection;
import io.gpusockets.protocol.transport.Listener;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link Workers} with a stand-in worker process ({@link ReservingWorker}): the frontend's connection reaches
 * the worker whole (a socket, or a ring's shared memory with its shared window), which answers on it directly;
 * the worker's reserves are answered against the front's {@link Tenant} (its limit holds, refusals are counted
 * there); what a worker still holds when it dies goes back to the tenant; and the worker's death ends the
 * connection for the frontend, cleanly and at once.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WorkersTest {
    static {
        System.setProperty(WorkerAotCache.DIR_PROP_NAME, "off"); // the stand-in worker needs no AOT cache of its own
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"unix", "tcp", "fdunix", "ring"})
    void theWorkerServesTheConnectionAndItsTenantHoldsOnlyWhatTheLimitAllows(String scheme) throws Exception {
        Path dir = Files.createTempDirectory("gpusockets-workers-test");
        Tenant tenant = new Tenant("t", new TenantLimits(1000, 10, 8, 100, 10, 1000, 0));
        String where = switch (scheme) {
            case "tcp" -> "tcp://127.0.0.1:0";
            case "ring" -> "ring://workers-test-" + ProcessHandle.current().pid();
            default -> scheme + "://" + dir.resolve("s.sock");
        };
        try (Listener l = Transports.listen(TransportUri.parse(where));
             Workers workers = new Workers(command(), 0, 2)) {
            CompletableFuture<Connection> accepted = CompletableFuture.supplyAsync(() -> {
                try {
                    return l.accept();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            try (Connection client = Transports.connect(l.address(), Duration.ofSeconds(5))) {
                Connection server = accepted.get(10, TimeUnit.SECONDS);
                SessionTicket ticket = new SessionTicket(42, 0, tenant.name(), tenant.limits(), server.peer());
                assertTrue(workers.handOver(server, ticket, tenant));
                assertEquals(1, workers.handedOver());
                ByteBuffer line = ByteBuffer.allocate(64);
                client.readFully(line.limit(ReservingWorker.ANSWER_BYTES));
                String answer = new String(line.array(), 0, ReservingWorker.ANSWER_BYTES, StandardCharsets.US_ASCII).strip();
                assertEquals("42 true false 600 " + scheme.equals("ring"), answer,
                        "session id, reserve 600 of 1000, reserve 600 more, used, the shared window in the worker");
                assertEquals(600, tenant.memoryUsed(), "the worker holds 600 of the tenant's quota");
                assertFalse(client.peerClosed(), "the front let go of its copy without a sign to the frontend");
                client.write(ByteBuffer.wrap(new byte[] {1})); // the worker dies now, without releasing
                long died = System.nanoTime();
                assertThrows(IOException.class, () -> client.readFully(ByteBuffer.allocateDirect(1)),
                        "the worker's death ends the connection for the frontend");
                assertTrue(System.nanoTime() - died < TimeUnit.SECONDS.toNanos(5), "and soon");
                for (int i = 0; i < 1000 && workers.live() > 0; i++) {
                    Thread.sleep(10);
                }
                assertEquals(0, workers.live(), "the dead worker is gone");
                assertEquals(0, tenant.memoryUsed(), "what the dead worker held went back to its tenant");
                assertEquals(Map.of("memory", 1L, "streams", 1L), tenant.rejections());
            }
        } finally {
            Files.deleteIfExists(dir.resolve("s.sock"));
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void aProcessThatIsNotAWorkerIsRefusedAtTheControlSocket() throws Exception {
        try (Workers workers = new Workers(command(), 0, 1)) {
            try (Connection c = Transports.connect(workers.controlAddress(), Duration.ofSeconds(5))) {
                ByteBuffer b = ByteBuffer.allocateDirect(1);
                assertTrue(readsEof(c, b), "the front closes a control connection from a process it did not start");
            }
            assertFalse(workers.live() > 0);
        }
    }

    private static boolean readsEof(Connection c, ByteBuffer b) {
        try {
            c.readFully(b);
            return false;
        } catch (IOException e) {
            return true;
        }
    }

    private static List<String> command() {
        return List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "-Xmx64m", "-cp", System.getProperty("java.class.path"), ReservingWorker.class.getName());
    }

    /**
     * A stand-in worker: takes its session like {@link WorkerMain}, reserves 600 and then 600 more bytes of
     * its tenant's memory through {@link FrontTenantAccount}, counts a refusal of streams, writes what it got
     * to the frontend's socket, and dies (exit 3, holding its reserve) when the frontend sends a byte.
     */
    public static final class ReservingWorker {
        static final int ANSWER_BYTES = 32;

        public static void main(String[] args) throws Exception {
            Connection control = Transports.connect(TransportUri.parse(args[args.length - 1]), Duration.ofSeconds(30));
            ByteBuffer ready = ControlMessages.start(ControlMessages.READY);
            ready.putLong(ProcessHandle.current().pid());
            control.write(ControlMessages.finish(ready));
            HandedConnection.Received received = HandedConnection.receive(control);
            SessionTicket t = received.ticket();
            Connection peer = received.connection();
            FrontTenantAccount tenant = new FrontTenantAccount(t.tenant(), t.limits(), control);
            Thread.ofPlatform().daemon().start(() -> {
                try {
                    while (true) {
                        ByteBuffer a = ControlMessages.read(control);
                        a.get();
                        tenant.answered(a.getLong(), a.getLong());
                    }
                } catch (IOException e) {
                    tenant.frontGone();
                }
            });
            boolean first = tenant.reserveMemory(600);
            boolean second = tenant.reserveMemory(600);
            tenant.rejected("streams");
            String answer = t.sessionId() + " " + first + " " + second + " " + tenant.memoryUsed() + " " + peer.hasSharedWindow();
            byte[] out = String.format("%-" + ANSWER_BYTES + "s", answer).getBytes(StandardCharsets.US_ASCII);
            peer.write(ByteBuffer.wrap(out));
            peer.readFully(ByteBuffer.allocate(1));
            Runtime.getRuntime().halt(3);
        }
    }

}
