package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.status.StatusJson;
import io.gpusockets.cli.Main;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.wire.Handshake;
import io.gpusockets.protocol.wire.Opcodes;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code gpusockets status} and {@code /metrics} against a real backend process (emulated device):
 * sessions shown with their tenant, transport and memory, the metrics' names, and the kill -9 storm
 * of the issue: 100 client processes killed mid-call leave no session and no device memory held.
 */
class StatusTest {
    private static final long MIB = 1 << 20;

    /** What {@code gpusockets status ARGS} printed and returned. */
    record Result(int exit, String out, String err) {
    }

    static Result status(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = new CommandLine(new Main()).setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true));
        List<String> all = new ArrayList<>(List.of("status"));
        all.addAll(List.of(args));
        int exit = cl.execute(all.toArray(String[]::new));
        return new Result(exit, out.toString(), err.toString());
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> statusJson(BackendProcess b) {
        Result r = status("--socket", b.adminSocket().toString(), "--json");
        assertEquals(0, r.exit(), r.err());
        return (Map<String, Object>) StatusJson.parse(r.out().strip());
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> list(Map<String, Object> s, String key) {
        return (List<Map<String, Object>>) s.get(key);
    }

    static long deviceUsed(Map<String, Object> s) {
        return (Long) list(s, "devices").getFirst().get("memoryUsedBytes");
    }

    static String metrics(BackendProcess b) throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(b.metricsUrl())).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return r.body();
    }

    /** The value of the sample whose line starts with {@code series} (name and labels), or NaN. */
    static double sample(String metrics, String series) {
        for (String line : metrics.split("\n")) {
            if (line.startsWith(series + " ")) {
                return Double.parseDouble(line.substring(series.length() + 1).strip());
            }
        }
        return Double.NaN;
    }

    @Test
    void showsEachSessionWithItsTenantTransportAndMemoryAndServesTenantMetrics() throws Exception {
        // mode context: the emulated device's used memory is the one process's (a worker's device is its own)
        try (BackendProcess b = BackendProcess.startWithStatus("--isolation", "context")) {
            Map<String, Object> before = statusJson(b);
            assertEquals(List.of(), list(before, "sessions"));
            Map<String, Object> dev = list(before, "devices").getFirst();
            assertEquals(8L << 30, dev.get("memoryTotalBytes"));
            try (RemoteCudaDriver tcp = RemoteCudaDriver.connect(b.tcp());
                 RemoteCudaDriver unix = RemoteCudaDriver.connect(b.unix())) {
                Cuda t = new Cuda(tcp);
                t.primaryContext();
                t.alloc(3 * MIB);
                t.stream();
                Cuda u = new Cuda(unix);
                u.primaryContext();
                u.alloc(5 * MIB);
                u.stream();
                u.stream();
                byte[] data = new byte[256 << 10];
                long p = u.alloc(data.length);
                u.put(p, data);
                u.get(p, data.length);

                Map<String, Object> s = statusJson(b);
                List<Map<String, Object>> sessions = list(s, "sessions");
                assertEquals(2, sessions.size(), sessions.toString());
                Map<String, Object> st = sessions.stream().filter(x -> x.get("id").equals(tcp.sessionId())).findFirst().orElseThrow();
                Map<String, Object> su = sessions.stream().filter(x -> x.get("id").equals(unix.sessionId())).findFirst().orElseThrow();
                assertEquals("default", st.get("tenant"));
                assertEquals("tcp", st.get("transport"));
                assertEquals("unix", su.get("transport"));
                assertEquals(3 * MIB, st.get("memoryBytes"));
                assertEquals(5 * MIB + data.length, su.get("memoryBytes"));
                assertEquals(1L, st.get("streams"));
                assertEquals(2L, su.get("streams"));
                assertTrue((Long) su.get("bytesIn") > data.length && (Long) su.get("bytesOut") > data.length, su.toString());
                assertTrue((Long) st.get("calls") >= 3, st.toString());
                assertTrue(((Number) st.get("callsPerSecond")).doubleValue() > 0, "calls/s over the session's first seconds: " + st);
                assertTrue(deviceUsed(s) >= deviceUsed(before) + 8 * MIB + data.length, s.toString());
                assertEquals(2L, list(s, "tenants").getFirst().get("sessions"));

                Result table = status("--socket", b.adminSocket().toString());
                assertEquals(0, table.exit(), table.err());
                assertTrue(table.out().contains("DEVICE  NAME") && table.out().contains("emulated device") && table.out().contains("SESSION  TENANT"),
                        table.out());
                assertTrue(table.out().lines().anyMatch(l -> l.startsWith(tcp.sessionId() + " ") && l.contains("default")
                        && l.contains(" tcp ") && l.contains("3.0 MiB")), table.out());

                String m = metrics(b);
                for (String name : List.of("gpusockets_tenant_memory_used_bytes{tenant=\"default\"}",
                        "gpusockets_tenant_memory_limit_bytes{tenant=\"default\"}", "gpusockets_sessions{tenant=\"default\"}",
                        "gpusockets_calls_total{tenant=\"default\"}",
                        "gpusockets_transfer_bytes_total{direction=\"in\",tenant=\"default\",transport=\"unix\"}",
                        "gpusockets_transfer_bytes_total{direction=\"out\",tenant=\"default\",transport=\"tcp\"}",
                        "gpusockets_connections", "gpusockets_device_memory_used_bytes{device=\"0\"",
                        "gpusockets_device_memory_total_bytes{device=\"0\"", "# TYPE gpusockets_quota_rejections_total counter")) {
                    assertTrue(m.contains(name), "no " + name + " in:\n" + m);
                }
                assertEquals(2.0, sample(m, "gpusockets_sessions{tenant=\"default\"}"), m);
            }
            // Totals keep the ended sessions: after both ended, the counters have not dropped.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!list(statusJson(b), "sessions").isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            Thread.sleep(600); // past the endpoint's reuse of a snapshot
            String after = metrics(b);
            assertEquals(0.0, sample(after, "gpusockets_sessions{tenant=\"default\"}"), after);
            assertTrue(sample(after, "gpusockets_calls_total{tenant=\"default\"}") >= 6, after);
            assertTrue(sample(after, "gpusockets_transfer_bytes_total{direction=\"in\",tenant=\"default\",transport=\"unix\"}")
                    > (256 << 10), after);
        }
    }

    @Test
    void aProcessModeWorkersSessionWhoseConnectionIsLostShowsDetachedUntilItResumes() throws Exception {
        try (BackendProcess b = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "1",
                "--resume-grace", "60")) {
            io.gpusockets.protocol.wire.FrameChannel[] ch = new io.gpusockets.protocol.wire.FrameChannel[1];
            io.gpusockets.protocol.wire.Handshake.Welcome w = ResumeTest.hello(b.unix(), new byte[0], "detach", new byte[0], ch);
            assertEquals("serving", awaitState(b, w.sessionId(), "serving"), "a session with its connection");
            ch[0].close();
            assertEquals("detached", awaitState(b, w.sessionId(), "detached"), "its worker's session waits for a resume");
            ResumeTest.hello(b.unix(), new byte[0], "detach", w.resumeToken(), ch);
            assertEquals("serving", awaitState(b, w.sessionId(), "serving"), "resumed");
            ch[0].send(Opcodes.GOODBYE, 0, 0, 0);
            ch[0].close();
        }
    }

    /** The state status shows for session {@code id} once it is {@code want} (a worker reports once a second), else the last. */
    private static String awaitState(BackendProcess b, long id, String want) throws InterruptedException {
        String state = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            state = list(statusJson(b), "sessions").stream().filter(x -> x.get("id").equals(id))
                    .map(x -> (String) x.get("state")).findFirst().orElse(null);
            if (want.equals(state)) {
                break;
            }
            Thread.sleep(100);
        }
        return state;
    }

    @Test
    void showsTheSessionsThatProcessModeWorkersServeWithTheirFigures() throws Exception {
        try (BackendProcess b = BackendProcess.startWithStatus("--isolation", "process", "--idle-workers", "1")) {
            long callsBefore;
            try (RemoteCudaDriver unix = RemoteCudaDriver.connect(b.unix());
                 RemoteCudaDriver tcp = RemoteCudaDriver.connect(b.tcp())) {
                Cuda u = new Cuda(unix);
                u.primaryContext();
                u.alloc(5 * MIB);
                u.stream();
                byte[] data = new byte[256 << 10];
                long p = u.alloc(data.length);
                u.put(p, data);
                u.get(p, data.length);
                Cuda t = new Cuda(tcp);
                t.primaryContext();
                t.alloc(3 * MIB);

                // a worker reports once a second: wait for figures that include the calls above
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                Map<String, Object> su = null;
                Map<String, Object> st = null;
                List<Map<String, Object>> sessions = List.of();
                while (System.nanoTime() < deadline) {
                    sessions = list(statusJson(b), "sessions");
                    su = sessions.stream().filter(x -> x.get("id").equals(unix.sessionId())).findFirst().orElse(null);
                    st = sessions.stream().filter(x -> x.get("id").equals(tcp.sessionId())).findFirst().orElse(null);
                    if (su != null && st != null && (Long) su.get("memoryBytes") == 5 * MIB + data.length
                            && (Long) st.get("memoryBytes") == 3 * MIB) {
                        break;
                    }
                    Thread.sleep(100);
                }
                assertEquals(2, sessions.size(), "one row per worker session: " + sessions);
                assertEquals("unix", su.get("transport"));
                assertEquals("tcp", st.get("transport"));
                assertEquals("default", su.get("tenant"));
                assertEquals(5 * MIB + data.length, su.get("memoryBytes"), su.toString());
                assertEquals(3 * MIB, st.get("memoryBytes"), st.toString());
                assertEquals(1L, su.get("streams"), su.toString());
                assertTrue((Long) su.get("bytesIn") > data.length && (Long) su.get("bytesOut") > data.length, su.toString());
                assertTrue((Long) st.get("calls") >= 3, st.toString());
                Map<String, Object> s = statusJson(b);
                assertEquals(2L, list(s, "tenants").getFirst().get("sessions"), s.toString());
                Result table = status("--socket", b.adminSocket().toString());
                assertTrue(table.out().lines().anyMatch(l -> l.startsWith(tcp.sessionId() + " ") && l.contains(" tcp ")
                        && l.contains("3.0 MiB")), table.out());
                callsBefore = (Long) su.get("calls") + (Long) st.get("calls");
            }
            // Ended: no row, and the tenant's totals keep what the workers' sessions did.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!list(statusJson(b), "sessions").isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(50);
            }
            assertEquals(List.of(), list(statusJson(b), "sessions"));
            Thread.sleep(600); // past the endpoint's reuse of a snapshot
            String after = metrics(b);
            assertEquals(0.0, sample(after, "gpusockets_sessions{tenant=\"default\"}"), after);
            assertTrue(sample(after, "gpusockets_calls_total{tenant=\"default\"}") >= callsBefore, after);
            assertTrue(sample(after, "gpusockets_transfer_bytes_total{direction=\"out\",tenant=\"default\",transport=\"unix\"}")
                    > (256 << 10), after);
        }
    }

    @Test
    void saysClearlyWhenThereIsNoAdminSocket(@TempDir Path dir) {
        Result r = status("--socket", dir.resolve("absent.sock").toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("no admin socket at " + dir.resolve("absent.sock")) && r.err().contains("--admin-socket"), r.err());
        assertEquals("", r.out());
    }

    @Test
    void aRefusalByTheBackendIsPrintedAsAnError(@TempDir Path dir) throws Exception {
        Path p = dir.resolve("admin.sock");
        try (var server = java.nio.channels.ServerSocketChannel.open(java.net.StandardProtocolFamily.UNIX)) {
            server.bind(java.net.UnixDomainSocketAddress.of(p));
            Thread t = Thread.ofPlatform().daemon().start(() -> {
                try (var c = server.accept()) {
                    c.read(ByteBuffer.allocate(128)); // the request line
                    c.write(ByteBuffer.wrap("refused: user mallory (group users) is not root\n".getBytes()));
                } catch (java.io.IOException ignored) {
                    // the test fails on what status printed
                }
            });
            Result r = status("--socket", p.toString());
            t.join(10_000);
            assertEquals(1, r.exit());
            assertEquals("gpusockets status: the backend refused: user mallory (group users) is not root", r.err().strip());
        }
    }

    /** A client that speaks the wire protocol itself (a few KiB of process, where a JVM client is 50 MiB). */
    private static final String STORM_CLIENT = """
            #include <stdint.h>
            #include <stdio.h>
            #include <stdlib.h>
            #include <string.h>
            #include <sys/socket.h>
            #include <sys/un.h>
            #include <unistd.h>

            static int fd;
            static uint64_t next_id = 1;

            static void die(const char *what) { fprintf(stderr, "storm_client: %s\\n", what); exit(2); }
            static void put_all(const void *p, size_t n) {
                const char *c = p;
                while (n > 0) { ssize_t w = write(fd, c, n); if (w <= 0) die("write"); c += w; n -= (size_t) w; }
            }
            static void get_all(void *p, size_t n) {
                char *c = p;
                while (n > 0) { ssize_t r = read(fd, c, n); if (r <= 0) die("read"); c += r; n -= (size_t) r; }
            }
            static void send_frame(uint32_t op, uint32_t lane, uint64_t id, const void *body, uint32_t len) {
                unsigned char h[24];
                uint32_t flags = 0;
                memcpy(h, &len, 4); memcpy(h + 4, &op, 4); memcpy(h + 8, &flags, 4); memcpy(h + 12, &lane, 4);
                memcpy(h + 16, &id, 8);
                put_all(h, 24);
                if (len > 0) put_all(body, len);
            }
            /* Reads one frame; returns its body (malloc'd) and fills op, id, len. */
            static unsigned char *read_frame(uint32_t *op, uint64_t *id, uint32_t *len) {
                unsigned char h[24];
                get_all(h, 24);
                memcpy(len, h, 4); memcpy(op, h + 4, 4); memcpy(id, h + 16, 8);
                if (*len > (8u << 20)) die("frame too long");
                unsigned char *b = malloc(*len + 1);
                get_all(b, *len);
                return b;
            }
            /* One call on lane 1; returns the 8-byte output after the result (0 if none); exits on failure. */
            static uint64_t call(uint32_t op, const void *body, uint32_t len) {
                uint64_t id = next_id++;
                send_frame(op, 1, id, body, len);
                for (;;) {
                    uint32_t rop, rlen; uint64_t rid;
                    unsigned char *b = read_frame(&rop, &rid, &rlen);
                    if (rid == id && rop == op) {
                        int32_t result; uint64_t out = 0;
                        if (rlen < 4) die("short reply");
                        memcpy(&result, b, 4);
                        if (result != 0) { fprintf(stderr, "storm_client: call 0x%x failed: %d\\n", op, result); exit(3); }
                        if (rlen >= 12) memcpy(&out, b + 4, 8);
                        free(b);
                        return out;
                    }
                    free(b);
                }
            }
            int main(int argc, char **argv) {
                if (argc != 9) die("usage: storm_client SOCKET HELLOHEX HELLO RETAIN SETCURRENT ALLOC STREAMCREATE DTOH");
                uint32_t op_hello = (uint32_t) strtoul(argv[3], 0, 0), op_retain = (uint32_t) strtoul(argv[4], 0, 0);
                uint32_t op_set = (uint32_t) strtoul(argv[5], 0, 0), op_alloc = (uint32_t) strtoul(argv[6], 0, 0);
                uint32_t op_stream = (uint32_t) strtoul(argv[7], 0, 0), op_dtoh = (uint32_t) strtoul(argv[8], 0, 0);
                fd = socket(AF_UNIX, SOCK_STREAM, 0);
                struct sockaddr_un a; memset(&a, 0, sizeof a); a.sun_family = AF_UNIX;
                strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
                if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) die("connect");
                uint32_t op, len; uint64_t id;
                free(read_frame(&op, &id, &len)); /* SERVER_HELLO */
                size_t hl = strlen(argv[2]) / 2;
                unsigned char *hello = malloc(hl);
                for (size_t i = 0; i < hl; i++) sscanf(argv[2] + 2 * i, "%2hhx", &hello[i]);
                send_frame(op_hello, 0, 0, hello, (uint32_t) hl);
                free(read_frame(&op, &id, &len)); /* WELCOME, or REFUSE: the first call then fails */
                int32_t dev = 0;
                uint64_t ctx = call(op_retain, &dev, 4);
                call(op_set, &ctx, 8);
                uint64_t size = 3u << 20;
                uint64_t dptr = call(op_alloc, &size, 8);
                uint32_t flags = 0;
                call(op_stream, &flags, 4);
                /* mid-call: a 3 MiB device-to-host copy whose answer is never read, so the backend's
                   lane blocks sending it once the socket's buffer is full */
                uint64_t copy[2] = {dptr, size};
                send_frame(op_dtoh, 1, next_id++, copy, 16);
                printf("ready\\n");
                fflush(stdout);
                for (;;) pause();
            }
            """;

    @Test
    void aKillStormOf100ClientsMidCallLeavesNoSessionAndEveryByteBack(@TempDir Path dir) throws Exception {
        Path src = dir.resolve("storm_client.c");
        Files.writeString(src, STORM_CLIENT);
        Path exe = dir.resolve("storm_client");
        Process gcc = new ProcessBuilder("gcc", "-std=c11", "-D_DEFAULT_SOURCE", "-O1", "-Wall", "-Werror", src.toString(),
                "-o", exe.toString()).redirectErrorStream(true).start();
        String gccOut = new String(gcc.getInputStream().readAllBytes());
        assertTrue(gcc.waitFor(120, TimeUnit.SECONDS) && gcc.exitValue() == 0, "gcc failed:\n" + gccOut);

        ApiTable api = ApiTable.get();
        String hello = HexFormat.of().formatHex(bytes(new Handshake.Hello(Handshake.PROTOCOL_VERSION, 0, "storm", new byte[0]).encode()));
        // Each of the 100 sessions holds several MiB of native memory (the emulated device's 3 MiB, staging for
        // the copy, lane buffers), counted against the JVM's direct-memory limit, which is -Xmx (512 MiB) unless set.
        // mode context: 100 clients at once, each a worker JVM in mode process (--max-workers 64)
        try (BackendProcess b = BackendProcess.startWithStatus(List.of("-XX:MaxDirectMemorySize=2g"), "--isolation", "context")) {
            String socket = b.unix().substring("unix://".length());
            long usedBefore = deviceUsed(statusJson(b));
            List<Process> clients = new ArrayList<>();
            try {
                for (int i = 0; i < 100; i++) {
                    clients.add(new ProcessBuilder(exe.toString(), socket, hello, Integer.toString(Opcodes.HELLO),
                            Integer.toString(api.byName("cuDevicePrimaryCtxRetain").opcode()),
                            Integer.toString(api.byName("cuCtxSetCurrent").opcode()),
                            Integer.toString(api.byName("cuMemAlloc").opcode()),
                            Integer.toString(api.byName("cuStreamCreate").opcode()),
                            Integer.toString(api.byName("cuMemcpyDtoH").opcode()))
                            .redirectError(ProcessBuilder.Redirect.INHERIT).start());
                }
                for (Process c : clients) {
                    var reader = new java.io.BufferedReader(new java.io.InputStreamReader(c.getInputStream()));
                    String ready = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                        try {
                            return reader.readLine();
                        } catch (java.io.IOException e) {
                            return e.toString();
                        }
                    }).completeOnTimeout("no answer within 120 s", 120, TimeUnit.SECONDS).get();
                    assertEquals("ready", ready, "a client did not get to its call (" + (c.isAlive() ? "still running" : "exit "
                            + c.exitValue()) + "); status: " + statusJson(b));
                }
                Map<String, Object> busy = statusJson(b);
                assertEquals(100, list(busy, "sessions").size());
                assertTrue(list(busy, "sessions").stream().allMatch(s -> s.get("memoryBytes").equals(3 * MIB)
                        && s.get("streams").equals(1L) && s.get("transport").equals("unix")), busy.toString());
                assertTrue(deviceUsed(busy) >= usedBefore + 100 * 3 * MIB, busy.toString());
            } finally {
                clients.forEach(Process::destroyForcibly); // SIGKILL: no GOODBYE, a copy half sent
            }
            for (Process c : clients) {
                assertTrue(c.waitFor(30, TimeUnit.SECONDS));
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            Map<String, Object> after = statusJson(b);
            while ((!list(after, "sessions").isEmpty() || deviceUsed(after) != usedBefore) && System.nanoTime() < deadline) {
                Thread.sleep(100);
                after = statusJson(b);
            }
            assertEquals(List.of(), list(after, "sessions"), "every killed client's session has ended");
            assertEquals(usedBefore, deviceUsed(after), "every byte of device memory is back");
            assertEquals(0L, list(after, "tenants").getFirst().get("sessions"));
            assertTrue(b.alive());
        }
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }
}
