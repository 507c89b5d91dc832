package io.gpusockets.benchmarks;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import java.io.IOException;
import java.io.InputStream;
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
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench startup}: how long a CUDA runtime-API program takes from main to the return of its
 * first cudaMalloc (DESIGN §10: at most native + 50 ms), through libcuda.so.1 against an in-process
 * backend over each transport, and natively where the device is the real GPU, side by side in one
 * run. The program ({@code startup.cu}, built here by nvcc with the default static cudart) times
 * itself on CLOCK_MONOTONIC and prints the figure before anything that may fail, so a library that
 * gets it only part of the way still yields the time to its first cudaMalloc (and says what that
 * returned). Runs are interleaved (run 1 of every target, then run 2, ...) after one unmeasured run
 * of each.
 */
@Command(name = "bench startup", mixinStandardHelpOptions = true,
        description = "A runtime-API program's start-up (main to its first cudaMalloc), through GPUsockets and natively.")
public final class StartupBench implements Callable<Integer> {
    static final String NATIVE = "native";
    /** DESIGN §10: a runtime-API program's start-up ≤ native + 50 ms. */
    static final double TARGET_OVER_NATIVE_MS = 50;
    private static final Pattern FIRST_LINE = Pattern.compile(
            "startup main-to-malloc-ms=([0-9.]+) malloc=(\\S+) since-exec-ms=(-?[0-9.]+)");
    private static final Pattern SECOND_LINE = Pattern.compile("startup vector-add=(\\S+) total-ms=([0-9.]+)");
    private static final int RUN_TIMEOUT_SECONDS = 120;

    @Option(names = "--runs", paramLabel = "N", defaultValue = "10", description = "Measured runs per target. Default: ${DEFAULT-VALUE}.")
    int runs;

    @Option(names = "--quick", description = "3 runs per target (a smoke run).")
    boolean quick;

    @Option(names = "--transports", split = ",", paramLabel = "LIST", defaultValue = "unix,ring",
            description = "Transports to run the program through. Default: ${DEFAULT-VALUE}.")
    List<String> transports;

