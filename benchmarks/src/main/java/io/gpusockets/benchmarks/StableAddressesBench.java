package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.Kernels;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The cost of address-stable memory (issue 22, item 2; {@code -Dgpusockets.backend.stableAddresses}) as a
 * program sees it through a unix:// session to an in-process backend: cuMemAlloc + cuMemFree round trips
 * of 256 bytes, 64 KiB and 4 MiB (p50), cuMemAllocAsync + cuMemFreeAsync on one stream of the same sizes (p50,
 * the stream synchronised, untimed, every 100), a gpus_fill_u32 launch over 1 MiB of such memory with a
 * cuCtxSynchronize (p50), and 1 MiB and 64 MiB copies each way (GB/s), in sessions with plain allocations
 * and with stable ones, alternating which goes first in each round; prints the medians and stable/plain.
 */
@Command(name = "bench-stable-addresses", mixinStandardHelpOptions = true,
        description = "Address-stable memory against plain cuMemAlloc: allocation latency, launches, copies.")
public final class StableAddressesBench implements Callable<Integer> {
    private static final String PROPERTY = "gpusockets.backend.stableAddresses";

    @Option(names = "--rounds", defaultValue = "4", description = "Rounds, each one session of either kind. Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver of the in-process backend. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/stable-addresses.md.")
    Path out;

