package io.gpusockets.benchmarks;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.driver.NativeLibrary;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench programs} (issue 26 item 5): the wall time, from exec to exit, of the short test programs (the C
 * driver-API programs of {@code frontend/native/tests/programs.list} and the runtime-API programs of
 * {@code runtime/programs.list}) natively where the device is the real GPU and through GPUsockets' libcuda.so.1 over
 * each transport against an in-process backend, in interleaved rounds (every program on every target, then again,
 * after one unmeasured run of the first program on each target),
 * with a table of medians and each transport's ratio to native (issue 26: ≤ 1.3× over ring, ≤ 1.5× over tcp on the
 * GPU). The programs are built by {@code scripts/gpu-programs --build-only} (its build, its lists and its placeholders:
 * this class builds nothing itself) and listed in its {@code programs.tsv}; outputs are not compared here (gpu-programs
 * and the test suite do that), but a run that exits non-zero is reported and fails the bench. The backend is this
 * process's, one driver for all sessions, so the programs that end in a kernel fault by design are left out
 * ({@code --exclude}).
 */
@Command(name = "bench programs", mixinStandardHelpOptions = true,
        description = "The short C driver-API and runtime-API programs' wall time, natively and through GPUsockets.")
public final class ProgramsBench implements Callable<Integer> {
    static final String NATIVE = "native";
    /** Issue 26: short programs' wall time at most this × native over ring, {@link #TARGET_OTHER} over tcp (and unix). */
    static final double TARGET_RING = 1.3;
    static final double TARGET_OTHER = 1.5;

    @Option(names = "--rounds", paramLabel = "N", defaultValue = "3", description = "Interleaved rounds (medians kept). Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--quick", description = "1 round.")
    boolean quick;

    @Option(names = "--transports", split = ",", paramLabel = "LIST", defaultValue = "ring,tcp,unix",
            description = "Transports to run the programs through. Default: ${DEFAULT-VALUE}.")
    List<String> transports;

    @Option(names = "--programs", paramLabel = "REGEX", description = "Only the runs whose label (as in the table) matches, e.g. '^rt/'.")
    Pattern programs;

