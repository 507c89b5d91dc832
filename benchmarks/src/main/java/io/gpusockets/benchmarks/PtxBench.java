package io.gpusockets.benchmarks;

import io.gpusockets.emulated.ptx.PtxEngine;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code scripts/bench emulated-ptx}: how fast the emulated device runs PTX, per engine
 * ({@link PtxEngine}: the interpreter and the compiler to JVM bytecode, picked per launch by
 * {@code -D}{@value PtxEngine#PROPERTY}), on CUDA C kernels that nvcc compiles to PTX at run time, each
 * checked against a CPU reference. Per workload and engine: ms per launch (launch + cuCtxSynchronize;
 * one warm-up, then N timed: median and min), thread-instructions per launch and per second, and
 * which engine really ran (from {@link PtxEngine#statistics}); then the targets.
 */
@Command(name = "bench emulated-ptx", mixinStandardHelpOptions = true,
        description = "PTX speed of the emulated device per engine (interpreter, jit): vector add, tiled SGEMM,"
                + " warp-shuffle reduction, atomic histogram, device-function call; nvcc-compiled, checked on the CPU.")
public final class PtxBench implements Callable<Integer> {
    static final String PLOT = "emulated-ptx";
    static final int EXIT_NO_NVCC = 2;

    @Option(names = "--quick", description = "Smaller sizes and fewer launches (a smoke run; no targets apply).")
    boolean quick;

    @Option(names = "--engines", split = ",", paramLabel = "LIST", defaultValue = "interpreter,jit",
            description = "Engines to measure, in this order (interpreter, jit, auto). Default: ${DEFAULT-VALUE}.")
    List<String> engines;

    @Option(names = "--workloads", split = ",", paramLabel = "LIST",
            description = "Workloads to run, by name prefix: vector-add, sgemm, reduce, histogram, device-call (default: all).")
    List<String> workloads;

    @Option(names = "--launches", paramLabel = "N",
            description = "Timed launches per workload and engine, for all of them (default: 10 vector add and device call,"
                    + " 5 reduction and histogram, SGEMM 3 and 1 for the interpreter; --quick about half).")
    Integer launches;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "1",
            description = "Untimed (but checked) launches before the timed ones, per workload and engine. Default: ${DEFAULT-VALUE}.")
    int warmup;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "bench-results-ptx",
            description = "Where results.csv, summary.md, plotdata.csv, emulated-ptx.png and the kernels go. Default: ${DEFAULT-VALUE}.")
    Path out;

    @Option(names = "--nvcc", paramLabel = "PATH",
            description = "nvcc to compile the kernels (default: -Dgpusockets.nvcc, else nvcc on PATH, else /usr/local/cuda/bin/nvcc).")
    Path nvcc;

    @Option(names = "--seed", defaultValue = "42", description = "Seed of the inputs. Default: ${DEFAULT-VALUE}.")
    long seed;

    @Option(names = "--replot", paramLabel = "DIR",
            description = "Only draw emulated-ptx.png of an earlier run from DIR/plotdata.csv.")
    Path replot;

    private final PrintStream console = System.out;
    private final List<String> notes = new ArrayList<>();
    private boolean failed;

    public static void main(String[] args) {
        System.setProperty("java.awt.headless", "true");
        System.exit(new CommandLine(new PtxBench()).execute(args));
    }

    /** One workload on one engine. */
    record Result(String engine, String workload, double firstMs, double[] ms, long instructionsPerLaunch,
                  long interpretedLaunches, long compiledLaunches, String error) {
        double medianMs() {
            return DriverBench.median(ms);
        }

        double minMs() {
            return Arrays.stream(ms).min().orElse(Double.NaN);
        }

        double instructionsPerSecond() {
            return instructionsPerLaunch / (medianMs() / 1e3);
        }

        boolean measured() {
            return ms.length > 0;
        }

        /** What the statistics say ran the timed launches. */
        String ran() {
            if (interpretedLaunches == 0 && compiledLaunches == 0) {
                return "nothing counted";
            }
            if (compiledLaunches == 0) {
                return "interpreter";
            }
            if (interpretedLaunches == 0) {
                return "compiled";
            }
            return "interpreter " + interpretedLaunches + ", compiled " + compiledLaunches;
        }
    }

    @Override
    public Integer call() throws Exception {
        if (replot != null) {
            List<Path> files = BenchReport.plots(replot, BenchReport.readPlotCsv(replot.resolve("plotdata.csv")));
            console.println("bench emulated-ptx: drew " + String.join(", ", files.stream().map(Path::toString).toList()));
            return 0;
        }
        for (String e : engines) {
            if (!List.of("interpreter", "jit", "auto").contains(e)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "--engines: unknown engine " + e
                        + " (interpreter, jit, auto)");
            }
        }
        Path compiler = findNvcc();
        if (compiler == null) {
            console.println("bench emulated-ptx: nvcc not found (--nvcc, -Dgpusockets.nvcc, PATH, /usr/local/cuda/bin/nvcc):"
                    + " the workloads are CUDA C compiled to PTX at run time");
            return EXIT_NO_NVCC;
        }
        long start = System.nanoTime();
        String loadBefore = loadAverage();
        Files.createDirectories(out);
        String ptx = compile(compiler);
        PtxWorkloads.Sizes sizes = quick ? PtxWorkloads.Sizes.QUICK : PtxWorkloads.Sizes.FULL;
        List<PtxWorkloads.Workload> chosen = PtxWorkloads.all(sizes, seed).stream()
                .filter(w -> workloads == null || workloads.stream().anyMatch(p -> w.name().startsWith(p))).toList();
        String saved = System.getProperty(PtxEngine.PROPERTY);
        List<Result> results = new ArrayList<>();
        String machine;
        try (PtxDevice device = new PtxDevice(ptx)) {
            machine = TransportBench.machine(device.description());
            console.println("bench emulated-ptx: " + machine);
            console.println("bench emulated-ptx: nvcc " + compiler + ", engines " + engines + ", workloads "
                    + chosen.stream().map(PtxWorkloads.Workload::name).toList() + (quick ? "; --quick: a smoke run" : ""));
            for (PtxWorkloads.Workload w : chosen) {
                runWorkload(device, w, results);
            }
        } finally {
            if (saved == null) {
                System.clearProperty(PtxEngine.PROPERTY);
            } else {
                System.setProperty(PtxEngine.PROPERTY, saved);
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        PtxReport report = new PtxReport(engines, chosen, results, quick);
        notes.addAll(report.engineNotes());
        if (loadBefore != null) {
            int cores = Runtime.getRuntime().availableProcessors();
            String loadAfter = loadAverage();
            boolean busy = Double.parseDouble(loadBefore.split(" ")[0]) > 0.5 * cores
                    || loadAfter != null && Double.parseDouble(loadAfter.split(" ")[0]) > cores + 1;
            notes.add("load average (1, 5, 15 min) at the start " + loadBefore + ", at the end " + loadAfter + ", on " + cores
                    + " cores (the launches themselves keep up to " + cores + " busy)"
                    + (busy ? ": other processes (or a run just before) may have shared the CPUs, so the times may be slower than on an"
                            + " idle machine" : ""));
        }
        console.println();
        console.println(report.table());
        console.println(report.targets());
        notes.forEach(n -> console.println("note: " + n));
        List<Path> files = report.write(out, heading(machine, compiler, seconds), notes);
        console.printf(Locale.ROOT, "bench emulated-ptx: wrote %s (%.0f s)%n",
                String.join(", ", files.stream().map(Path::toString).toList()), seconds);
        return failed ? 1 : 0;
    }

    private String heading(String machine, Path compiler, double seconds) {
        return "# gpusockets bench emulated-ptx" + (quick ? " --quick" : "") + "\n\n" + machine + "\n\n"
                + String.format(Locale.ROOT, "Wall time %.0f s. nvcc: `%s -arch=sm_90 -ptx -O3` (kernels.cu → kernels.ptx)."
                        + " Each launch is timed with its cuCtxSynchronize, after %d warm-up launch%s per workload and engine"
                        + " (`first` in results.csv is the first of them); every launch's output is checked against a CPU"
                        + " reference. Engines run one after the other on each workload, in the order given, in one JVM.",
                seconds, compiler, Math.max(1, warmup), warmup > 1 ? "es" : "");
    }

    private int timedLaunches(PtxWorkloads.Workload w, String engine) {
        if (launches != null) {
            return launches;
        }
        boolean interpreter = engine.equals("interpreter");
        int n = switch (w) {
            case PtxWorkloads.Sgemm s -> interpreter ? 1 : 3;
            case PtxWorkloads.Reduce r -> 5;
            case PtxWorkloads.Histogram h -> 5;
            default -> 10;
        };
        return quick ? Math.max(interpreter && w instanceof PtxWorkloads.Sgemm ? 2 : 1, (n + 1) / 2) : n;
    }

    private void runWorkload(PtxDevice device, PtxWorkloads.Workload w, List<Result> results) {
        console.printf("[%s] %s ...%n", w.name(), w.description());
        PtxWorkloads.Launch launch;
        try {
            launch = w.prepare(device);
        } catch (RuntimeException e) {
            fail(w.name(), "prepare", e.toString());
            for (String engine : engines) {
                results.add(new Result(engine, w.name(), Double.NaN, new double[0], 0, 0, 0, e.toString()));
            }
            return;
        }
        try {
            long function = device.function(launch.kernel());
            MemorySegment parameters = device.parameters(launch);
            for (String engine : engines) {
                results.add(measure(device, w, engine, function, launch, parameters));
            }
        } catch (RuntimeException e) {
            fail(w.name(), "cuModuleGetFunction", e.toString());
        } finally {
            w.free(device);
        }
    }

    private Result measure(PtxDevice device, PtxWorkloads.Workload w, String engine, long function,
                           PtxWorkloads.Launch launch, MemorySegment parameters) {
        System.setProperty(PtxEngine.PROPERTY, engine);
        int n = timedLaunches(w, engine);
        String tag = "[" + engine + "] " + w.name();
        double first = Double.NaN;
        double[] ms = new double[n];
        int done = 0;
        PtxEngine.Statistics before = null;
        try {
            for (int k = 0; k < Math.max(1, warmup); k++) {
                double t = launchChecked(device, w, function, launch, parameters,
                        tag + " warm-up launch" + (warmup > 1 ? " " + (k + 1) + "/" + warmup : ""));
                first = k == 0 ? t : first;
            }
            before = PtxEngine.statistics();
            for (; done < n; done++) {
                ms[done] = launchChecked(device, w, function, launch, parameters,
                        String.format(Locale.ROOT, "%s launch %d/%d", tag, done + 1, n));
            }
        } catch (RuntimeException e) {
            fail(engine, w.name(), e.getMessage() != null ? e.getMessage() : e.toString());
            return new Result(engine, w.name(), first, Arrays.copyOf(ms, done), 0, 0, 0, String.valueOf(e.getMessage()));
        }
        PtxEngine.Statistics after = PtxEngine.statistics();
        long interpreted = after.interpretedLaunches() - before.interpretedLaunches();
        long compiled = after.compiledLaunches() - before.compiledLaunches();
        long instructions = after.interpretedInstructions() - before.interpretedInstructions()
                + after.compiledInstructions() - before.compiledInstructions();
        Result r = new Result(engine, w.name(), first, ms, instructions / n, interpreted, compiled, null);
        console.printf(Locale.ROOT, "%s: median %s ms, min %s ms, %,d thread-instructions per launch, %.1f M/s, ran: %s%n",
                tag, BenchReport.figure(r.medianMs()), BenchReport.figure(r.minMs()), r.instructionsPerLaunch(),
                r.instructionsPerSecond() / 1e6, r.ran());
        return r;
    }

    /** reset, launch + cuCtxSynchronize (timed), check; throws with what was wrong. */
    private double launchChecked(PtxDevice device, PtxWorkloads.Workload w, long function, PtxWorkloads.Launch launch,
                                 MemorySegment parameters, String what) {
        w.reset(device);
        double ms = device.launchAndSynchronize(function, launch, parameters) / 1e6;
        String wrong = w.check(device);
        if (wrong != null) {
            throw new IllegalStateException(what + ": WRONG RESULT: " + wrong);
        }
        console.printf(Locale.ROOT, "%s: %s ms, checked%n", what, BenchReport.figure(ms));
        return ms;
    }

    private void fail(String where, String what, String why) {
        console.printf("[%s] %s FAILED: %s%n", where, what, why);
        notes.add(where + " " + what + " failed: " + why);
        failed = true;
    }

    /** The first three fields of /proc/loadavg; null where there is none. */
    private static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return f.length >= 3 ? f[0] + " " + f[1] + " " + f[2] : null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    private Path findNvcc() {
        List<Path> candidates = new ArrayList<>();
        if (nvcc != null) {
            candidates.add(nvcc);
        } else {
            String property = System.getProperty("gpusockets.nvcc");
            if (property != null) {
                candidates.add(Path.of(property));
            }
            for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
                if (!dir.isEmpty()) {
                    candidates.add(Path.of(dir, "nvcc"));
                }
            }
            candidates.add(Path.of("/usr/local/cuda/bin/nvcc"));
        }
        return candidates.stream().filter(Files::isExecutable).findFirst().orElse(null);
    }

    /** nvcc -arch=sm_90 -ptx -O3 of {@link PtxWorkloads#SOURCE}; kernels.cu and kernels.ptx are kept in --out. */
    private String compile(Path compiler) throws IOException, InterruptedException {
        Path cu = Files.writeString(out.resolve("kernels.cu"), PtxWorkloads.SOURCE);
        Path ptx = out.resolve("kernels.ptx");
        long t0 = System.nanoTime();
        Process p = new ProcessBuilder(compiler.toString(), "-arch=sm_90", "-ptx", "-O3", cu.toString(), "-o", ptx.toString())
                .redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(compiler + " did not finish in 300 s");
        }
        if (p.exitValue() != 0) {
            throw new IOException(compiler + " failed (exit " + p.exitValue() + "):\n" + log);
        }
        console.printf(Locale.ROOT, "bench emulated-ptx: nvcc compiled %d kernels to PTX (%.1f s)%n",
                Files.readString(ptx).split("\\.entry ", -1).length - 1, (System.nanoTime() - t0) / 1e9);
        return Files.readString(ptx);
    }

    /** The figures of one run and their renderings. */
    static final class PtxReport {
        final List<String> engines;
        final List<PtxWorkloads.Workload> workloads;
        final List<Result> results;
        final boolean quick;

        PtxReport(List<String> engines, List<PtxWorkloads.Workload> workloads, List<Result> results, boolean quick) {
            this.engines = engines;
            this.workloads = workloads;
            this.results = results;
            this.quick = quick;
        }

        Result find(String engine, String workload) {
            return results.stream().filter(r -> r.engine().equals(engine) && r.workload().equals(workload)).findFirst()
                    .orElse(null);
        }

        List<String> engineNotes() {
            List<String> n = new ArrayList<>();
            for (String e : engines) {
                long compiled = results.stream().filter(r -> r.engine().equals(e)).mapToLong(Result::compiledLaunches).sum();
                long interpreted = results.stream().filter(r -> r.engine().equals(e))
                        .mapToLong(Result::interpretedLaunches).sum();
                if (!e.equals("interpreter") && compiled == 0 && interpreted > 0) {
                    n.add(e + ": PtxEngine.statistics counted no compiled launch: every " + e
                            + " launch ran the interpreter (no compiler yet, or it does not cover these kernels)");
                } else if (!e.equals("interpreter") && interpreted > 0) {
                    n.add(e + ": " + interpreted + " of " + (compiled + interpreted)
                            + " timed launches ran the interpreter (kernels the compiler does not cover)");
                }
            }
            int cores = Runtime.getRuntime().availableProcessors();
            if (cores != 2) {
                n.add("the targets are for a 2-core machine; this one has " + cores + " cores");
            }
            return n;
        }

        /** results.csv rows: the engine in the transport column; an interpreter row's ratio is interpreter/jit. */
        BenchReport values() {
            BenchReport r = new BenchReport();
            for (Result x : results) {
                if (!x.measured()) {
                    continue;
                }
                String[] baseline = x.engine().equals("interpreter") && engines.contains("jit")
                        ? new String[] {"jit/" + x.workload()} : new String[0];
                r.add(x.engine(), x.workload(), "median", x.medianMs(), "ms", baseline);
                r.add(x.engine(), x.workload(), "min", x.minMs(), "ms", baseline);
                r.add(x.engine(), x.workload(), "first", x.firstMs(), "ms", baseline);
                r.add(x.engine(), x.workload(), "launches", x.ms().length, "launches");
                r.add(x.engine(), x.workload(), "thread-instructions", x.instructionsPerLaunch(), "per launch", baseline);
                r.add(x.engine(), x.workload(), "thread-instruction-rate", x.instructionsPerSecond(), "per s", baseline);
                r.add(x.engine(), x.workload(), "compiled-launches", x.compiledLaunches(), "launches");
                r.add(x.engine(), x.workload(), "interpreted-launches", x.interpretedLaunches(), "launches");
            }
            return r;
        }

        private static String ms(Result r) {
            if (r == null) {
                return "";
            }
            if (!r.measured()) {
                return "FAILED";
            }
            return BenchReport.figure(r.medianMs()) + " / " + BenchReport.figure(r.minMs()) + (r.error() != null ? " FAILED" : "");
        }

        private static String rate(Result r) {
            return r == null || !r.measured() || r.error() != null ? ""
                    : String.format(Locale.ROOT, "%.1f M", r.instructionsPerSecond() / 1e6);
        }

        /** The side-by-side table (Markdown, also printed). */
        String table() {
            List<String> header = new ArrayList<>(List.of("workload"));
            engines.forEach(e -> header.add(e + " ms (median / min)"));
            boolean ratio = engines.contains("interpreter") && engines.contains("jit");
            if (ratio) {
                header.add("interpreter / jit");
            }
            header.add("thread-instructions / launch");
            engines.forEach(e -> header.add(e + " thread-instr/s"));
            engines.forEach(e -> header.add(e + ": ran"));
            List<List<String>> rows = new ArrayList<>();
            for (PtxWorkloads.Workload w : workloads) {
                List<String> row = new ArrayList<>(List.of(w.name()));
                engines.forEach(e -> row.add(ms(find(e, w.name()))));
                if (ratio) {
                    Result i = find("interpreter", w.name());
                    Result j = find("jit", w.name());
                    row.add(i != null && j != null && i.measured() && j.measured() && i.error() == null && j.error() == null
                            ? String.format(Locale.ROOT, "%.2f×", i.medianMs() / j.medianMs()) : "");
                }
                List<String> counts = engines.stream().map(e -> find(e, w.name()))
                        .filter(r -> r != null && r.measured() && r.error() == null)
                        .map(r -> String.format(Locale.ROOT, "%,d", r.instructionsPerLaunch())).distinct().toList();
                row.add(String.join(" / ", counts));
                engines.forEach(e -> row.add(rate(find(e, w.name()))));
                engines.forEach(e -> {
                    Result r = find(e, w.name());
                    row.add(r == null ? "" : r.error() != null ? "failed" : r.ran());
                });
                rows.add(row);
            }
            return markdownTable(header, rows);
        }

        /** The targets (full sizes, 2 cores): met or not per engine. */
        String targets() {
            List<String> header = new ArrayList<>(List.of("target (2 cores)"));
            header.addAll(engines);
            List<List<String>> rows = new ArrayList<>();
            for (PtxWorkloads.Workload w : workloads) {
                double target = w.targetMs();
                if (Double.isNaN(target) && !quick) {
                    continue;
                }
                String label = quick ? targetLabel(w) : String.format(Locale.ROOT, "%s ≤ %.0f ms", w.name(), target);
                if (label == null) {
                    continue;
                }
                List<String> row = new ArrayList<>(List.of(label));
                for (String e : engines) {
                    Result r = find(e, w.name());
                    if (quick) {
                        row.add("n/a at --quick sizes");
                    } else if (r == null || !r.measured() || r.error() != null) {
                        row.add("not measured");
                    } else {
                        row.add(BenchReport.figure(r.medianMs()) + " ms: " + (r.medianMs() <= target ? "met" : "**not met**")
                                + (e.equals("interpreter") || r.compiledLaunches() > 0 ? "" : " (ran " + r.ran() + ")"));
                    }
                }
                rows.add(row);
            }
            return rows.isEmpty() ? "" : markdownTable(header, rows);
        }

        private static String targetLabel(PtxWorkloads.Workload w) {
            return switch (w) {
                case PtxWorkloads.VectorAdd v -> "vector-add-1M ≤ 50 ms";
                case PtxWorkloads.Sgemm s -> "sgemm-1024 ≤ 2 s";
                case PtxWorkloads.Reduce r -> "reduce-shfl-16M ≤ 200 ms";
                default -> null;
            };
        }

        static String markdownTable(List<String> header, List<List<String>> rows) {
            StringBuilder md = new StringBuilder("| ").append(String.join(" | ", header)).append(" |\n|");
            for (int i = 0; i < header.size(); i++) {
                md.append(i == 0 ? "---|" : "---:|");
            }
            md.append('\n');
            for (List<String> row : rows) {
                md.append("| ").append(String.join(" | ", row)).append(" |\n");
            }
            return md.toString();
        }

        /** The plot's data: series ENGINE|WORKLOAD (and target|WORKLOAD), x = the workload's index, y = median ms. */
        List<BenchReport.PlotPoint> plotPoints() {
            List<BenchReport.PlotPoint> points = new ArrayList<>();
            for (int i = 0; i < workloads.size(); i++) {
                String w = workloads.get(i).name();
                for (String e : engines) {
                    Result r = find(e, w);
                    if (r != null && r.measured() && r.error() == null) {
                        points.add(new BenchReport.PlotPoint(PLOT, e + "|" + w, i, r.medianMs()));
                    }
                }
                if (!quick && !Double.isNaN(workloads.get(i).targetMs())) {
                    points.add(new BenchReport.PlotPoint(PLOT, "target|" + w, i, workloads.get(i).targetMs()));
                }
            }
            return points;
        }

        List<Path> write(Path dir, String heading, List<String> notes) throws IOException {
            Files.createDirectories(dir);
            List<Path> files = new ArrayList<>();
            files.add(Files.writeString(dir.resolve("results.csv"), values().csv()));
            StringBuilder md = new StringBuilder(heading).append("\n\n");
            md.append("| workload | what |\n|---|---|\n");
            workloads.forEach(w -> md.append("| ").append(w.name()).append(" | ").append(w.description()).append(" |\n"));
            md.append("\nms per launch (launch + cuCtxSynchronize), thread-instructions from PtxEngine.statistics;"
                    + " \"ran\" is the engine the statistics counted for the timed launches.\n\n");
            md.append(table());
            String t = targets();
            if (!t.isEmpty()) {
                md.append("\nTargets (the issue's, for a 2-core machine; median ms per launch):\n\n").append(t);
            }
            if (!notes.isEmpty()) {
                md.append('\n');
                notes.forEach(n -> md.append("- ").append(n).append('\n'));
            }
            files.add(Files.writeString(dir.resolve("summary.md"), md.toString()));
            List<BenchReport.PlotPoint> points = plotPoints();
            files.add(Files.writeString(dir.resolve("plotdata.csv"), BenchReport.plotCsv(points)));
            List<Path> drawn = BenchReport.plots(dir, points); // none on a runtime without java.desktop
            if (drawn.isEmpty() && !points.isEmpty()) {
                System.out.println("bench emulated-ptx: draw the plot from " + dir.resolve("plotdata.csv")
                        + " with: scripts/bench --replot " + dir);
            }
            files.addAll(drawn);
            return files;
        }
    }

    /**
     * emulated-ptx.png: a bar per engine and workload, log ms per launch, the targets as markers; returns the file, or
     * null where it was not drawn ({@link Plots#png}).
     */
    static Path draw(Path dir, List<BenchReport.PlotPoint> points) {
        return Plots.png(dir.resolve(PLOT + ".png"), () -> chart(points));
    }

    private static org.knowm.xchart.CategoryChart chart(List<BenchReport.PlotPoint> points) {
        Map<String, Map<Integer, Double>> bySeries = new LinkedHashMap<>();
        Map<Integer, String> names = new java.util.TreeMap<>();
        for (BenchReport.PlotPoint p : points) {
            int bar = p.series().indexOf('|');
            String series = p.series().substring(0, bar);
            names.put((int) p.x(), p.series().substring(bar + 1));
            bySeries.computeIfAbsent(series, s -> new LinkedHashMap<>()).put((int) p.x(), p.y());
        }
        List<String> categories = new ArrayList<>(names.values());
        List<Integer> index = new ArrayList<>(names.keySet());
        var chart = new org.knowm.xchart.CategoryChartBuilder().width(1100).height(620)
                .title("Emulated device: PTX kernel time per launch (launch + cuCtxSynchronize, median)")
                .xAxisTitle("workload").yAxisTitle("ms per launch (log)").build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE)
                .setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNE);
        // bars stand on the axis' minimum, which XChart takes as 0 unless told: a power of 10 below the data
        double low = points.stream().mapToDouble(BenchReport.PlotPoint::y).filter(y -> y > 0).min().orElse(1);
        double high = points.stream().mapToDouble(BenchReport.PlotPoint::y).max().orElse(10);
        chart.getStyler().setYAxisLogarithmic(true).setYAxisMin(Math.pow(10, Math.floor(Math.log10(low))))
                .setYAxisMax(Math.pow(10, Math.ceil(Math.log10(high * 1.01))));
        chart.getStyler().setOverlapped(false);
        for (var s : bySeries.entrySet()) {
            List<Double> y = index.stream().map(i -> s.getValue().get(i)).toList();
            boolean target = s.getKey().equals("target");
            var series = chart.addSeries(target ? "target (2 cores)" : s.getKey(), categories, y);
            if (target) {
                series.setChartCategorySeriesRenderStyle(org.knowm.xchart.CategorySeries.CategorySeriesRenderStyle.Scatter);
                series.setMarker(org.knowm.xchart.style.markers.SeriesMarkers.DIAMOND);
                series.setMarkerColor(java.awt.Color.RED);
            }
        }
        return chart;
    }
}
