package io.gpusockets.benchmarks;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench-transports}: for each transport on the class path that can listen on this machine,
 * measures side by side the raw transport (64-byte ping-pong, 1 MiB streaming; for tcp and unix also a
 * plain JDK socket ping-pong) and GPUsockets on it (cuCtxGetDevice, 1 MiB cuMemcpyHtoD/DtoH against an
 * in-process backend), prints a table per transport with GPUsockets / raw ratios, and checks the
 * DESIGN §10 targets that one machine can check.
 */
@Command(name = "bench-transports", mixinStandardHelpOptions = true,
        description = "Raw transport vs GPUsockets on every self-hostable transport: latency, throughput, ratios.")
public final class TransportBench implements Callable<Integer> {

    @Option(names = "--quick", description = "A tenth of the iterations (a smoke run, not figures to quote).")
    boolean quick;

    @Option(names = "--schemes", split = ",", paramLabel = "LIST",
            description = "Schemes to measure, e.g. tcp,unix (default: every transport on the class path).")
    List<String> schemes;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/results.csv and DIR/results.md.")
    Path out;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver of the in-process backend. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--busy", paramLabel = "N", defaultValue = "0",
            description = "Also measure every round trip again while N busy-spinning processes run (cores oversubscribed),"
                    + " as rows WORKLOAD@busyN; with --out, busy.png plots quiet against busy. Default: ${DEFAULT-VALUE}.")
    int busy;

    private final PrintStream console = System.out;
    /** CPU µs per round trip of each round-trip workload, by "scheme/workload" (both ends run in this process). */
    private final Map<String, Double> cpuPerRoundTrip = new LinkedHashMap<>();
    /** Per scheme: CPU of this process while everything stays connected and nothing is sent, in % of one core. */
    private final Map<String, Double> idleCpuPercent = new LinkedHashMap<>();

    /** Iteration counts; {@code --quick} divides them. */
    record Sizes(int pingWarmup, int pings, int streamWarmup, int streamChunks, int copyWarmup, int copies) {
        static final Sizes FULL = new Sizes(20_000, 50_000, 128, 1024, 16, 256);
        static final Sizes QUICK = new Sizes(2_000, 5_000, 16, 128, 4, 32);
    }

    /** Held so that the level sticks: the backend's per-session INFO lines would interleave with the progress. */
    private static final java.util.logging.Logger BACKEND_LOG = java.util.logging.Logger.getLogger("gpusockets");

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s: %5$s%6$s%n");
        BACKEND_LOG.setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new TransportBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (busy < 0 || busy > 4 * Runtime.getRuntime().availableProcessors()) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--busy must be 0.."
                    + 4 * Runtime.getRuntime().availableProcessors() + ": --busy=" + busy);
        }
        Sizes sizes = quick ? Sizes.QUICK : Sizes.FULL;
        List<String> wanted = schemes != null ? schemes : defaultSchemes();
        ResultTable table = new ResultTable();
        List<String> notes = new ArrayList<>();
        boolean failed = false;
        Path tmp = Files.createTempDirectory("gpusockets-bench");
        DriverHost host = device.open(null);
        String machine = machine(host.description());
        console.println("bench-transports: " + machine);
        console.println("bench-transports: transports on the class path: " + Transports.byScheme().keySet()
                + (quick ? "; --quick: a smoke run, not figures to quote" : ""));
        try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
            for (String scheme : wanted) {
                String skip = SelfHosting.skipReason(scheme, tmp);
                if (skip != null) {
                    notes.add(scheme + ": skipped (" + skip + ")");
                    console.println("[" + scheme + "] skipped: " + skip);
                    continue;
                }
                failed |= !runScheme(scheme, tmp, sizes, backend, table, notes);
            }
        } finally {
            deleteTree(tmp);
        }
        console.println();
        for (String t : table.transports()) {
            console.println("== " + t + " ==");
            console.print(table.text(t));
            console.println();
        }
        String cpu = cpuTable();
        console.print(cpu);
        List<Targets.Verdict> verdicts = Targets.check(table);
        console.println("DESIGN §10 targets:");
        verdicts.forEach(v -> console.println("  " + v));
        if (verdicts.isEmpty()) {
            console.println("  none measurable in this run");
        }
        notes.forEach(n -> console.println("note: " + n));
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("results.csv"), table.csv());
            Files.writeString(out.resolve("results.md"), markdown(machine, table, verdicts, notes) + "\n```\n" + cpu + "```\n");
            if (busy > 0) {
                Plots.png(out.resolve("busy.png"), () -> busyChart(table, busy));
            }
            console.println("bench-transports: wrote " + out.resolve("results.csv") + " and " + out.resolve("results.md"));
        }
        return failed ? 1 : 0;
    }

    /**
     * Every step of one scheme; a failing step is reported and the others still run. The three
     * round-trip workloads are opened side by side and measured in interleaved rounds.
     */
    private boolean runScheme(String scheme, Path tmp, Sizes s, BackendServer backend, ResultTable table,
                              List<String> notes) {
        boolean ok = true;
        boolean plainSocket = scheme.equals("tcp") || scheme.equals("unix");
        Map<String, PingPong> pingPongs = new LinkedHashMap<>();
        GpuSocketsCalls[] calls = new GpuSocketsCalls[1];
        try {
            if (plainSocket) {
                ok &= step(scheme, "open " + Workloads.SOCKET_PING_PONG + " (plain JDK SocketChannel)", notes, () -> {
                    pingPongs.put(Workloads.SOCKET_PING_PONG, RawBaselines.socketPingPong(scheme, tmp));
                    return "ok";
                });
            }
            ok &= step(scheme, "open " + Workloads.FRAME_PING_PONG + " (FrameChannel over the Connection)", notes, () -> {
                pingPongs.put(Workloads.FRAME_PING_PONG, RawBaselines.framePingPong(listen(scheme, tmp, "raw-ping")));
                return "ok";
            });
            ok &= step(scheme, "start the backend's listener and connect RemoteCudaDriver", notes, () -> {
                String uri = backend.listen(listen(scheme, tmp, "backend")).toString();
                calls[0] = GpuSocketsCalls.open(uri);
                pingPongs.put(Workloads.NULL_CALL, calls[0].nullCalls());
                return uri;
            });
            if (!pingPongs.isEmpty()) {
                ok &= step(scheme, "round trips: " + s.pingWarmup() + " warm-up + " + s.pings() + " measured each, in "
                        + ROUNDS + " interleaved rounds", notes, () -> {
                    Map<String, Long> cpu = new LinkedHashMap<>();
                    Map<String, Histogram> h = interleave(pingPongs, s.pingWarmup(), s.pings(), cpu);
                    StringBuilder summary = new StringBuilder();
                    for (var e : h.entrySet()) {
                        Latency l = Latency.of(e.getValue());
                        table.add(Measurement.latency(scheme, e.getKey(), l, baselines(e.getKey(), plainSocket)));
                        double cpuMicros = cpu.get(e.getKey()) / 1e3 / l.count();
                        cpuPerRoundTrip.put(scheme + "/" + e.getKey(), cpuMicros);
                        summary.append(String.format(Locale.ROOT, "%n    %-20s %s, cpu %.2f µs per round trip",
                                e.getKey(), latency(l), cpuMicros));
                    }
                    return "done" + summary;
                });
            }
            if (busy > 0 && !pingPongs.isEmpty()) {
                ok &= step(scheme, "round trips again with " + busy + " busy processes: " + s.pings() + " measured each, in "
                        + ROUNDS + " interleaved rounds", notes, () -> {
                    Map<String, Long> cpu = new LinkedHashMap<>();
                    Map<String, Histogram> h;
                    try (BusyLoad load = BusyLoad.start(busy)) {
                        h = interleave(pingPongs, s.pingWarmup() / 10, s.pings(), cpu);
                    }
                    StringBuilder summary = new StringBuilder();
                    for (var e : h.entrySet()) {
                        Latency l = Latency.of(e.getValue());
                        String[] base = baselines(e.getKey(), plainSocket);
                        for (int i = 0; i < base.length; i++) {
                            base[i] = busyName(base[i], busy);
                        }
                        table.add(Measurement.latency(scheme, busyName(e.getKey(), busy), l, base));
                        double cpuMicros = cpu.get(e.getKey()) / 1e3 / l.count();
                        cpuPerRoundTrip.put(scheme + "/" + busyName(e.getKey(), busy), cpuMicros);
                        summary.append(String.format(Locale.ROOT, "%n    %-28s %s, cpu %.2f µs per round trip",
                                busyName(e.getKey(), busy), latency(l), cpuMicros));
                    }
                    return "done" + summary;
                });
            }
            if (!pingPongs.isEmpty()) {
                long idleMillis = quick ? 1_000 : 5_000;
                ok &= step(scheme, "idle CPU over " + idleMillis + " ms (every connection open, nothing sent)", notes, () -> {
                    Thread.sleep(200); // the last round trip's waiters finish their spin and sleep
                    long c0 = processCpuNanos();
                    long t0 = System.nanoTime();
                    Thread.sleep(idleMillis);
                    double percent = 100.0 * (processCpuNanos() - c0) / (System.nanoTime() - t0);
                    idleCpuPercent.put(scheme, percent);
                    return String.format(Locale.ROOT, "%.2f%% of a core", percent);
                });
            }
            ok &= step(scheme, Workloads.STREAM + " (" + s.streamChunks() + " MiB over the Connection)", notes, () -> {
                double gbs = RawBaselines.stream(listen(scheme, tmp, "raw-stream"), s.streamWarmup(), s.streamChunks());
                table.add(Measurement.throughput(scheme, Workloads.STREAM, gbs));
                return String.format(Locale.ROOT, "%.2f GB/s", gbs);
            });
            if (calls[0] != null) {
                ok &= step(scheme, Workloads.HTOD + " and " + Workloads.DTOH + " (" + s.copies() + " each)", notes, () -> {
                    double[] gbs = calls[0].copies(s.copyWarmup(), s.copies());
                    table.add(Measurement.throughput(scheme, Workloads.HTOD, gbs[0], Workloads.STREAM));
                    table.add(Measurement.throughput(scheme, Workloads.DTOH, gbs[1], Workloads.STREAM));
                    return String.format(Locale.ROOT, "HtoD %.2f GB/s, DtoH %.2f GB/s", gbs[0], gbs[1]);
                });
                int big = Math.max(2, s.copies() / 8);
                ok &= step(scheme, Workloads.HTOD_16M + " and " + Workloads.DTOH_16M + " (" + big + " each)", notes, () -> {
                    double[] gbs = calls[0].copies(16L << 20, Math.max(1, s.copyWarmup() / 4), big);
                    table.add(Measurement.throughput(scheme, Workloads.HTOD_16M, gbs[0], Workloads.STREAM));
                    table.add(Measurement.throughput(scheme, Workloads.DTOH_16M, gbs[1], Workloads.STREAM));
                    return String.format(Locale.ROOT, "HtoD %.2f GB/s, DtoH %.2f GB/s", gbs[0], gbs[1]);
                });
            }
        } finally {
            for (PingPong p : pingPongs.values()) {
                ok &= step(scheme, "close", notes, () -> {
                    p.close();
                    return "ok";
                }, false);
            }
            if (calls[0] != null) {
                calls[0].close();
            }
        }
        return ok;
    }

    private static final int ROUNDS = 10;

    /** Warm-up for each, then ROUNDS rounds in which each workload does its share in turn. */
    static Map<String, Histogram> interleave(Map<String, PingPong> pingPongs, Sizes s) throws Exception {
        return interleave(pingPongs, s.pingWarmup(), s.pings());
    }

    /** {@code warmup} untimed round trips each, then {@code pings} each in ROUNDS interleaved rounds. */
    static Map<String, Histogram> interleave(Map<String, PingPong> pingPongs, int warmup, int pings) throws Exception {
        return interleave(pingPongs, warmup, pings, new LinkedHashMap<>());
    }

    /**
     * As above, and adds to {@code cpuNanos} the CPU time this process spent (every thread: both ends of
     * each workload run here) during each workload's measured rounds. Unlike the latencies, CPU time
     * per round trip hardly moves when other processes compete for the cores, so it is the figure that
     * compares two builds on a busy machine ({@code scripts/bench compare}).
     */
    static Map<String, Histogram> interleave(Map<String, PingPong> pingPongs, int warmup, int pings,
                                             Map<String, Long> cpuNanos) throws Exception {
        Map<String, Histogram> out = new LinkedHashMap<>();
        for (var e : pingPongs.entrySet()) {
            e.getValue().roundTrips(warmup, null);
            out.put(e.getKey(), new Histogram(3));
            cpuNanos.put(e.getKey(), 0L);
        }
        for (int r = 0; r < ROUNDS; r++) {
            int n = pings / ROUNDS + (r < pings % ROUNDS ? 1 : 0);
            for (var e : pingPongs.entrySet()) {
                long c0 = processCpuNanos();
                e.getValue().roundTrips(n, out.get(e.getKey()));
                cpuNanos.merge(e.getKey(), processCpuNanos() - c0, Long::sum);
            }
        }
        return out;
    }

    /**
     * CPU time of this process so far (user and system, every thread), in nanoseconds:
     * clock_gettime(CLOCK_PROCESS_CPUTIME_ID) through FFM, exact to the nanosecond, where the JDK's
     * OperatingSystemMXBean.getProcessCpuTime counts in clock ticks (10 ms here), too coarse for rounds
     * of a few hundred round trips.
     */
    static long processCpuNanos() {
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            java.lang.foreign.MemorySegment ts = a.allocate(16, 8);
            int r = (int) CLOCK_GETTIME.invokeExact(CLOCK_PROCESS_CPUTIME_ID, ts);
            if (r != 0) {
                throw new IllegalStateException("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) returned " + r);
            }
            return ts.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0) * 1_000_000_000L
                    + ts.get(java.lang.foreign.ValueLayout.JAVA_LONG, 8);
        } catch (Throwable t) {
            throw t instanceof RuntimeException re ? re : new IllegalStateException(t);
        }
    }

    private static final int CLOCK_PROCESS_CPUTIME_ID = 2;
    private static final java.lang.invoke.MethodHandle CLOCK_GETTIME = java.lang.foreign.Linker.nativeLinker()
            .downcallHandle(java.lang.foreign.Linker.nativeLinker().defaultLookup().find("clock_gettime").orElseThrow(),
                    java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_INT,
                            java.lang.foreign.ValueLayout.JAVA_INT, java.lang.foreign.ValueLayout.ADDRESS));

    private static String[] baselines(String workload, boolean plainSocket) {
        return switch (workload) {
            case Workloads.FRAME_PING_PONG -> plainSocket ? new String[] {Workloads.SOCKET_PING_PONG} : new String[0];
            case Workloads.NULL_CALL -> plainSocket
                    ? new String[] {Workloads.SOCKET_PING_PONG, Workloads.FRAME_PING_PONG}
                    : new String[] {Workloads.FRAME_PING_PONG};
            default -> new String[0];
        };
    }

    /** A round-trip workload's name when measured with {@code n} busy processes running. */
    static String busyName(String workload, int n) {
        return workload + "@busy" + n;
    }

    /**
     * busy.png: per scheme, the null call's and the raw ping-pongs' p50 quiet and with {@code n} busy processes
     * (log scale: a quiet ring call and a busy one differ by an order of magnitude or more).
     */
    static org.knowm.xchart.CategoryChart busyChart(ResultTable table, int n) {
        List<String> schemes = table.transports();
        List<String> workloads = List.of(Workloads.NULL_CALL, Workloads.FRAME_PING_PONG, Workloads.SOCKET_PING_PONG);
        var chart = new org.knowm.xchart.CategoryChartBuilder().width(1000).height(600)
                .title("Round trip p50, without and with " + n + " busy processes (" + Runtime.getRuntime().availableProcessors()
                        + " cores)")
                .xAxisTitle("transport").yAxisTitle("p50 µs (log)").build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE)
                .setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.OutsideE);
        chart.getStyler().setOverlapped(false);
        double low = Double.MAX_VALUE;
        double high = 0;
        for (String w : workloads) {
            for (String name : List.of(w, busyName(w, n))) {
                List<Double> y = new ArrayList<>();
                boolean any = false;
                for (String scheme : schemes) {
                    double v = table.find(scheme, name).filter(m -> m.latency() != null)
                            .map(m -> m.latency().p50Micros()).orElse(0.0);
                    any |= v > 0;
                    if (v > 0) {
                        low = Math.min(low, v);
                        high = Math.max(high, v);
                    }
                    y.add(v > 0 ? v : null);
                }
                if (any) {
                    chart.addSeries(name.equals(w) ? w : w + ", " + n + " busy", schemes, y);
                }
            }
        }
        if (chart.getSeriesMap().isEmpty()) {
            return null;
        }
        chart.getStyler().setYAxisLogarithmic(true).setYAxisMin(Math.pow(10, Math.floor(Math.log10(low))))
                .setYAxisMax(Math.pow(10, Math.ceil(Math.log10(high * 1.01))));
        return chart;
    }

    private interface Step {
        String run() throws Exception;
    }

    private boolean step(String scheme, String what, List<String> notes, Step step) {
        return step(scheme, what, notes, step, true);
    }

    private boolean step(String scheme, String what, List<String> notes, Step step, boolean progress) {
        if (progress) {
            console.printf("[%s] %s ...%n", scheme, what);
        }
        long t0 = System.nanoTime();
        try {
            String result = step.run();
            if (progress) {
                console.printf("[%s] %s: %s (%.1f s)%n", scheme, what, result, (System.nanoTime() - t0) / 1e9);
            }
            return true;
        } catch (Exception | LinkageError e) {
            console.printf("[%s] %s FAILED: %s%n", scheme, what, e);
            notes.add(scheme + ": " + what + " failed: " + e);
            return false;
        }
    }

    /**
     * The schemes {@link SelfHosting} knows, in its order (those not on the class path are listed as
     * skipped), then any other scheme on the class path, sorted.
     */
    private static List<String> defaultSchemes() {
        List<String> all = new ArrayList<>(SelfHosting.KNOWN_SCHEMES);
        Transports.byScheme().keySet().stream().sorted().filter(s -> !all.contains(s)).forEach(all::add);
        return all;
    }

    private static TransportUri listen(String scheme, Path tmp, String name) {
        return SelfHosting.recipe(scheme, tmp, name).listen();
    }

    private static String latency(Latency l) {
        return String.format(Locale.ROOT, "p50 %s µs, p99 %s µs, p99.9 %s µs (%d round trips)",
                ResultTable.micros(l.p50Micros()), ResultTable.micros(l.p99Micros()),
                ResultTable.micros(l.p999Micros()), l.count());
    }

    static String machine(String device) {
        String cpu = "unknown CPU";
        try (Stream<String> lines = Files.lines(Path.of("/proc/cpuinfo"))) {
            cpu = lines.filter(l -> l.startsWith("model name")).map(l -> l.substring(l.indexOf(':') + 1).strip())
                    .findFirst().orElse(cpu);
        } catch (IOException | RuntimeException ignored) {
            // not Linux: the model stays unknown
        }
        return String.format(Locale.ROOT, "%d cores (%s), JDK %s (%s), %s, backend device: %s",
                Runtime.getRuntime().availableProcessors(), cpu, System.getProperty("java.runtime.version"),
                System.getProperty("java.vm.name"), LocalDate.now(), device);
    }

    /**
     * The CPU table: per scheme, CPU µs per round trip of each round-trip workload, and the null call's
     * excess over the frame ping-pong on the same connection kind ("own": what GPUsockets' session,
     * dispatch and client code cost per call, both ends together). Empty when no round trip was measured.
     */
    private String cpuTable() {
        StringBuilder t = new StringBuilder();
        List<String> done = new ArrayList<>();
        for (String key : cpuPerRoundTrip.keySet()) {
            String scheme = key.substring(0, key.indexOf('/'));
            if (done.contains(scheme)) {
                continue;
            }
            done.add(scheme);
            Double nul = cpuPerRoundTrip.get(scheme + "/" + Workloads.NULL_CALL);
            Double frame = cpuPerRoundTrip.get(scheme + "/" + Workloads.FRAME_PING_PONG);
            Double sock = cpuPerRoundTrip.get(scheme + "/" + Workloads.SOCKET_PING_PONG);
            t.append(String.format(Locale.ROOT, "cpu-per-round-trip %-8s socket %s  frame %s  null-call %s  own %s%n",
                    scheme, cpuMicros(sock), cpuMicros(frame), cpuMicros(nul),
                    nul != null && frame != null ? cpuMicros(nul - frame) : "-"));
        }
        for (var e : idleCpuPercent.entrySet()) {
            t.append(String.format(Locale.ROOT, "idle-cpu %-8s %.2f%% of a core (this whole process, every connection open, nothing sent)%n",
                    e.getKey(), e.getValue()));
        }
        if (t.isEmpty()) {
            return "";
        }
        return "CPU µs per round trip (both ends, this process; own = null-call - frame):\n" + t + "\n";
    }

    private static String cpuMicros(Double v) {
        return v == null ? "-" : String.format(Locale.ROOT, "%.2f", v);
    }

    static String markdown(String machine, ResultTable table, List<Targets.Verdict> verdicts, List<String> notes) {
        StringBuilder md = new StringBuilder("# bench-transports\n\n").append(machine).append("\n\n");
        md.append(table.markdown()).append('\n');
        md.append("Latencies are round trips; ratios compare p50 with p50 and GB/s with GB/s.\n\n");
        md.append("## DESIGN §10 targets\n\n").append(Targets.markdown(verdicts));
        if (!notes.isEmpty()) {
            md.append('\n');
            notes.forEach(n -> md.append("- ").append(n).append('\n'));
        }
        return md.toString();
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
