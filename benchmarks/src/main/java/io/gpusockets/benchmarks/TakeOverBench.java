package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.frontend.RemoteCudaDriver;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code backend --take-over} (issue 23 item 2) against the memory the sessions hold: for each isolation mode and size,
 * a backend A ({@code gpusockets backend} in a process of its own: this JVM's java and class path, its admin socket and
 * one unix:// listener in a temp folder; mode context with {@code --stable-addresses}) serves {@code --sessions}
 * programs (RemoteCudaDrivers in this JVM, resumable), which hold SIZE MiB between them in allocations of at most
 * {@code --allocation} MiB (256 by default: several per session from 1 GiB a session on), each set to a value of its
 * own (session and allocation index; checked once set, so that a wrong value after the take-over is the take-over's
 * doing). A program thread in the first session makes calls continuously, each iteration
 * a cuMemAlloc of 64 KiB, a 4 KiB cuMemcpyHtoD into it and its cuMemFree, each iteration timed. Then a backend B takes
 * A over ({@code --take-over A's admin socket}, same mode): process mode adopts the workers (nothing of the GPU moves),
 * context mode hands each session over by shareable handles ({@code HandOver}). Reported per mode and size: the
 * longest iteration from B's start to A's exit (the pause a program sees; on a machine with few cores B's JVM start
 * competes for them), the median iteration before, the take-over's own time as B prints it (request, the old backend's
 * stop and hand, adoption, hand-overs), and in mode context the longest hand-over's downtime with its split (drain,
 * export, image, restore, switch) from A's log, and the bytes copied. After the take-over every allocation's first and
 * last word are checked. Writes DIR/takeover.md and DIR/takeover.png with {@code --out}.
 *
 * <p>Bounds: one program thread times calls; the other sessions hold memory and are idle. B's JVM start is inside the
 * window, its own take-over time is not (B prints it from its request on).
 */
@Command(name = "bench-takeover", mixinStandardHelpOptions = true,
        description = "backend --take-over: the pause a program sees and the take-over's time split against memory held.")
public final class TakeOverBench implements Callable<Integer> {
    private static final long MIB = 1L << 20;
    private static final Pattern TOOK = Pattern.compile("took over pid \\d+: (\\d+) session\\(s\\) adopted, \\d+ listener\\(s\\),"
            + " (\\d+) bytes on the take-over connection, (\\d+) session\\(s\\) handed over \\((\\d+) bytes of device memory"
            + " mapped, (\\d+) copied\\), in ([\\d.]+) ms \\(request ([\\d.]+), the old backend's stop and hand ([\\d.]+),"
            + " adoption ([\\d.]+), hand-overs ([\\d.]+)\\)");
    private static final Pattern DOWN = Pattern.compile("downtime ([\\d.]+) ms \\(drain ([\\d.]+), export ([\\d.]+),"
            + " image ([\\d.]+), restore ([\\d.]+), switch ([\\d.]+)\\)");

    @Option(names = "--sizes", split = ",", paramLabel = "MIB", defaultValue = "64,256,1024",
            description = "Memory the sessions hold between them, in MiB. Default: ${DEFAULT-VALUE} (the GPU pass:"
                    + " 1024,8192,32768).")
    List<Long> sizesMib;

    @Option(names = "--sessions", defaultValue = "4", description = "Sessions holding it. Default: ${DEFAULT-VALUE}.")
    int sessions;

    @Option(names = "--modes", split = ",", defaultValue = "process,context",
            description = "Isolation modes: process, context. Default: ${DEFAULT-VALUE}.")
    List<String> modes;

    @Option(names = "--allocation", paramLabel = "MIB", defaultValue = "256",
            description = "Each session's memory is held in allocations of at most this many MiB (several per session"
                    + " when SIZE / sessions is larger). Default: ${DEFAULT-VALUE}.")
    long allocationMib;

    @Option(names = "--device", paramLabel = "native|emulated", defaultValue = "emulated",
            description = "Driver of the backends. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/takeover.md and DIR/takeover.png.")
    Path out;

    /** {@link #allocationMib} in bytes. */
    private long maxAllocation;
    private final PrintStream console = System.out;
    private final PrintStream progress = System.err;

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new TakeOverBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    /** One take-over's figures (milliseconds; downtime figures NaN in mode process). */
    record Run(String mode, long mib, double longestMs, double medianMs, int calls, double takeOverMs, double requestMs,
               double handMs, double adoptMs, double handOversMs, int moved, long bytes, long copied, double[] down,
               List<String> downtimes) {
    }

    @Override
    public Integer call() throws Exception {
        if (sessions < 1 || sessions > 64 || sizesMib.stream().anyMatch(m -> m < sessions)
                || modes.stream().anyMatch(m -> !m.equals("process") && !m.equals("context"))
                || allocationMib < 1 || allocationMib > (1L << 20)) {
            throw new CommandLine.ParameterException(new CommandLine(this),
                    "--sessions 1..64, --sizes >= one MiB a session, --modes process,context, --allocation 1..1048576");
        }
        maxAllocation = allocationMib * MIB;
        System.setProperty("gpusockets.resume", "true");
        List<Run> runs = new ArrayList<>();
        for (String mode : modes) {
            for (long mib : sizesMib) {
                Path dir = Files.createTempDirectory("gpusockets-takeover-bench");
                try {
                    Run r = once(mode, mib, dir);
                    runs.add(r);
                    progress.printf(Locale.ROOT, "[%s, %d MiB in %d sessions] longest call %.1f ms (median %.3f, %d calls);"
                                    + " take-over %.1f ms (request %.1f, stop and hand %.1f, adoption %.1f, hand-overs %.1f);"
                                    + " %d moved, %d bytes on the connection, %d copied%s%n", mode, mib, sessions,
                            r.longestMs(), r.medianMs(), r.calls(), r.takeOverMs(), r.requestMs(), r.handMs(), r.adoptMs(),
                            r.handOversMs(), r.moved(), r.bytes(), r.copied(), mode.equals("context")
                                    ? String.format(Locale.ROOT, "; longest hand-over %.1f ms (drain %.1f, export %.1f,"
                                    + " image %.1f, restore %.1f, switch %.1f)", r.down()[0], r.down()[1], r.down()[2],
                                    r.down()[3], r.down()[4], r.down()[5]) + "; each (ms): " + String.join(", ", r.downtimes())
                                    : "");
                } finally {
                    try (var files = Files.list(dir)) {
                        for (Path f : files.toList()) {
                            Files.deleteIfExists(f);
                        }
                    }
                    Files.deleteIfExists(dir);
                }
            }
        }
        String header = String.format(Locale.ROOT, "%-8s %7s %9s %9s %7s %9s %8s %8s %8s %9s %6s %8s %7s %9s %7s %7s %7s %8s %7s",
                "mode", "MiB", "longest", "median", "calls", "takeover", "request", "stop+hand", "adopt", "handovers",
                "moved", "bytes", "copied", "handover", "drain", "export", "image", "restore", "switch");
        StringBuilder t = new StringBuilder(header).append('\n');
        for (Run r : runs) {
            t.append(String.format(Locale.ROOT, "%-8s %7d %9.1f %9.3f %7d %9.1f %8.1f %8.1f %8.1f %9.1f %6d %8d %7d %9.1f %7.1f"
                            + " %7.1f %7.1f %8.1f %7.1f%n", r.mode(), r.mib(), r.longestMs(), r.medianMs(), r.calls(),
                    r.takeOverMs(), r.requestMs(), r.handMs(), r.adoptMs(), r.handOversMs(), r.moved(), r.bytes(), r.copied(),
                    r.down()[0], r.down()[1], r.down()[2], r.down()[3], r.down()[4], r.down()[5]));
        }
        String line = "bench-takeover: " + Runtime.getRuntime().availableProcessors() + " cores, device " + device.name()
                .toLowerCase(Locale.ROOT) + ", " + sessions + " sessions, one program thread timing alloc+copy+free"
                + " (milliseconds)";
        console.println(line);
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("takeover.md"), "# bench-takeover\n\n" + line + ". longest: the longest"
                    + " iteration (cuMemAlloc 64 KiB + 4 KiB cuMemcpyHtoD + cuMemFree) from B's start to A's exit, the pause"
                    + " the program saw; median: iterations before; takeover: B's own time from its request (request,"
                    + " the old backend's stop and hand, adoption, hand-overs); moved: sessions adopted (process) or"
                    + " handed over (context); bytes: on the take-over connection before the hand-overs; copied: device"
                    + " memory copied by the hand-overs; handover..switch: the longest hand-over's downtime and its split"
                    + " (context only).\n\n```\n" + t + "```\n");
            Plots.png(out.resolve("takeover.png"), () -> {
                CategoryChart chart = new CategoryChartBuilder().width(800).height(500)
                        .title("Take-over: the pause a program sees against memory held").xAxisTitle("memory held (MiB)")
                        .yAxisTitle("milliseconds").build();
                for (String mode : modes) {
                    List<Run> rs = runs.stream().filter(r -> r.mode().equals(mode)).toList();
                    List<String> x = rs.stream().map(r -> Long.toString(r.mib())).toList();
                    chart.addSeries(mode + ": longest call", x, rs.stream().map(Run::longestMs).toList());
                    chart.addSeries(mode + ": take-over", x, rs.stream().map(Run::takeOverMs).toList());
                    if (mode.equals("context")) {
                        chart.addSeries("context: longest hand-over downtime", x, rs.stream().map(r -> r.down()[0]).toList());
                    }
                }
                return chart;
            });
        }
        return 0;
    }

    /** One take-over of {@code mib} MiB held in {@link #sessions} sessions, isolation {@code mode}: see the class. */
    private Run once(String mode, long mib, Path dir) throws Exception {
        Path admin = dir.resolve("admin.sock");
        String unix = "unix://" + dir.resolve("a.sock");
        List<String> common = new ArrayList<>(List.of("--isolation", mode, "--resume-grace", "60", "--admin-socket",
                admin.toString()));
        if (mode.equals("context")) {
            common.add("--stable-addresses");
        }
        List<String> argsA = new ArrayList<>(common);
        argsA.addAll(List.of("--listen", unix));
        List<RemoteCudaDriver> drivers = new ArrayList<>();
        try (BackendProcess a = new BackendProcess("a", device, argsA, null)) {
            a.await("listening on " + unix, 120);
            List<long[]> held = new ArrayList<>(); // per session: allocations
            long each = mib * MIB / sessions;
            long[] contexts = new long[sessions];
            for (int i = 0; i < sessions; i++) {
                RemoteCudaDriver d = RemoteCudaDriver.connect(unix);
                drivers.add(d);
                Cu.check(d.cuInit(0), "cuInit");
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment c = arena.allocate(JAVA_LONG);
                    Cu.check(d.cuDevicePrimaryCtxRetain(c, 0), "cuDevicePrimaryCtxRetain");
                    contexts[i] = c.get(JAVA_LONG, 0);
                    Cu.check(d.cuCtxSetCurrent(contexts[i]), "cuCtxSetCurrent");
                    List<Long> mine = new ArrayList<>(); // pointer, size, pointer, size, ...
                    for (long left = each; left > 0; left -= maxAllocation) {
                        long size = Math.min(left, maxAllocation) & ~4095L;
                        Cu.check(d.cuMemAlloc(c, size), "cuMemAlloc");
                        long p = c.get(JAVA_LONG, 0);
                        Cu.check(d.cuMemsetD32(p, value(i, mine.size() / 2), size / 4), "cuMemsetD32");
                        mine.add(p);
                        mine.add(size);
                    }
                    Cu.check(d.cuCtxSynchronize(), "cuCtxSynchronize");
                    held.add(mine.stream().mapToLong(Long::longValue).toArray());
                    check(d, contexts[i], i, held.getLast(), "before"); // the bench's own check: set as it reads them
                }
            }
            Probe probe = new Probe(drivers.getFirst(), contexts[0]);
            probe.start();
            Thread.sleep(1000);
            long from = System.nanoTime();
            List<String> argsB = new ArrayList<>(common);
            argsB.addAll(0, List.of("--take-over", admin.toString()));
            String took;
            try (BackendProcess b = new BackendProcess("b", device, argsB, null)) {
                took = b.await("took over pid", 120);
                if (!a.process.waitFor(120, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("backend A did not exit after the take-over: " + a.tail());
                }
                long to = System.nanoTime();
                if (a.process.exitValue() != 0) {
                    throw new IllegalStateException("backend A exited with " + a.process.exitValue() + ": " + a.tail());
                }
                Thread.sleep(300);
                probe.stop();
                for (int i = 0; i < sessions; i++) {
                    check(drivers.get(i), contexts[i], i, held.get(i), "after");
                }
                Matcher m = TOOK.matcher(took);
                if (!m.find()) {
                    throw new IllegalStateException("B's line is not as expected: " + took);
                }
                double[] down = {Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN};
                List<String> downtimes = new ArrayList<>();
                for (String l : a.lines) {
                    Matcher dm = DOWN.matcher(l);
                    if (dm.find()) {
                        downtimes.add(dm.group(1) + " (restore " + dm.group(5) + ")");
                        dm.reset();
                    }
                    if (dm.find() && (Double.isNaN(down[0]) || Double.parseDouble(dm.group(1)) > down[0])) {
                        for (int k = 0; k < 6; k++) {
                            down[k] = Double.parseDouble(dm.group(k + 1));
                        }
                    }
                }
                int moved = Integer.parseInt(m.group(mode.equals("process") ? 1 : 3));
                if (moved < sessions) {
                    throw new IllegalStateException("only " + moved + " of " + sessions + " sessions moved: " + took);
                }
                double[] before = probe.durationsBefore(from);
                return new Run(mode, mib, probe.longest(from, to) / 1e6, DriverBench.median(before) / 1e6, probe.count(),
                        Double.parseDouble(m.group(6)), Double.parseDouble(m.group(7)), Double.parseDouble(m.group(8)),
                        Double.parseDouble(m.group(9)), Double.parseDouble(m.group(10)), moved, Long.parseLong(m.group(2)),
                        Long.parseLong(m.group(5)), down, downtimes);
            }
        } finally {
            for (RemoteCudaDriver d : drivers) {
                d.close();
            }
        }
    }

    private static int value(int session, int allocation) {
        return (session * 131 + allocation) * 0x9E3779B1;
    }

    /**
     * Each allocation's first and last word, as set before the take-over ({@code when}: "before" or "after" it, for
     * the message); {@code held} is pointer, size, pointer, size, ... in allocation order.
     */
    private static void check(RemoteCudaDriver d, long context, int session, long[] held, String when) {
        Cu.check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment w = arena.allocate(JAVA_INT);
            for (int k = 0; k < held.length; k += 2) {
                for (long at : new long[] {held[k], held[k] + held[k + 1] - 4}) {
                    Cu.check(d.cuMemcpyDtoH(w, at, 4), "cuMemcpyDtoH");
                    int expected = value(session, k / 2);
                    if (w.get(JAVA_INT, 0) != expected) {
                        throw new IllegalStateException(String.format(Locale.ROOT, "session %d allocation %d: 0x%08x, not"
                                + " 0x%08x %s the take-over (word at 0x%x)", session, k / 2, w.get(JAVA_INT, 0), expected, when,
                                at));
                    }
                }
            }
        }
    }

    /** The program thread: alloc, copy, free, each iteration timed (start and duration, in order). */
    private static final class Probe {
        private static final int MAX = 1 << 22;
        private final RemoteCudaDriver d;
        private final long context;
        private final long[] starts = new long[MAX];
        private final long[] durations = new long[MAX];
        private volatile int n;
        private ProgramThread thread;

        Probe(RemoteCudaDriver d, long context) {
            this.d = d;
            this.context = context;
        }

        void start() {
            thread = new ProgramThread("the program thread", stopping -> {
                try (Arena arena = Arena.ofConfined()) {
                    Cu.check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
                    MemorySegment c = arena.allocate(JAVA_LONG);
                    MemorySegment host = arena.allocate(4096).fill((byte) 7);
                    int i = 0;
                    while (!stopping.getAsBoolean() && i < MAX) {
                        long t = System.nanoTime();
                        Cu.check(d.cuMemAlloc(c, 64 << 10), "cuMemAlloc");
                        long p = c.get(JAVA_LONG, 0);
                        Cu.check(d.cuMemcpyHtoD(p, host, 4096), "cuMemcpyHtoD");
                        Cu.check(d.cuMemFree(p), "cuMemFree");
                        starts[i] = t;
                        durations[i] = System.nanoTime() - t;
                        n = ++i;
                    }
                }
            });
        }

        void stop() throws InterruptedException {
            thread.stop();
        }

        int count() {
            return n;
        }

        /** The longest iteration that overlaps [from, to]. */
        long longest(long from, long to) {
            long worst = 0;
            for (int i = 0; i < n; i++) {
                if (starts[i] + durations[i] >= from && starts[i] <= to) {
                    worst = Math.max(worst, durations[i]);
                }
            }
            return worst;
        }

        /** The iterations that ended before {@code from}. */
        double[] durationsBefore(long from) {
            int k = n;
            double[] d = java.util.stream.IntStream.range(0, k).filter(i -> starts[i] + durations[i] < from)
                    .mapToDouble(i -> durations[i]).toArray();
            return d.length == 0 ? new double[] {0} : d;
        }
    }
}
