package io.gpusockets.benchmarks;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.Kernels;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.Transports;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
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
 * {@code gpusockets bench} (issue 5): the driver-API workloads natively (FFM straight to the driver,
 * when the device is the real one) and through every self-hostable transport in one run, with each
 * transport's raw baseline beside them; writes results.csv, summary.md and PNG plots.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = "Null calls, launches, copies 8 B..256 MiB, module load, 1..16 clients and vector add,"
                + " natively and through every self-hostable transport; CSV, Markdown and PNG plots.")
public final class Bench implements Callable<Integer> {

    @Option(names = "--quick", description = "Fewer iterations, copies up to 16 MiB (a smoke run, not figures to quote).")
    boolean quick;

    @Option(names = "--transports", split = ",", paramLabel = "LIST",
            description = "Schemes to measure, e.g. tcp,ring (default: every self-hostable transport on the class path).")
    List<String> transports;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "bench-results",
            description = "Where results.csv, summary.md and the PNG plots go. Default: ${DEFAULT-VALUE}.")
    Path out;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver: the real one (also measured natively, in-process) or the emulated device. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--replot", paramLabel = "DIR",
            description = "Only draw the PNG plots of an earlier run from DIR/plotdata.csv (e.g. one from a machine without java.desktop).")
    Path replot;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "libcuda.so.1 to load (default: the loader's).")
    String libcuda;

    static final String NATIVE = "native";
    static final int[] CLIENTS = {1, 2, 4, 8, 16};
    /** Summary rows, in this order: WORKLOAD (every metric) or WORKLOAD#METRIC; results.csv has everything. */
    /** Async launches measured in rounds alternating with native ones (DriverBench.pairedLaunches). */
    static final String PAIRED = "launch-async-paired";
    /** Rounds each way of the paired launch measurement. */
    static final int PAIRED_ROUNDS = 5;

    static final List<String> SUMMARY_ORDER = List.of(Workloads.NULL_CALL, "launch-async", PAIRED, "launch-sync#p50",
            "launch-sync#p99", "memcpy-htod-pageable-8B#per-copy", "memcpy-dtoh-pageable-8B#per-copy",
            "memcpy-htod-pageable-16MiB#throughput", "memcpy-dtoh-pageable-16MiB#throughput",
            "memcpy-htod-pinned-16MiB#throughput", "memcpy-dtoh-pinned-16MiB#throughput",
            "memcpy-htod-pageable-256MiB#throughput", "memcpy-dtoh-pageable-256MiB#throughput",
            "memcpy-htod-pinned-256MiB#throughput", "memcpy-dtoh-pinned-256MiB#throughput", "module-load",
            "clients-1", "clients-2", "clients-4", "clients-8", "clients-16", "vector-add-1M",
            Workloads.FRAME_PING_PONG + "#p50", Workloads.STREAM);

    /** Iteration counts. */
    record Sizes(int pingWarmup, int pings, int launchWarmup, int launches, int syncWarmup, int syncs, long copyMax,
                 long copyBudget, int copyMaxReps, int moduleLoads, int clientWarmup, int clientLaunches,
                 int vectorAdds, int streamWarmup, int streamChunks) {
        static final Sizes FULL = new Sizes(20_000, 50_000, 50_000, 100_000, 1_000, 20_000, 256L << 20, 1L << 30, 2_000,
                10, 500, 20_000, 5, 128, 1024);
        static final Sizes QUICK = new Sizes(2_000, 5_000, 5_000, 10_000, 200, 2_000, 16L << 20, 32L << 20, 200,
                3, 100, 5_000, 2, 16, 128);
    }

    private final PrintStream console = System.out;
    /** The real driver, for workloads measured side by side with a remote target; null without a GPU. */
    private CudaDriver nativeDriver;
    private final List<String> notes = new ArrayList<>();
    private boolean failed;

    private static final java.util.logging.Logger BACKEND_LOG = java.util.logging.Logger.getLogger("gpusockets");

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s: %5$s%6$s%n");
        System.setProperty("java.awt.headless", "true");
        BACKEND_LOG.setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new Bench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (replot != null) {
            List<Path> files = BenchReport.plots(replot, BenchReport.readPlotCsv(replot.resolve("plotdata.csv")));
            console.println("bench: drew " + String.join(", ", files.stream().map(Path::toString).toList()));
            return 0;
        }
        long start = System.nanoTime();
        Sizes sizes = quick ? Sizes.QUICK : Sizes.FULL;
        BenchReport report = new BenchReport();
        Path tmp = Files.createTempDirectory("gpusockets-bench");
        DriverHost host = device.open(libcuda);
        boolean nativeDevice = host.driver() instanceof NativeCudaDriver;
        String machine = TransportBench.machine(host.description());
        console.println("bench: " + machine);
        console.println("bench: transports on the class path: " + Transports.byScheme().keySet()
                + (quick ? "; --quick: a smoke run, not figures to quote" : ""));
        if (!nativeDevice) {
            notes.add("no GPU (emulated device): no native column; ratios are to each transport's raw baseline"
                    + " (frame ping-pong, 1 MiB stream) or to its own single client");
        }
        try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
            if (nativeDevice) {
                nativeDriver = host.driver();
                DriverBench.Opener inProcess = () -> inProcess(host.driver());
                runTarget(NATIVE, null, inProcess, sizes, report, true, tmp);
            }
            for (String scheme : transports != null ? transports : defaultSchemes()) {
                String skip = SelfHosting.skipReason(scheme, tmp);
                if (skip != null) {
                    notes.add(scheme + ": skipped (" + skip + ")");
                    console.println("[" + scheme + "] skipped: " + skip);
                    continue;
                }
                String[] uri = new String[1];
                boolean listening = step(scheme, "start the backend's listener", () -> {
                    uri[0] = backend.listen(SelfHosting.recipe(scheme, tmp, "backend").listen()).toString();
                    return uri[0];
                });
                if (listening) {
                    runTarget(scheme, uri[0], () -> remote(uri[0]), sizes, report, nativeDevice, tmp);
                }
            }
        } finally {
            deleteTree(tmp);
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        String heading = "# gpusockets bench" + (quick ? " --quick" : "") + "\n\n" + machine + "\n\n"
                + String.format(Locale.ROOT, "Wall time %.0f s. Ratios: value / baseline (TARGET/WORKLOAD, same metric):"
                        + " above 1 is slower for µs and ms, faster for GB/s and launches/s.", seconds)
                + (notes.isEmpty() ? "" : "\n\n" + String.join("\n", notes.stream().map(n -> "- " + n).toList()));
        console.println();
        console.println(report.summary(SUMMARY_ORDER));
        notes.forEach(n -> console.println("note: " + n));
        List<Path> files = report.write(out, heading, SUMMARY_ORDER);
        console.printf(Locale.ROOT, "bench: wrote %s (%.0f s)%n",
                String.join(", ", files.stream().map(Path::toString).toList()), seconds);
        return failed ? 1 : 0;
    }

    /** Every workload on one target; a failing step is reported and the next one runs. */
    private void runTarget(String name, String uri, DriverBench.Opener opener, Sizes s, BenchReport report,
                           boolean nativeDevice, Path tmp) {
        boolean isNative = name.equals(NATIVE);
        DriverBench.Client[] client = new DriverBench.Client[1];
        PrimaryContext[] context = new PrimaryContext[1];
        if (!step(name, "connect" + (uri != null ? " RemoteCudaDriver to " + uri : " in-process (FFM to libcuda)"), () -> {
            client[0] = opener.open();
            context[0] = PrimaryContext.retain(client[0].driver(), 0);
            return "ok";
        })) {
            if (client[0] != null) {
                client[0].close();
            }
            return;
        }
        CudaDriver cu = client[0].driver();
        Kernels[] kernels = new Kernels[1];
        try {
            step(name, "module-load: cuModuleLoadData of the shipped PTX, " + s.moduleLoads() + " times", () -> {
                double[] ms = DriverBench.moduleLoads(cu, s.moduleLoads());
                report.add(name, "module-load", "first", ms[0], "ms", baselines(name, nativeDevice, "module-load"));
                report.add(name, "module-load", "median", DriverBench.median(ms), "ms",
                        baselines(name, nativeDevice, "module-load"));
                return String.format(Locale.ROOT, "first %.2f ms, median %.2f ms", ms[0], DriverBench.median(ms));
            });
            step(name, "load the kernels", () -> {
                kernels[0] = Kernels.load(cu);
                return "ok";
            });
            step(name, "null-call: cuCtxGetDevice, " + s.pingWarmup() + " warm-up + " + s.pings() + " measured"
                    + (isNative ? "" : ", interleaved with " + Workloads.FRAME_PING_PONG), () -> {
                Map<String, PingPong> pingPongs = new LinkedHashMap<>();
                try {
                    pingPongs.put(Workloads.NULL_CALL, DriverBench.nullCalls(cu));
                    if (!isNative) {
                        pingPongs.put(Workloads.FRAME_PING_PONG,
                                RawBaselines.framePingPong(SelfHosting.recipe(name, tmp, "raw-ping").listen()));
                    }
                    Map<String, Histogram> h = TransportBench.interleave(pingPongs, s.pingWarmup(), s.pings());
                    StringBuilder summary = new StringBuilder();
                    for (var e : h.entrySet()) {
                        report.addLatency(name, e.getKey(), e.getValue(), baselines(name, nativeDevice, e.getKey()));
                        Latency l = Latency.of(e.getValue());
                        summary.append(String.format(Locale.ROOT, "%n    %-20s p50 %s µs, p99 %s µs, p99.9 %s µs",
                                e.getKey(), ResultTable.micros(l.p50Micros()), ResultTable.micros(l.p99Micros()),
                                ResultTable.micros(l.p999Micros())));
                    }
                    report.latencyCurve(name, h.get(Workloads.NULL_CALL));
                    return "done" + summary;
                } finally {
                    for (PingPong p : pingPongs.values()) {
                        p.close();
                    }
                }
            });
            if (!isNative) {
                step(name, Workloads.STREAM + " (raw: " + s.streamChunks() + " MiB one way over the Connection)", () -> {
                    double gbs = RawBaselines.stream(SelfHosting.recipe(name, tmp, "raw-stream").listen(),
                            s.streamWarmup(), s.streamChunks());
                    report.add(name, Workloads.STREAM, "throughput", gbs, "GB/s");
                    return String.format(Locale.ROOT, "%.2f GB/s", gbs);
                });
            }
            if (kernels[0] != null) {
                long empty = kernels[0].function(DriverBench.EMPTY_KERNEL);
                step(name, "launch-async: " + s.launchWarmup() + " warm-up, then " + DriverBench.LAUNCH_ROUNDS + " rounds of "
                        + s.launches() + " gpus_empty launches and a cuCtxSynchronize (median)", () -> {
                    double rate = DriverBench.asyncLaunches(cu, empty, s.launchWarmup(), s.launches());
                    report.add(name, "launch-async", "throughput", rate, "launches/s",
                            baselines(name, nativeDevice, "launch-async"));
                    return String.format(Locale.ROOT, "%,.0f launches/s", rate);
                });
                if (!isNative && nativeDriver != null) {
                    step(name, PAIRED + ": " + PAIRED_ROUNDS + " rounds of " + s.launches() + " launches natively, then over "
                            + name + " (medians)", () -> {
                        double[] rates;
                        // The native side in its own primary context on this thread; the remote side's is the frontend's.
                        try (PrimaryContext nativeContext = PrimaryContext.retain(nativeDriver, 0);
                             Kernels nativeKernels = Kernels.load(nativeDriver)) {
                            rates = DriverBench.pairedLaunches(nativeDriver, nativeKernels.function(DriverBench.EMPTY_KERNEL),
                                    cu, empty, s.launchWarmup(), s.launches(), PAIRED_ROUNDS);
                        }
                        report.add(NATIVE, PAIRED + "-" + name, "throughput", rates[0], "launches/s");
                        report.add(name, PAIRED, "throughput", rates[1], "launches/s", NATIVE + "/" + PAIRED + "-" + name);
                        return String.format(Locale.ROOT, "native %,.0f, %s %,.0f launches/s: %.2f×", rates[0], name, rates[1],
                                rates[1] / rates[0]);
                    });
                }
                step(name, "launch-sync: gpus_empty launch + cuCtxSynchronize, " + s.syncs() + " times", () -> {
                    Histogram h = DriverBench.launchSync(cu, empty, s.syncWarmup(), s.syncs());
                    report.addLatency(name, "launch-sync", h, baselines(name, nativeDevice, "launch-sync"));
                    Latency l = Latency.of(h);
                    return String.format(Locale.ROOT, "p50 %s µs, p99 %s µs", ResultTable.micros(l.p50Micros()),
                            ResultTable.micros(l.p99Micros()));
                });
            }
            long[] copySizes = DriverBench.copySizes(s.copyMax());
            for (boolean pinned : new boolean[] {false, true}) {
                String kind = pinned ? "pinned" : "pageable";
                String what = pinned ? (isNative ? "cuMemAllocHost (page-locked)"
                        : "cuMemAllocHost (through the frontend: its local host memory, not page-locked)")
                        : "pageable (FFM arena)";
                step(name, "memcpy HtoD/DtoH " + size(copySizes[0]) + " .. " + size(s.copyMax()) + ", " + what, () -> {
                    List<DriverBench.CopyResult> r = DriverBench.copies(cu, copySizes, pinned, s.copyBudget(),
                            s.copyMaxReps());
                    for (DriverBench.CopyResult c : r) {
                        for (String dir : new String[] {"HtoD", "DtoH"}) {
                            String w = "memcpy-" + dir.toLowerCase(Locale.ROOT) + "-" + kind + "-" + size(c.bytes());
                            double gbs = dir.equals("HtoD") ? c.htod() : c.dtoh();
                            report.add(name, w, "throughput", gbs, "GB/s", baselines(name, nativeDevice, w));
                            // GB/s is bytes per ns
                            report.add(name, w, "per-copy", c.bytes() / gbs / 1e3, "us", baselines(name, nativeDevice, w));
                            report.bandwidthPoint(name + " " + kind, dir, c.bytes(), gbs);
                        }
                    }
                    DriverBench.CopyResult last = r.getLast();
                    return String.format(Locale.ROOT, "%s: HtoD %.2f GB/s, DtoH %.2f GB/s", size(last.bytes()),
                            last.htod(), last.dtoh());
                });
            }
            if (kernels[0] != null) {
                step(name, "vector-add-1M: HtoD a, b; launch; DtoH c; checked, " + s.vectorAdds() + " times", () -> {
                    double[] ms = DriverBench.vectorAdd(cu, kernels[0], s.vectorAdds());
                    report.add(name, "vector-add-1M", "median", DriverBench.median(ms), "ms",
                            baselines(name, nativeDevice, "vector-add-1M"));
                    return String.format(Locale.ROOT, "median %.1f ms", DriverBench.median(ms));
                });
            }
            for (int n : CLIENTS) {
                step(name, "clients-" + n + ": " + n + " × (own " + (isNative ? "thread" : "connection and thread") + ", "
                        + s.clientLaunches() + " async launches)", () -> {
                    double rate = DriverBench.concurrentLaunches(opener, n, s.clientWarmup(), s.clientLaunches());
                    String w = "clients-" + n;
                    report.add(name, w, "throughput", rate, "launches/s", baselines(name, nativeDevice, w));
                    report.clientsPoint(name, n, rate);
                    return String.format(Locale.ROOT, "%,.0f launches/s in all", rate);
                });
            }
        } finally {
            step(name, "close", () -> {
                try {
                    if (kernels[0] != null) {
                        kernels[0].close();
                    }
                    context[0].close();
                } finally {
                    client[0].close();
                }
                return "ok";
            }, false);
        }
    }

    /**
     * The baselines of a workload on a target: with the real driver, the same workload natively first;
     * then the transport's raw figure for round trips and copies; concurrent clients also against one client.
     */
    static String[] baselines(String target, boolean nativeDevice, String workload) {
        List<String> b = new ArrayList<>();
        boolean isNative = target.equals(NATIVE);
        if (workload.startsWith("clients-") && !workload.equals("clients-1")) {
            // DESIGN §10: 16 clients against one native client (one client of this transport without a GPU)
            b.add((nativeDevice ? NATIVE : target) + "/clients-1");
        }
        boolean raw = workload.equals(Workloads.FRAME_PING_PONG) || workload.equals(Workloads.STREAM);
        if (nativeDevice && !isNative && !raw) {
            b.add(NATIVE + "/" + workload);
        }
        if (!isNative) {
            if (workload.equals(Workloads.NULL_CALL) || workload.equals("launch-sync")) {
                b.add(target + "/" + Workloads.FRAME_PING_PONG);
            } else if (workload.startsWith("memcpy-")) {
                b.add(target + "/" + Workloads.STREAM);
            }
        }
        return b.stream().distinct().toArray(String[]::new);
    }

    static String size(long bytes) {
        if (bytes >= 1 << 20 && bytes % (1 << 20) == 0) {
            return (bytes >> 20) + "MiB";
        }
        if (bytes >= 1 << 10 && bytes % (1 << 10) == 0) {
            return (bytes >> 10) + "KiB";
        }
        return bytes + "B";
    }

    private static DriverBench.Client inProcess(CudaDriver driver) {
        return new DriverBench.Client() {
            @Override
            public CudaDriver driver() {
                return driver;
            }

            @Override
            public void close() {
                // the backend owns the driver
            }
        };
    }

    private static DriverBench.Client remote(String uri) throws IOException {
        RemoteCudaDriver cu = RemoteCudaDriver.connect(uri);
        try {
            Cu.check(cu.cuInit(0), "cuInit(0)");
        } catch (RuntimeException e) {
            cu.close();
            throw e;
        }
        return new DriverBench.Client() {
            @Override
            public CudaDriver driver() {
                return cu;
            }

            @Override
            public void close() {
                cu.close();
            }
        };
    }

    private interface Step {
        String run() throws Exception;
    }

    private boolean step(String target, String what, Step step) {
        return step(target, what, step, true);
    }

    private boolean step(String target, String what, Step step, boolean progress) {
        if (progress) {
            console.printf("[%s] %s ...%n", target, what);
        }
        long t0 = System.nanoTime();
        try {
            String result = step.run();
            if (progress) {
                console.printf(Locale.ROOT, "[%s] %s: %s (%.1f s)%n", target, what, result, (System.nanoTime() - t0) / 1e9);
            }
            return true;
        } catch (Exception | LinkageError e) {
            console.printf("[%s] %s FAILED: %s%n", target, what, e);
            notes.add(target + ": " + what + " failed: " + e);
            failed = true;
            return false;
        }
    }

    private static List<String> defaultSchemes() {
        List<String> all = new ArrayList<>(SelfHosting.KNOWN_SCHEMES);
        Transports.byScheme().keySet().stream().sorted().filter(s -> !all.contains(s)).forEach(all::add);
        return all;
    }

    private static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
