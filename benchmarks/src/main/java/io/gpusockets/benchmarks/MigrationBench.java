package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.server.Migration;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.cli.workloads.PrimaryContext;
import io.gpusockets.frontend.FrontendConfig;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Live migration of a running session between two backends (issue 23, {@link BackendServer#migrate}) against the
 * copy bound measured in the same run. For each size and dirty rate, each round: two backends (context isolation,
 * address-stable memory, resume; B accepts migrations; both on the chosen driver: A in this JVM, B in it too on a
 * second emulated device, or with {@code --target process}, always on the real driver, as {@code gpusockets backend}
 * in a process of its own, on the same GPU), a program (a RemoteCudaDriver on A's unix socket) holds SIZE MiB in allocations of at most
 * 256 MiB, each 1 MiB chunk set to a value of its own; the backend's driver copies the same bytes device-to-host and
 * host-to-device through pinned memory ({@link CheckpointBench#pinnedCopies}: the copy bound, DtoH + HtoD time); a
 * program thread then launches, every 10 ms, a PTX kernel adding 1 to every word of whole 1 MiB chunks, as many as
 * make PCT% of the memory per second, spread over the memory (chunk j*stride mod n, stride prime to n), and
 * counts them; after a second of that, A migrates the session to B (over {@code --transport}: unix, or tcp with a
 * pre-shared key both backends hold), the program runs on at B for a moment, stops, and every word is read back and
 * checked against its chunk's value plus its count. Prints progress on stderr and, per size and rate, the medians
 * over the rounds: the dirty rate reached, the rounds' sent chunks (of the last round run), total time, downtime and
 * its split (drain, final hash, final copy, restore, switch), the bound, total/bound; writes DIR/migration.md with
 * {@code --out}.
 *
 * <p>Bounds: chunks are 1 MiB (the migration's own chunk size) and dirtied whole, so a rate below one chunk per
 * migration dirties nothing it sees; B (isolation mode context) lands the memory as it arrives and its restore adopts
 * it, so its temp image (java.io.tmpdir of B) holds the header and arrays only ({@code MigrationLanding}).
 */
@Command(name = "bench-migration", mixinStandardHelpOptions = true,
        description = "Live migration of a session dirtying its memory, against the pinned-copy bound, at several sizes.")
public final class MigrationBench implements Callable<Integer> {
    private static final String STABLE = "gpusockets.backend.stableAddresses";
    private static final long MIB = 1L << 20;
    private static final long CHUNK = MIB;
    private static final int CHUNK_WORDS = (int) (CHUNK / 4);
    private static final long MAX_ALLOCATION = 256 * MIB;
    private static final long TICK_NANOS = 10_000_000L;

    /** Adds 1 to each of {@code words} 32-bit words at {@code base}, one thread each. */
    static final String PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .entry bump(.param .u64 base, .param .u32 words)
            {
                .reg .u32 %r<8>;
                .reg .u64 %rd<4>;
                .reg .pred %p<2>;
                ld.param.u64 %rd1, [base];
                ld.param.u32 %r1, [words];
                mov.u32 %r3, %ctaid.x;
                mov.u32 %r4, %ntid.x;
                mov.u32 %r5, %tid.x;
                mad.lo.u32 %r6, %r3, %r4, %r5;
                setp.ge.u32 %p1, %r6, %r1;
                @%p1 bra DONE;
                mul.wide.u32 %rd2, %r6, 4;
                add.u64 %rd3, %rd1, %rd2;
                ld.global.u32 %r7, [%rd3];
                add.u32 %r7, %r7, 1;
                st.global.u32 [%rd3], %r7;
            DONE:
                ret;
            }
            """;

    @Option(names = "--sizes", split = ",", paramLabel = "MIB", defaultValue = "64,256",
            description = "Session memory sizes in MiB. Default: ${DEFAULT-VALUE} (the GPU pass: 1024,8192,32768).")
    List<Long> sizesMib;

    @Option(names = "--dirty", split = ",", paramLabel = "PCT", defaultValue = "1,10",
            description = "Percent of the memory the program dirties per second. Default: ${DEFAULT-VALUE}.")
    List<Double> dirtyPct;

    @Option(names = "--rounds", defaultValue = "3", description = "Migrations per size and rate. Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver of both in-process backends. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--transport", paramLabel = "unix|tcp", defaultValue = "unix",
            description = "How A reaches B (tcp: both hold a pre-shared key). Default: ${DEFAULT-VALUE}.")
    String transport;

    @Option(names = "--target", paramLabel = "jvm|process",
            description = "Where backend B runs: in this JVM, or as `gpusockets backend` in a process of its own (the"
                    + " real driver's address space is the process's: the restored session's address window, still held"
                    + " by A until the switch, would be taken). Default: jvm on the emulated device, process on the real"
                    + " driver.")
    String target;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/migration.md.")
    Path out;

    private final PrintStream console = System.out;
    private final PrintStream progress = System.err;
    private String description = "";

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new MigrationBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    /** One migration's figures. */
    record Run(Migration.Result result, long totalNanos, double boundNanos, double dirtiedMibPerSecond) {
    }

    @Override
    public Integer call() throws Exception {
        if (!transport.equals("unix") && !transport.equals("tcp")) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--transport=" + transport + ": unix or tcp");
        }
        if (target != null && !target.equals("jvm") && !target.equals("process")) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--target=" + target + ": jvm or process");
        }
        if (rounds < 1 || sizesMib.stream().anyMatch(m -> m < 1) || dirtyPct.stream().anyMatch(p -> !(p >= 0 && p <= 1000))) {
            throw new CommandLine.ParameterException(new CommandLine(this),
                    "--rounds >= 1, --sizes >= 1 MiB, --dirty 0..1000 percent per second");
        }
        System.setProperty(STABLE, "true");
        System.setProperty("gpusockets.resume", "true");
        Path dir = Files.createTempDirectory("gpusockets-migration-bench");
        String header = String.format(Locale.ROOT, "%7s %6s %8s %-22s %8s %9s %9s %7s %7s %7s %8s %7s %9s %8s",
                "MiB", "%/s", "MiB/s", "rounds (sent chunks)", "sent MiB", "total ms", "down ms", "drain", "hash",
                "copy", "restore", "switch", "bound ms", "total/b");
        List<String> rows = new ArrayList<>();
        try {
            for (long mib : sizesMib) {
                for (double pct : dirtyPct) {
                    List<Run> runs = new ArrayList<>();
                    for (int r = 1; r <= rounds; r++) {
                        Run run = migrateOnce(mib * MIB, pct, dir);
                        runs.add(run);
                        Migration.Result m = run.result();
                        progress.printf(Locale.ROOT, "[%d MiB, %.1f%%/s, round %d/%d] dirtied %.1f MiB/s; rounds %s; total %.0f ms,"
                                        + " downtime %.1f ms (drain %.1f, hash %.1f, copy %.1f, restore %.1f, switch %.1f);"
                                        + " bound %.0f ms%n", mib, pct, r, rounds, run.dirtiedMibPerSecond(), rounds(m),
                                run.totalNanos() / 1e6, ms(m.downtimeNanos()), ms(m.drainNanos()), ms(m.hashNanos()),
                                ms(m.finalCopyNanos()), ms(m.restoreNanos()), ms(m.switchNanos()), run.boundNanos() / 1e6);
                    }
                    double total = med(runs, x -> x.totalNanos()), bound = med(runs, Run::boundNanos);
                    rows.add(String.format(Locale.ROOT, "%7d %6.1f %8.1f %-22s %8.0f %9.0f %9.1f %7.1f %7.1f %7.1f %8.1f %7.1f %9.0f %8.2f",
                            mib, pct, med(runs, Run::dirtiedMibPerSecond), rounds(runs.getLast().result()),
                            med(runs, x -> x.result().bytes()) / MIB, total / 1e6,
                            med(runs, x -> x.result().downtimeNanos()) / 1e6, med(runs, x -> x.result().drainNanos()) / 1e6,
                            med(runs, x -> x.result().hashNanos()) / 1e6, med(runs, x -> x.result().finalCopyNanos()) / 1e6,
                            med(runs, x -> x.result().restoreNanos()) / 1e6, med(runs, x -> x.result().switchNanos()) / 1e6,
                            bound / 1e6, total / bound));
                }
            }
        } finally {
            try (var files = Files.list(dir)) {
                for (Path f : files.toList()) {
                    Files.deleteIfExists(f);
                }
            }
            Files.deleteIfExists(dir);
        }
        StringBuilder t = new StringBuilder(header).append('\n');
        rows.forEach(r -> t.append(r).append('\n'));
        String line = "bench-migration: " + Runtime.getRuntime().availableProcessors() + " cores, " + description
                + ", A to B over " + transport + ", " + rounds + " rounds (medians; rounds column: the last round's)";
        console.println(line);
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("migration.md"), "# bench-migration\n\n" + line + ". MiB/s: what the program"
                    + " dirtied (whole 1 MiB chunks) while it was migrated; rounds: chunks each round sent, the last the"
                    + " final round at the stop; down ms = drain + hash + copy + restore + switch; bound: DtoH + HtoD of"
                    + " the same bytes through pinned memory in 8 MiB chunks by the backend's driver; total/b: the"
                    + " migration's total time over the bound.\n\n```\n" + t + "```\n");
        }
        return 0;
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    private static String rounds(Migration.Result m) {
        return m.rounds().stream().map(r -> Integer.toString(r.sentChunks())).collect(Collectors.joining("+"));
    }

    private static double med(List<Run> rs, java.util.function.ToDoubleFunction<Run> f) {
        return DriverBench.median(rs.stream().mapToDouble(f).toArray());
    }

    private static BackendServer server(DriverHost host, byte[] psk) {
        BackendSettings s = BackendSettings.fromSystemProperties();
        s = s.withServer(psk, s.allowedUids(), s.allowedCids(), s.handshakeMillis(), s.warmContexts());
        BackendServer server = new BackendServer(host, s);
        server.resumeGrace(Duration.ofSeconds(60));
        return server;
    }

    /** One migration of a session of {@code bytes} dirtying {@code pct}% of it per second: see the class. */
    private Run migrateOnce(long bytes, double pct, Path dir) throws Exception {
        byte[] psk = null;
        Map<String, String> env = new HashMap<>();
        if (transport.equals("tcp")) {
            byte[] random = new byte[32];
            new SecureRandom().nextBytes(random);
            psk = java.util.HexFormat.of().formatHex(random).getBytes(StandardCharsets.US_ASCII); // key files are text
            Path key = dir.resolve("psk");
            Files.write(key, psk);
            env.put(FrontendConfig.PSK_FILE_ENV, key.toString());
        }
        DriverHost hostA = device.open(null);
        boolean emulated = hostA.driver() instanceof io.gpusockets.emulated.EmulatedDevice;
        boolean process = target != null ? target.equals("process") : !emulated;
        if (!process && !emulated) {
            throw new IllegalArgumentException("--target jvm needs the emulated device: on the real driver both backends"
                    + " would share one address space, and the restored session's address window is A's until the switch");
        }
        description = hostA.description() + (process ? ", B in a process of its own" : ", B in this JVM");
        try (BackendServer a = server(hostA, psk); TargetBackend b = process ? new ProcessTarget(dir, psk)
                : new JvmTarget(dir, psk)) {
            String unixA = a.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            String unixB = b.unix();
            String target = transport.equals("tcp") ? b.tcp() : unixB;
            env.put(FrontendConfig.SERVER_ENV, unixA);
            try (RemoteCudaDriver cu = RemoteCudaDriver.connect(FrontendConfig.fromEnvironment(env))) {
                Cu.check(cu.cuInit(0), "cuInit");
                try (PrimaryContext pc = PrimaryContext.retain(cu, 0)) {
                    Program p = new Program(cu, pc.context(), bytes, pct);
                    double[] bound = CheckpointBench.pinnedCopies(hostA.driver(), bytes); // GB/s = bytes per ns
                    double boundNanos = bytes / bound[0] + bytes / bound[1];
                    long id = a.sessions().getFirst().id();
                    p.start();
                    Thread.sleep(1000);
                    int before = p.dirtied;
                    long t0 = System.nanoTime();
                    Migration.Result m = a.migrate(id, target, unixB, null);
                    long total = System.nanoTime() - t0;
                    double rate = (p.dirtied - before) * (double) CHUNK / MIB / (total / 1e9);
                    Thread.sleep(300);
                    p.stop();
                    if (!unixB.equals(cu.backendUri())) {
                        throw new IllegalStateException("the frontend is at " + cu.backendUri() + ", not " + unixB);
                    }
                    p.check();
                    p.free();
                    return new Run(m, total, boundNanos, rate);
                }
            }
        } finally {
            if (hostA.driver() instanceof io.gpusockets.emulated.EmulatedDevice e) {
                e.close();
            }
        }
    }

    /** Backend B, accepting migrations: its unix URI (the frontend's) and, with a key, its tcp URI. */
    private interface TargetBackend extends AutoCloseable {
        String unix();

        String tcp();
    }

    /** B in this JVM, on a driver of its own (a second emulated device). */
    private final class JvmTarget implements TargetBackend {
        private final DriverHost host;
        private final BackendServer server;
        private final String unix, tcp;

        JvmTarget(Path dir, byte[] psk) throws Exception {
            host = device.open(null);
            server = server(host, psk);
            server.acceptMigrations(true);
            unix = server.listen(TransportUri.parse("unix://" + dir.resolve("b.sock"))).toString();
            tcp = psk == null ? null : server.listen(TransportUri.parse("tcp://127.0.0.1:0")).toString();
        }

        @Override
        public String unix() {
            return unix;
        }

        @Override
        public String tcp() {
            return tcp;
        }

        @Override
        public void close() throws Exception {
            try {
                server.close();
            } finally {
                if (host.driver() instanceof io.gpusockets.emulated.EmulatedDevice e) {
                    e.close();
                }
            }
        }
    }

    /**
     * B as {@code gpusockets backend} in a JVM of its own (this JVM's java and class path), in isolation mode context
     * with address-stable memory, resume and {@code --accept-migrations} ({@link BackendProcess}); its URIs are read
     * from its "listening on" lines (its output goes to DIR/b.log).
     */
    private final class ProcessTarget implements TargetBackend {
        private final BackendProcess process;
        private final List<String> addresses;

        ProcessTarget(Path dir, byte[] psk) throws Exception {
            List<String> args = new ArrayList<>(List.of("--isolation", "context", "--stable-addresses", "--resume-grace",
                    "60", "--accept-migrations", "--listen", "unix://" + dir.resolve("b.sock")));
            if (psk != null) {
                args.addAll(List.of("--listen", "tcp://127.0.0.1:0", "--psk-file", dir.resolve("psk").toString()));
            }
            process = new BackendProcess("b", device, args, dir.resolve("b.log"));
            try {
                addresses = process.listening(psk != null ? 2 : 1, 120);
            } catch (RuntimeException | InterruptedException e) {
                process.close();
                throw e;
            }
        }

        private String first(String scheme) {
            return addresses.stream().filter(a -> a.startsWith(scheme + "://")).findFirst()
                    .orElseThrow(() -> new IllegalStateException("backend B does not listen on " + scheme + ": " + addresses));
        }

        @Override
        public String unix() {
            return first("unix");
        }

        @Override
        public String tcp() {
            return first("tcp");
        }

        @Override
        public void close() throws Exception {
            process.close();
        }
    }

    /** The program: its allocations, each chunk set to {@link #value}, and a thread bumping chunks at a rate. */
    private final class Program {
        private final RemoteCudaDriver cu;
        private final long context;
        private final long fn;
        private final List<Long> allocations = new ArrayList<>();
        private final long[] chunkAt;
        private final int[] bumps;
        private final double chunksPerSecond;
        private final int stride;
        volatile int dirtied;
        private ProgramThread thread;

        Program(RemoteCudaDriver cu, long context, long bytes, double pct) {
            this.cu = cu;
            this.context = context;
            int n = (int) (bytes / CHUNK);
            chunkAt = new long[n];
            bumps = new int[n];
            chunksPerSecond = n * pct / 100;
            int s = Math.max(1, (int) (n * 0.618));
            while (gcd(s, n) != 1) {
                s++;
            }
            stride = s;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment c = arena.allocate(JAVA_LONG);
                byte[] ptx = (PTX + "\0").getBytes(StandardCharsets.US_ASCII);
                MemorySegment image = arena.allocate(ptx.length);
                MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
                Cu.check(cu.cuModuleLoadData(c, image), "cuModuleLoadData");
                long module = c.get(JAVA_LONG, 0);
                Cu.check(cu.cuModuleGetFunction(c, module, arena.allocateFrom("bump")), "cuModuleGetFunction");
                fn = c.get(JAVA_LONG, 0);
                int k = 0;
                for (long left = bytes; left > 0; left -= MAX_ALLOCATION) {
                    long size = Math.min(left, MAX_ALLOCATION);
                    Cu.check(cu.cuMemAlloc(c, size), "cuMemAlloc");
                    long d = c.get(JAVA_LONG, 0);
                    allocations.add(d);
                    for (long off = 0; off < size; off += CHUNK, k++) {
                        chunkAt[k] = d + off;
                        Cu.check(cu.cuMemsetD32(d + off, value(k), CHUNK_WORDS), "cuMemsetD32");
                    }
                }
                Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
            }
        }

        private static int gcd(int x, int y) {
            return y == 0 ? x : gcd(y, x % y);
        }

        private static int value(int chunk) {
            return chunk * 0x9E3779B1;
        }

        void start() {
            thread = new ProgramThread("the program", stopping -> {
                try (Arena arena = Arena.ofConfined()) {
                    Cu.check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
                    MemorySegment base = arena.allocate(JAVA_LONG), words = arena.allocate(JAVA_INT);
                    words.set(JAVA_INT, 0, CHUNK_WORDS);
                    MemorySegment args = arena.allocate(ADDRESS, 2);
                    args.setAtIndex(ADDRESS, 0, base);
                    args.setAtIndex(ADDRESS, 1, words);
                    long t0 = System.nanoTime();
                    long j = 0;
                    while (!stopping.getAsBoolean()) {
                        long due = (long) (chunksPerSecond * (System.nanoTime() - t0) / 1e9);
                        for (; j < due && !stopping.getAsBoolean(); j++) {
                            int chunk = (int) (j * stride % chunkAt.length);
                            base.set(JAVA_LONG, 0, chunkAt[chunk]);
                            Cu.check(cu.cuLaunchKernel(fn, CHUNK_WORDS / 256, 1, 1, 256, 1, 1, 0, 0, args,
                                    MemorySegment.NULL), "cuLaunchKernel");
                            bumps[chunk]++;
                            dirtied++;
                        }
                        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                        Thread.sleep(TICK_NANOS / 1_000_000);
                    }
                }
            });
        }

        void stop() throws InterruptedException {
            thread.stop();
        }

        /** Reads every chunk back: each word must be the chunk's value plus its bumps. */
        void check() {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment host = arena.allocate(CHUNK, 64);
                for (int k = 0; k < chunkAt.length; k++) {
                    Cu.check(cu.cuMemcpyDtoH(host, chunkAt[k], CHUNK), "cuMemcpyDtoH");
                    int expected = value(k) + bumps[k];
                    for (int w = 0; w < CHUNK_WORDS; w++) {
                        int got = host.getAtIndex(JAVA_INT, w);
                        if (got != expected) {
                            throw new IllegalStateException(String.format(Locale.ROOT, "after the migration chunk %d word %d"
                                    + " is 0x%08x, not 0x%08x (%d bumps)", k, w, got, expected, bumps[k]));
                        }
                    }
                }
            }
        }

        void free() {
            for (long d : allocations) {
                Cu.check(cu.cuMemFree(d), "cuMemFree");
            }
        }
    }
}
