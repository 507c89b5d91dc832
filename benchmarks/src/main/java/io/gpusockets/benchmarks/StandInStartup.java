package io.gpusockets.benchmarks;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;

/**
 * {@code bench startup --stand-in}: the frontend's own start and resident memory, with no GPU. One
 * small driver-API program ({@code startup_driver.c}, built by gcc, no CUDA toolkit) runs against a
 * stand-in libcuda.so.1 that answers at once ({@code frontend/native/tools/standin.c}), against
 * GPUsockets' libcuda.so.1 over each transport to a backend on the emulated device in this process,
 * and against GPUsockets' with no backend (a unix socket nobody listens on); rounds interleave the
 * targets after one unmeasured run of each. The program times its first CUDA call (cuInit, entry
 * to return) itself and prints its VmRSS and VmHWM at the end of main; the bench times its wall.
 * Three figures against issue 26's targets: the frontend's own start (first call, ours minus the
 * stand-in's, medians) ≤ {@value #START_TARGET_MS} ms; the no-backend program's wall over the
 * stand-in's ≤ {@value #NO_BACKEND_TARGET_MS} ms; VmHWM over the stand-in's ≤ {@value #RSS_TARGET_MB} MB.
 */
final class StandInStartup {
    static final String STAND_IN = "stand-in";
    static final String NO_BACKEND = "no-backend";
    static final double START_TARGET_MS = 50;
    static final double NO_BACKEND_TARGET_MS = 50;
    static final double RSS_TARGET_MB = 64;
    private static final int RUN_TIMEOUT_SECONDS = 60;
    private static final Pattern FIRST = Pattern.compile("startup first-call-ms=([0-9.]+) init=(-?\\d+) main-ms=([0-9.]+)");
    private static final Pattern SECOND = Pattern.compile("startup main-to-malloc-ms=([0-9.]+) result=(\\S+) total-ms=([0-9.]+)");
    private static final Pattern MEMORY = Pattern.compile("startup rss-kb=(-?\\d+) hwm-kb=(-?\\d+)(?: cpu-ms=(-?[0-9.]+))?");

    /** One run as the program printed it (NaN / -1 where it printed nothing). */
    record Run(double firstCallMs, int init, double toMallocMs, String result, long rssKb, long hwmKb, double cpuMs, double wallMs, int exit) {
    }

    private final PrintStream console;
    private final int workMs;
    private final boolean earlyStart;

    /** {@code workMs}: the program's own start before its first call; {@code earlyStart}: also each transport early-started. */
    StandInStartup(PrintStream console, int workMs, boolean earlyStart) {
        this.console = console;
        this.workMs = workMs;
        this.earlyStart = earlyStart;
    }

    /** {@code env} with the program's own start added. */
    private Map<String, String> withWork(Map<String, String> env) {
        Map<String, String> m = new LinkedHashMap<>(env);
        if (workMs > 0) {
            m.put("GPUSOCKETS_BENCH_WORK_MS", Integer.toString(workMs));
        }
        return m;
    }

    static Run parse(String stdout, double wallMs, int exit) {
        Matcher f = FIRST.matcher(stdout);
        Matcher s = SECOND.matcher(stdout);
        Matcher m = MEMORY.matcher(stdout);
        boolean hf = f.find(), hs = s.find(), hm = m.find();
        return new Run(hf ? Double.parseDouble(f.group(1)) : Double.NaN, hf ? Integer.parseInt(f.group(2)) : -1,
                hs ? Double.parseDouble(s.group(1)) : Double.NaN, hs ? s.group(2) : hf ? "init=" + f.group(2) : "(none printed)",
                hm ? Long.parseLong(m.group(1)) : -1, hm ? Long.parseLong(m.group(2)) : -1,
                hm && m.group(3) != null && !m.group(3).startsWith("-") ? Double.parseDouble(m.group(3)) : Double.NaN, wallMs, exit);
    }

