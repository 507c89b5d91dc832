package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.driver.NativeLibrary;
import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.markers.SeriesMarkers;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench copies} (issue 26 item 2): small and medium host↔device copies (4 KiB to 1 MiB by default) as a C
 * program makes them, through GPUsockets' libcuda.so.1 against an in-process backend over each transport, natively
 * where the device is the real GPU, and the same copies made by this JVM straight into the backend's driver
 * ({@code in-process}: with the emulated device, its device memory with no frontend, transport or backend in between),
 * side by side in one run. The program ({@code copies.c}, built here by the C compiler against cuda.h) copies HtoD and
 * DtoH, from pageable (malloc) and pinned (cuMemAllocHost) memory, synchronously and asynchronously (a batch on one
 * stream, then one cuStreamSynchronize), each case timed over a batch after a few untimed copies (the mean, which the
 * ratios use; synchronous copies are also timed one by one, and their median is shown as p50), with, as the floor of
 * a call that moves no data, cuCtxSynchronize with nothing pending; the in-process copies
 * follow the same steps. Rounds are interleaved (every target once, then again), and each case's figure is the median
 * over the rounds. The ratio of each target is its throughput over the reference's: native where there is a native
 * column, else in-process; issue 26 asks ≥ 0.8 over ring and ≥ 0.5 over tcp and unix against native.
 */
@Command(name = "bench copies", mixinStandardHelpOptions = true,
        description = "Small and medium copies through libcuda.so.1 (remote), natively and in-process, side by side.")
public final class CopiesBench implements Callable<Integer> {
    static final String NATIVE = "native";
    static final String IN_PROCESS = "in-process";
    /** Issue 26: copies' throughput against native, at least this over ring and {@link #TARGET_OTHER} over tcp and unix. */
    static final double TARGET_RING = 0.8;
    static final double TARGET_OTHER = 0.5;
    private static final Pattern CALL = Pattern.compile("^call ctx-synchronize reps=(\\d+) us=([0-9.]+)(?: p50=([0-9.]+))?$",
            Pattern.MULTILINE);
    private static final Pattern LINE = Pattern.compile("^copy (htod|dtoh) (pageable|pinned) (sync|async) (\\d+) reps=(\\d+) us=([0-9.]+)(?: p50=([0-9.]+))?$",
            Pattern.MULTILINE);
    private static final int RUN_TIMEOUT_SECONDS = 300;
    private static final int WARM = 3;
    private static final int CUDA_ERROR_NOT_SUPPORTED = 801;

    @Option(names = "--sizes", split = ",", paramLabel = "KIB,...", defaultValue = "4,16,64,256,1024",
            description = "Copy sizes in KiB. Default: ${DEFAULT-VALUE}.")
    List<Long> sizesKib;

    @Option(names = "--rounds", paramLabel = "N", defaultValue = "3", description = "Interleaved rounds (the median is kept). Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--budget", paramLabel = "MIB", defaultValue = "16",
            description = "Bytes per case and round, in MiB: copies = this / size, within 3 and --max-reps. Default: ${DEFAULT-VALUE}.")
    long budgetMib;