    @Option(names = "--compare-local-answers",
            description = "Also run each transport with GPUSOCKETS_LOCAL_ANSWERS=0 (every device query and cuCtxGetCurrent a round trip).")
    boolean compareLocalAnswers;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver of the in-process backend; with the real one the program also runs natively. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "The real libcuda.so.1 for the backend (default: the system's).")
    String libcuda;

    @Option(names = "--library-dir", paramLabel = "DIR",
            description = "Where GPUsockets' libcuda.so.1 is (default: frontend/target/native of the checkout above the working directory).")
    Path libraryDir;

    @Option(names = "--frontend-prefix", paramLabel = "DIR",
            description = "An installed frontend (install-frontend --prefix DIR): the program loads DIR/lib/libcuda.so.1, which finds"
                    + " its own runtime, jars and class-data-sharing archive, as users get it. Default: --library-dir with this JVM's"
                    + " runtime and class path (no archive).")
    Path frontendPrefix;

    @Option(names = "--nvcc", paramLabel = "PATH", description = "nvcc (default: -Dgpusockets.nvcc, nvcc on PATH, /usr/local/cuda/bin/nvcc).")
    Path nvcc;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/results.csv and DIR/summary.md.")
    Path out;

    @Option(names = "--stand-in",
            description = "No GPU needed: a small driver-API program (gcc) against a stand-in libcuda.so.1 that answers at once,"
                    + " against ours over each transport and with no backend; prints the frontend's own start, the no-backend"
                    + " wall time and VmHWM/VmRSS over the stand-in's (StandInStartup; writes DIR/standin.* with --out).")
    boolean standIn;

    @Option(names = "--work-ms", paramLabel = "MS", defaultValue = "0",
            description = "With --stand-in: the program spends MS ms of CPU before its first CUDA call (its own start). Default: ${DEFAULT-VALUE}.")
    int workMs;

    @Option(names = "--early-start",
            description = "With --stand-in: also each transport with GPUSOCKETS_EARLY_START=1 (the JVM and connection start as the library loads).")
    boolean earlyStart;

    private final PrintStream console = System.out;

    /** One run's figures as the program printed them (NaN where it printed none). */
    record Run(double toMallocMs, String malloc, double sinceExecMs, String vectorAdd, double wallMs, int exit) {
    }

    /** Where one target's program runs: its name and the environment it gets. */
    record Target(String name, Map<String, String> env) {
    }

    private static final java.util.logging.Logger BACKEND_LOG = java.util.logging.Logger.getLogger("gpusockets");

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s: %5$s%6$s%n");
        BACKEND_LOG.setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new StartupBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        int n = quick ? 3 : runs;
        if (standIn) {
            Path library = frontendPrefix != null ? frontendPrefix.resolve("lib") : libraryDir != null ? libraryDir : checkoutLibrary();
            if (library == null || !Files.isRegularFile(library.resolve("libcuda.so.1"))) {
                console.println("bench startup: GPUsockets' libcuda.so.1 not found (--library-dir, or build frontend/ in a checkout)");
                return 2;
            }
            return new StandInStartup(console, workMs, earlyStart).run(n, transports, library, frontendPrefix == null, device.open(libcuda), out);
        }
        Path compiler = findNvcc();
        if (compiler == null) {
            console.println("bench startup: nvcc not found (--nvcc, -Dgpusockets.nvcc, PATH, /usr/local/cuda/bin/nvcc)");
            return 2;
        }
        Path library = frontendPrefix != null ? frontendPrefix.resolve("lib") : libraryDir != null ? libraryDir : checkoutLibrary();
        if (library == null || !Files.isRegularFile(library.resolve("libcuda.so.1"))) {
            console.println("bench startup: GPUsockets' libcuda.so.1 not found (--library-dir, or build frontend/ in a checkout)");
            return 2;
        }
        Path tmp = Files.createTempDirectory("gpusockets-startup");
        try {
            Path program = build(compiler, tmp);
            DriverHost host = device.open(libcuda);
            boolean nativeDevice = host.driver() instanceof NativeCudaDriver;
            String machine = Runtime.getRuntime().availableProcessors() + " cores, " + host.description();
            console.println("bench startup: " + machine);
            List<String> notes = new ArrayList<>();
            if (!nativeDevice) {
                notes.add("no GPU (emulated device): no native column, so no check of the native + "
                        + (int) TARGET_OVER_NATIVE_MS + " ms target");
            }
            Map<String, List<Run>> results = new LinkedHashMap<>();
            try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
                List<Target> targets = new ArrayList<>();
                if (nativeDevice) {
                    targets.add(new Target(NATIVE, Map.of()));
                }
                for (String scheme : transports) {
                    String uri = SelfHosting.listenOrNote(backend, scheme, tmp, "startup-" + scheme, notes);
                    if (uri == null) {
                        continue;
                    }
                    targets.add(new Target(scheme, remoteEnv(library, uri, true, frontendPrefix == null)));
                    if (compareLocalAnswers) {
                        targets.add(new Target(scheme + "-no-local-answers", remoteEnv(library, uri, false, frontendPrefix == null)));
                    }
                }
                for (Target t : targets) {
                    Run warm = run(program, t, tmp);
                    console.printf(Locale.ROOT, "[%s] unmeasured first run: %s%n", t.name(), describe(warm));
                    results.put(t.name(), new ArrayList<>());
                }
                for (int i = 0; i < n; i++) {
                    for (Target t : targets) {
                        Run r = run(program, t, tmp);
                        results.get(t.name()).add(r);
                        console.printf(Locale.ROOT, "[%s] run %d: %s%n", t.name(), i + 1, describe(r));
                    }
                }
            }
            String table = table(results);
            console.println();
            console.print(table);
            List<String> verdicts = verdicts(results);
            verdicts.forEach(v -> console.println("DESIGN §10: " + v));
            notes.forEach(note -> console.println("note: " + note));
            if (out != null) {
                Files.createDirectories(out);
                Files.writeString(out.resolve("results.csv"), csv(results));
                Files.writeString(out.resolve("summary.md"), summary("bench startup", machine + "; " + n
                        + " measured runs per target after one unmeasured.", table, "DESIGN §10", verdicts, notes));
                console.println("bench startup: wrote " + out.resolve("results.csv") + " and " + out.resolve("summary.md"));
            }
            boolean anyFigure = results.values().stream().flatMap(List::stream).anyMatch(r -> !Double.isNaN(r.toMallocMs()));
            return anyFigure ? 0 : 1;
        } finally {
            deleteTree(tmp);
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
            for (String dir : System.getenv().getOrDefault("PATH", "").split(java.io.File.pathSeparator)) {
                if (!dir.isEmpty()) {
                    candidates.add(Path.of(dir, "nvcc"));
                }
            }
            candidates.add(Path.of("/usr/local/cuda/bin/nvcc"));
        }
        return candidates.stream().filter(Files::isExecutable).findFirst().orElse(null);
    }

    static void deleteTree(Path dir) throws IOException {
        try (java.util.stream.Stream<Path> paths = Files.walk(dir)) {
            for (Path p : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    /**
     * The program's environment through GPUsockets: our libcuda.so.1 first and, unless it is an install that
     * finds its own ({@code thisJvm} false), this JVM's runtime and class path for it.
     */
    static Map<String, String> remoteEnv(Path library, String uri, boolean localAnswers, boolean thisJvm) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("LD_LIBRARY_PATH", library.toAbsolutePath().toString());
        env.put("GPUSOCKETS_SERVER", uri);
        if (!localAnswers) {
            env.put("GPUSOCKETS_LOCAL_ANSWERS", "0");
        }
        if (!thisJvm) {
            return env;
        }
        env.put("GPUSOCKETS_JAVA_HOME", System.getProperty("java.home"));
        // absolute: the program runs in a directory of its own
        env.put("GPUSOCKETS_CLASSPATH", Arrays.stream(System.getProperty("java.class.path").split(java.io.File.pathSeparator))
                .map(e -> Path.of(e).toAbsolutePath().toString()).reduce((a, b) -> a + java.io.File.pathSeparator + b).orElse(""));
        return env;
    }

    /** frontend/target/native of the checkout above the working directory, or null. */
    private static Path checkoutLibrary() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            Path lib = p.resolve("frontend/target/native");
            if (Files.isRegularFile(lib.resolve("libcuda.so.1")) && Files.isRegularFile(p.resolve("pom.xml"))) {
                return lib;
            }
        }
        return null;
    }

    /** nvcc -arch=sm_90 -O2 of startup.cu (default static cudart). */
    private Path build(Path compiler, Path tmp) throws IOException, InterruptedException {
        Path src = tmp.resolve("startup.cu");
        try (InputStream in = StartupBench.class.getResourceAsStream("startup.cu")) {
            Files.write(src, in.readAllBytes());
        }
        Path exe = tmp.resolve("startup");
        Process p = new ProcessBuilder(compiler.toString(), "-arch=sm_90", "-O2", "-o", exe.toString(), src.toString())
                .redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException("nvcc failed on startup.cu:\n" + log);
        }
        return exe;
    }

    /** One run of the program: what it printed about itself, and its wall time as seen from here. */
    private static Run run(Path program, Target t, Path dir) throws IOException, InterruptedException {
        ProgramRuns.Run r = ProgramRuns.run(List.of(program.toString()), t.env(), dir, RUN_TIMEOUT_SECONDS, true);
        return parse(r.stdout(), r.wallMs(), r.exit());
    }

    /** A summary.md: the title, a line on how it was measured, the table, then each verdict and note as a bullet. */
    static String summary(String title, String how, String table, String verdictLabel, List<String> verdicts, List<String> notes) {
        return "# " + title + "\n\n" + how + "\n\n" + table + "\n"
                + String.join("\n", verdicts.stream().map(v -> "- " + verdictLabel + ": " + v).toList()) + "\n"
                + String.join("\n", notes.stream().map(v -> "- note: " + v).toList()) + "\n";
    }

    static Run parse(String stdout, double wallMs, int exit) {
        Matcher first = FIRST_LINE.matcher(stdout);
        Matcher second = SECOND_LINE.matcher(stdout);
        boolean f = first.find(), s = second.find();
        return new Run(f ? Double.parseDouble(first.group(1)) : Double.NaN, f ? first.group(2) : "(none printed)",
                f ? Double.parseDouble(first.group(3)) : Double.NaN, s ? second.group(1) : "(not reached)", wallMs, exit);
    }

    private static String describe(Run r) {
        return String.format(Locale.ROOT, "main→cudaMalloc %.1f ms (%s), exec→cudaMalloc %.1f ms, vector add %s, wall %.0f ms, exit %d",
                r.toMallocMs(), r.malloc(), r.sinceExecMs(), r.vectorAdd(), r.wallMs(), r.exit());
    }

    static double median(double[] v) {
        double[] s = Arrays.stream(v).filter(x -> !Double.isNaN(x)).sorted().toArray();
        if (s.length == 0) {
            return Double.NaN;
        }
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static double[] column(List<Run> runs, java.util.function.ToDoubleFunction<Run> f) {
        return runs.stream().mapToDouble(f).toArray();
    }

    /** The cudaMalloc results seen, most frequent first. */
    private static String mallocResults(List<Run> runs) {
        Map<String, Long> counts = new LinkedHashMap<>();
        runs.forEach(r -> counts.merge(r.malloc() + (r.vectorAdd().equals("ok") ? "" : ", vector add " + r.vectorAdd()), 1L, Long::sum));
        return counts.entrySet().stream().sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
                .map(e -> e.getKey() + (counts.size() > 1 ? " ×" + e.getValue() : "")).reduce((a, b) -> a + "; " + b).orElse("");
    }

    private static String table(Map<String, List<Run>> results) {
        StringBuilder b = new StringBuilder();
        b.append("| target | main→cudaMalloc median ms | min ms | exec→cudaMalloc median ms | wall median ms | over native (median) | cudaMalloc returned |\n");
        b.append("|---|---|---|---|---|---|---|\n");
        double nativeMedian = results.containsKey(NATIVE) ? median(column(results.get(NATIVE), Run::toMallocMs)) : Double.NaN;
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            double[] ms = column(e.getValue(), Run::toMallocMs);
            double med = median(ms);
            double min = Arrays.stream(ms).filter(x -> !Double.isNaN(x)).min().orElse(Double.NaN);
            b.append(String.format(Locale.ROOT, "| %s | %.1f | %.1f | %.1f | %.0f | %s | %s |%n", e.getKey(), med, min,
                    median(column(e.getValue(), Run::sinceExecMs)), median(column(e.getValue(), Run::wallMs)),
                    e.getKey().equals(NATIVE) || Double.isNaN(nativeMedian) ? "" : String.format(Locale.ROOT, "+%.1f ms", med - nativeMedian),
                    mallocResults(e.getValue())));
        }
        return b.toString();
    }

    private static List<String> verdicts(Map<String, List<Run>> results) {
        List<String> v = new ArrayList<>();
        if (!results.containsKey(NATIVE)) {
            return v;
        }
        double nativeMedian = median(column(results.get(NATIVE), Run::toMallocMs));
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            if (e.getKey().equals(NATIVE) || e.getKey().endsWith("-no-local-answers")) {
                continue;
            }
            double over = median(column(e.getValue(), Run::toMallocMs)) - nativeMedian;
            v.add(String.format(Locale.ROOT, "%s start-up to first cudaMalloc ≤ native + %.0f ms: +%.1f ms, %s", e.getKey(),
                    TARGET_OVER_NATIVE_MS, over, over <= TARGET_OVER_NATIVE_MS ? "met" : "NOT MET"));
        }
        return v;
    }

    private static String csv(Map<String, List<Run>> results) {
        StringBuilder b = new StringBuilder(ResultTable.CSV_HEADER).append('\n');
        double nativeMedian = results.containsKey(NATIVE) ? median(column(results.get(NATIVE), Run::toMallocMs)) : Double.NaN;
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            double med = median(column(e.getValue(), Run::toMallocMs));
            boolean ratio = !e.getKey().equals(NATIVE) && !Double.isNaN(nativeMedian);
            b.append(String.format(Locale.ROOT, "%s,startup,main-to-malloc-median,%.3f,ms,%s,%s%n", e.getKey(), med,
                    ratio ? NATIVE + "/startup" : "", ratio ? String.format(Locale.ROOT, "%.4f", med / nativeMedian) : ""));
            b.append(String.format(Locale.ROOT, "%s,startup,exec-to-malloc-median,%.3f,ms,,%n", e.getKey(),
                    median(column(e.getValue(), Run::sinceExecMs))));
            b.append(String.format(Locale.ROOT, "%s,startup,wall-median,%.3f,ms,,%n", e.getKey(),
                    median(column(e.getValue(), Run::wallMs))));
        }
        return b.toString();
    }
}
