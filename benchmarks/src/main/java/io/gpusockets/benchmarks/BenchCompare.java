package io.gpusockets.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code scripts/bench compare A B}: the per-call cost of two builds side by side. Each side is a
 * directory (a built source checkout) or a git revision of this checkout, which is checked out into a
 * worktree under {@code target/bench-compare/} and built there once ({@code mvnw package}, which installs
 * nothing, so this checkout's own artifacts are left alone). Then {@code --rounds} rounds run each side's
 * own bench-transports in turn, A then B in odd rounds and B then A in even ones, so that a drift of the
 * machine's load over the run weighs on both alike. Each run's null call is read as ratios to the raw
 * socket and frame ping-pongs measured in the same run (which cancel most of the machine's state), plus
 * its CPU per round trip where the side's bench prints it. Prints one line per run, then the medians and
 * B / A; writes {@code compare.csv}, {@code compare.md} and {@code compare.png} (each run's null call p50 per
 * round) to {@code --out}.
 */
@Command(name = "bench compare", mixinStandardHelpOptions = true,
        description = "The null call's cost in two builds (checkouts or git revisions), measured in alternating rounds.")
public final class BenchCompare implements Callable<Integer> {

    @Parameters(index = "0", paramLabel = "A", description = "A built checkout's directory, or a git revision of this checkout (the baseline).")
    String a;

    @Parameters(index = "1", paramLabel = "B", description = "The same for the build compared with A.")
    String b;

    @Option(names = "--rounds", defaultValue = "5", description = "Rounds; each runs A and B once. Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--schemes", split = ",", defaultValue = "unix,tcp", paramLabel = "LIST",
            description = "Transports each run measures. Default: ${DEFAULT-VALUE}.")
    List<String> schemes;

    @Option(names = "--full", description = "Each run with bench-transports' full iteration counts, not --quick.")
    boolean full;

    @Option(names = "--out", paramLabel = "DIR", description = "Where the runs and the comparison go (default: bench-compare-TIMESTAMP).")
    Path out;

    /** The checkout this runs from: where git revisions are resolved and their worktrees kept. */
    private final Path root = Path.of(System.getProperty("gpusockets.root", ".")).toAbsolutePath().normalize();

    public static void main(String[] args) {
        System.exit(new CommandLine(new BenchCompare()).execute(args));
    }

    /** One build under comparison: its label and the directory holding its built benchmarks. */
    record Side(String label, Path dir) {
    }

    /** What one run measured on one transport. */
    record Run(String side, int round, String scheme, double nullP50, double perSocket, double perFrame, double cpuNull, double cpuOwn) {
    }

    /** The figures compared, by name: what each is read from. */
    private static final List<String> FIGURES = List.of("null/socket", "null/frame", "null p50 µs", "cpu µs/call", "own cpu µs/call");

    @Override
    public Integer call() throws Exception {
        if (rounds < 1) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--rounds must be 1 or more");
        }
        if (out == null) {
            out = Path.of("bench-compare-" + LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        }
        out = out.toAbsolutePath(); // each side's run starts in its own checkout: a relative path would land there
        Files.createDirectories(out);
        Side sa = side("A", a);
        Side sb = side("B", b);
        System.out.println("compare: A = " + a + " (" + sa.dir() + "), B = " + b + " (" + sb.dir() + ")");
        List<Run> runs = new ArrayList<>();
        for (int r = 1; r <= rounds; r++) {
            for (Side s : r % 2 == 1 ? List.of(sa, sb) : List.of(sb, sa)) {
                System.out.printf("[round %d/%d] %s ...%n", r, rounds, s.label());
                List<Run> got = runOnce(s, r);
                for (Run run : got) {
                    System.out.printf(Locale.ROOT, "[round %d/%d] %s %-6s null p50 %6.1f µs  null/socket %.2f  null/frame %.2f  cpu %s  own %s%n",
                            r, rounds, s.label(), run.scheme(), run.nullP50(), run.perSocket(), run.perFrame(),
                            fmt(run.cpuNull()), fmt(run.cpuOwn()));
                }
                runs.addAll(got);
            }
        }
        String table = summary(runs);
        System.out.println();
        System.out.print(table);
        Files.writeString(out.resolve("compare.csv"), csv(runs));
        Files.writeString(out.resolve("compare.md"), "# bench compare\n\nA = `" + a + "`, B = `" + b + "`, " + rounds
                + " rounds, " + (full ? "full" : "--quick") + " runs, " + TransportBench.machine("emulated device") + "\n\n```\n"
                + table + "```\n");
        Path png = plot(runs);
        System.out.println("compare: wrote " + out.resolve("compare.csv") + ", compare.md" + (png == null ? "" : " and compare.png"));
        return 0;
    }

    // ---- the two sides

    private Side side(String label, String what) throws IOException, InterruptedException {
        Path dir = Path.of(what);
        if (Files.isDirectory(dir)) {
            dir = dir.toAbsolutePath().normalize();
            ensureBuilt(dir);
            return new Side(label, dir);
        }
        String sha = git(root, "rev-parse", "--verify", what + "^{commit}").strip();
        Path tree = root.resolve("target/bench-compare").resolve(sha.substring(0, 12));
        if (!Files.isDirectory(tree)) {
            Files.createDirectories(tree.getParent());
            System.out.println("compare: checking out " + what + " (" + sha.substring(0, 12) + ") into " + tree);
            git(root, "worktree", "add", "--detach", tree.toString(), sha);
        }
        ensureBuilt(tree);
        return new Side(label, tree);
    }

    /** Builds a checkout's modules once (package: nothing installed) when its benchmarks jar is missing. */
    private static void ensureBuilt(Path dir) throws IOException, InterruptedException {
        if (benchJar(dir) != null && Files.isDirectory(dir.resolve("benchmarks/target/lib"))) {
            return;
        }
        if (!Files.isExecutable(dir.resolve("mvnw"))) {
            throw new IOException(dir + ": neither a built checkout (benchmarks/target) nor one with mvnw to build it");
        }
        System.out.println("compare: building " + dir + " (mvnw package, nothing installed) ...");
        Path log = Files.createTempFile("bench-compare-build", ".log");
        Process p = new ProcessBuilder(dir.resolve("mvnw").toString(), "-q", "-B", "package", "-DskipTests")
                .directory(dir.toFile()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (p.waitFor() != 0 || benchJar(dir) == null) {
            throw new IOException("building " + dir + " failed; see " + log);
        }
    }

    private static Path benchJar(Path dir) throws IOException {
        Path target = dir.resolve("benchmarks/target");
        if (!Files.isDirectory(target)) {
            return null;
        }
        try (Stream<Path> files = Files.list(target)) {
            return files.filter(f -> {
                String n = f.getFileName().toString();
                return n.startsWith("gpusockets-benchmarks-") && n.endsWith(".jar") && !n.endsWith("-tests.jar")
                        && !n.endsWith("-sources.jar") && !n.endsWith("-javadoc.jar");
            }).findFirst().orElse(null);
        }
    }

    private static String git(Path dir, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("git", "-C", dir.toString()));
        cmd.addAll(Arrays.asList(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) {
            throw new IOException(String.join(" ", cmd) + ": " + text.strip());
        }
        return text;
    }

    // ---- one run

    /** One bench-transports run of {@code s}'s own build, with this JVM's java; its figures per scheme. */
    private List<Run> runOnce(Side s, int round) throws IOException, InterruptedException {
        Path dir = out.resolve(s.label()).resolve("round-" + round);
        Files.createDirectories(dir);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Djava.awt.headless=true",
                "-cp", benchJar(s.dir()) + ":" + s.dir().resolve("benchmarks/target/lib") + "/*",
                "io.gpusockets.benchmarks.TransportBench", "--schemes", String.join(",", schemes), "--out", dir.toString()));
        if (!full) {
            cmd.add("--quick");
        }
        Path log = dir.resolve("run.log");
        Process p = new ProcessBuilder(cmd).directory(s.dir().toFile()).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(30, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            throw new IOException("run of " + s.label() + " did not end in 30 minutes; see " + log);
        }
        Path csv = dir.resolve("results.csv");
        if (!Files.exists(csv)) {
            throw new IOException("run of " + s.label() + " wrote no results (exit " + p.exitValue() + "); see " + log);
        }
        return parse(s.label(), round, Files.readAllLines(csv), Files.readAllLines(log));
    }

    /** The null call's figures per scheme from a run's results.csv and console log. */
    static List<Run> parse(String side, int round, List<String> csv, List<String> log) {
        Map<String, double[]> byScheme = new LinkedHashMap<>(); // p50, /socket, /frame, cpu null, cpu own
        for (String line : csv.subList(1, csv.size())) {
            String[] f = line.split(",", -1);
            if (f.length < 7 || !f[1].equals(Workloads.NULL_CALL) || !f[2].equals("p50")) {
                continue;
            }
            double[] v = byScheme.computeIfAbsent(f[0], k -> new double[] {Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN});
            v[0] = Double.parseDouble(f[3]);
            if (f[5].equals(Workloads.SOCKET_PING_PONG)) {
                v[1] = Double.parseDouble(f[6]);
            } else if (f[5].equals(Workloads.FRAME_PING_PONG)) {
                v[2] = Double.parseDouble(f[6]);
            }
        }
        for (String line : log) {
            String[] f = line.trim().split("\\s+");
            // cpu-per-round-trip SCHEME socket S frame F null-call N own O
            if (f.length >= 10 && f[0].equals("cpu-per-round-trip") && byScheme.containsKey(f[1])) {
                byScheme.get(f[1])[3] = number(f[7]);
                byScheme.get(f[1])[4] = number(f[9]);
            }
        }
        List<Run> runs = new ArrayList<>();
        byScheme.forEach((scheme, v) -> runs.add(new Run(side, round, scheme, v[0], v[1], v[2], v[3], v[4])));
        return runs;
    }

    private static double number(String s) {
        try {
            return Double.parseDouble(s);
        } catch (NumberFormatException e) {
            return Double.NaN;
        }
    }

    // ---- the comparison

    private static double figure(Run r, String name) {
        return switch (name) {
            case "null/socket" -> r.perSocket();
            case "null/frame" -> r.perFrame();
            case "null p50 µs" -> r.nullP50();
            case "cpu µs/call" -> r.cpuNull();
            case "own cpu µs/call" -> r.cpuOwn();
            default -> throw new IllegalArgumentException(name);
        };
    }

    static double median(List<Double> values) {
        double[] v = values.stream().filter(d -> !Double.isNaN(d)).mapToDouble(Double::doubleValue).sorted().toArray();
        if (v.length == 0) {
            return Double.NaN;
        }
        return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
    }

    private String summary(List<Run> runs) {
        StringBuilder t = new StringBuilder(String.format(Locale.ROOT, "%-7s %-16s %12s %12s %8s   %s%n",
                "scheme", "figure", "A median", "B median", "B / A", "A runs | B runs"));
        for (String scheme : schemes) {
            for (String name : FIGURES) {
                List<Double> av = values(runs, "A", scheme, name), bv = values(runs, "B", scheme, name);
                double ma = median(av), mb = median(bv);
                if (Double.isNaN(ma) && Double.isNaN(mb)) {
                    continue;
                }
                t.append(String.format(Locale.ROOT, "%-7s %-16s %12s %12s %8s   %s | %s%n", scheme, name, fmt(ma), fmt(mb),
                        Double.isNaN(ma) || Double.isNaN(mb) ? "-" : fmt(mb / ma), join(av), join(bv)));
            }
        }
        return t.toString();
    }

    private static List<Double> values(List<Run> runs, String side, String scheme, String name) {
        return runs.stream().filter(r -> r.side().equals(side) && r.scheme().equals(scheme)).map(r -> figure(r, name)).toList();
    }

    private static String join(List<Double> v) {
        return String.join(" ", v.stream().map(BenchCompare::fmt).toList());
    }

    private static String fmt(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.2f", v);
    }

    private String csv(List<Run> runs) {
        StringBuilder s = new StringBuilder("side,build,round,scheme,null_p50_us,null_per_socket,null_per_frame,cpu_us_per_call,own_cpu_us_per_call\n");
        for (Run r : runs) {
            s.append(String.join(",", r.side(), ResultTable.csvField(r.side().equals("A") ? a : b), Integer.toString(r.round()),
                    r.scheme(), fmt(r.nullP50()), fmt(r.perSocket()), fmt(r.perFrame()), fmt(r.cpuNull()), fmt(r.cpuOwn()))).append('\n');
        }
        return s.toString();
    }

    /**
     * compare.png: each run's null call p50 against its round, a series per side and scheme (every scheme has this
     * figure; ring has no socket ping-pong to divide by). Null where nothing was drawn.
     */
    private Path plot(List<Run> runs) {
        return Plots.png(out.resolve("compare.png"), () -> chart(runs));
    }

    private XYChart chart(List<Run> runs) {
        XYChart chart = new XYChartBuilder().width(960).height(600)
                .title("Null call p50, per round (A = " + a + ", B = " + b + ")")
                .xAxisTitle("round").yAxisTitle("null call p50 (µs)").build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE).setLegendPosition(Styler.LegendPosition.OutsideE);
        chart.getStyler().setDefaultSeriesRenderStyle(XYSeries.XYSeriesRenderStyle.Line);
        for (String scheme : schemes) {
            for (String side : List.of("A", "B")) {
                List<Run> rs = runs.stream().filter(r -> r.side().equals(side) && r.scheme().equals(scheme)
                        && !Double.isNaN(r.nullP50())).toList();
                if (rs.isEmpty()) {
                    continue;
                }
                XYSeries series = chart.addSeries(side + " " + scheme, rs.stream().map(r -> (double) r.round()).toList(),
                        rs.stream().map(Run::nullP50).toList());
                series.setMarker(side.equals("A") ? SeriesMarkers.CIRCLE : SeriesMarkers.DIAMOND);
            }
        }
        return chart.getSeriesMap().isEmpty() ? null : chart;
    }
}