    @Option(names = "--max-reps", paramLabel = "N", defaultValue = "2000", description = "Most copies per case. Default: ${DEFAULT-VALUE}.")
    int maxReps;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "1000",
            description = "Untimed copies of the first size in each direction, memory and mode before the first case. Default: ${DEFAULT-VALUE}.")
    int warmup;

    @Option(names = "--quick", description = "1 round, 4 MiB per case, at most 500 copies, 200 warm-up copies (a smoke run).")
    boolean quick;

    @Option(names = "--transports", split = ",", paramLabel = "LIST", defaultValue = "unix,tcp,ring",
            description = "Transports to run the program through. Default: ${DEFAULT-VALUE}.")
    List<String> transports;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver of the in-process backend; with the real one the program also runs natively. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "The real libcuda.so.1 (backend and native runs; default: the system's).")
    String libcuda;

    @Option(names = "--library-dir", paramLabel = "DIR",
            description = "Where GPUsockets' libcuda.so.1 is (default: frontend/target/native of the checkout above the working directory).")
    Path libraryDir;

    @Option(names = "--cc", paramLabel = "PATH", defaultValue = "gcc", description = "The C compiler. Default: ${DEFAULT-VALUE}.")
    String cc;

    @Option(names = "--cuda-include", paramLabel = "DIR", description = "Folder of cuda.h (default: $CUDA_INCLUDE, else /usr/local/cuda/include).")
    Path cudaInclude;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/results.csv, DIR/summary.md and the plots.")
    Path out;

    private final PrintStream console = System.out;

    /**
     * One copy case: direction (htod, dtoh), memory (pageable, pinned), mode (sync, async), bytes per copy. Its figure
     * is the mean µs per copy over a batch; {@link #p50()} is the key of the median of its copies timed one by one
     * (synchronous copies and the floor only).
     */
    record Case(String direction, String memory, String mode, long bytes) implements Comparable<Case> {
        private static final String P50 = "/p50";

        /** The key of this case's median figure. */
        Case p50() {
            return new Case(direction, memory, mode + P50, bytes);
        }

        /** Whether this is the key of a median figure. */
        boolean isP50() {
            return mode.endsWith(P50);
        }

        /** As results.csv names the workload: copy-htod-pageable-sync-4KiB. */
        String workload() {
            return bytes == 0 ? direction + "-" + memory : "copy-" + direction + "-" + memory + "-" + mode + "-" + size(bytes);
        }

        @Override
        public int compareTo(Case o) {
            int c = Boolean.compare(o.bytes == 0, bytes == 0); // the floor first
            c = c != 0 ? c : direction.compareTo(o.direction) * -1; // htod first
            c = c != 0 ? c : memory.compareTo(o.memory);
            c = c != 0 ? c : o.baseMode().compareTo(baseMode()); // sync first
            c = c != 0 ? c : Long.compare(bytes, o.bytes);
            return c != 0 ? c : Boolean.compare(isP50(), o.isP50()); // a median after its mean
        }

        private String baseMode() {
            return isP50() ? mode.substring(0, mode.length() - P50.length()) : mode;
        }
    }

    /** cuCtxSynchronize with nothing pending: a call that moves no data, the floor of every copy's time. */
    static final Case FLOOR = new Case("call", "ctx-synchronize", "sync", 0);

    private static final java.util.logging.Logger BACKEND_LOG = java.util.logging.Logger.getLogger("gpusockets");

    public static void main(String[] args) {
        System.setProperty("java.util.logging.SimpleFormatter.format", "%1$tT %4$s %3$s: %5$s%6$s%n");
        BACKEND_LOG.setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new CopiesBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    /** The sizes in bytes, as given (KiB) in order. */
    long[] sizes() {
        return sizesKib.stream().mapToLong(k -> {
            if (k <= 0) {
                throw new CommandLine.ParameterException(new CommandLine(this), "--sizes: " + k + " KiB is not a positive size");
            }
            return k << 10;
        }).toArray();
    }

    /** Copies per case: budget / size within 3..maxReps, as copies.c counts them. */
    static long reps(long bytes, long budget, int maxReps) {
        return Math.max(3, Math.min(maxReps, budget / bytes));
    }

    @Override
    public Integer call() throws Exception {
        long[] sizes = sizes();
        int n = quick ? 1 : rounds;
        long budget = (quick ? 4 : budgetMib) << 20;
        int most = quick ? Math.min(500, maxReps) : maxReps;
        int warm = quick ? Math.min(200, warmup) : warmup;
        Path include = cudaInclude != null ? cudaInclude
                : Path.of(System.getenv().getOrDefault("CUDA_INCLUDE", "/usr/local/cuda/include"));
        if (!Files.isRegularFile(include.resolve("cuda.h"))) {
            console.println("bench copies: no cuda.h in " + include + " (--cuda-include, CUDA_INCLUDE)");
            return 2;
        }
        Path library = ProgramRuns.library(libraryDir);
        if (library == null) {
            console.println("bench copies: GPUsockets' libcuda.so.1 not found (--library-dir, or build frontend/ in a checkout)");
            return 2;
        }
        Path tmp = Files.createTempDirectory("gpusockets-copies");
        try {
            Path program = build(include, library, tmp);
            DriverHost host = device.open(libcuda);
            boolean nativeDevice = host.driver() instanceof NativeCudaDriver;
            String machine = Runtime.getRuntime().availableProcessors() + " cores, " + host.description();
            console.println("bench copies: " + machine);
            List<String> notes = new ArrayList<>();
            List<String> args = new ArrayList<>(List.of(program.toString(), Long.toString(budget), Integer.toString(most),
                    Integer.toString(warm)));
            for (long s : sizes) {
                args.add(Long.toString(s));
            }
            Map<String, Map<String, String>> targets = new LinkedHashMap<>(); // name -> environment (in-process: none)
            if (nativeDevice) {
                targets.put(NATIVE, ProgramRuns.nativeEnv(libcuda != null ? libcuda : NativeLibrary.path()));
            } else {
                notes.add("no GPU (emulated device): ratios are to the same copies into emulated device memory in-process,"
                        + " not to a GPU; issue 26's targets are against native on the GPU");
            }
            targets.put(IN_PROCESS, null);
            Map<String, Map<Case, List<Double>>> figures = new LinkedHashMap<>();
            boolean failed = false;
            try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
                for (String scheme : transports) {
                    String uri = SelfHosting.listenOrNote(backend, scheme, tmp, "copies-" + scheme, notes);
                    if (uri == null) {
                        continue;
                    }
                    targets.put(scheme, ProgramRuns.remoteEnv(library, uri));
                }
                targets.keySet().forEach(t -> figures.put(t, new TreeMap<>()));
                for (int round = 1; round <= n; round++) {
                    for (Map.Entry<String, Map<String, String>> t : targets.entrySet()) {
                        long t0 = System.nanoTime();
                        Map<Case, Double> got;
                        try {
                            if (t.getValue() == null) {
                                got = inProcess(host.driver(), sizes, budget, most, warm);
                            } else {
                                ProgramRuns.Run r = ProgramRuns.run(args, t.getValue(), tmp, RUN_TIMEOUT_SECONDS);
                                got = parse(r.stdout());
                                if (r.exit() != 0 || !r.stdout().contains("copies done")) {
                                    failed = true;
                                    console.printf(Locale.ROOT, "[%s] round %d: exit %d%n%s%n", t.getKey(), round, r.exit(),
                                            ProgramRuns.tail(r.stderr(), 15));
                                }
                            }
                        } catch (RuntimeException e) {
                            failed = true;
                            console.printf(Locale.ROOT, "[%s] round %d failed: %s%n", t.getKey(), round, e);
                            continue;
                        }
                        got.forEach((c, us) -> figures.get(t.getKey()).computeIfAbsent(c, k -> new ArrayList<>()).add(us));
                        console.printf(Locale.ROOT, "[%s] round %d: %d cases (%.1f s)%n", t.getKey(), round, got.size(),
                                (System.nanoTime() - t0) / 1e9);
                    }
                }
            }
            Map<String, Map<Case, Double>> medians = medians(figures);
            String reference = medians.containsKey(NATIVE) ? NATIVE : IN_PROCESS;
            String table = table(medians, reference);
            console.println();
            console.print(table);
            List<String> verdicts = verdicts(medians);
            verdicts.forEach(v -> console.println("issue 26: " + v));
            notes.forEach(note -> console.println("note: " + note));
            if (out != null) {
                Files.createDirectories(out);
                Files.writeString(out.resolve("results.csv"), csv(medians, reference));
                Files.writeString(out.resolve("summary.md"), "# bench copies\n\n" + machine + "; " + n + " interleaved round(s), "
                        + (budget >> 20) + " MiB per case and round (at most " + most + " copies); µs per copy (median) and GB/s, ratio ="
                        + " throughput / " + reference + "'s.\n\n" + table + "\n"
                        + String.join("\n", verdicts.stream().map(v -> "- issue 26: " + v).toList()) + "\n"
                        + String.join("\n", notes.stream().map(v -> "- note: " + v).toList()) + "\n");
                for (String direction : List.of("htod", "dtoh")) {
                    Plots.png(out.resolve("copies-" + direction + ".png"), () -> plot(medians, direction));
                }
                console.println("bench copies: wrote " + out.resolve("results.csv") + ", summary.md and the plots");
            }
            return failed ? 1 : 0;
        } finally {
            ProgramRuns.deleteTree(tmp);
        }
    }

    /** cc -O2 of copies.c against cuda.h, linked to libcuda.so.1 by name (the loader picks ours or the real one). */
    private Path build(Path include, Path library, Path tmp) throws IOException, InterruptedException {
        Path src = tmp.resolve("copies.c");
        try (InputStream in = CopiesBench.class.getResourceAsStream("copies.c")) {
            Files.write(src, in.readAllBytes());
        }
        Path exe = tmp.resolve("copies");
        Process p = new ProcessBuilder(cc, "-std=c11", "-O2", "-Wall", "-Werror", "-I" + include, "-o", exe.toString(), src.toString(),
                "-L" + library, "-l:libcuda.so.1").redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException(cc + " failed on copies.c:\n" + log);
        }
        return exe;
    }

    /**
     * The cases copies.c printed, µs per copy, and its cuCtxSynchronize floor as {@link #FLOOR} (a copy of no bytes in
     * the table: {@code call ctx-synchronize}); where it printed a median too, that under the case's {@link Case#p50()}.
     */
    static Map<Case, Double> parse(String stdout) {
        Map<Case, Double> out = new TreeMap<>();
        Matcher c = CALL.matcher(stdout);
        if (c.find()) {
            out.put(FLOOR, Double.parseDouble(c.group(2)));
            if (c.group(3) != null) {
                out.put(FLOOR.p50(), Double.parseDouble(c.group(3)));
            }
        }
        Matcher m = LINE.matcher(stdout);
        while (m.find()) {
            Case k = new Case(m.group(1), m.group(2), m.group(3), Long.parseLong(m.group(4)));
            out.put(k, Double.parseDouble(m.group(6)));
            if (m.group(7) != null) {
                out.put(k.p50(), Double.parseDouble(m.group(7)));
            }
        }
        return out;
    }

    /**
     * The copies of copies.c made by this thread straight into {@code cu} (the backend's driver), in a context of
     * its own: the same cases, order, warm-up and batches. Pinned memory is {@code cuMemAllocHost} of that driver, or,
     * where it has none (the emulated device answers CUDA_ERROR_NOT_SUPPORTED), page-aligned memory of this JVM.
     */
    static Map<Case, Double> inProcess(CudaDriver cu, long[] sizes, long budget, int maxReps, int warmup) {
        long max = java.util.Arrays.stream(sizes).max().orElseThrow();
        Map<Case, Double> out = new TreeMap<>();
        Cu.check(cu.cuInit(0), "cuInit");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment word = arena.allocate(JAVA_LONG);
            // a context of its own: the emulated device has no primary contexts outside a backend's sessions
            Cu.check(cu.cuCtxCreate(word, MemorySegment.NULL, 0, 0), "cuCtxCreate");
            long context = word.get(JAVA_LONG, 0);
            try {
                inContext(cu, sizes, budget, maxReps, warmup, max, arena, out);
            } finally {
                cu.cuCtxDestroy(context);
            }
        }
        return out;
    }

    private static void inContext(CudaDriver cu, long[] sizes, long budget, int maxReps, int warmup, long max, Arena arena,
            Map<Case, Double> out) {
        {
            MemorySegment word = arena.allocate(JAVA_LONG);
            Cu.check(cu.cuStreamCreate(word, 1), "cuStreamCreate"); // CU_STREAM_NON_BLOCKING
            long stream = word.get(JAVA_LONG, 0);
            Cu.check(cu.cuMemAlloc(word, max), "cuMemAlloc");
            long dev = word.get(JAVA_LONG, 0);
            MemorySegment[] pageable = {arena.allocate(max, 64), arena.allocate(max, 64)};
            MemorySegment[] pinned = new MemorySegment[2];
            boolean driverHost = true;
            for (int k = 0; k < 2; k++) {
                MemorySegment pp = arena.allocate(ADDRESS);
                int r = cu.cuMemAllocHost(pp, max);
                if (r == CUDA_ERROR_NOT_SUPPORTED) {
                    // the emulated device has no host allocations of its own; its copies read and write host memory alike
                    driverHost = false;
                    pinned[k] = arena.allocate(max, 4096);
                } else {
                    Cu.check(r, "cuMemAllocHost");
                    pinned[k] = pp.get(ADDRESS, 0).reinterpret(max);
                }
            }
            try {
                for (long i = 0; i < max; i++) {
                    byte v = (byte) (i * 131 + 7);
                    pageable[0].set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, v);
                    pinned[0].set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, v);
                }
                for (int i = 0; i < warmup; i++) {
                    for (int k = 0; k < 8; k++) {
                        one(cu, (k & 1) != 0, (k & 2) != 0, ((k & 4) != 0 ? pinned : pageable)[1], dev, sizes[0], stream);
                    }
                }
                Cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
                for (int i = 0; i < WARM + warmup; i++) {
                    Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                }
                double[] laps = new double[maxReps];
                long t0 = System.nanoTime(), t = t0;
                for (int i = 0; i < maxReps; i++) {
                    Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                    long now = System.nanoTime();
                    laps[i] = (now - t) / 1e3;
                    t = now;
                }
                out.put(FLOOR, (System.nanoTime() - t0) / 1e3 / maxReps);
                out.put(FLOOR.p50(), ProgramRuns.median(laps));
                for (long bytes : sizes) {
                    long reps = reps(bytes, budget, maxReps);
                    for (String memory : List.of("pageable", "pinned")) {
                        MemorySegment[] m = memory.equals("pinned") ? pinned : pageable;
                        for (String mode : List.of("sync", "async")) {
                            boolean async = mode.equals("async");
                            put(out, new Case("htod", memory, mode, bytes), batch(cu, true, async, m[0], dev, bytes, reps, stream));
                            m[1].asSlice(0, bytes).fill((byte) 0);
                            put(out, new Case("dtoh", memory, mode, bytes), batch(cu, false, async, m[1], dev, bytes, reps, stream));
                            long at = m[0].asSlice(0, bytes).mismatch(m[1].asSlice(0, bytes));
                            if (at >= 0) {
                                throw new IllegalStateException("in-process copies: " + bytes + " bytes, " + memory + " " + mode + ": byte "
                                        + at + " came back different");
                            }
                        }
                    }
                }
            } finally {
                for (MemorySegment p : pinned) {
                    if (driverHost) {
                        cu.cuMemFreeHost(p);
                    }
                }
                cu.cuMemFree(dev);
                cu.cuStreamDestroy(stream);
            }
        }
    }

    private static void put(Map<Case, Double> out, Case c, double[] meanAndMedian) {
        out.put(c, meanAndMedian[0]);
        if (!Double.isNaN(meanAndMedian[1])) {
            out.put(c.p50(), meanAndMedian[1]);
        }
    }

    /** µs per copy over the batch, and the median of the copies timed one by one (NaN for async ones). */
    private static double[] batch(CudaDriver cu, boolean htod, boolean async, MemorySegment host, long dev, long bytes, long reps, long stream) {
        for (int i = 0; i < WARM; i++) {
            one(cu, htod, async, host, dev, bytes, stream);
        }
        if (async) {
            Cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
        }
        double[] laps = new double[(int) reps];
        long t0 = System.nanoTime(), t = t0;
        for (int i = 0; i < reps; i++) {
            one(cu, htod, async, host, dev, bytes, stream);
            if (!async) {
                long now = System.nanoTime();
                laps[i] = (now - t) / 1e3;
                t = now;
            }
        }
        if (async) {
            Cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
        }
        return new double[] {(System.nanoTime() - t0) / 1e3 / reps, async ? Double.NaN : ProgramRuns.median(laps)};
    }

    private static void one(CudaDriver cu, boolean htod, boolean async, MemorySegment host, long dev, long bytes, long stream) {
        int r;
        if (htod) {
            r = async ? cu.cuMemcpyHtoDAsync(dev, host, bytes, stream) : cu.cuMemcpyHtoD(dev, host, bytes);
        } else {
            r = async ? cu.cuMemcpyDtoHAsync(host, dev, bytes, stream) : cu.cuMemcpyDtoH(host, dev, bytes);
        }
        Cu.check(r, htod ? "cuMemcpyHtoD" : "cuMemcpyDtoH");
    }

    /** Per target and case, the median of its rounds' µs per copy. */
    static Map<String, Map<Case, Double>> medians(Map<String, Map<Case, List<Double>>> figures) {
        Map<String, Map<Case, Double>> out = new LinkedHashMap<>();
        figures.forEach((t, cases) -> {
            Map<Case, Double> m = new TreeMap<>();
            cases.forEach((c, v) -> m.put(c, ProgramRuns.median(v.stream().mapToDouble(Double::doubleValue).toArray())));
            out.put(t, m);
        });
        return out;
    }

    /** GB/s of a copy of {@code bytes} taking {@code us}. */
    static double gbs(long bytes, double us) {
        return bytes / us / 1e3;
    }

    /** 4096 → 4KiB, 1048576 → 1MiB, otherwise bytes → 100B. */
    static String size(long bytes) {
        if (bytes >= 1 << 20 && bytes % (1 << 20) == 0) {
            return (bytes >> 20) + "MiB";
        }
        return bytes >= 1024 && bytes % 1024 == 0 ? (bytes >> 10) + "KiB" : bytes + "B";
    }

    /**
     * One row per case, a column per target: µs per copy and GB/s, and for every target but the reference its
     * throughput over the reference's ({@code ×0.42}).
     */
    static String table(Map<String, Map<Case, Double>> medians, String reference) {
        List<String> targets = new ArrayList<>(medians.keySet());
        StringBuilder b = new StringBuilder("| copy | size |");
        targets.forEach(t -> b.append(' ').append(t).append(t.equals(reference) ? "" : " (× " + reference + ")").append(" |"));
        b.append('\n').append("|---|---|").append("---|".repeat(targets.size())).append('\n');
        java.util.SortedSet<Case> cases = new java.util.TreeSet<>();
        medians.values().forEach(m -> m.keySet().stream().filter(c -> !c.isP50()).forEach(cases::add));
        Map<Case, Double> ref = medians.getOrDefault(reference, Map.of());
        for (Case c : cases) {
            b.append("| ").append(c.direction()).append(' ').append(c.memory()).append(c.bytes() == 0 ? "" : " " + c.mode())
                    .append(" | ").append(c.bytes() == 0 ? "-" : size(c.bytes())).append(" |");
            for (String t : targets) {
                Double us = medians.get(t).get(c);
                if (us == null || us.isNaN()) {
                    b.append(" - |");
                    continue;
                }
                b.append(String.format(Locale.ROOT, " %.1f µs", us));
                Double p50 = medians.get(t).get(c.p50());
                if (p50 != null && !p50.isNaN()) {
                    b.append(String.format(Locale.ROOT, " (p50 %.1f)", p50));
                }
                if (c.bytes() > 0) {
                    b.append(String.format(Locale.ROOT, " %.2f GB/s", gbs(c.bytes(), us)));
                }
                Double r = ref.get(c);
                if (!t.equals(reference) && r != null && !r.isNaN()) {
                    b.append(String.format(Locale.ROOT, " ×%.2f", r / us));
                }
                b.append(" |");
            }
            b.append('\n');
        }
        return b.toString();
    }

    /**
     * Issue 26's targets per transport, where there is a native column: the lowest throughput ratio over all cases
     * against {@link #TARGET_RING} (ring) or {@link #TARGET_OTHER} (the others), and the case it is in.
     */
    static List<String> verdicts(Map<String, Map<Case, Double>> medians) {
        List<String> v = new ArrayList<>();
        Map<Case, Double> ref = medians.get(NATIVE);
        if (ref == null) {
            return v;
        }
        for (Map.Entry<String, Map<Case, Double>> e : medians.entrySet()) {
            if (e.getKey().equals(NATIVE) || e.getKey().equals(IN_PROCESS)) {
                continue;
            }
            double target = e.getKey().equals("ring") ? TARGET_RING : TARGET_OTHER;
            double worst = Double.POSITIVE_INFINITY;
            Case at = null;
            for (Map.Entry<Case, Double> c : e.getValue().entrySet()) {
                Double r = ref.get(c.getKey());
                if (c.getKey().bytes() > 0 && !c.getKey().isP50() && r != null && !r.isNaN() && !c.getValue().isNaN() && r / c.getValue() < worst) {
                    worst = r / c.getValue();
                    at = c.getKey();
                }
            }
            if (at != null) {
                v.add(String.format(Locale.ROOT, "%s copies ≥ %.1f× native: lowest ×%.2f (%s), %s", e.getKey(), target, worst,
                        at.workload(), worst >= target ? "met" : "NOT MET"));
            }
        }
        return v;
    }

    static String csv(Map<String, Map<Case, Double>> medians, String reference) {
        StringBuilder b = new StringBuilder(ResultTable.CSV_HEADER).append('\n');
        Map<Case, Double> ref = medians.getOrDefault(reference, Map.of());
        medians.forEach((t, cases) -> cases.forEach((c, us) -> {
            if (c.isP50()) {
                return;
            }
            Double r = ref.get(c);
            boolean ratio = !t.equals(reference) && r != null && !r.isNaN();
            b.append(String.format(Locale.ROOT, "%s,%s,%s,%.3f,us,%s,%s%n", t, c.workload(), c.bytes() == 0 ? "per-call" : "per-copy", us,
                    ratio ? reference + "/" + c.workload() : "", ratio ? String.format(Locale.ROOT, "%.4f", us / r) : ""));
            Double p50 = cases.get(c.p50());
            if (p50 != null && !p50.isNaN()) {
                b.append(String.format(Locale.ROOT, "%s,%s,%s,%.3f,us,,%n", t, c.workload(), c.bytes() == 0 ? "per-call-p50" : "per-copy-p50", p50));
            }
            if (c.bytes() == 0) {
                return;
            }
            b.append(String.format(Locale.ROOT, "%s,%s,throughput,%.4f,GB/s,%s,%s%n", t, c.workload(), gbs(c.bytes(), us),
                    ratio ? reference + "/" + c.workload() : "", ratio ? String.format(Locale.ROOT, "%.4f", r / us) : ""));
        }));
        return b.toString();
    }

    /** GB/s against bytes per copy (log x) for one direction: a series per target, memory and mode. */
    private static XYChart plot(Map<String, Map<Case, Double>> medians, String direction) {
        XYChart chart = new XYChartBuilder().width(900).height(600).title("copies " + direction + " (bench copies)")
                .xAxisTitle("bytes per copy").yAxisTitle("GB/s").build();
        chart.getStyler().setXAxisLogarithmic(true);
        boolean any = false;
        for (Map.Entry<String, Map<Case, Double>> t : medians.entrySet()) {
            for (String memory : List.of("pageable", "pinned")) {
                for (String mode : List.of("sync", "async")) {
                    List<Double> x = new ArrayList<>(), y = new ArrayList<>();
                    t.getValue().forEach((c, us) -> {
                        if (c.direction().equals(direction) && c.memory().equals(memory) && c.mode().equals(mode) && !us.isNaN()) {
                            x.add((double) c.bytes());
                            y.add(gbs(c.bytes(), us));
                        }
                    });
                    if (!x.isEmpty()) {
                        chart.addSeries(t.getKey() + " " + memory + " " + mode, x, y).setMarker(SeriesMarkers.CIRCLE);
                        any = true;
                    }
                }
            }
        }
        return any ? chart : null;
    }
}
