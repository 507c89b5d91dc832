package io.gpusockets.cli;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.Kernels;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.cli.workloads.VectorAdd;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code gpusockets soak}: a backend of its own (a separate JVM, so that its memory is measured alone)
 * serving many clients for a long time, sampled at intervals: the backend's resident memory, threads
 * and descriptors, and the device memory in use. Each client keeps a session busy with a mixed cycle
 * (allocations, copies both ways, a kernel launch checked against the CPU, streams and events) and
 * starts a new session every few cycles, so session set-up and release are soaked too. The run passes
 * when every cycle gave correct results and, between the window after warm-up and the last window, the
 * median resident memory and device memory in use moved by at most the tolerance. Writes samples.csv
 * (plotted by {@code scripts/bench soak-plot DIR}) and summary.md.
 */
@Command(name = "soak", mixinStandardHelpOptions = true,
        description = {"Many clients against a backend of its own for a long time; checks that the backend's resident"
                + " memory and the device memory in use stay flat and that every result is correct.",
                "Exit code 0: flat and correct; 1: not; 2: could not run."})
final class SoakCommand implements Callable<Integer> {
    @Option(names = "--clients", defaultValue = "16", description = "Client sessions at once. Default: ${DEFAULT-VALUE}.")
    int clients;

    @Option(names = "--duration", defaultValue = "1h", paramLabel = "TIME",
            description = "How long, e.g. 90s, 20m, 1h. Default: ${DEFAULT-VALUE}.")
    String duration;

    @Option(names = "--interval", defaultValue = "10s", paramLabel = "TIME",
            description = "Time between samples. Default: ${DEFAULT-VALUE}.")
    String interval;

    @Option(names = "--warmup", defaultValue = "10%", paramLabel = "TIME|P%",
            description = "Samples before this are not compared (JIT, heap growth to its working size). Default: ${DEFAULT-VALUE}.")
    String warmup;

