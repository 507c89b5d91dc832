package io.gpusockets.benchmarks;

import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CuResult;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bench isolation}: what isolation mode process costs against mode context (README "Isolation
 * modes"). For each mode a backend is started as users start it ({@code gpusockets backend --isolation M},
 * its own JVM, on unix://), and one client measures the null call (cuCtxGetDevice round trips: p50, p99)
 * and the start of a session (connect, handshake, primary context retained and current, first call
 * answered), sessions one after another with a pause between them so that an idle worker is ready again
 * ({@code process}), or with no idle workers kept, so that each session waits for a worker JVM to start
 * ({@code process-cold}).
 */
@Command(name = "bench isolation", mixinStandardHelpOptions = true,
        description = "Null-call latency and session start time in isolation modes context and process.")
public final class IsolationBench implements Callable<Integer> {
    @Option(names = "--modes", split = ",", paramLabel = "LIST", defaultValue = "context,process,process-cold",
            description = "Modes to measure: context, process (one idle worker kept), process-cold (none). Default: ${DEFAULT-VALUE}.")
    List<String> modes;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "auto",
            description = "The backend's driver. Default: ${DEFAULT-VALUE}.")
    String device;

    @Option(names = "--calls", paramLabel = "N", defaultValue = "100000", description = "Measured null calls. Default: ${DEFAULT-VALUE}.")
    int calls;

    @Option(names = "--sessions", paramLabel = "N", defaultValue = "20", description = "Measured session starts. Default: ${DEFAULT-VALUE}.")
    int sessions;

    @Option(names = "--pause-ms", paramLabel = "MS", defaultValue = "1500",
            description = "Pause after each session, for the backend to get a worker ready again. Default: ${DEFAULT-VALUE}.")
    long pauseMillis;

    @Option(names = "--quick", description = "20000 calls, 5 sessions (a smoke run).")
    boolean quick;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write the table to DIR/isolation.txt.")
    Path out;

    /** One mode's figures. */
    record Row(String mode, Latency nullCall, double startP50Millis, double startMinMillis, double startMaxMillis) {
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new IsolationBench()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (quick) {
            calls = 20_000;
            sessions = 5;
        }
        List<Row> rows = new ArrayList<>();
        for (String mode : modes) {
            rows.add(measure(mode));
        }
        String table = table(rows);
        System.out.print(table);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("isolation.txt"), table);
        }
        return 0;
    }

    private Row measure(String mode) throws Exception {
        List<String> backendArgs = switch (mode) {
            case "context" -> List.of("--isolation", "context");
            case "process" -> List.of("--isolation", "process", "--idle-workers", "1");
            case "process-cold" -> List.of("--isolation", "process", "--idle-workers", "0");
            default -> throw new CommandLine.ParameterException(new CommandLine(this), "unknown mode: " + mode);
        };
        Path dir = Files.createTempDirectory("gpusockets-isolation-bench");
        Path sock = dir.resolve("backend.sock");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "io.gpusockets.cli.Main", "backend", "--device", device, "--listen", "unix://" + sock));
        cmd.addAll(backendArgs);
        Process backend = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try {
            String uri = awaitListening(backend);
            Thread.sleep(pauseMillis); // the idle worker (process) starts
            Latency nullCall = nullCalls(uri);
            Thread.sleep(pauseMillis);
            double[] starts = new double[sessions];
            for (int i = 0; i < sessions; i++) {
                starts[i] = sessionStart(uri);
                Thread.sleep(pauseMillis);
            }
            Arrays.sort(starts);
            return new Row(mode, nullCall, starts[starts.length / 2], starts[0], starts[starts.length - 1]);
        } finally {
            backend.destroy();
            if (!backend.waitFor(20, TimeUnit.SECONDS)) {
                backend.destroyForcibly();
            }
            Files.deleteIfExists(sock);
            Files.deleteIfExists(dir);
        }
    }

    private static String awaitListening(Process backend) throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(backend.getInputStream(), StandardCharsets.UTF_8));
        List<String> seen = new ArrayList<>();
        for (String line; (line = r.readLine()) != null; ) {
            seen.add(line);
            int at = line.indexOf("listening on ");
            if (line.startsWith("gpusockets backend:") && at >= 0) {
                Thread.ofPlatform().daemon().start(() -> drain(r));
                return line.substring(at + "listening on ".length()).strip();
            }
        }
        throw new IOException("backend did not start: " + String.join("\n", seen));
    }

    private static void drain(BufferedReader r) {
        try {
            while (r.readLine() != null) {
                // the backend's log is not part of the figures
            }
        } catch (IOException ignored) {
            // the backend stopped
        }
    }

    private Latency nullCalls(String uri) throws IOException {
        try (RemoteCudaDriver cu = RemoteCudaDriver.connect(uri); Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(ValueLayout.JAVA_INT);
            current(cu, arena);
            for (int i = 0; i < Math.min(calls, 20_000); i++) {
                check(cu.cuCtxGetDevice(dev), "cuCtxGetDevice");
            }
            Histogram h = new Histogram(3);
            for (int i = 0; i < calls; i++) {
                long t0 = System.nanoTime();
                int r = cu.cuCtxGetDevice(dev);
                h.recordValue(Math.max(0, System.nanoTime() - t0));
                check(r, "cuCtxGetDevice");
            }
            return Latency.of(h);
        }
    }

    /** Milliseconds from connect to the first call's answer in a fresh session. */
    private static double sessionStart(String uri) throws IOException {
        long t0 = System.nanoTime();
        try (RemoteCudaDriver cu = RemoteCudaDriver.connect(uri); Arena arena = Arena.ofConfined()) {
            current(cu, arena);
            check(cu.cuCtxGetDevice(arena.allocate(ValueLayout.JAVA_INT)), "cuCtxGetDevice");
            return (System.nanoTime() - t0) / 1e6;
        }
    }

    private static void current(RemoteCudaDriver cu, Arena arena) {
        MemorySegment ctx = arena.allocate(ValueLayout.JAVA_LONG);
        check(cu.cuDevicePrimaryCtxRetain(ctx, 0), "cuDevicePrimaryCtxRetain");
        check(cu.cuCtxSetCurrent(ctx.get(ValueLayout.JAVA_LONG, 0)), "cuCtxSetCurrent");
    }

    private static void check(int r, String what) {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException(what + " failed: " + CuResult.name(r));
        }
    }

    static String table(List<Row> rows) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "%-13s %14s %14s %16s %16s %16s%n", "isolation", "null p50 µs", "null p99 µs",
                "start p50 ms", "start min ms", "start max ms"));
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%-13s %14.1f %14.1f %16.1f %16.1f %16.1f%n", r.mode(), r.nullCall().p50Micros(),
                    r.nullCall().p99Micros(), r.startP50Millis(), r.startMinMillis(), r.startMaxMillis()));
        }
        return b.toString();
    }

}
