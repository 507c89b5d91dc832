package io.gpusockets.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * GPUSOCKETS_SERVER=dns://NAME:PORT as a Kubernetes headless Service uses it: three backend processes
 * (emulated device) on one port of three loopback addresses, 127.0.0.2-4, named by the JDK's hosts
 * file ({@code -Djdk.net.hosts.file}, which a frontend JVM of its own reads: {@link DnsClientMain}).
 * No traffic leaves loopback and no real DNS server is asked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DnsDiscoveryTest {
    private static final String NAME = "gpusockets-backend.gpusockets.svc.cluster.local";
    private static final List<String> ADDRESSES = List.of("127.0.0.2", "127.0.0.3", "127.0.0.4");
    private static final List<BackendProcess> backends = new ArrayList<>();
    private static int port;

    @TempDir
    static Path dir;

    @BeforeAll
    static void startBackends() throws Exception {
        port = freePortOnEvery(ADDRESSES);
        for (String a : ADDRESSES) {
            // DNS discovery, not isolation: mode context spares a worker JVM per session
            backends.add(BackendProcess.start("--isolation", "context", "--listen", "tcp://" + a + ":" + port));
        }
    }

    @AfterAll
    static void stopBackends() throws Exception {
        for (BackendProcess b : backends) {
            b.close();
        }
    }

    /** A port free on each address now (the backends bind it a moment later; a clash fails the start loudly). */
    private static int freePortOnEvery(List<String> addresses) throws IOException {
        for (int attempt = 0; attempt < 20; attempt++) {
            int candidate;
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(InetAddress.getByName(addresses.getFirst()), 0));
                candidate = s.getLocalPort();
            }
            boolean free = true;
            for (String a : addresses) {
                try (ServerSocket s = new ServerSocket()) {
                    s.bind(new InetSocketAddress(InetAddress.getByName(a), candidate));
                } catch (IOException e) {
                    free = false;
                }
            }
            if (free) {
                return candidate;
            }
        }
        throw new IOException("no port free on all of " + addresses);
    }

    /** The frontend JVM: its hosts file, its stdin for commands and its stdout for answers. */
    private static final class Client implements AutoCloseable {
        final Process process;
        final Writer commands;
        final BufferedReader answers;
        final Path hosts;

        Client(Path hosts, String server) throws IOException {
            this.hosts = hosts;
            process = new ProcessBuilder(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                    "-Djdk.net.hosts.file=" + hosts,
                    "-cp", System.getProperty("java.class.path"),
                    DnsClientMain.class.getName(), server)
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            commands = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
            answers = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        }

        String ask(String command) throws IOException {
            commands.write(command + "\n");
            commands.flush();
            String answer = answers.readLine();
            if (answer == null) {
                throw new IOException("the frontend JVM ended without answering '" + command + "'");
            }
            return answer;
        }

        @Override
        public void close() throws Exception {
            commands.close();
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }

    private static Path hostsFile(String file, List<String> addresses) throws IOException {
        Path hosts = dir.resolve(file);
        writeHosts(hosts, addresses);
        return hosts;
    }

    private static void writeHosts(Path hosts, List<String> addresses) throws IOException {
        StringBuilder b = new StringBuilder("# a headless Service's answer, one line per ready backend pod\n");
        for (String a : addresses) {
            b.append(a).append(' ').append(NAME).append('\n');
        }
        Path tmp = hosts.resolveSibling(hosts.getFileName() + ".tmp");
        Files.writeString(tmp, b.toString());
        Files.move(tmp, hosts, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private static String uris(List<String> addresses) {
        return String.join(",", addresses.stream().map(a -> "tcp://" + a + ":" + port).toList());
    }

    @Test
    void mergesTheDevicesOfEveryAddressInAddressOrder() throws Exception {
        // DNS answers in any order (a Service's records rotate): the frontend sorts, so every client numbers alike.
        Path hosts = hostsFile("all", List.of("127.0.0.4", "127.0.0.2", "127.0.0.3"));
        try (Client c = new Client(hosts, "dns://" + NAME + ":" + port)) {
            assertEquals("ok resolved=" + uris(ADDRESSES) + " devices=3", c.ask("connect"));
            String probe = c.ask("probe 0");
            assertTrue(probe.startsWith("ok devices=3 "), probe);
            for (int dev = 0; dev < 3; dev++) {
                assertTrue(probe.contains(" dev" + dev + "=CUDA_SUCCESS:GPUsockets_emulated_device_(no_GPU)/CUDA_SUCCESS"), probe);
            }
        }
    }

    @Test
    void aNameThatResolvesToNothingFailsNamingIt() throws Exception {
        Path hosts = hostsFile("other", List.of("127.0.0.2"));
        try (Client c = new Client(hosts, "dns://missing-backend.gpusockets.svc.cluster.local:" + port)) {
            String answer = c.ask("connect");
            assertTrue(answer.startsWith("error dns://missing-backend.gpusockets.svc.cluster.local:" + port
                    + ": missing-backend.gpusockets.svc.cluster.local resolves to no address"), answer);
        }
    }

    /**
     * A backend goes away: the running driver keeps its device count and ordinals (the gone backend's
     * device answers CUDA_ERROR_DEVICE_UNAVAILABLE, the others work on); a connect while DNS still names
     * it leaves it out; a connect after DNS dropped it, and a new process, see the rest.
     */
    @Test
    void aBackendThatGoesAwayIsLeftOutByTheNextConnect() throws Exception {
        Path hosts = hostsFile("shrinking", List.of("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"));
        // 127.0.0.5 has no backend: a pod that DNS still names but that is gone already is left out.
        BackendProcess extra = BackendProcess.start("--isolation", "context", "--listen", "tcp://127.0.0.6:" + port);
        boolean extraGone = false;
        try (Client c = new Client(hosts, "dns://" + NAME + ":" + port)) {
            assertEquals("ok resolved=" + uris(List.of("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")) + " devices=3",
                    c.ask("connect"));
            writeHosts(hosts, List.of("127.0.0.2", "127.0.0.3", "127.0.0.6"));
            assertEquals("ok resolved=" + uris(List.of("127.0.0.2", "127.0.0.3", "127.0.0.6")) + " devices=3", c.ask("connect"));

            extra.close(); // the pod at 127.0.0.6 dies: driver 1's device 2
            extraGone = true;
            String probe = probeUntilGone(c, 1, 2);
            assertTrue(probe.startsWith("ok devices=3 "), probe);
            assertTrue(probe.contains(" dev0=CUDA_SUCCESS:GPUsockets_emulated_device_(no_GPU)/CUDA_SUCCESS"), probe);
            assertTrue(probe.contains(" dev1=CUDA_SUCCESS:GPUsockets_emulated_device_(no_GPU)/CUDA_SUCCESS"), probe);
            assertTrue(probe.contains("/CUDA_ERROR_DEVICE_UNAVAILABLE"), probe);

            // DNS still names it: the next connect leaves it out; once DNS drops it, it is not asked at all.
            assertEquals("ok resolved=" + uris(List.of("127.0.0.2", "127.0.0.3", "127.0.0.6")) + " devices=2", c.ask("connect"));
            writeHosts(hosts, List.of("127.0.0.3", "127.0.0.2"));
            assertEquals("ok resolved=" + uris(List.of("127.0.0.2", "127.0.0.3")) + " devices=2", c.ask("connect"));
        } finally {
            if (!extraGone) {
                extra.close();
            }
        }
        try (Client fresh = new Client(hosts, "dns://" + NAME + ":" + port)) {
            assertEquals("ok resolved=" + uris(List.of("127.0.0.2", "127.0.0.3")) + " devices=2", fresh.ask("connect"));
        }
    }

    /** Probes driver {@code driver} until device {@code dev} is seen gone (the connection's end reaches the frontend asynchronously). */
    private static String probeUntilGone(Client c, int driver, int dev) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        String probe;
        do {
            probe = c.ask("probe " + driver);
            if (probe.contains(" dev" + dev + "=") && probe.substring(probe.indexOf(" dev" + dev + "=")).contains("DEVICE_UNAVAILABLE")) {
                return probe;
            }
            Thread.sleep(100);
        } while (System.nanoTime() < deadline);
        return probe;
    }
}
