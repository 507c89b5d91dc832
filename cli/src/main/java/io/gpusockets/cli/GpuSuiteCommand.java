package io.gpusockets.cli;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.cli.workloads.MemcpyRoundTrips;
import io.gpusockets.cli.workloads.WorkloadResult;
import io.gpusockets.cli.workloads.WorkloadSuite;
import io.gpusockets.cli.workloads.WorkloadSuite.Outcome;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code gpusockets gpu-suite --server URI}: runs {@link WorkloadSuite} on the real driver in this
 * process, then through a backend, compares the outputs byte for byte and prints a table with the
 * native and remote times. Exit status: 0 when every workload passed on both sides with identical
 * outputs, 1 when any did not, 2 when either driver could not be opened.
 *
 * <p>The remote driver comes from a {@link RemoteDriverFactory} that Main installs (this module must
 * not know the frontend's construction details): {@code new GpuSuiteCommand(RemoteCudaDriver::connect)},
 * or {@link #useRemoteFactory} before picocli instantiates the command through its no-arg constructor.
 */
@Command(name = "gpu-suite", mixinStandardHelpOptions = true,
        description = "Runs the GPU workloads natively (libcuda in this process) and through a backend, "
                + "compares their outputs byte for byte and prints native and remote times.")
public final class GpuSuiteCommand implements Callable<Integer> {
    public static final int EXIT_PASS = 0;
    public static final int EXIT_MISMATCH = 1;
    public static final int EXIT_SETUP = 2;

    /** Connects a {@link CudaDriver} to a backend; a result that is {@link AutoCloseable} is closed after the run. */
    @FunctionalInterface
    public interface RemoteDriverFactory {
        CudaDriver connect(String uri) throws Exception;
    }

    /** Opens the in-process driver (tests substitute one). */
    @FunctionalInterface
    interface NativeDriverFactory {
        CudaDriver open(String libcudaPath);
    }

    private static volatile RemoteDriverFactory defaultRemoteFactory;

    @Option(names = "--server", required = true, paramLabel = "URI",
            description = "Backend to compare against, e.g. tcp://127.0.0.1:47100 or unix:///run/gpusockets.sock")
    String server;

    @Option(names = "--libcuda", paramLabel = "PATH",
            description = "libcuda for the native run (default: libcuda.so.1 through the dynamic loader)")
    String libcuda;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "1",
            description = "Untimed runs of the whole suite on each side first, so that neither side's times include "
                    + "JIT compilation or first-use costs (default: ${DEFAULT-VALUE})")
    int warmup;

    @Spec
    CommandSpec spec;

    private final RemoteDriverFactory remoteFactory;
    private final NativeDriverFactory nativeFactory;
    private final WorkloadSuite.Options options;

    /** For picocli's default factory: uses the factory installed with {@link #useRemoteFactory}. */
    public GpuSuiteCommand() {
        this(null);
    }

    public GpuSuiteCommand(RemoteDriverFactory remoteFactory) {
        this(remoteFactory, NativeCudaDriver::open, WorkloadSuite.Options.defaults());
    }

    GpuSuiteCommand(RemoteDriverFactory remoteFactory, NativeDriverFactory nativeFactory, WorkloadSuite.Options options) {
        this.remoteFactory = remoteFactory;
        this.nativeFactory = nativeFactory;
        this.options = options;
    }

    /** Installs the factory that instances made with the no-arg constructor use (Main calls this once). */
    public static void useRemoteFactory(RemoteDriverFactory factory) {
        defaultRemoteFactory = factory;
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        RemoteDriverFactory factory = remoteFactory != null ? remoteFactory : defaultRemoteFactory;
        if (factory == null) {
            out.println("gpu-suite: no remote driver factory installed (Main must construct GpuSuiteCommand with "
                    + "RemoteCudaDriver::connect or call GpuSuiteCommand.useRemoteFactory)");
            out.flush();
            return EXIT_SETUP;
        }
        CudaDriver nativeDriver;
        try {
            nativeDriver = nativeFactory.open(libcuda);
        } catch (RuntimeException e) {
            out.println("gpu-suite: cannot open the native driver: " + e.getMessage());
            out.flush();
            return EXIT_SETUP;
        }
        out.println("gpu-suite: native = " + describe(nativeDriver));
        out.flush();
        List<Outcome> nativeRun = measure(nativeDriver);

        CudaDriver remote;
        try {
            remote = factory.connect(server);
        } catch (Exception e) {
            out.println("gpu-suite: cannot connect to " + server + ": " + e.getMessage());
            out.flush();
            return EXIT_SETUP;
        }
        out.println("gpu-suite: remote = " + server + " (" + remote.getClass().getSimpleName() + ")");
        out.flush();
        List<Outcome> remoteRun;
        try {
            remoteRun = measure(remote);
        } finally {
            if (remote instanceof AutoCloseable closeable) {
                try {
                    closeable.close();
                } catch (Exception e) {
                    out.println("gpu-suite: closing the remote driver failed: " + e.getMessage());
                }
            }
        }
        boolean pass = report(out, nativeRun, remoteRun);
        out.flush();
        return pass ? EXIT_PASS : EXIT_MISMATCH;
    }

    private List<Outcome> measure(CudaDriver driver) {
        for (int i = 0; i < warmup; i++) {
            WorkloadSuite.run(driver, options);
        }
        return WorkloadSuite.run(driver, options);
    }

    /** Prints the table and details; true when every row is ok. */
    static boolean report(PrintWriter out, List<Outcome> nativeRun, List<Outcome> remoteRun) {
        Set<String> names = new LinkedHashSet<>();
        nativeRun.forEach(o -> names.add(o.workload()));
        remoteRun.forEach(o -> names.add(o.workload()));
        List<String> details = new ArrayList<>();
        boolean pass = true;
        out.println();
        out.printf("%-18s %12s %12s %8s  %s%n", "workload", "native", "remote", "ratio", "check");
        for (String name : names) {
            Optional<Outcome> n = find(nativeRun, name);
            Optional<Outcome> r = find(remoteRun, name);
            String check = check(n, r);
            pass &= check.equals("ok");
            long nn = n.map(GpuSuiteCommand::nanos).orElse(-1L);
            long rn = r.map(GpuSuiteCommand::nanos).orElse(-1L);
            out.printf("%-18s %12s %12s %8s  %s%n", name, millis(nn), millis(rn), ratio(rn, nn), check);
            details.add(String.format("  %-18s native: %s", name, n.map(Outcome::detail).orElse("(did not run)")));
            details.add(String.format("  %-18s remote: %s", "", r.map(Outcome::detail).orElse("(did not run)")));
        }
        out.println("(time in driver calls, after warm-up runs; ratio = remote / native, lower is better)");
        out.println();
        out.println("details:");
        details.forEach(out::println);
        memcpyTable(out, nativeRun, remoteRun);
        out.println();
        out.println(pass
                ? "gpu-suite: PASS (" + names.size() + " workloads passed natively and remotely with identical outputs)"
                : "gpu-suite: FAIL (see the check column)");
        return pass;
    }

    private static String check(Optional<Outcome> n, Optional<Outcome> r) {
        if (n.isEmpty() || r.isEmpty()) {
            return "FAIL: ran only " + (n.isPresent() ? "natively" : "remotely");
        }
        if (!n.get().passed()) {
            return "FAIL native: " + n.get().detail();
        }
        if (!r.get().passed()) {
            return "FAIL remote: " + r.get().detail();
        }
        byte[] a = n.get().result().comparableOutput();
        byte[] b = r.get().result().comparableOutput();
        int at = Arrays.mismatch(a, b);
        if (at >= 0) {
            return "MISMATCH: outputs differ at byte " + at + " (native " + a.length + " bytes, remote " + b.length + ")";
        }
        return "ok";
    }

    private static void memcpyTable(PrintWriter out, List<Outcome> nativeRun, List<Outcome> remoteRun) {
        Optional<MemcpyRoundTrips.Result> n = memcpy(nativeRun);
        Optional<MemcpyRoundTrips.Result> r = memcpy(remoteRun);
        if (n.isEmpty() || r.isEmpty() || n.get().sizes().size() != r.get().sizes().size()) {
            return;
        }
        out.println();
        out.println("memcpy throughput, pageable host memory (ratio = remote / native, higher is better):");
        out.printf("%-10s %14s %14s %7s %14s %14s %7s%n", "memcpy", "HtoD native", "HtoD remote", "ratio",
                "DtoH native", "DtoH remote", "ratio");
        for (int i = 0; i < n.get().sizes().size(); i++) {
            MemcpyRoundTrips.SizeResult a = n.get().sizes().get(i);
            MemcpyRoundTrips.SizeResult b = r.get().sizes().get(i);
            out.printf("%-10s %9.2f GB/s %9.2f GB/s %6.2fx %9.2f GB/s %9.2f GB/s %6.2fx%n", human(a.bytes()),
                    a.htodGBs(), b.htodGBs(), b.htodGBs() / a.htodGBs(), a.dtohGBs(), b.dtohGBs(), b.dtohGBs() / a.dtohGBs());
        }
    }

    private static Optional<MemcpyRoundTrips.Result> memcpy(List<Outcome> run) {
        return find(run, WorkloadSuite.MEMCPY)
                .map(Outcome::result)
                .filter(MemcpyRoundTrips.Result.class::isInstance)
                .map(MemcpyRoundTrips.Result.class::cast);
    }

    private static Optional<Outcome> find(List<Outcome> run, String name) {
        return run.stream().filter(o -> o.workload().equals(name)).findFirst();
    }

    private static long nanos(Outcome o) {
        WorkloadResult r = o.result();
        return r == null ? -1 : r.driverNanos();
    }

    private static String millis(long nanos) {
        return nanos < 0 ? "-" : String.format("%.3f ms", nanos / 1e6);
    }

    private static String ratio(long remote, long nativeNanos) {
        return remote < 0 || nativeNanos <= 0 ? "-" : String.format("%.2fx", remote / (double) nativeNanos);
    }

    private static String human(long bytes) {
        return bytes >= 1L << 20 ? (bytes >> 20) + " MiB" : (bytes >> 10) + " KiB";
    }

    private static String describe(CudaDriver driver) {
        return driver instanceof NativeCudaDriver n ? n.description() : driver.getClass().getSimpleName();
    }
}
