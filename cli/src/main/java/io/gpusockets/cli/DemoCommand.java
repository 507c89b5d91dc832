package io.gpusockets.cli;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.workloads.DeviceQuery;
import io.gpusockets.cli.workloads.MemcpyRoundTrips;
import io.gpusockets.cli.workloads.NullCalls;
import io.gpusockets.cli.workloads.WorkloadSuite;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.emulated.ptx.PtxEngine;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import io.gpusockets.protocol.transport.Transports;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets demo}: the main job end to end. Starts a backend (the real driver when there is a
 * GPU, else the emulated device, and says which) or uses {@code --server}, then runs through the
 * frontend, on every transport available: a device query, a vector add of 1M floats checked against
 * the CPU, memcpy round trips 4 KiB..64 MiB checked byte for byte, and 10,000 null calls.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run the main job through the frontend on every available transport and check every result.")
final class DemoCommand implements Callable<Integer> {
    @Option(names = "--server", paramLabel = "URI", description = "Use this backend instead of starting one.")
    String server;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "Driver of the backend the demo starts. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--libcuda", paramLabel = "PATH", description = "libcuda.so.1 for the backend the demo starts.")
    String libcuda;

    @Spec
    CommandSpec spec;

    private record Row(String transport, String device, List<WorkloadSuite.Outcome> outcomes) {
        boolean passed() {
            return outcomes.stream().allMatch(WorkloadSuite.Outcome::passed);
        }

        <T> T result(String name, Class<T> type) {
            return outcomes.stream().filter(o -> o.workload().equals(name) && type.isInstance(o.result()))
                    .map(o -> type.cast(o.result())).findFirst().orElse(null);
        }
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        List<String> uris = new ArrayList<>();
        BackendServer backend = null;
        Path socketDir = null;
        boolean emulatedHere = false;
        PtxEngine.Statistics ptxBefore = PtxEngine.statistics();
        try {
            if (server != null) {
                uris.add(server);
                out.println("demo: using the backend at " + server);
            } else {
                DriverHost host = device.open(libcuda);
                boolean emulated = host.driver() instanceof EmulatedDevice;
                out.println("demo: started a backend with " + (emulated
                        ? "the EMULATED device (no GPU here: " + describeNoGpu() + ")"
                        : "the REAL driver: " + host.description()));
                if (emulated) {
                    out.println("demo: " + EmulatedDevice.KERNELS);
                    emulatedHere = true;
                }
                backend = new BackendServer(host, BackendSettings.fromSystemProperties());
                socketDir = Files.createTempDirectory("gpusockets-demo");
                for (String scheme : Transports.byScheme().keySet()) {
                    String listen = switch (scheme) {
                        case "tcp" -> "tcp://127.0.0.1:0";
                        case "unix" -> "unix://" + socketDir.resolve("backend.sock");
                        case "fdunix" -> "fdunix://" + socketDir.resolve("backend-fd.sock");
                        case "ring" -> "ring://demo-" + ProcessHandle.current().pid();
                        default -> null; // transports that need a peer machine (vsock, vchan) are not self-hosted
                    };
                    if (listen != null) {
                        uris.add(backend.listen(TransportUri.parse(listen)).toString());
                    }
                }
            }
            out.flush();
            List<Row> rows = new ArrayList<>();
            for (String uri : uris) {
                out.println("demo: running on " + uri + " ...");
                out.flush();
                rows.add(run(uri, out));
            }
            printTable(out, rows);
            if (emulatedHere) {
                out.println("demo: " + ptxLaunches(ptxBefore, PtxEngine.statistics()));
            }
            boolean ok = rows.stream().allMatch(Row::passed);
            out.println(ok ? "demo: every check passed" : "demo: FAILED (see above)");
            out.flush();
            return ok ? 0 : 1;
        } finally {
            if (backend != null) {
                backend.close();
            }
            if (socketDir != null) {
                Files.deleteIfExists(socketDir.resolve("backend.sock"));
                Files.deleteIfExists(socketDir.resolve("backend-fd.sock"));
                Files.deleteIfExists(socketDir);
            }
        }
    }

    /** What ran from PTX on the emulated device during the demo, from its engines' statistics. */
    static String ptxLaunches(PtxEngine.Statistics before, PtxEngine.Statistics after) {
        long compiled = after.compiledLaunches() - before.compiledLaunches();
        long interpreted = after.interpretedLaunches() - before.interpretedLaunches();
        long instructions = after.compiledInstructions() - before.compiledInstructions() + after.interpretedInstructions()
                - before.interpretedInstructions();
        return String.format("kernels: %d launches ran from their PTX on the emulated device (%d compiled to JVM bytecode, "
                + "%d interpreted), %,d thread-instructions", compiled + interpreted, compiled, interpreted, instructions);
    }

    private String describeNoGpu() {
        Throwable why = io.gpusockets.backend.driver.NativeLibrary.loadFailure();
        return why != null ? "libcuda.so.1 not loadable" : "no CUDA device";
    }

    private Row run(String uri, PrintWriter out) {
        String scheme = TransportUri.parse(uri).scheme();
        try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
            List<WorkloadSuite.Outcome> outcomes = WorkloadSuite.run(d, WorkloadSuite.Options.defaults());
            for (WorkloadSuite.Outcome o : outcomes) {
                out.printf("  %-18s %s %s%n", o.workload(), o.passed() ? "ok  " : "FAIL", o.detail());
            }
            DeviceQuery.Result q = outcomes.stream().filter(o -> o.result() instanceof DeviceQuery.Result)
                    .map(o -> (DeviceQuery.Result) o.result()).findFirst().orElse(null);
            return new Row(scheme, q != null ? q.name() : "?", outcomes);
        } catch (Exception e) {
            out.println("  cannot use " + uri + ": " + e.getMessage());
            return new Row(scheme, "unreachable", List.of(new WorkloadSuite.Outcome("connect", null, e)));
        }
    }

    private static void printTable(PrintWriter out, List<Row> rows) {
        out.println();
        out.printf("%-10s %-38s %12s %12s %11s %11s  %s%n", "transport", "device", "null p50 us", "null p99 us",
                "HtoD GB/s", "DtoH GB/s", "checks");
        for (Row r : rows) {
            NullCalls.Result n = r.result(WorkloadSuite.NULL_CALLS, NullCalls.Result.class);
            MemcpyRoundTrips.Result m = r.result(WorkloadSuite.MEMCPY, MemcpyRoundTrips.Result.class);
            out.printf("%-10s %-38s %12s %12s %11s %11s  %s%n", r.transport(), truncate(r.device(), 38),
                    n == null ? "-" : String.format("%.1f", n.p50Micros()),
                    n == null ? "-" : String.format("%.1f", n.p99Micros()),
                    m == null ? "-" : String.format("%.2f", m.largest().htodGBs()),
                    m == null ? "-" : String.format("%.2f", m.largest().dtohGBs()),
                    r.passed() ? "all passed" : "FAILED: " + String.join(", ", r.outcomes().stream()
                            .filter(o -> !o.passed()).map(WorkloadSuite.Outcome::workload).toList()));
        }
        out.println("(GB/s at 64 MiB; null call = cuCtxGetDevice round trip)");
    }

    private static String truncate(String s, int n) {
        return s.length() <= n ? s : s.substring(0, n - 1) + "~";
    }
}