    @Option(names = "--tolerance", defaultValue = "5", paramLabel = "PERCENT",
            description = "Largest change allowed between the first and the last window. Default: ${DEFAULT-VALUE}.")
    double tolerance;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "The backend's driver. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--transport", paramLabel = "unix|tcp|ring", defaultValue = "unix",
            description = "How clients reach the backend. Default: ${DEFAULT-VALUE}.")
    String transport;

    @Option(names = "--backend-arg", paramLabel = "ARG",
            description = "An extra argument for the backend (repeatable), e.g. --backend-arg=--isolation --backend-arg=process"
                    + " (the soak runs the backend in mode context unless told: one process serves every session and is"
                    + " the one sampled).")
    List<String> backendArgs = new ArrayList<>();

    @Option(names = "--backend-heap", defaultValue = "512m", paramLabel = "SIZE",
            description = "The backend JVM's heap: -Xms and -Xmx, touched at start (see --growing-heap). Default: ${DEFAULT-VALUE}.")
    String backendHeap;

    @Option(names = "--growing-heap",
            description = "Start the backend's heap small and let it grow to --backend-heap (-Xmx only, no -Xms or pre-touch):"
                    + " resident memory then also follows the collector's sizing of the heap, which the default leaves out.")
    boolean growingHeap;

    @Option(names = "--backend-jvm-arg", paramLabel = "ARG",
            description = "An extra JVM option for the backend (repeatable), e.g. --backend-jvm-arg=-XX:+UseZGC.")
    List<String> backendJvmArgs = new ArrayList<>();

    @Option(names = "--native-memory-tracking",
            description = "Run the backend with -XX:NativeMemoryTracking=summary, take a baseline when the warm-up ends and"
                    + " write what changed since then, by category, to DIR/native-memory.txt (needs jcmd beside java).")
    boolean nativeMemoryTracking;

    @Option(names = "--cycles-per-session", defaultValue = "20", description = "Cycles before a client starts a new session. Default: ${DEFAULT-VALUE}.")
    int cyclesPerSession;

    @Option(names = "--elements", defaultValue = "65536", description = "Vector length per cycle. Default: ${DEFAULT-VALUE}.")
    int elements;

    @Option(names = "--out", defaultValue = "soak-results", paramLabel = "DIR", description = "Where samples.csv and summary.md go. Default: ${DEFAULT-VALUE}.")
    Path out;

    /** One sample of the backend and the device. */
    record Sample(double seconds, long rssBytes, int threads, int descriptors, long deviceUsedBytes, long cycles,
                  long sessions, long failures) {
    }

    @Override
    public Integer call() throws Exception {
        long durationNanos = parseTime(duration).toNanos();
        long intervalNanos = parseTime(interval).toNanos();
        if (clients < 1 || intervalNanos <= 0 || durationNanos < intervalNanos) {
            System.err.println("soak: need --clients >= 1 and --duration >= --interval > 0");
            return 2;
        }
        long warmupNanos = warmup.endsWith("%")
                ? (long) (durationNanos * Double.parseDouble(warmup.substring(0, warmup.length() - 1)) / 100)
                : parseTime(warmup).toNanos();
        Files.createDirectories(out);
        Path dir = Files.createTempDirectory("gpusockets-soak");
        String listen = switch (transport) {
            case "unix" -> "unix://" + dir.resolve("backend.sock");
            case "tcp" -> "tcp://127.0.0.1:0";
            case "ring" -> "ring://soak-" + ProcessHandle.current().pid();
            default -> throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
                    "--transport must be unix, tcp or ring: " + transport);
        };
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx" + backendHeap));
        if (!growingHeap) {
            // The heap is bounded by -Xmx whatever the collector does; sized and touched up front, it is resident
            // from the start, so a change in resident memory is what a leak grows (native memory, metaspace,
            // threads), not the collector's choice of heap size at the sampling instants.
            cmd.addAll(List.of("-Xms" + backendHeap, "-XX:+AlwaysPreTouch"));
        }
        if (nativeMemoryTracking) {
            cmd.add("-XX:NativeMemoryTracking=summary");
        }
        String libcuda = System.getProperty("gpusockets.libcuda");
        if (libcuda != null) {
            cmd.add("-Dgpusockets.libcuda=" + libcuda);
        }
        cmd.addAll(backendJvmArgs);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", device.name().toLowerCase(Locale.ROOT), "--listen", listen));
        if (backendArgs.stream().noneMatch(a -> a.equals("--isolation") || a.startsWith("--isolation="))) {
            // one process serving every session for the whole run, the one whose memory is sampled: in the default
            // mode (process) each session's code runs in a worker that exits with it, out of the sampled process
            cmd.addAll(List.of("--isolation", "context"));
        }
        cmd.addAll(backendArgs);
        Process backend = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        List<String> backendLog = new ArrayList<>();
        String address = awaitAddress(backend, backendLog, out.resolve("backend.log"));
        if (address == null) {
            System.err.println("soak: the backend did not start:\n" + String.join("\n", backendLog));
            backend.destroyForcibly();
            return 2;
        }
        System.out.println("soak: backend pid " + backend.pid() + " on " + address + " (" + backendLog.getFirst() + "), "
                + clients + " clients for " + duration + ", a sample every " + interval);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong cycles = new AtomicLong();
        AtomicLong sessions = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        ConcurrentLinkedQueue<String> failureLines = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        List<Sample> samples = new ArrayList<>();
        long before;
        long after;
        try (RemoteCudaDriver monitor = RemoteCudaDriver.connect(address);
             PrintWriter csv = new PrintWriter(Files.newBufferedWriter(out.resolve("samples.csv")))) {
            Cu.check(monitor.cuInit(0), "cuInit");
            csv.println("seconds,rss_bytes,threads,descriptors,device_used_bytes,cycles,sessions,failures");
            try (PrimaryContext ctx = PrimaryContext.retain(monitor, 0)) {
                before = steadyDeviceUsed(monitor);
                for (int c = 0; c < clients; c++) {
                    int client = c;
                    threads.add(Thread.ofPlatform().name("soak-client-" + c).start(() ->
                            clientLoop(address, client, stop, cycles, sessions, failures, failureLines)));
                }
                long t0 = System.nanoTime();
                long next = t0;
                boolean baselined = false;
                try {
                    while (true) {
                        long now = System.nanoTime();
                        if (nativeMemoryTracking && !baselined && now - t0 >= warmupNanos) {
                            nativeMemory = jcmd(backend.pid(), "VM.native_memory", "baseline");
                            baselined = true;
                        }
                        if (now - t0 > durationNanos || !backend.isAlive()) {
                            if (nativeMemoryTracking && backend.isAlive()) {
                                nativeMemory = jcmd(backend.pid(), "VM.native_memory", "summary.diff", "scale=KB");
                                Files.writeString(out.resolve("native-memory.txt"), nativeMemory);
                            }
                            break;
                        }
                        if (now >= next) {
                            Sample s = sample(backend.pid(), monitor, (now - t0) / 1e9, cycles.get(), sessions.get(), failures.get());
                            samples.add(s);
                            csv.printf(Locale.ROOT, "%.1f,%d,%d,%d,%d,%d,%d,%d%n", s.seconds(), s.rssBytes(), s.threads(),
                                    s.descriptors(), s.deviceUsedBytes(), s.cycles(), s.sessions(), s.failures());
                            csv.flush();
                            System.out.printf(Locale.ROOT, "soak: %6.0f s  backend RSS %7.1f MiB  threads %4d  fds %4d  device used %8.1f MiB"
                                            + "  cycles %8d  sessions %6d  failures %d%n", s.seconds(), s.rssBytes() / 1048576.0,
                                    s.threads(), s.descriptors(), s.deviceUsedBytes() / 1048576.0, s.cycles(), s.sessions(), s.failures());
                            next += intervalNanos;
                        }
                        Thread.sleep(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(next - System.nanoTime()), 1000)));
                    }
                } finally {
                    stop.set(true);
                    for (Thread t : threads) {
                        t.join(60_000);
                    }
                }
                // Every client's session has ended: the device memory they held must all be back.
                after = settledDeviceUsed(monitor, before);
            }
        }
        boolean alive = backend.isAlive();
        backend.destroy();
        if (!backend.waitFor(20, TimeUnit.SECONDS)) {
            backend.destroyForcibly();
        }
        // What the clients may hold at one instant: three vectors each, mid-cycle.
        long slack = 3L * clients * elements * Float.BYTES;
        Verdict v = verdict(samples, warmupNanos / 1e9, tolerance, slack);
        boolean returned = after == before;
        List<String> lines = new ArrayList<>();
        lines.add("# Soak: " + clients + " clients, " + duration + ", transport " + transport + ", device " + backendLog.getFirst());
        lines.add("");
        lines.add("Backend arguments: " + String.join(" ", backendArgs) + "; JVM options: " + String.join(" ",
                cmd.subList(1, cmd.indexOf("-cp"))) + "; MALLOC_ARENA_MAX=" + System.getenv().getOrDefault("MALLOC_ARENA_MAX", "(unset)"));
        lines.add("Cycles: " + cycles.get() + ", sessions: " + sessions.get() + ", failures: " + failures.get()
                + (alive ? "" : ", THE BACKEND DIED"));
        lines.add(String.format(Locale.ROOT, "Device memory in use before the clients: %d bytes; after every client's session ended: %d bytes%s",
                before, after, returned ? " (all back)" : " (NOT ALL BACK)"));
        lines.addAll(v.lines());
        if (nativeMemoryTracking) {
            lines.add("");
            lines.add("Native memory of the backend (NMT), end of run against the baseline taken when the warm-up ended"
                    + " (all of it in native-memory.txt): " + nativeMemoryTotal(nativeMemory));
        }
        failureLines.stream().limit(20).forEach(l -> lines.add("- failure: " + l));
        lines.add("");
        boolean pass = v.flat() && failures.get() == 0 && alive && returned;
        lines.add(pass ? "Result: PASS" : "Result: FAIL");
        Files.write(out.resolve("summary.md"), lines);
        lines.forEach(System.out::println);
        return pass ? 0 : 1;
    }

    /** The last output of {@link #jcmd} (with --native-memory-tracking). */
    private String nativeMemory = "(not taken)";

    /** Runs the JDK's jcmd beside this JVM's java on the backend; returns what it printed, or why it could not. */
    static String jcmd(long pid, String... command) {
        Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
        if (!Files.isExecutable(jcmd)) {
            return "(no jcmd at " + jcmd + ": native memory tracking needs a full JDK, not the bundle's runtime)";
        }
        List<String> cmd = new ArrayList<>(List.of(jcmd.toString(), Long.toString(pid)));
        cmd.addAll(List.of(command));
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor(60, TimeUnit.SECONDS);
            return text;
        } catch (IOException e) {
            return "(jcmd failed: " + e + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "(interrupted)";
        }
    }

    /** The "Total:" line of an NMT summary.diff, or what jcmd said instead. */
    static String nativeMemoryTotal(String diff) {
        return diff.lines().filter(l -> l.strip().startsWith("Total:")).map(String::strip).findFirst()
                .orElse(diff.lines().findFirst().orElse("(nothing)"));
    }

    /** The backend's first output line names its device; then waits for its "listening on" line. */
    private static String awaitAddress(Process p, List<String> lines, Path logFile) throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        String address = null;
        while (address == null && System.nanoTime() < deadline) {
            String line = r.readLine();
            if (line == null) {
                return null;
            }
            lines.add(line);
            int at = line.indexOf("listening on ");
            if (line.startsWith("gpusockets backend:") && at >= 0) {
                address = line.substring(at + "listening on ".length()).strip();
            }
        }
        PrintStream log = new PrintStream(Files.newOutputStream(logFile), true, StandardCharsets.UTF_8);
        lines.forEach(log::println);
        Thread.ofPlatform().daemon().start(() -> {
            try (log) {
                for (String line; (line = r.readLine()) != null; ) {
                    log.println(line);
                }
            } catch (IOException ignored) {
                // the backend ended
            }
        });
        return address;
    }

    private void clientLoop(String address, int client, AtomicBoolean stop, AtomicLong cycles, AtomicLong sessions,
                            AtomicLong failures, ConcurrentLinkedQueue<String> failureLines) {
        long seed = client * 1_000_003L;
        while (!stop.get()) {
            try (RemoteCudaDriver cu = RemoteCudaDriver.connect(address)) {
                sessions.incrementAndGet();
                Cu.check(cu.cuInit(0), "cuInit");
                try (PrimaryContext ctx = PrimaryContext.retain(cu, 0); Kernels kernels = Kernels.load(cu);
                     Arena arena = Arena.ofConfined()) {
                    MemorySegment out = arena.allocate(JAVA_LONG);
                    for (int i = 0; i < cyclesPerSession && !stop.get(); i++) {
                        VectorAdd.Result r = VectorAdd.run(cu, kernels, elements, seed++);
                        if (!r.passed()) {
                            throw new IllegalStateException("vector add: " + r.summary());
                        }
                        Cu.check(cu.cuStreamCreate(out, 0), "cuStreamCreate");
                        long stream = out.get(JAVA_LONG, 0);
                        Cu.check(cu.cuEventCreate(out, 0), "cuEventCreate");
                        long event = out.get(JAVA_LONG, 0);
                        Cu.check(cu.cuEventRecord(event, stream), "cuEventRecord");
                        Cu.check(cu.cuEventSynchronize(event), "cuEventSynchronize");
                        Cu.check(cu.cuEventDestroy(event), "cuEventDestroy");
                        Cu.check(cu.cuStreamDestroy(stream), "cuStreamDestroy");
                        cycles.incrementAndGet();
                    }
                }
            } catch (RuntimeException | IOException e) {
                failures.incrementAndGet();
                failureLines.add("client " + client + ": " + e);
                try {
                    Thread.sleep(200);
                } catch (InterruptedException ie) {
                    return;
                }
            }
        }
    }

    private static Sample sample(long pid, RemoteCudaDriver monitor, double seconds, long cycles, long sessions, long failures) {
        long rss = -1;
        int threads = -1;
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmRSS:")) {
                    rss = Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                } else if (line.startsWith("Threads:")) {
                    threads = Integer.parseInt(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (IOException | RuntimeException e) {
            // the backend is gone: the loop notices
        }
        int fds = -1;
        try (var s = Files.list(Path.of("/proc/" + pid + "/fd"))) {
            fds = (int) s.count();
        } catch (IOException | RuntimeException e) {
            // as above
        }
        return new Sample(seconds, rss, threads, fds, deviceUsed(monitor), cycles, sessions, failures);
    }

    /** Device memory in use (total - free, as cuMemGetInfo sees it), or -1. */
    private static long deviceUsed(RemoteCudaDriver monitor) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment free = a.allocate(JAVA_LONG);
            MemorySegment total = a.allocate(JAVA_LONG);
            if (monitor.cuMemGetInfo(free, total) == CuResult.CUDA_SUCCESS) {
                return total.get(JAVA_LONG, 0) - free.get(JAVA_LONG, 0);
            }
            return -1;
        }
    }

    /**
     * Device memory in use once it has held still for 2 s (at most 30 s of waiting): in isolation mode
     * process the backend's idle workers make their contexts ahead as they start, which the figure the
     * run ends against must include.
     */
    private static long steadyDeviceUsed(RemoteCudaDriver monitor) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        long last = deviceUsed(monitor);
        int same = 0;
        while (same < 4 && System.nanoTime() < deadline) {
            Thread.sleep(500);
            long now = deviceUsed(monitor);
            same = now == last ? same + 1 : 0;
            last = now;
        }
        return last;
    }

    /** Device memory in use once it is back to {@code expected}, or what it is after 30 s of waiting (sessions end asynchronously). */
    private static long settledDeviceUsed(RemoteCudaDriver monitor, long expected) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        long used;
        while ((used = deviceUsed(monitor)) != expected && System.nanoTime() < deadline) {
            Thread.sleep(200);
        }
        return used;
    }

    /** Whether the run stayed flat, and the lines that say so. */
    record Verdict(boolean flat, List<String> lines) {
    }

    /**
     * Compares the median of each measure over the first window after {@code warmupSeconds} with the median
     * over the last window (each a tenth of the samples after warm-up, at least one): flat when resident memory
     * moved by at most {@code tolerancePercent}. Device memory in use is compared by each window's minimum (what
     * stays held when clients hold least: a leak raises it), allowed to grow by the larger of
     * {@code tolerancePercent} and {@code slackBytes} (what the clients may hold at one instant); a fall is no leak.
     */
    static Verdict verdict(List<Sample> samples, double warmupSeconds, double tolerancePercent, long slackBytes) {
        List<Sample> after = samples.stream().filter(s -> s.seconds() >= warmupSeconds).toList();
        List<String> lines = new ArrayList<>();
        if (after.size() < 2) {
            lines.add("Too few samples after warm-up (" + after.size() + ") to judge: run longer or sample more often.");
            return new Verdict(false, lines);
        }
        int w = Math.max(1, after.size() / 10);
        List<Sample> first = after.subList(0, w);
        List<Sample> last = after.subList(after.size() - w, after.size());
        boolean flat = true;
        lines.add("");
        lines.add(String.format(Locale.ROOT, "| measure | first window (from %.0f s) | last window (to %.0f s) | change |",
                first.getFirst().seconds(), last.getLast().seconds()));
        lines.add("|---|---:|---:|---:|");
        for (String measure : List.of("backend RSS", "device memory used (window minimum)", "backend threads",
                "backend descriptors")) {
            boolean device = measure.startsWith("device");
            double a = device ? min(first) : median(first, measure);
            double b = device ? min(last) : median(last, measure);
            double change = a == 0 ? (b == 0 ? 0 : 100) : (b - a) * 100 / a;
            boolean judged = measure.startsWith("backend RSS") || device;
            // device memory is judged by growth only: a leak raises the floor, while fewer contexts alive at the
            // sampling instants (sessions come and go) lower it; that all of it comes back is checked at the end
            boolean ok = !judged || (a >= 0 && b >= 0 && (device
                    ? change <= tolerancePercent || b - a <= slackBytes
                    : Math.abs(change) <= tolerancePercent));
            flat &= ok;
            String unit = measure.contains("RSS") || measure.contains("memory") ? " MiB" : "";
            double scale = unit.isEmpty() ? 1 : 1048576.0;
            lines.add(String.format(Locale.ROOT, "| %s | %.1f%s | %.1f%s | %+.2f %%%s |", measure, a / scale, unit, b / scale,
                    unit, change, judged ? (ok ? "" : " (over " + tolerancePercent + " %)") : " (not judged)"));
        }
        return new Verdict(flat, lines);
    }

    private static double min(List<Sample> window) {
        return window.stream().mapToLong(Sample::deviceUsedBytes).min().orElse(-1);
    }

    private static double median(List<Sample> window, String measure) {
        double[] v = window.stream().mapToDouble(s -> switch (measure) {
            case "backend RSS" -> s.rssBytes();
            case "device memory used (window minimum)" -> s.deviceUsedBytes();
            case "backend threads" -> s.threads();
            default -> s.descriptors();
        }).sorted().toArray();
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    /** "90s", "20m", "1h", "1500ms" or a plain number of seconds. */
    static Duration parseTime(String s) {
        String t = s.strip().toLowerCase(Locale.ROOT);
        try {
            if (t.endsWith("ms")) {
                return Duration.ofMillis(Long.parseLong(t.substring(0, t.length() - 2)));
            }
            char unit = t.charAt(t.length() - 1);
            String n = Character.isDigit(unit) ? t : t.substring(0, t.length() - 1);
            double v = Double.parseDouble(n);
            double seconds = switch (unit) {
                case 'h' -> v * 3600;
                case 'm' -> v * 60;
                default -> v;
            };
            if (!Character.isDigit(unit) && unit != 's' && unit != 'm' && unit != 'h') {
                throw new NumberFormatException(s);
            }
            return Duration.ofMillis((long) (seconds * 1000));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("not a time (e.g. 90s, 20m, 1h): " + s);
        }
    }
}