    /** Runs it all; 0 when every target printed its figures. */
    int run(int n, List<String> transports, Path library, boolean thisJvm, DriverHost host, Path out) throws IOException, InterruptedException {
        Path root = checkoutRoot();
        if (root == null) {
            console.println("bench startup --stand-in: needs a checkout (frontend/native/tools/build-standin.sh) above the working directory");
            return 2;
        }
        Path tmp = Files.createTempDirectory("gpusockets-standin");
        try {
            Path standIn = tmp.resolve("stand-in");
            exec(List.of(root.resolve("frontend/native/tools/build-standin.sh").toString(), standIn.toString()), "build-standin.sh");
            Path program = tmp.resolve("startup_driver");
            Path src = tmp.resolve("startup_driver.c");
            try (InputStream in = StandInStartup.class.getResourceAsStream("startup_driver.c")) {
                Files.write(src, in.readAllBytes());
            }
            exec(List.of("gcc", "-std=c11", "-O2", "-o", program.toString(), src.toString(), "-L" + standIn, "-l:libcuda.so.1"), "gcc");
            String machine = Runtime.getRuntime().availableProcessors() + " cores, " + host.description();
            console.println("bench startup --stand-in: " + machine + (workMs > 0 ? "; the program works " + workMs + " ms before its first call" : ""));
            List<String> notes = new ArrayList<>();
            Map<String, List<Run>> results = new LinkedHashMap<>();
            try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
                List<StartupBench.Target> targets = new ArrayList<>();
                targets.add(new StartupBench.Target(STAND_IN, withWork(Map.of("LD_LIBRARY_PATH", standIn.toString()))));
                for (String scheme : transports) {
                    String uri = SelfHosting.listenOrNote(backend, scheme, tmp, "standin-" + scheme, notes);
                    if (uri == null) {
                        continue;
                    }
                    targets.add(new StartupBench.Target(scheme, withWork(StartupBench.remoteEnv(library, uri, true, thisJvm))));
                    if (earlyStart) {
                        Map<String, String> early = withWork(StartupBench.remoteEnv(library, uri, true, thisJvm));
                        early.put("GPUSOCKETS_EARLY_START", "1");
                        targets.add(new StartupBench.Target(scheme + "-early", early));
                    }
                }
                Map<String, String> none = withWork(StartupBench.remoteEnv(library, "unix://" + tmp.resolve("nobody.sock"), true, thisJvm));
                targets.add(new StartupBench.Target(NO_BACKEND, none));
                for (StartupBench.Target t : targets) {
                    console.printf(Locale.ROOT, "[%s] unmeasured first run: %s%n", t.name(), describe(once(program, t, tmp)));
                    results.put(t.name(), new ArrayList<>());
                }
                for (int i = 0; i < n; i++) {
                    for (StartupBench.Target t : targets) {
                        Run r = once(program, t, tmp);
                        results.get(t.name()).add(r);
                        console.printf(Locale.ROOT, "[%s] run %d: %s%n", t.name(), i + 1, describe(r));
                    }
                }
            }
            String table = table(results);
            List<String> verdicts = verdicts(results);
            console.println();
            console.print(table);
            verdicts.forEach(v -> console.println("issue 26: " + v));
            notes.forEach(v -> console.println("note: " + v));
            if (out != null) {
                Files.createDirectories(out);
                Files.writeString(out.resolve("standin.csv"), csv(results));
                Files.writeString(out.resolve("standin.md"), StartupBench.summary("bench startup --stand-in", machine + "; " + n
                        + " measured runs per target after one unmeasured, interleaved; medians.", table, "issue 26", verdicts, notes));
                Path png = Plots.png(out.resolve("standin.png"), () -> chart(results));
                console.println("bench startup --stand-in: wrote " + out.resolve("standin.csv") + ", " + out.resolve("standin.md")
                        + (png != null ? ", " + png : ""));
            }
            boolean all = results.values().stream().allMatch(rs -> rs.stream().anyMatch(r -> !Double.isNaN(r.firstCallMs())));
            return all ? 0 : 1;
        } finally {
            StartupBench.deleteTree(tmp);
        }
    }

    private static void exec(List<String> command, String what) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException(what + " failed:\n" + log);
        }
    }

    private static Path checkoutRoot() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("frontend/native/tools/build-standin.sh")) && Files.isRegularFile(p.resolve("pom.xml"))) {
                return p;
            }
        }
        return null;
    }

    private static Run once(Path program, StartupBench.Target t, Path dir) throws IOException, InterruptedException {
        ProgramRuns.Run r = ProgramRuns.run(List.of(program.toString()), t.env(), dir, RUN_TIMEOUT_SECONDS, true);
        return parse(r.stdout(), r.wallMs(), r.exit());
    }

    private static String describe(Run r) {
        return String.format(Locale.ROOT, "first call %.1f ms (init %d), main→cuMemAlloc %.1f ms, %s, VmHWM %.1f MB, VmRSS %.1f MB, CPU %.0f ms, wall %.0f ms, exit %d",
                r.firstCallMs(), r.init(), r.toMallocMs(), r.result(), r.hwmKb() / 1024.0, r.rssKb() / 1024.0, r.cpuMs(), r.wallMs(), r.exit());
    }

    static double median(List<Run> runs, ToDoubleFunction<Run> f) {
        return StartupBench.median(runs.stream().mapToDouble(f).toArray());
    }

    private static double mb(long kb) {
        return kb < 0 ? Double.NaN : kb / 1024.0;
    }

    /** Our figure minus the stand-in's, as "+x" text, or "" for the stand-in itself. */
    private static String over(String target, double ours, double standIn) {
        return target.equals(STAND_IN) || Double.isNaN(ours) || Double.isNaN(standIn) ? "" : String.format(Locale.ROOT, "%+.1f", ours - standIn);
    }

    static String table(Map<String, List<Run>> results) {
        List<Run> base = results.get(STAND_IN);
        double baseFirst = median(base, Run::firstCallMs), baseWall = median(base, Run::wallMs);
        double baseHwm = median(base, r -> mb(r.hwmKb())), baseRss = median(base, r -> mb(r.rssKb()));
        double baseCpu = median(base, Run::cpuMs);
        StringBuilder b = new StringBuilder();
        b.append("| target | first call ms | over stand-in ms | main→cuMemAlloc ms | wall ms | over stand-in ms | CPU ms | over stand-in ms"
                + " | VmHWM MB | over stand-in MB | VmRSS MB | over stand-in MB | result |\n");
        b.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            List<Run> rs = e.getValue();
            double first = median(rs, Run::firstCallMs), wall = median(rs, Run::wallMs);
            double hwm = median(rs, r -> mb(r.hwmKb())), rss = median(rs, r -> mb(r.rssKb()));
            double cpu = median(rs, Run::cpuMs);
            Map<String, Long> seen = new LinkedHashMap<>();
            rs.forEach(r -> seen.merge(r.result() + (r.exit() != 0 ? " (exit " + r.exit() + ")" : ""), 1L, Long::sum));
            b.append(String.format(Locale.ROOT, "| %s | %.1f | %s | %.1f | %.0f | %s | %.0f | %s | %.1f | %s | %.1f | %s | %s |%n", e.getKey(),
                    first, over(e.getKey(), first, baseFirst), median(rs, Run::toMallocMs), wall, over(e.getKey(), wall, baseWall),
                    cpu, over(e.getKey(), cpu, baseCpu), hwm, over(e.getKey(), hwm, baseHwm), rss, over(e.getKey(), rss, baseRss),
                    seen.entrySet().stream().map(x -> x.getKey() + (seen.size() > 1 ? " ×" + x.getValue() : "")).reduce((x, y) -> x + "; " + y).orElse("")));
        }
        return b.toString();
    }

    static List<String> verdicts(Map<String, List<Run>> results) {
        List<Run> base = results.get(STAND_IN);
        double baseFirst = median(base, Run::firstCallMs), baseWall = median(base, Run::wallMs);
        double baseHwm = median(base, r -> mb(r.hwmKb()));
        List<String> v = new ArrayList<>();
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            String name = e.getKey();
            if (name.equals(STAND_IN)) {
                continue;
            }
            if (name.equals(NO_BACKEND)) {
                double over = median(e.getValue(), Run::wallMs) - baseWall;
                v.add(String.format(Locale.ROOT, "a program with no backend, wall over the stand-in's ≤ %.0f ms: %+.1f ms, %s",
                        NO_BACKEND_TARGET_MS, over, over <= NO_BACKEND_TARGET_MS ? "met" : "NOT MET"));
                continue;
            }
            double start = median(e.getValue(), Run::firstCallMs) - baseFirst;
            v.add(String.format(Locale.ROOT, "%s frontend's own start (first call over the stand-in's) ≤ %.0f ms: %+.1f ms, %s",
                    name, START_TARGET_MS, start, start <= START_TARGET_MS ? "met" : "NOT MET"));
            double rss = median(e.getValue(), r -> mb(r.hwmKb())) - baseHwm;
            v.add(String.format(Locale.ROOT, "%s client VmHWM over the stand-in's ≤ %.0f MB: %+.1f MB, %s",
                    name, RSS_TARGET_MB, rss, rss <= RSS_TARGET_MB ? "met" : "NOT MET"));
        }
        return v;
    }

    static String csv(Map<String, List<Run>> results) {
        List<Run> base = results.get(STAND_IN);
        StringBuilder b = new StringBuilder(ResultTable.CSV_HEADER).append('\n');
        for (Map.Entry<String, List<Run>> e : results.entrySet()) {
            boolean ratio = !e.getKey().equals(STAND_IN);
            for (Object[] m : new Object[][] {{"first-call-median", "ms", (ToDoubleFunction<Run>) Run::firstCallMs},
                    {"wall-median", "ms", (ToDoubleFunction<Run>) Run::wallMs},
                    {"cpu-median", "ms", (ToDoubleFunction<Run>) Run::cpuMs},
                    {"vmhwm-median", "MB", (ToDoubleFunction<Run>) r -> mb(r.hwmKb())},
                    {"vmrss-median", "MB", (ToDoubleFunction<Run>) r -> mb(r.rssKb())}}) {
                @SuppressWarnings("unchecked")
                ToDoubleFunction<Run> f = (ToDoubleFunction<Run>) m[2];
                double ours = median(e.getValue(), f), theirs = median(base, f);
                b.append(String.format(Locale.ROOT, "%s,startup-stand-in,%s,%.3f,%s,%s,%s%n", e.getKey(), m[0], ours, m[1],
                        ratio ? STAND_IN + "/startup-stand-in" : "", ratio ? String.format(Locale.ROOT, "%.4f", ours / theirs) : ""));
            }
        }
        return b.toString();
    }

    /** First-call time and VmHWM over the stand-in's, per target (ms and MB on one axis). */
    private static CategoryChart chart(Map<String, List<Run>> results) {
        List<Run> base = results.get(STAND_IN);
        List<String> x = new ArrayList<>(results.keySet());
        x.remove(STAND_IN);
        if (x.isEmpty()) {
            return null;
        }
        CategoryChart c = new CategoryChartBuilder().width(900).height(500)
                .title("Over a stand-in libcuda.so.1 (medians)").xAxisTitle("target").yAxisTitle("ms / MB").build();
        c.addSeries("first call, ms", x, x.stream().map(t -> median(results.get(t), Run::firstCallMs) - median(base, Run::firstCallMs)).toList());
        c.addSeries("CPU, ms", x, x.stream().map(t -> median(results.get(t), Run::cpuMs) - median(base, Run::cpuMs)).toList());
        c.addSeries("wall, ms", x, x.stream().map(t -> median(results.get(t), Run::wallMs) - median(base, Run::wallMs)).toList());
        c.addSeries("VmHWM, MB", x, x.stream().map(t -> median(results.get(t), r -> mb(r.hwmKb())) - median(base, r -> mb(r.hwmKb()))).toList());
        return c;
    }
}
