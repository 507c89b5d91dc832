package io.gpusockets.benchmarks;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench isolation}: what isolation mode process costs against mode context (README "Isolation
 * modes"). For each mode a backend is started as users start it ({@code gpusockets backend --isolation M},
 * its own JVM, on unix://), and one client measures the null call (cuCtxGetDevice round trips: p50, p99)
 * and the start of a session (connect, handshake, primary context retained and current, first call
 * answered), sessions one after another with a pause between them so that an idle worker is ready again
 * ({@code process}), or with no idle workers kept, so that each session waits for a worker JVM to start
 * ({@code process-cold}). Then bursts ({@code --bursts}): N clients start sessions at once (p50 and max of
 * their starts) and, while all N are open, the host memory is read: each worker process's resident set
 * (RSS) and proportional set (PSS, its share of pages mapped by several processes, such as the JDK's class
 * data), and the whole backend's (front and workers) RSS and PSS. The load average is printed beside each
 * row: figures taken on a busy machine say so.
 */
@Command(name = "bench isolation", mixinStandardHelpOptions = true,
        description = "Null-call latency and session start time in isolation modes context and process.")
public final class IsolationBench implements Callable<Integer> {
    @Option(names = "--modes", split = ",", paramLabel = "LIST", defaultValue = "context,process,process-cold",
            description = "Modes to measure: context, process (one idle worker kept), process-cold (none). Default: ${DEFAULT-VALUE}.")
    List<String> modes;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "The backend's driver. Default: ${DEFAULT-VALUE}.")
    String device;

    @Option(names = "--calls", paramLabel = "N", defaultValue = "100000", description = "Measured null calls. Default: ${DEFAULT-VALUE}.")
    int calls;

    @Option(names = "--sessions", paramLabel = "N", defaultValue = "20", description = "Measured session starts. Default: ${DEFAULT-VALUE}.")
    int sessions;

    @Option(names = "--pause-ms", paramLabel = "MS", defaultValue = "1500",
            description = "Pause after each session, for the backend to get a worker ready again. Default: ${DEFAULT-VALUE}.")
    long pauseMillis;

    @Option(names = "--quick", description = "20000 calls, 5 sessions (a smoke run).")
    boolean quick;

    @Option(names = "--bursts", split = ",", paramLabel = "LIST", defaultValue = "1,4,16",
            description = "Sessions started at once, per burst (none: --bursts=). Default: ${DEFAULT-VALUE}.")
    List<Integer> bursts;

    @Option(names = "--idle-workers", paramLabel = "N", defaultValue = "1",
            description = "Mode process: worker processes kept started ahead. Default: ${DEFAULT-VALUE}.")
    int idleWorkers;

    @Option(names = "--backend-java-options", paramLabel = "OPTS",
            description = "JVM options for the backend (split on spaces; its workers inherit them), e.g. -Xmx256m.")
    String backendJavaOptions;

    @Option(names = "--worker-java-options", paramLabel = "OPTS",
            description = "Mode process: the workers' extra JVM options (-Dgpusockets.worker.javaOptions), e.g. -XX:+UseSerialGC.")
    String workerJavaOptions;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write the table to DIR/isolation.txt.")
    Path out;

    /** One mode's figures. */
    record Row(String mode, Latency nullCall, double startP50Millis, double startMinMillis, double startMaxMillis,
               List<Burst> bursts) {
    }

    /**
     * N sessions started at once: their start times, and the host memory while all N were open, in MiB (RSS and
     * PSS from /proc; per worker: the median over the backend's worker processes; whole: front and workers).
     */
    record Burst(int sessions, double startP50Millis, double startMaxMillis, double workerRssMib, double workerPssMib,
                 int workers, double wholeRssMib, double wholePssMib, double gpuMib, String load) {
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new IsolationBench()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (quick) {
            calls = 20_000;
            sessions = 5;
        }
        List<Row> rows = new ArrayList<>();
        for (String mode : modes) {
            rows.add(measure(mode));
        }
        String table = table(rows);
        System.out.print(table);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("isolation.txt"), table);
        }
        return 0;
    }

    private Row measure(String mode) throws Exception {
        int most = bursts.stream().mapToInt(Integer::intValue).max().orElse(1);
        List<String> backendArgs = switch (mode) {
            case "context" -> List.of("--isolation", "context", "--max-sessions", String.valueOf(most + 4));
            case "process" -> List.of("--isolation", "process", "--idle-workers", String.valueOf(idleWorkers),
                    "--max-workers", String.valueOf(most + idleWorkers + 4));
            case "process-cold" -> List.of("--isolation", "process", "--idle-workers", "0", "--max-workers", String.valueOf(most + 4));
            default -> throw new CommandLine.ParameterException(new CommandLine(this), "unknown mode: " + mode);
        };
        Path dir = Files.createTempDirectory("gpusockets-isolation-bench");
        Path sock = dir.resolve("backend.sock");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED"));
        if (backendJavaOptions != null && !backendJavaOptions.isBlank()) {
            cmd.addAll(List.of(backendJavaOptions.strip().split("\\s+")));
        }
        if (workerJavaOptions != null) {
            cmd.add("-Dgpusockets.worker.javaOptions=" + workerJavaOptions);
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", device, "--listen", "unix://" + sock));
        cmd.addAll(backendArgs);
        Process backend = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try {
            String uri = awaitListening(backend);
            Thread.sleep(pauseMillis); // the idle worker (process) starts
            Latency nullCall = nullCalls(uri);
            Thread.sleep(pauseMillis);
            double[] starts = new double[sessions];
            for (int i = 0; i < sessions; i++) {
                starts[i] = sessionStart(uri);
                Thread.sleep(pauseMillis);
            }
            Arrays.sort(starts);
            List<Burst> measured = new ArrayList<>();
            for (int n : bursts) {
                settle(backend, mode);
                measured.add(burst(uri, n, backend.toHandle()));
            }
            return new Row(mode, nullCall, starts[starts.length / 2], starts[0], starts[starts.length - 1], measured);
        } finally {
            backend.destroy();
            if (!backend.waitFor(20, TimeUnit.SECONDS)) {
                backend.destroyForcibly();
            }
            Files.deleteIfExists(sock);
            Files.deleteIfExists(dir);
        }
    }

    /** Waits until the backend is back to its idle workers (those of the last burst gone), then the pause. */
    private void settle(Process backend, String mode) throws InterruptedException {
        long idle = switch (mode) {
            case "process" -> idleWorkers;
            default -> 0;
        };
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (backend.toHandle().children().count() > idle && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(pauseMillis * (mode.equals("process") ? Math.max(1, idleWorkers) : 1));
    }

    /** {@code n} sessions started at once from as many threads; memory read while all are open. */
    private static Burst burst(String uri, int n, ProcessHandle backend) throws Exception {
        CyclicBarrier go = new CyclicBarrier(n);
        CountDownLatch measured = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(n);
        ExecutorService pool = Executors.newFixedThreadPool(n);
        List<Future<Double>> starts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            starts.add(pool.submit(() -> {
                go.await();
                long t0 = System.nanoTime();
                try (RemoteCudaDriver cu = RemoteCudaDriver.connect(uri); Arena arena = Arena.ofConfined()) {
                    current(cu, arena);
                    check(cu.cuCtxGetDevice(arena.allocate(ValueLayout.JAVA_INT)), "cuCtxGetDevice");
                    double ms = (System.nanoTime() - t0) / 1e6;
                    started.countDown();
                    measured.await();
                    return ms;
                } catch (Exception | Error e) {
                    started.countDown(); // the burst's memory is read without this session; its get() throws
                    throw e;
                }
            }));
        }
        try {
            started.await(300, TimeUnit.SECONDS);
            List<ProcessHandle> workers = backend.children().toList();
            double[] rss = workers.stream().mapToDouble(w -> memoryMib(w.pid(), "Rss")).sorted().toArray();
            double[] pss = workers.stream().mapToDouble(w -> memoryMib(w.pid(), "Pss")).sorted().toArray();
            double wholeRss = memoryMib(backend.pid(), "Rss") + Arrays.stream(rss).sum();
            double wholePss = memoryMib(backend.pid(), "Pss") + Arrays.stream(pss).sum();
            List<Long> pids = new ArrayList<>(workers.stream().map(ProcessHandle::pid).toList());
            pids.add(backend.pid());
            double gpu = gpuMemoryMib(pids);
            measured.countDown();
            double[] ms = new double[n];
            for (int i = 0; i < n; i++) {
                ms[i] = starts.get(i).get(300, TimeUnit.SECONDS);
            }
            Arrays.sort(ms);
            return new Burst(n, ms[(n - 1) / 2], ms[n - 1], rss.length == 0 ? 0 : rss[rss.length / 2],
                    pss.length == 0 ? 0 : pss[pss.length / 2], workers.size(), wholeRss, wholePss, gpu, loadAverage());
        } finally {
            measured.countDown();
            pool.shutdown();
        }
    }

    /** A process's Rss or Pss in MiB, from /proc/PID/smaps_rollup; 0 when it is gone. */
    static double memoryMib(long pid, String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "smaps_rollup"))) {
                if (line.startsWith(field + ":")) {
                    return Long.parseLong(line.substring(field.length() + 1).replace("kB", "").strip()) / 1024.0;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }

    /**
     * Device memory the driver reports for these processes together (nvidia-smi's compute apps), in MiB; NaN
     * where nvidia-smi is missing (the emulated device) or says nothing of them.
     */
    static double gpuMemoryMib(List<Long> pids) {
        try {
            Process p = new ProcessBuilder("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
                    .redirectErrorStream(true).start();
            String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
                return Double.NaN;
            }
            double sum = 0;
            boolean any = false;
            for (String line : text.split("\n")) {
                String[] f = line.split(",");
                if (f.length == 2 && pids.contains(Long.parseLong(f[0].strip()))) {
                    sum += Double.parseDouble(f[1].strip());
                    any = true;
                }
            }
            return any ? sum : Double.NaN;
        } catch (IOException | NumberFormatException e) {
            return Double.NaN;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Double.NaN;
        }
    }

    /** The 1-minute load average and the core count, e.g. "4.1/2". */
    static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).split(" ")[0] + "/" + Runtime.getRuntime().availableProcessors();
        } catch (IOException e) {
            return "?";
        }
    }

    private static String awaitListening(Process backend) throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(backend.getInputStream(), StandardCharsets.UTF_8));
        List<String> seen = new ArrayList<>();
        for (String line; (line = r.readLine()) != null; ) {
            seen.add(line);
            int at = line.indexOf("listening on ");
            if (line.startsWith("gpusockets backend:") && at >= 0) {
                Thread.ofPlatform().daemon().start(() -> drain(r));
                return line.substring(at + "listening on ".length()).strip();
            }
        }
        throw new IOException("backend did not start: " + String.join("\n", seen));
    }

    private static void drain(BufferedReader r) {
        try {
            while (r.readLine() != null) {
                // the backend's log is not part of the figures
            }
        } catch (IOException ignored) {
            // the backend stopped
        }
    }

    private Latency nullCalls(String uri) throws IOException {
        try (RemoteCudaDriver cu = RemoteCudaDriver.connect(uri); Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(ValueLayout.JAVA_INT);
            current(cu, arena);
            for (int i = 0; i < Math.min(calls, 20_000); i++) {
                check(cu.cuCtxGetDevice(dev), "cuCtxGetDevice");
            }
            Histogram h = new Histogram(3);
            for (int i = 0; i < calls; i++) {
                long t0 = System.nanoTime();
                int r = cu.cuCtxGetDevice(dev);
                h.recordValue(Math.max(0, System.nanoTime() - t0));
                check(r, "cuCtxGetDevice");
            }
            return Latency.of(h);
        }
    }

    /** Milliseconds from connect to the first call's answer in a fresh session. */
    private static double sessionStart(String uri) throws IOException {
        long t0 = System.nanoTime();
        try (RemoteCudaDriver cu = RemoteCudaDriver.connect(uri); Arena arena = Arena.ofConfined()) {
            current(cu, arena);
            check(cu.cuCtxGetDevice(arena.allocate(ValueLayout.JAVA_INT)), "cuCtxGetDevice");
            return (System.nanoTime() - t0) / 1e6;
        }
    }

    private static void current(RemoteCudaDriver cu, Arena arena) {
        MemorySegment ctx = arena.allocate(ValueLayout.JAVA_LONG);
        check(cu.cuDevicePrimaryCtxRetain(ctx, 0), "cuDevicePrimaryCtxRetain");
        check(cu.cuCtxSetCurrent(ctx.get(ValueLayout.JAVA_LONG, 0)), "cuCtxSetCurrent");
    }

    private static void check(int r, String what) {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException(what + " failed: " + CuResult.name(r));
        }
    }

    static String table(List<Row> rows) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%-13s %14s %14s %16s %16s %16s%n", "isolation", "null p50 µs", "null p99 µs",
                "start p50 ms", "start min ms", "start max ms"));
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%-13s %14.1f %14.1f %16.1f %16.1f %16.1f%n", r.mode(), r.nullCall().p50Micros(),
                    r.nullCall().p99Micros(), r.startP50Millis(), r.startMinMillis(), r.startMaxMillis()));
        }
        if (rows.stream().anyMatch(r -> !r.bursts().isEmpty())) {
            b.append(String.format(Locale.ROOT, "%n%-13s %6s %13s %13s %8s %13s %13s %15s %15s %12s %8s%n", "isolation", "burst",
                    "start p50 ms", "start max ms", "workers", "worker RSS MiB", "worker PSS MiB", "whole RSS MiB",
                    "whole PSS MiB", "GPU MiB", "load"));
            for (Row r : rows) {
                for (Burst x : r.bursts()) {
                    b.append(String.format(Locale.ROOT, "%-13s %6d %13.1f %13.1f %8d %13.1f %13.1f %15.1f %15.1f %12.0f %8s%n",
                            r.mode(), x.sessions(), x.startP50Millis(), x.startMaxMillis(), x.workers(), x.workerRssMib(),
                            x.workerPssMib(), x.wholeRssMib(), x.wholePssMib(), x.gpuMib(), x.load()));
                }
            }
        }
        return b.toString();
    }

}