    private final PrintStream console = System.out;

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new StableAddressesBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        DriverHost host = device.open(null);
        console.println("bench-stable-addresses: " + Runtime.getRuntime().availableProcessors() + " cores, "
                + host.description());
        Map<String, List<Double>> plain = new LinkedHashMap<>(), stable = new LinkedHashMap<>();
        Path dir = Files.createTempDirectory("gpusockets-stable-bench");
        String was = System.getProperty(PROPERTY);
        try (BackendServer backend = new BackendServer(host, BackendSettings.fromSystemProperties())) {
            String uri = backend.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            for (int round = 1; round <= rounds; round++) {
                for (int k = 0; k < 2; k++) {
                    boolean on = (round + k) % 2 == 0;
                    System.setProperty(PROPERTY, Boolean.toString(on));
                    Map<String, Double> r = session(uri);
                    r.forEach((name, v) -> (on ? stable : plain).computeIfAbsent(name, n -> new ArrayList<>()).add(v));
                    console.println("[round " + round + "/" + rounds + "] " + (on ? "stable" : "plain ") + " " + r);
                }
            }
        } finally {
            if (was == null) {
                System.clearProperty(PROPERTY);
            } else {
                System.setProperty(PROPERTY, was);
            }
            Files.deleteIfExists(dir.resolve("b.sock"));
            Files.deleteIfExists(dir);
        }
        StringBuilder t = new StringBuilder(String.format("%-24s %12s %12s %9s%n", "figure", "plain", "stable", "ratio"));
        for (String name : plain.keySet()) {
            double p = DriverBench.median(plain.get(name).stream().mapToDouble(Double::doubleValue).toArray());
            double s = DriverBench.median(stable.get(name).stream().mapToDouble(Double::doubleValue).toArray());
            t.append(String.format("%-24s %12.2f %12.2f %9.2f%n", name, p, s, s / p));
        }
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("stable-addresses.md"), "# bench-stable-addresses\n\n" + host.description() + ", "
                    + Runtime.getRuntime().availableProcessors() + " cores, " + rounds + " rounds (medians; µs, or GB/s for copies)\n\n```\n" + t + "```\n");
        }
        return 0;
    }

    /** One session's figures. */
    private static Map<String, Double> session(String uri) throws Exception {
        Map<String, Double> r = new LinkedHashMap<>();
        try (GpuSocketsCalls calls = GpuSocketsCalls.open(uri); Arena arena = Arena.ofConfined()) {
            RemoteCudaDriver cu = calls.driver();
            MemorySegment out = arena.allocate(8);
            for (long bytes : new long[] {256, 64 << 10, 4 << 20}) {
                Histogram h = new Histogram(3);
                int n = bytes >= (4 << 20) ? 300 : 2000;
                for (int i = 0; i < n + n / 4; i++) {
                    long t0 = System.nanoTime();
                    Cu.check(cu.cuMemAlloc(out, bytes), "cuMemAlloc");
                    Cu.check(cu.cuMemFree(out.get(JAVA_LONG, 0)), "cuMemFree");
                    if (i >= n / 4) {
                        h.recordValue(System.nanoTime() - t0);
                    }
                }
                r.put("alloc+free " + label(bytes) + " µs", h.getValueAtPercentile(50) / 1e3);
            }
            Cu.check(cu.cuStreamCreate(out, 0), "cuStreamCreate");
            long stream = out.get(JAVA_LONG, 0);
            for (long bytes : new long[] {256, 64 << 10, 4 << 20}) {
                Histogram h = new Histogram(3);
                int n = 2000;
                for (int i = 0; i < n + n / 4; i++) {
                    long t0 = System.nanoTime();
                    Cu.check(cu.cuMemAllocAsync(out, bytes, stream), "cuMemAllocAsync");
                    Cu.check(cu.cuMemFreeAsync(out.get(JAVA_LONG, 0), stream), "cuMemFreeAsync");
                    if (i >= n / 4) {
                        h.recordValue(System.nanoTime() - t0);
                    }
                    if (i % 100 == 99) {
                        Cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize"); // untimed, as a program syncs now and then
                    }
                }
                r.put("async alloc+free " + label(bytes) + " µs", h.getValueAtPercentile(50) / 1e3);
            }
            Cu.check(cu.cuStreamSynchronize(stream), "cuStreamSynchronize");
            Cu.check(cu.cuStreamDestroy(stream), "cuStreamDestroy");
            try (Kernels k = Kernels.load(cu)) {
                long fill = k.function("gpus_fill_u32");
                int words = (1 << 20) / 4;
                Cu.check(cu.cuMemAlloc(out, 4L * words), "cuMemAlloc");
                long p = out.get(JAVA_LONG, 0);
                MemorySegment args = arena.allocate(ADDRESS, 3);
                MemorySegment a0 = arena.allocate(JAVA_LONG), a1 = arena.allocate(JAVA_INT), a2 = arena.allocate(JAVA_INT);
                a0.set(JAVA_LONG, 0, p);
                a1.set(JAVA_INT, 0, 7);
                a2.set(JAVA_INT, 0, words);
                args.setAtIndex(ADDRESS, 0, a0);
                args.setAtIndex(ADDRESS, 1, a1);
                args.setAtIndex(ADDRESS, 2, a2);
                Histogram h = new Histogram(3);
                for (int i = 0; i < 250; i++) {
                    long t0 = System.nanoTime();
                    Cu.check(cu.cuLaunchKernel(fill, words / 256, 1, 1, 256, 1, 1, 0, 0, args, MemorySegment.NULL), "launch");
                    Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                    if (i >= 50) {
                        h.recordValue(System.nanoTime() - t0);
                    }
                }
                Cu.check(cu.cuMemFree(p), "cuMemFree");
                r.put("fill 1MiB + sync µs", h.getValueAtPercentile(50) / 1e3);
            }
            double[] small = calls.copies(1L << 20, 8, 64);
            double[] big = calls.copies(64L << 20, 1, 4);
            r.put("HtoD 1MiB GB/s", small[0]);
            r.put("DtoH 1MiB GB/s", small[1]);
            r.put("HtoD 64MiB GB/s", big[0]);
            r.put("DtoH 64MiB GB/s", big[1]);
        }
        return r;
    }

    private static String label(long bytes) {
        return bytes >= (1 << 20) ? (bytes >> 20) + "MiB" : bytes >= 1024 ? (bytes >> 10) + "KiB" : bytes + "B";
    }
}
