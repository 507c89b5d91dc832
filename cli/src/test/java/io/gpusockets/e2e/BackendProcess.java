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
 * ephemeral loopback port and on a Unix socket in a temporary directory. System properties of the test JVM
 * named {@code gpusockets.backend.*} are given to it too (e.g. a suite run with address-stable memory on).
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

    /** Backends started and not yet closed: the test JVM kills them when it exits, so none outlives the suite. */
    private static final java.util.Set<Process> LEFT_RUNNING = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> LEFT_RUNNING.forEach(Process::destroyForcibly)));
    }

    static BackendProcess start(String... extraArgs) throws IOException, InterruptedException {
        return start(List.of(), extraArgs);
    }

    /**
     * A backend whose process may hold at most {@code descriptors} open files (the shell's
     * {@code ulimit -n}), for running it out of descriptors.
     */
    static BackendProcess startWithDescriptorLimit(int descriptors, String... extraArgs)
            throws IOException, InterruptedException {
        return start(List.of("sh", "-c", "ulimit -n " + descriptors + " && exec \"$0\" \"$@\""), List.of(), extraArgs);
    }

    /** As {@link #start(String...)}, with {@code jvmOptions} added to the backend JVM's own options. */
    static BackendProcess start(List<String> jvmOptions, String... extraArgs) throws IOException, InterruptedException {
        return start(List.of(), jvmOptions, extraArgs);
    }

    /**
     * A backend that takes over the running one whose admin socket is {@code oldAdmin} ({@code --take-over}, no
     * {@code --listen}: it serves the old one's listeners), with its own admin socket at {@code admin} (may be the old
     * one's path); returns once it reported the {@code listeners} addresses it took over.
     */
    static BackendProcess startTakingOver(Path oldAdmin, Path admin, int listeners, String... extraArgs)
            throws IOException, InterruptedException {
        List<String> args = new ArrayList<>(List.of("--take-over", oldAdmin.toString(), "--admin-socket", admin.toString()));
        args.addAll(List.of(extraArgs));
        BackendProcess b = start(List.of(), List.of(), false, listeners, args.toArray(String[]::new));
        b.adminSocket = admin;
        return b;
    }

    private static BackendProcess start(List<String> prefix, List<String> jvmOptions, String... extraArgs)
            throws IOException, InterruptedException {
        return start(prefix, jvmOptions, true, -1, extraArgs);
    }

    private static BackendProcess start(List<String> prefix, List<String> jvmOptions, boolean listen, long listens,
                                        String... extraArgs) throws IOException, InterruptedException {
        Path dir = Files.createTempDirectory("gpusockets-e2e");
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx512m"));
        // the backend's own settings given to the test JVM (-Dgpusockets.backend.*) reach it too
        System.getProperties().stringPropertyNames().stream().filter(k -> k.startsWith("gpusockets.backend."))
                .sorted().forEach(k -> cmd.add("-D" + k + "=" + System.getProperty(k)));
        cmd.addAll(jvmOptions);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", "emulated"));
        if (listen) {
            cmd.addAll(List.of("--listen", "tcp://127.0.0.1:0", "--listen", "unix://" + dir.resolve("backend.sock")));
        }
        cmd.addAll(List.of(extraArgs));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        LEFT_RUNNING.add(p);
        BackendProcess b = new BackendProcess(p, dir);
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        if (listens < 0) {
            listens = cmd.stream().filter("--listen"::equals).count();
        }
        while (b.addresses.size() < listens) {
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

    /**
     * A backend that also serves status on an admin socket in its temporary directory and Prometheus
     * metrics on a loopback port ({@link #adminSocket}, {@link #metricsUrl}).
     */
    static BackendProcess startWithStatus(String... extraArgs) throws IOException, InterruptedException {
        return startWithStatus(List.of(), extraArgs);
    }

    /** As {@link #startWithStatus(String...)}, with {@code jvmOptions} added to the backend JVM's own options. */
    static BackendProcess startWithStatus(List<String> jvmOptions, String... extraArgs) throws IOException, InterruptedException {
        Path socket = Files.createTempDirectory("gpusockets-admin").resolve("admin.sock");
        List<String> args = new ArrayList<>(List.of("--admin-socket", socket.toString(), "--metrics", "tcp://127.0.0.1:0"));
        args.addAll(List.of(extraArgs));
        BackendProcess b = start(jvmOptions, args.toArray(String[]::new));
        b.adminSocket = socket;
        return b;
    }

    private Path adminSocket;

    /** The admin socket of a backend from {@link #startWithStatus}. */
    Path adminSocket() {
        return adminSocket;
    }

    /** The metrics URL a backend from {@link #startWithStatus} printed. */
    String metricsUrl() throws InterruptedException {
        String line = awaitLog("gpusockets backend: metrics on ", 30_000);
        return line.substring(line.indexOf("http://")).strip();
    }

    String tcp() {
        return addresses.get(0);
    }

    String unix() {
        return addresses.get(1);
    }

    /** The first address of {@code scheme} the backend reported, e.g. an extra {@code --listen tls://...}. */
    String address(String scheme) {
        return addresses.stream().filter(a -> a.startsWith(scheme + "://")).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("backend does not listen on " + scheme + "://: " + addresses));
    }

    /** The backend's open descriptors now (from /proc). */
    long openDescriptors() throws IOException {
        try (var fds = Files.list(Path.of("/proc", String.valueOf(process.pid()), "fd"))) {
            return fds.count();
        }
    }

    /** The backend's process id (to signal it). */
    long pid() {
        return process.pid();
    }

    /** The backend's process, e.g. to find its worker processes (isolation mode process). */
    ProcessHandle handle() {
        return process.toHandle();
    }

    /**
     * Waits up to {@code seconds} for the process to end; whether it did. (Through the Process, whose reaper sees
     * the exit: {@code handle().onExit()} was seen to miss a SIGKILLed child's end for over 30 s.)
     */
    boolean awaitExit(long seconds) throws InterruptedException {
        return process.waitFor(seconds, TimeUnit.SECONDS);
    }

    /** The exit status of a backend that has ended ({@link #awaitExit}). */
    int exitValue() {
        return process.exitValue();
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

    /** The backend's output lines so far: a snapshot (a view of the live list would fail when a line comes meanwhile). */
    List<String> output() {
        return List.copyOf(output);
    }

    @Override
    public void close() throws Exception {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly();
        }
        LEFT_RUNNING.remove(process);
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.deleteIfExists(f);
            }
        }
        Files.deleteIfExists(dir);
        if (adminSocket != null) {
            Files.deleteIfExists(adminSocket);
            Files.deleteIfExists(adminSocket.getParent());
        }
    }
}
