package io.gpusockets.e2e;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * A real backend in its own JVM process (emulated device), as users run it, listening on an
 * ephemeral loopback port and on a Unix socket in a temporary directory.
 */
final class BackendProcess implements AutoCloseable {
    private final Process process;
    private final List<String> output = new CopyOnWriteArrayList<>();
    private final List<String> addresses = new ArrayList<>();
    private final Path dir;

    private BackendProcess(Process process, Path dir) {
        this.process = process;
        this.dir = dir;
    }

    static BackendProcess start(String... extraArgs) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("gpusockets-e2e");
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx512m",
                "-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", "emulated",
                "--listen", "tcp://127.0.0.1:0", "--listen", "unix://" + dir.resolve("backend.sock")));
        cmd.addAll(List.of(extraArgs));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        BackendProcess b = new BackendProcess(p, dir);
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (b.addresses.size() < 2) {
            String line = r.readLine();
            if (line == null || System.nanoTime() > deadline) {
                p.destroyForcibly();
                throw new IOException("backend did not start: " + b.output);
            }
            b.output.add(line);
            int at = line.indexOf("listening on ");
            if (line.startsWith("gpusockets backend:") && at >= 0) {
                b.addresses.add(line.substring(at + "listening on ".length()).strip());
            }
        }
        Thread.ofPlatform().daemon().start(() -> {
            try {
                for (String line; (line = r.readLine()) != null; ) {
                    b.output.add(line);
                }
            } catch (IOException ignored) {
                // process ended
            }
        });
        return b;
    }

    String tcp() {
        return addresses.get(0);
    }

    String unix() {
        return addresses.get(1);
    }

    String address(String scheme) {
        return scheme.equals("tcp") ? tcp() : unix();
    }

    /** The backend's process, e.g. to find its worker processes (isolation mode process). */
    ProcessHandle handle() {
        return process.toHandle();
    }

    boolean alive() {
        return process.isAlive();
    }

    /** Waits until a line containing {@code text} has been logged; returns it. */
    String awaitLog(String text, long millis) throws InterruptedException {
        long deadline = System.currentTimeMillis() + millis;
        while (System.currentTimeMillis() < deadline) {
            for (String line : output) {
                if (line.contains(text)) {
                    return line;
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("backend never logged '" + text + "'; log:\n" + String.join("\n", output));
    }

    List<String> output() {
        return output;
    }

    @Override
    public void close() throws Exception {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly();
        }
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
        }
        Files.deleteIfExists(dir);
    }
}