    @Option(names = "--exclude", paramLabel = "REGEX", defaultValue = "^(fault|assert)$",
            description = "Runs left out, by label: those that end in a kernel fault by design, which in the in-process backend (one"
                    + " driver for every session) poisons the driver for every later run. Default: ${DEFAULT-VALUE}.")
    Pattern exclude;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver of the in-process backend; with the real one the programs also run natively. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "The real libcuda.so.1 (backend and native runs; default: the system's).")
    String libcuda;

    @Option(names = "--library-dir", paramLabel = "DIR",
            description = "Where GPUsockets' libcuda.so.1 is: a bundle's lib/ finds its own runtime; default frontend/target/native of the checkout.")
    Path libraryDir;

    @Option(names = "--gpu-programs", paramLabel = "PATH", description = "scripts/gpu-programs (default: the checkout's).")
    Path script;

    @Option(names = "--built", paramLabel = "DIR",
            description = "Programs built already (gpu-programs --build-only DIR): DIR/programs.tsv is used and nothing is built.")
    Path built;

    @Option(names = "--time-limit", paramLabel = "S",
            description = "Start no round that would end after S seconds from the start, judged by the longest round so far (the first round always runs).")
    Integer timeLimit;

    @Option(names = "--timeout", paramLabel = "S", defaultValue = "120", description = "Seconds per run. Default: ${DEFAULT-VALUE}.")
    int timeout;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/results.csv, DIR/summary.md and DIR/programs.png.")
    Path out;

    private final PrintStream console = System.out;

    /** One line of programs.tsv: the label, the run's extra environment and its command. */
    record Program(String label, Map<String, String> env, List<String> command) {
    }

    private static final java.util.logging.Logger BACKEND_LOG = java.util.logging.Logger.getLogger("gpusockets");

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s: %5$s%6$s%n");
        BACKEND_LOG.setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new ProgramsBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    /** The lines of gpu-programs' programs.tsv: LABEL, VAR=VALUE words, command words, tab-separated. */
    static List<Program> parseManifest(String text) {
        List<Program> out = new ArrayList<>();
        for (String line : text.split("\n")) {
            if (line.isBlank()) {
                continue;
            }
            String[] f = line.split("\t", -1);
            if (f.length != 3 || f[2].isBlank()) {
                throw new IllegalArgumentException("programs.tsv: not LABEL<TAB>VARS<TAB>COMMAND: " + line);
            }
            Map<String, String> env = new LinkedHashMap<>();
            for (String v : f[1].strip().split("\\s+")) {
                if (v.isEmpty()) {
                    continue;
                }
                int eq = v.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("programs.tsv: not VAR=VALUE: " + v + " in " + line);
                }
                env.put(v.substring(0, eq), v.substring(eq + 1));
            }
            out.add(new Program(f[0], env, List.of(f[2].strip().split("\\s+"))));
        }
        return out;
    }

    @Override
    public Integer call() throws Exception {
        long start = System.nanoTime();
        int n = quick ? 1 : rounds;
        Path library = ProgramRuns.library(libraryDir);
        if (library == null) {
            console.println("bench programs: GPUsockets' libcuda.so.1 not found (--library-dir, or build frontend/ in a checkout)");
            return 2;
        }
        DriverHost host = device.open(libcuda);
        boolean nativeDevice = host.driver() instanceof NativeCudaDriver;
        Path tmp = Files.createTempDirectory("gpusockets-programs");
        try {
            Path dir = built;
            if (dir == null) {
                dir = tmp.resolve("build");
                int rc = buildPrograms(dir, nativeDevice ? "gpu" : "emulated", library);
                if (rc == 2) {
                    return 2;
                }
            }
            Path manifest = dir.resolve("programs.tsv");
            if (!Files.isRegularFile(manifest)) {
                console.println("bench programs: no " + manifest + " (gpu-programs --build-only DIR)");
                return 2;
            }
            List<Program> list = parseManifest(Files.readString(manifest, StandardCharsets.UTF_8)).stream()
                    .filter(p -> programs == null || programs.matcher(p.label()).find())
                    .filter(p -> exclude == null || !exclude.matcher(p.label()).find()).toList();
            String machine = Runtime.getRuntime().availableProcessors() + " cores, " + host.description();
            console.println("bench programs: " + machine + "; " + list.size() + " runs");
            List<String> notes = new ArrayList<>();
            if (!nativeDevice) {
                notes.add("no GPU (emulated device): remote wall times only (the emulated device runs kernels on the CPU;"
                        + " there is no native figure to compare with)");
            }
            Map<String, Map<String, String>> targets = new LinkedHashMap<>();
            if (nativeDevice) {
                targets.put(NATIVE, ProgramRuns.nativeEnv(libcuda != null ? libcuda : NativeLibrary.path()));
            }
            Map<String, Map<String, List<Double>>> wall = new LinkedHashMap<>(); // label -> target -> ms
            List<String> failures = new ArrayList<>();
            try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
                for (String scheme : transports) {
                    String uri = SelfHosting.listenOrNote(backend, scheme, tmp, "programs-" + scheme, notes);
                    if (uri == null) {
                        continue;
                    }
                    targets.put(scheme, ProgramRuns.remoteEnv(library, uri));
                }
                Path work = Files.createDirectories(tmp.resolve("run"));
                if (!list.isEmpty()) {
                    // one unmeasured run of the first program per target: the first start of a process pays for cold caches
                    for (Map.Entry<String, Map<String, String>> t : targets.entrySet()) {
                        Map<String, String> env = new LinkedHashMap<>(t.getValue());
                        env.putAll(list.getFirst().env());
                        ProgramRuns.Run r = ProgramRuns.run(list.getFirst().command(), env, work, timeout);
                        console.printf(Locale.ROOT, "[%s] unmeasured first run of %s: exit %d, %.0f ms%n", t.getKey(),
                                list.getFirst().label(), r.exit(), r.wallMs());
                    }
                }
                long longest = 0;
                for (int round = 1; round <= n; round++) {
                    long roundStart = System.nanoTime();
                    if (round > 1 && timeLimit != null && roundStart - start + longest > timeLimit * 1_000_000_000L) {
                        notes.add("rounds " + round + " to " + n + " not run: they would end after --time-limit " + timeLimit + " s");
                        break;
                    }
                    for (Program p : list) {
                        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "[round %d] %s:", round, p.label()));
                        for (Map.Entry<String, Map<String, String>> t : targets.entrySet()) {
                            Map<String, String> env = new LinkedHashMap<>(t.getValue());
                            env.putAll(p.env());
                            ProgramRuns.Run r = ProgramRuns.run(p.command(), env, work, timeout);
                            if (r.exit() != 0) {
                                failures.add(String.format(Locale.ROOT, "%s on %s, round %d: exit %d%n%s", p.label(), t.getKey(), round,
                                        r.exit(), ProgramRuns.tail(r.stderr(), 3)));
                                line.append(' ').append(t.getKey()).append(" exit ").append(r.exit());
                                continue;
                            }
                            wall.computeIfAbsent(p.label(), k -> new LinkedHashMap<>()).computeIfAbsent(t.getKey(), k -> new ArrayList<>())
                                    .add(r.wallMs());
                            line.append(String.format(Locale.ROOT, " %s %.0f ms", t.getKey(), r.wallMs()));
                        }
                        console.println(line);
                    }
                    longest = Math.max(longest, System.nanoTime() - roundStart);
                }
            }
            Map<String, Map<String, Double>> medians = medians(wall);
            List<String> columns = new ArrayList<>(targets.keySet());
            String table = table(medians, columns);
            console.println();
            console.print(table);
            List<String> verdicts = verdicts(medians, columns);
            verdicts.forEach(v -> console.println("issue 26: " + v));
            notes.forEach(note -> console.println("note: " + note));
            failures.forEach(f -> console.println("FAILED: " + f));
            if (out != null) {
                Files.createDirectories(out);
                Files.writeString(out.resolve("results.csv"), csv(medians));
                Files.writeString(out.resolve("summary.md"), "# bench programs\n\n" + machine + "; " + n + " interleaved round(s);"
                        + " wall ms from exec to exit (median), × native.\n\n" + table + "\n"
                        + String.join("\n", verdicts.stream().map(v -> "- issue 26: " + v).toList()) + "\n"
                        + String.join("\n", notes.stream().map(v -> "- note: " + v).toList()) + "\n"
                        + String.join("\n", failures.stream().map(v -> "- FAILED: " + v.replace("\n", " / ")).toList()) + "\n");
                Plots.png(out.resolve("programs.png"), () -> plot(medians, columns));
                console.println("bench programs: wrote " + out.resolve("results.csv") + ", summary.md and programs.png");
            }
            return failures.isEmpty() ? 0 : 1;
        } finally {
            ProgramRuns.deleteTree(tmp);
        }
    }

    /** gpu-programs --build-only DIR TARGET LIBDIR; its output goes to the console. Returns its exit status. */
    private int buildPrograms(Path dir, String target, Path library) throws IOException, InterruptedException {
        Path s = script;
        if (s == null) {
            Path root = ProgramRuns.checkout();
            s = root == null ? null : root.resolve("scripts/gpu-programs");
        }
        if (s == null || !Files.isExecutable(s)) {
            console.println("bench programs: scripts/gpu-programs not found (--gpu-programs PATH, or run in a checkout)");
            return 2;
        }
        console.println("bench programs: building with " + s + " --build-only " + dir + " " + target);
        Process p = new ProcessBuilder(s.toString(), "--build-only", dir.toString(), target, library.toString())
                .redirectErrorStream(true).start();
        p.getInputStream().transferTo(console);
        int rc = p.waitFor();
        if (rc != 0) {
            console.println("bench programs: gpu-programs --build-only exit " + rc + (rc == 1 ? " (the runs that built are timed)" : ""));
        }
        return rc;
    }

    /** Per program and target, the median wall ms of its rounds that exited 0. */
    static Map<String, Map<String, Double>> medians(Map<String, Map<String, List<Double>>> wall) {
        Map<String, Map<String, Double>> out = new LinkedHashMap<>();
        wall.forEach((label, byTarget) -> {
            Map<String, Double> m = new LinkedHashMap<>();
            byTarget.forEach((t, v) -> m.put(t, ProgramRuns.median(v.stream().mapToDouble(Double::doubleValue).toArray())));
            out.put(label, m);
        });
        return out;
    }

    /** The geometric mean of {@code target}'s ratios to native over the programs that have both; NaN if none has. */
    static double geomeanRatio(Map<String, Map<String, Double>> medians, String target) {
        double logSum = 0;
        int count = 0;
        for (Map<String, Double> m : medians.values()) {
            Double nat = m.get(NATIVE), t = m.get(target);
            if (nat != null && t != null && nat > 0 && t > 0) {
                logSum += Math.log(t / nat);
                count++;
            }
        }
        return count == 0 ? Double.NaN : Math.exp(logSum / count);
    }

    /** One row per program, a column per target (wall ms, and × native where there is a native column), then the geometric means. */
    static String table(Map<String, Map<String, Double>> medians, List<String> columns) {
        boolean hasNative = columns.contains(NATIVE);
        StringBuilder b = new StringBuilder("| program |");
        columns.forEach(c -> b.append(' ').append(c).append(" ms |").append(hasNative && !c.equals(NATIVE) ? " × |" : ""));
        b.append('\n').append("|---|");
        columns.forEach(c -> b.append("---|").append(hasNative && !c.equals(NATIVE) ? "---|" : ""));
        b.append('\n');
        for (Map.Entry<String, Map<String, Double>> e : medians.entrySet()) {
            b.append("| ").append(e.getKey()).append(" |");
            Double nat = e.getValue().get(NATIVE);
            for (String c : columns) {
                Double ms = e.getValue().get(c);
                b.append(ms == null ? " - |" : String.format(Locale.ROOT, " %.0f |", ms));
                if (hasNative && !c.equals(NATIVE)) {
                    b.append(ms == null || nat == null || nat <= 0 ? " - |" : String.format(Locale.ROOT, " %.2f |", ms / nat));
                }
            }
            b.append('\n');
        }
        if (hasNative) {
            b.append("| geometric mean |");
            for (String c : columns) {
                b.append(" |");
                if (!c.equals(NATIVE)) {
                    double g = geomeanRatio(medians, c);
                    b.append(Double.isNaN(g) ? " - |" : String.format(Locale.ROOT, " %.2f |", g));
                }
            }
            b.append('\n');
        }
        return b.toString();
    }

    /**
     * Issue 26's targets per transport, where there is a native column: the geometric mean and the worst ratio over
     * the programs, the worst against {@link #TARGET_RING} (ring) or {@link #TARGET_OTHER} (the others).
     */
    static List<String> verdicts(Map<String, Map<String, Double>> medians, List<String> columns) {
        List<String> v = new ArrayList<>();
        if (!columns.contains(NATIVE)) {
            return v;
        }
        for (String c : columns) {
            if (c.equals(NATIVE)) {
                continue;
            }
            double target = c.equals("ring") ? TARGET_RING : TARGET_OTHER;
            double worst = 0;
            String at = null;
            for (Map.Entry<String, Map<String, Double>> e : medians.entrySet()) {
                Double nat = e.getValue().get(NATIVE), t = e.getValue().get(c);
                if (nat != null && t != null && nat > 0 && t / nat > worst) {
                    worst = t / nat;
                    at = e.getKey();
                }
            }
            if (at != null) {
                v.add(String.format(Locale.ROOT, "%s short programs ≤ %.1f× native: geometric mean ×%.2f, worst ×%.2f (%s), %s", c,
                        target, geomeanRatio(medians, c), worst, at, worst <= target ? "met" : "NOT MET"));
            }
        }
        return v;
    }

    static String csv(Map<String, Map<String, Double>> medians) {
        StringBuilder b = new StringBuilder(ResultTable.CSV_HEADER).append('\n');
        medians.forEach((label, m) -> {
            Double nat = m.get(NATIVE);
            m.forEach((t, ms) -> {
                boolean ratio = !t.equals(NATIVE) && nat != null && nat > 0;
                b.append(String.format(Locale.ROOT, "%s,%s,wall-median,%.3f,ms,%s,%s%n", t, csvField(label), ms,
                        ratio ? NATIVE + "/" + csvField(label) : "", ratio ? String.format(Locale.ROOT, "%.4f", ms / nat) : ""));
            });
        });
        return b.toString();
    }

    /** A label as a CSV field: "program-" + the label with spaces as '_' (labels have no commas or quotes). */
    static String csvField(String label) {
        return "program-" + label.replace(' ', '_').replace(',', ';');
    }

    /** Bars per program: × native per transport where there is a native column, else wall ms per transport. */
    private static CategoryChart plot(Map<String, Map<String, Double>> medians, List<String> columns) {
        boolean hasNative = columns.contains(NATIVE);
        CategoryChart chart = new CategoryChartBuilder().width(Math.max(900, 28 * medians.size())).height(600)
                .title(hasNative ? "short programs: wall time × native (bench programs)" : "short programs: wall ms (bench programs)")
                .xAxisTitle("program").yAxisTitle(hasNative ? "× native" : "ms").build();
        chart.getStyler().setXAxisLabelRotation(90);
        List<String> labels = new ArrayList<>(medians.keySet());
        boolean any = false;
        for (String c : columns) {
            if (hasNative && c.equals(NATIVE)) {
                continue;
            }
            double[] y = labels.stream().mapToDouble(l -> {
                Double ms = medians.get(l).get(c), nat = medians.get(l).get(NATIVE);
                if (ms == null) {
                    return 0;
                }
                return hasNative ? (nat == null || nat <= 0 ? 0 : ms / nat) : ms;
            }).toArray();
            if (Arrays.stream(y).anyMatch(v -> v > 0)) {
                chart.addSeries(c, labels, Arrays.stream(y).boxed().toList());
                any = true;
            }
        }
        return any ? chart : null;
    }
}
