package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.Kernels;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.frontend.ManagedMemoryStats;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What managed memory costs through GPUsockets against explicit copies of the same data (issue 25's done-when): for
 * each size N and three workloads, the time and the bytes moved by the same program written three ways, each through
 * a unix:// session to a backend on the chosen device:
 * <ul>
 *   <li><b>managed</b>: {@code cuMemAllocManaged}; the CPU touches the pointer (after
 *       {@link RemoteCudaDriver#prepareManagedAccess}, which Java programs must call: it installs the pages of the
 *       range asked, in batches, without fault round trips; a C program's fault fetches up to 64 absent pages from
 *       the faulting one, so reading one word costs it 256 KiB where this costs 4 KiB), bytes from
 *       {@link ManagedMemoryStats} (sent + fetched);</li>
 *   <li><b>minimal</b>: {@code cuMemAlloc} and a host buffer, copying exactly what the kernel and the CPU need;</li>
 *   <li><b>naive</b>: the same, copying the whole buffer to the device before every launch and back after it;</li>
 *   <li><b>native</b> (with {@code --device native} only): the real driver's managed memory through FFM in this
 *       process, no GPUsockets in between (bytes: not known, the driver does not say).</li>
 * </ul>
 * Workloads over N bytes of floats, the kernel {@code gpus_vector_add(p, p, p)} (doubles each element in place):
 * <b>all</b>: the CPU writes all, one launch reads and writes all, the CPU reads all; <b>sixteenth</b>: the CPU writes
 * all, the launch covers the first N/16 bytes (1/16 of the pages, contiguous), the CPU reads those; <b>ten-launches</b>:
 * the CPU writes all, then 10 times a launch over all and the CPU reading one word (a different page each time).
 * The backend of the three remote modes is {@code gpusockets backend --isolation context --stable-addresses} (the sessions
 * in the backend's own process, as an in-process backend's were) in a process of its own
 * ({@link BackendProcess}, its output in a temporary folder's backend.log, quoted when a run fails): on the real driver
 * a backend in the bench's process would reserve its device allocations' addresses here too (UVA), where the
 * frontend maps a managed range at its device address, and the two clash; with stable addresses the managed ranges
 * lie in the session's address window (from 0x6000_0000_0000), far from the JVM's and the libraries' mappings. The
 * native column's driver stays in the bench's process (with {@code --device auto}: native where a GPU is found).
 * One unrecorded warm-up run of each workload and mode at 1 MiB comes first. Each figure is timed from the CPU's first write to its last read (allocation and free untimed, a fresh allocation
 * each round, so the CPU's writes land on fresh pages), and the CPU's reads are checked against the expected values.
 * Prints time (ms, median over rounds) and MiB moved with the ratios managed/minimal and managed/naive; with
 * {@code --out}, DIR/managed.md and DIR/managed.png (through {@link Plots}: skipped where java.desktop is absent).
 */
@Command(name = "bench-managed", mixinStandardHelpOptions = true,
        description = "Managed memory against explicit copies: time and bytes moved.")
public final class ManagedBench implements Callable<Integer> {
    static final String[] WORKLOADS = {"all", "sixteenth", "ten-launches"};

    @Option(names = "--sizes", split = ",", defaultValue = "1,16,256", paramLabel = "MIB,...",
            description = "Buffer sizes in MiB. Default: ${DEFAULT-VALUE}.")
    List<Long> sizes;

    @Option(names = "--rounds", defaultValue = "3", description = "Rounds of each figure (median). Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--workloads", split = ",", defaultValue = "all,sixteenth,ten-launches", paramLabel = "W,...",
            description = "Workloads: all, sixteenth, ten-launches. Default: ${DEFAULT-VALUE}.")
    List<String> workloads;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver of the backend, a process of its own (native also measures the driver's own managed memory in this process). Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/managed.md and DIR/managed.png.")
    Path out;

    private final PrintStream console = System.out;

    /** One figure: median milliseconds and bytes moved (-1: not known). */
    record Figure(double ms, long bytes) {
    }

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new ManagedBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        for (String w : workloads) {
            if (!List.of(WORKLOADS).contains(w)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "unknown workload " + w);
            }
        }
        // the native column's driver, in this process; the remote modes' backend is a process of its own (see the class)
        boolean nativeColumn = device == DeviceChoice.NATIVE || device == DeviceChoice.AUTO && NativeCudaDriver.available(null);
        DriverHost host = nativeColumn ? device.open(null) : null;
        List<String> modes = new ArrayList<>(List.of("managed", "minimal", "naive"));
        if (nativeColumn) {
            modes.add("native");
        }
        Map<String, Figure> figures = new LinkedHashMap<>();
        Path dir = Files.createTempDirectory("gpusockets-managed-bench");
        String line;
        try (BackendProcess backend = new BackendProcess("managed", nativeColumn ? DeviceChoice.NATIVE : DeviceChoice.EMULATED,
                List.of("--isolation", "context", "--stable-addresses", "--listen", "unix://" + dir.resolve("b.sock")), dir.resolve("backend.log"))) {
            String uri = backend.listening(1, 120).getFirst();
            String said = backend.await("gpusockets backend: ", 10); // its first line: its device, its isolation
            line = "bench-managed: " + Runtime.getRuntime().availableProcessors() + " cores, backend in a process of its"
                    + " own: " + said.substring(said.indexOf("gpusockets backend: ") + "gpusockets backend: ".length())
                    + ", unix, " + rounds + " rounds";
            console.println(line);
            for (String w : workloads) { // warm-up, unrecorded: the JIT, the backend's first sessions
                for (String mode : modes) {
                    if (mode.equals("native")) {
                        nativeRun(host.driver(), w, 1 << 20);
                    } else {
                        remoteRun(uri, mode, w, 1 << 20, backend);
                    }
                }
            }
            for (long mib : sizes) {
                for (String w : workloads) {
                    Map<String, List<Double>> times = new LinkedHashMap<>();
                    Map<String, Long> bytes = new LinkedHashMap<>();
                    for (int round = 0; round < rounds; round++) {
                        for (int k = 0; k < modes.size(); k++) {
                            String mode = modes.get((k + round) % modes.size()); // each mode first in turn
                            double[] r = mode.equals("native") ? nativeRun(host.driver(), w, mib << 20)
                                    : remoteRun(uri, mode, w, mib << 20, backend);
                            times.computeIfAbsent(mode, m -> new ArrayList<>()).add(r[0]);
                            bytes.put(mode, (long) r[1]);
                        }
                    }
                    for (String mode : modes) {
                        double ms = DriverBench.median(times.get(mode).stream().mapToDouble(Double::doubleValue).toArray());
                        figures.put(key(mib, w, mode), new Figure(ms, bytes.get(mode)));
                    }
                    console.println("[" + mib + " MiB " + w + "] " + modes.stream().map(m -> m + " "
                            + String.format("%.1f ms", figures.get(key(mib, w, m)).ms())).toList());
                }
            }
        } finally {
            for (String f : List.of("b.sock", "backend.log")) {
                Files.deleteIfExists(dir.resolve(f));
            }
            Files.deleteIfExists(dir);
        }
        String t = table(figures, modes);
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("managed.md"), "# bench-managed\n\n" + line + " (medians). ms: from the CPU's first"
                    + " write to its last read; MiB: bytes moved between guest and device (managed: the frontend's"
                    + " counters, sent + fetched; minimal/naive: the copies made; native: not known); m/min, m/naive: managed"
                    + " over minimal and naive.\n\n```\n" + t + "```\n");
            Plots.png(out.resolve("managed.png"), () -> {
                CategoryChart chart = new CategoryChartBuilder().width(900).height(500)
                        .title("Managed memory against explicit copies").xAxisTitle("MiB, workload").yAxisTitle("ms").build();
                List<String> x = new ArrayList<>();
                for (long mib : sizes) {
                    for (String w : workloads) {
                        x.add(mib + " " + w);
                    }
                }
                for (String mode : modes) {
                    List<Double> y = new ArrayList<>();
                    for (long mib : sizes) {
                        for (String w : workloads) {
                            y.add(figures.get(key(mib, w, mode)).ms());
                        }
                    }
                    chart.addSeries(mode, x, y);
                }
                return chart;
            });
        }
        return 0;
    }

    private static String key(long mib, String workload, String mode) {
        return mib + "/" + workload + "/" + mode;
    }

    /** The table: per size and workload, each mode's ms and MiB, and managed over minimal and naive. */
    String table(Map<String, Figure> figures, List<String> modes) {
        StringBuilder t = new StringBuilder(String.format("%6s %-13s", "MiB", "workload"));
        for (String m : modes) {
            t.append(String.format(" %10s %9s", m + " ms", "MiB"));
        }
        t.append(String.format(" %8s %8s %8s %8s%n", "ms m/min", "ms m/nv", "B m/min", "B m/nv"));
        for (long mib : sizes) {
            for (String w : workloads) {
                t.append(String.format("%6d %-13s", mib, w));
                for (String m : modes) {
                    Figure f = figures.get(key(mib, w, m));
                    t.append(String.format(" %10.2f %9s", f.ms(), f.bytes() < 0 ? "-" : String.format("%.2f", f.bytes() / 1048576.0)));
                }
                Figure m = figures.get(key(mib, w, "managed")), min = figures.get(key(mib, w, "minimal")),
                        nv = figures.get(key(mib, w, "naive"));
                t.append(String.format(" %8.2f %8.2f %8s %8s%n", m.ms() / min.ms(), m.ms() / nv.ms(), ratio(m.bytes(), min.bytes()),
                        ratio(m.bytes(), nv.bytes())));
            }
        }
        return t.toString();
    }

    private static String ratio(long a, long b) {
        return b <= 0 ? "-" : String.format("%.2f", (double) a / b);
    }

    /** The value the CPU writes at element {@code i}: small integers, exact as floats through 10 doublings. */
    static float initial(long i) {
        return (float) (i % 1000 + 1);
    }

    /** One run of {@code workload} in {@code mode} through a fresh session: {ms, bytes moved}. */
    private static double[] remoteRun(String uri, String mode, String workload, long n, BackendProcess backend) throws Exception {
        try {
            return remoteRun(uri, mode, workload, n);
        } catch (Exception e) {
            throw new IllegalStateException(mode + " " + workload + " at " + n + " bytes failed (" + e + "); the backend's"
                    + " last lines:\n" + backend.tail(), e);
        }
    }

    private static double[] remoteRun(String uri, String mode, String workload, long n) throws Exception {
        try (GpuSocketsCalls calls = GpuSocketsCalls.open(uri); Arena arena = Arena.ofConfined();
             Kernels k = Kernels.load(calls.driver())) {
            RemoteCudaDriver cu = calls.driver();
            long add = k.function(Kernels.VECTOR_ADD);
            MemorySegment cell = arena.allocate(8);
            if (mode.equals("managed")) {
                Cu.check(cu.cuMemAllocManaged(cell, n, 1), "cuMemAllocManaged");
                long p = cell.get(JAVA_LONG, 0);
                try {
                    ManagedMemoryStats before = cu.managedMemoryStats();
                    long t0 = System.nanoTime();
                    managed(cu, add, p, n, workload, arena, cu::prepareManagedAccess);
                    long t1 = System.nanoTime();
                    ManagedMemoryStats after = cu.managedMemoryStats();
                    return new double[] {(t1 - t0) / 1e6,
                            after.bytesSent() + after.bytesFetched() - before.bytesSent() - before.bytesFetched()};
                } finally {
                    Cu.check(cu.cuMemFree(p), "cuMemFree");
                }
            }
            Cu.check(cu.cuMemAlloc(cell, n), "cuMemAlloc");
            long d = cell.get(JAVA_LONG, 0);
            try (Arena hostArena = Arena.ofConfined()) {
                MemorySegment host = hostArena.allocate(n, 4096);
                long t0 = System.nanoTime();
                long moved = explicit(cu, add, d, host, n, workload, mode.equals("naive"), arena);
                long t1 = System.nanoTime();
                return new double[] {(t1 - t0) / 1e6, moved};
            } finally {
                Cu.check(cu.cuMemFree(d), "cuMemFree");
            }
        }
    }

    /** The driver's own managed memory in this process (with --device native): {ms, -1}. */
    private static double[] nativeRun(CudaDriver cu, String workload, long n) {
        try (PrimaryContext ctx = PrimaryContext.retain(cu, 0); Arena arena = Arena.ofConfined(); Kernels k = Kernels.load(cu)) {
            long add = k.function(Kernels.VECTOR_ADD);
            MemorySegment cell = arena.allocate(8);
            Cu.check(cu.cuMemAllocManaged(cell, n, 1), "cuMemAllocManaged");
            long p = cell.get(JAVA_LONG, 0);
            try {
                long t0 = System.nanoTime();
                managed(cu, add, p, n, workload, arena, (a, l, w) -> { });
                long t1 = System.nanoTime();
                return new double[] {(t1 - t0) / 1e6, -1};
            } finally {
                Cu.check(cu.cuMemFree(p), "cuMemFree");
            }
        }
    }

    /** What a Java program must do before touching managed memory ({@link RemoteCudaDriver#prepareManagedAccess}). */
    @FunctionalInterface
    interface Prepare {
        void access(long address, long length, boolean write);
    }

    private static void launch(CudaDriver cu, long add, long p, long bytes, Arena arena) {
        int count = (int) (bytes / 4);
        MemorySegment args = arena.allocate(ADDRESS, 4);
        MemorySegment ptr = arena.allocate(JAVA_LONG);
        MemorySegment cnt = arena.allocate(JAVA_INT);
        ptr.set(JAVA_LONG, 0, p);
        cnt.set(JAVA_INT, 0, count);
        args.setAtIndex(ADDRESS, 0, ptr);
        args.setAtIndex(ADDRESS, 1, ptr);
        args.setAtIndex(ADDRESS, 2, ptr);
        args.setAtIndex(ADDRESS, 3, cnt);
        Cu.check(cu.cuLaunchKernel(add, (count + 255) / 256, 1, 1, 256, 1, 1, 0, 0, args, MemorySegment.NULL), "cuLaunchKernel");
        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
    }

    private static void write(MemorySegment s, long n) {
        for (long i = 0; i < n / 4; i++) {
            s.setAtIndex(JAVA_FLOAT, i, initial(i));
        }
    }

    private static void check(MemorySegment s, long from, long bytes, float factor) {
        for (long i = from / 4; i < (from + bytes) / 4; i++) {
            float v = s.getAtIndex(JAVA_FLOAT, i);
            if (v != initial(i) * factor) {
                throw new IllegalStateException("element " + i + " is " + v + ", expected " + initial(i) * factor);
            }
        }
    }

    /** The word the CPU reads after launch {@code k} of ten-launches: a different page each time. */
    private static long word(long n, int k) {
        return (n / 10 * k) & -4;
    }

    /** The workload on managed memory at {@code p}, the CPU touching it directly. */
    private static void managed(CudaDriver cu, long add, long p, long n, String workload, Arena arena, Prepare prepare) {
        MemorySegment s = MemorySegment.ofAddress(p).reinterpret(n);
        prepare.access(p, n, true);
        write(s, n);
        switch (workload) {
            case "all" -> {
                launch(cu, add, p, n, arena);
                prepare.access(p, n, false);
                check(s, 0, n, 2);
            }
            case "sixteenth" -> {
                launch(cu, add, p, n / 16, arena);
                prepare.access(p, n / 16, false);
                check(s, 0, n / 16, 2);
            }
            default -> {
                for (int k = 0; k < 10; k++) {
                    launch(cu, add, p, n, arena);
                    long at = word(n, k);
                    prepare.access(p + at, 4, false);
                    check(s, at, 4, 1 << (k + 1));
                }
            }
        }
    }

    /** The workload with device memory {@code d} and the host buffer {@code host}: the bytes copied. */
    private static long explicit(CudaDriver cu, long add, long d, MemorySegment host, long n, String workload, boolean naive,
                                 Arena arena) {
        write(host, n);
        long moved = 0;
        switch (workload) {
            case "all" -> {
                Cu.check(cu.cuMemcpyHtoD(d, host, n), "cuMemcpyHtoD");
                launch(cu, add, d, n, arena);
                Cu.check(cu.cuMemcpyDtoH(host, d, n), "cuMemcpyDtoH");
                check(host, 0, n, 2);
                moved = 2 * n;
            }
            case "sixteenth" -> {
                long part = naive ? n : n / 16;
                Cu.check(cu.cuMemcpyHtoD(d, host, part), "cuMemcpyHtoD");
                launch(cu, add, d, n / 16, arena);
                Cu.check(cu.cuMemcpyDtoH(host, d, part), "cuMemcpyDtoH");
                check(host, 0, n / 16, 2);
                moved = 2 * part;
            }
            default -> {
                if (!naive) {
                    Cu.check(cu.cuMemcpyHtoD(d, host, n), "cuMemcpyHtoD");
                    moved += n;
                }
                for (int k = 0; k < 10; k++) {
                    if (naive) {
                        Cu.check(cu.cuMemcpyHtoD(d, host, n), "cuMemcpyHtoD");
                    }
                    launch(cu, add, d, n, arena);
                    long at = word(n, k);
                    if (naive) {
                        Cu.check(cu.cuMemcpyDtoH(host, d, n), "cuMemcpyDtoH");
                        moved += 2 * n;
                    } else {
                        Cu.check(cu.cuMemcpyDtoH(host.asSlice(at, 4), d + at, 4), "cuMemcpyDtoH");
                        moved += 4;
                    }
                    check(host, at, 4, 1 << (k + 1));
                }
            }
        }
        return moved;
    }
}
