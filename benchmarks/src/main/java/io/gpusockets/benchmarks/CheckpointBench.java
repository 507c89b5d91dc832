package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointIo;
import io.gpusockets.backend.session.CheckpointResult;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Checkpoint and restore throughput (issue 22) against the copy bound measured in the same run: for each size, a
 * session (unix://, address-stable memory) allocates that much device memory in allocations of at most 256 MiB and
 * fills it; the backend's own driver then copies the same number of bytes device-to-host and host-to-device
 * through page-locked host memory in 8 MiB chunks (the pinned-copy bound a checkpoint and a restore are held to),
 * and writes and reads that many bytes to and from a file in the image's folder in 8 MiB chunks with the threads and
 * the way of writing a checkpoint uses ({@link CheckpointIo}: {@code -Dgpusockets.checkpoint.threads},
 * {@code -Dgpusockets.checkpoint.io}; what the file system allows them); then the
 * session is checkpointed (without stop), the program ends, its backend closes, and a second backend (a new
 * device instance on the emulated device; the same GPU on the real driver) restores the image. Prints, per size,
 * the medians over the rounds and checkpoint and restore against both bounds (ckpt/b, rst/b: the pinned copies;
 * ckpt/f, rst/f: the file); writes DIR/checkpoint.md and a plot (where the runtime can draw: {@link Plots}) with
 * {@code --out}. With {@code --during-kernel S}, also a checkpoint asked for while a kernel of S seconds runs (it
 * must wait for it and succeed). The cost of address-stable memory itself is {@code scripts/bench stable-addresses}.
 */
@Command(name = "bench-checkpoint", mixinStandardHelpOptions = true,
        description = "Checkpoint and restore throughput against the pinned-copy bound, at several sizes.")
public final class CheckpointBench implements Callable<Integer> {
    private static final String STABLE = "gpusockets.backend.stableAddresses";
    private static final long MIB = 1L << 20;
    private static final long CHUNK = 8 * MIB;
    private static final long MAX_ALLOCATION = 256 * MIB;

    @Option(names = "--sizes", split = ",", paramLabel = "MIB", defaultValue = "64,256,1024",
            description = "Session memory sizes in MiB. Default: ${DEFAULT-VALUE} (the GPU pass: 1024,8192,32768).")
    List<Long> sizesMib;

    @Option(names = "--rounds", defaultValue = "3", description = "Rounds per size. Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver of the in-process backends. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--dir", paramLabel = "DIR", description = "Where the images are written. Default: a temporary folder.")
    Path imageDir;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/checkpoint.md and DIR/checkpoint.png.")
    Path out;

    @Option(names = "--during-kernel", paramLabel = "SECONDS", defaultValue = "0",
            description = "Also checkpoint a session while a kernel of that many seconds (gpus_sleep) runs: the checkpoint"
                    + " must wait for it and succeed. 0: not. Default: ${DEFAULT-VALUE} (the GPU pass: 5).")
    int duringKernel;

    private final PrintStream console = System.out;
    /** The checkpoint's threads and way of writing ({@link CheckpointIo}), which the file bound uses too. */
    private int threads;
    private boolean mapped;
    private String lastDescription = "";

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new CheckpointBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    /** One round's figures at one size, GB/s. */
    record Round(double copyOut, double copyIn, double fileWrite, double fileRead, double checkpoint, double restore,
                 long imageBytes, double drainMs) {
    }

    @Override
    public Integer call() throws Exception {
        System.setProperty(STABLE, "true");
        System.setProperty("gpusockets.resume", "true");
        Path dir = imageDir != null ? Files.createDirectories(imageDir) : Files.createTempDirectory("gpusockets-ckpt-bench");
        threads = CheckpointIo.threads();
        mapped = CheckpointIo.mappedWrites(threads);
        String description = null;
        List<String> rows = new ArrayList<>();
        List<double[]> plot = new ArrayList<>();
        String header = String.format(Locale.ROOT, "%8s %9s %9s %9s %9s %10s %9s %8s %8s %8s %8s %9s", "MiB", "DtoH GB/s",
                "HtoD GB/s", "write", "read", "ckpt GB/s", "rst GB/s", "ckpt/b", "rst/b", "ckpt/f", "rst/f", "drain ms");
        for (long mib : sizesMib) {
            List<Round> rs = new ArrayList<>();
            for (int round = 1; round <= rounds; round++) {
                Round r = round(mib * MIB, dir);
                rs.add(r);
                console.printf(Locale.ROOT, "[%d MiB, round %d/%d] bound out %.2f in %.2f GB/s, file write %.2f read %.2f GB/s;"
                                + " checkpoint %.2f GB/s (image %d MiB, drain %.1f ms), restore %.2f GB/s%n", mib, round, rounds,
                        r.copyOut(), r.copyIn(), r.fileWrite(), r.fileRead(), r.checkpoint(), r.imageBytes() / MIB, r.drainMs(),
                        r.restore());
            }
            double out = med(rs, Round::copyOut), in = med(rs, Round::copyIn), ck = med(rs, Round::checkpoint),
                    rst = med(rs, Round::restore), w = med(rs, Round::fileWrite), r = med(rs, Round::fileRead);
            rows.add(String.format(Locale.ROOT, "%8d %9.2f %9.2f %9.2f %9.2f %10.2f %9.2f %8.2f %8.2f %8.2f %8.2f %9.1f", mib,
                    out, in, w, r, ck, rst, ck / out, rst / in, ck / w, rst / r, med(rs, Round::drainMs)));
            plot.add(new double[] {mib, ck / out, rst / in});
        }
        description = lastDescription;
        StringBuilder t = new StringBuilder(header).append('\n');
        rows.forEach(r -> t.append(r).append('\n'));
        if (duringKernel > 0) {
            t.append(duringKernel(dir)).append('\n');
        }
        console.println("bench-checkpoint: " + Runtime.getRuntime().availableProcessors() + " cores, " + description
                + ", images in " + dir + ", " + ioDescription() + " (medians of " + rounds + " rounds; ckpt/b = checkpoint"
                + " / pinned DtoH bound, rst/b = restore / pinned HtoD bound, ckpt/f = checkpoint / file write,"
                + " rst/f = restore / file read)");
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("checkpoint.md"), "# bench-checkpoint\n\n" + description + ", "
                    + Runtime.getRuntime().availableProcessors() + " cores, images in " + dir + ", " + ioDescription() + ", "
                    + rounds + " rounds (medians). Bounds: the backend's driver copying the same bytes through pinned"
                    + " memory in 8 MiB chunks (ckpt/b, rst/b); write/read: the same bytes to/from a file there in 8 MiB"
                    + " chunks with the checkpoint's threads and way of writing (ckpt/f, rst/f).\n\n```\n" + t + "```\n");
            Plots.png(out.resolve("checkpoint.png"), () -> {
                CategoryChart chart = new CategoryChartBuilder().width(800).height(500)
                        .title("Checkpoint and restore against the pinned-copy bound").xAxisTitle("session memory (MiB)")
                        .yAxisTitle("fraction of the bound").build();
                List<String> x = plot.stream().map(p -> Long.toString((long) p[0])).toList();
                chart.addSeries("checkpoint / DtoH bound", x, plot.stream().map(p -> p[1]).toList());
                chart.addSeries("restore / HtoD bound", x, plot.stream().map(p -> p[2]).toList());
                return chart;
            });
        }
        if (imageDir == null) {
            Files.deleteIfExists(dir);
        }
        return 0;
    }

    private String ioDescription() {
        return threads == 1 ? "1 thread moving the contents (pipelined with a helper thread, writes and reads in order)"
                : threads + " threads moving the contents (" + (mapped ? "mapped" : "positional") + " writes, positional"
                + " reads)";
    }

    private static double med(List<Round> rs, java.util.function.ToDoubleFunction<Round> f) {
        return DriverBench.median(rs.stream().mapToDouble(f).toArray());
    }

    /** One round at {@code bytes}: the bounds, a checkpoint, a restore in a second backend. */
    private Round round(long bytes, Path dir) throws Exception {
        Path image = dir.resolve("bench.img");
        Path sock = dir.resolve("a.sock");
        double copyOut, copyIn, fileWrite, fileRead, checkpoint;
        CheckpointResult result;
        long sessionId;
        DriverHost host = device.open(null);
        lastDescription = host.description();
        try (BackendServer a = new BackendServer(host, BackendSettings.fromSystemProperties())) {
            a.resumeGrace(Duration.ofSeconds(30));
            String uri = a.listen(TransportUri.parse("unix://" + sock)).toString();
            try (GpuSocketsCalls calls = GpuSocketsCalls.open(uri); Arena arena = Arena.ofConfined()) {
                RemoteCudaDriver cu = calls.driver();
                MemorySegment p = arena.allocate(8);
                List<Long> allocations = new ArrayList<>();
                for (long left = bytes; left > 0; left -= MAX_ALLOCATION) {
                    long n = Math.min(left, MAX_ALLOCATION);
                    Cu.check(cu.cuMemAlloc(p, n), "cuMemAlloc");
                    long d = p.get(JAVA_LONG, 0);
                    allocations.add(d);
                    Cu.check(cu.cuMemsetD32(d, 0x5a5a0000 + allocations.size(), n / 4), "cuMemsetD32");
                }
                Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                double[] bound = pinnedCopies(host.driver(), bytes);
                copyOut = bound[0];
                copyIn = bound[1];
                double[] file = fileCopies(dir.resolve("bound.bin"), bytes, threads, mapped);
                fileWrite = file[0];
                fileRead = file[1];
                sessionId = a.snapshot().sessions().getFirst().id();
                long t0 = System.nanoTime();
                result = a.checkpoint(sessionId, image, false, null);
                checkpoint = bytes / (double) (System.nanoTime() - t0);
                for (long d : allocations) {
                    Cu.check(cu.cuMemFree(d), "cuMemFree");
                }
            }
            // the program ended: its session goes, and with it its windows (the real driver's address space is the process's)
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!a.snapshot().sessions().isEmpty() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
        } finally {
            closeDevice(host);
        }
        double restore;
        DriverHost second = device.open(null);
        try (BackendServer b = new BackendServer(second, BackendSettings.fromSystemProperties())) {
            b.resumeGrace(Duration.ofSeconds(30));
            long t0 = System.nanoTime();
            long id = b.restore(image, null);
            restore = bytes / (double) (System.nanoTime() - t0);
            if (id != sessionId) {
                throw new IllegalStateException("restored session " + id + ", not " + sessionId);
            }
        } finally {
            closeDevice(second);
        }
        Files.deleteIfExists(image);
        Files.deleteIfExists(sock);
        return new Round(copyOut, copyIn, fileWrite, fileRead, checkpoint, restore, result.bytesWritten(),
                result.drainNanos() / 1e6);
    }

    /**
     * A checkpoint asked for just after a kernel of {@link #duringKernel} seconds was launched: it must wait for the
     * kernel (its drain lasts about as long as what is left of it) and succeed, and the program goes on.
     */
    private String duringKernel(Path dir) throws Exception {
        Path image = dir.resolve("during-kernel.img");
        Path sock = dir.resolve("k.sock");
        DriverHost host = device.open(null);
        try (BackendServer a = new BackendServer(host, BackendSettings.fromSystemProperties())) {
            a.resumeGrace(Duration.ofSeconds(30));
            String uri = a.listen(TransportUri.parse("unix://" + sock)).toString();
            try (GpuSocketsCalls calls = GpuSocketsCalls.open(uri); Arena arena = Arena.ofConfined();
                 io.gpusockets.cli.workloads.Kernels k = io.gpusockets.cli.workloads.Kernels.load(calls.driver())) {
                RemoteCudaDriver cu = calls.driver();
                MemorySegment ns = arena.allocate(JAVA_LONG);
                ns.set(JAVA_LONG, 0, duringKernel * 1_000_000_000L);
                MemorySegment args = arena.allocate(java.lang.foreign.ValueLayout.ADDRESS, 1);
                args.setAtIndex(java.lang.foreign.ValueLayout.ADDRESS, 0, ns);
                long t0 = System.nanoTime();
                Cu.check(cu.cuLaunchKernel(k.function("gpus_sleep"), 1, 1, 1, 1, 1, 1, 0, 0, args, MemorySegment.NULL),
                        "cuLaunchKernel(gpus_sleep)");
                // a launch may be pipelined (no reply awaited): a round trip behind it on the same thread makes sure the
                // backend runs it before the checkpoint is asked for (else the checkpoint would rightly come first)
                int q = cu.cuStreamQuery(0);
                if (q != 0 && q != 600) { // CUDA_ERROR_NOT_READY: the kernel runs
                    throw new IllegalStateException("cuStreamQuery after the launch: " + q);
                }
                long launched = System.nanoTime() - t0;
                CheckpointResult r = a.checkpoint(a.snapshot().sessions().getFirst().id(), image, false, null);
                long total = System.nanoTime() - t0;
                Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize after the checkpoint");
                String line = String.format(Locale.ROOT, "checkpoint during a %d s kernel: asked %.0f ms after the launch,"
                                + " drained in %.0f ms, done %.0f ms after the launch (%d KiB written)", duringKernel,
                        launched / 1e6, r.drainNanos() / 1e6, total / 1e6, r.bytesWritten() >> 10);
                if (total < duringKernel * 1_000_000_000L) {
                    throw new IllegalStateException(line + ": it did not wait for the kernel");
                }
                console.println(line);
                return line;
            }
        } finally {
            closeDevice(host);
            Files.deleteIfExists(image);
            Files.deleteIfExists(sock);
        }
    }

    /** Gives back an emulated device's memory (the real driver stays loaded for the next round). */
    private static void closeDevice(DriverHost host) throws Exception {
        if (host.driver() instanceof io.gpusockets.emulated.EmulatedDevice e) {
            e.close();
        }
    }

    /**
     * GB/s of the backend's driver copying {@code bytes} device to host, then host to device, through one page-locked
     * 8 MiB buffer (registered with cuMemHostRegister; the emulated device, which has none, copies from plain memory),
     * in a context of its own on device 0 (cycling over a device buffer of at most 256 MiB).
     */
    static double[] pinnedCopies(CudaDriver d, long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(8);
            Cu.check(d.cuCtxCreate_v2(out, 0, 0), "cuCtxCreate"); // current on this thread
            long ctx = out.get(JAVA_LONG, 0);
            try {
                long span = Math.min(bytes, MAX_ALLOCATION);
                Cu.check(d.cuMemAlloc(out, span), "cuMemAlloc");
                long dev = out.get(JAVA_LONG, 0);
                MemorySegment pinned = arena.allocate(CHUNK, 4096);
                // page-locked as the backend's staging is (portable); the emulated device has no page-locked memory
                boolean registered = d.cuMemHostRegister(pinned, CHUNK, 1) == 0;
                try {
                    long t0 = System.nanoTime();
                    for (long done = 0; done < bytes; done += CHUNK) {
                        Cu.check(d.cuMemcpyDtoH(pinned, dev + done % span, Math.min(CHUNK, bytes - done)), "cuMemcpyDtoH");
                    }
                    double o = bytes / (double) (System.nanoTime() - t0);
                    t0 = System.nanoTime();
                    for (long done = 0; done < bytes; done += CHUNK) {
                        Cu.check(d.cuMemcpyHtoD(dev + done % span, pinned, Math.min(CHUNK, bytes - done)), "cuMemcpyHtoD");
                    }
                    double i = bytes / (double) (System.nanoTime() - t0);
                    return new double[] {o, i};
                } finally {
                    if (registered) {
                        d.cuMemHostUnregister(pinned);
                    }
                    d.cuMemFree(dev);
                }
            } finally {
                d.cuCtxDestroy(ctx);
            }
        }
    }

    /**
     * GB/s writing {@code bytes} to {@code file} in 8 MiB chunks (not forced out, as an image is not), then reading them
     * back, as a checkpoint moves its contents: with {@code threads} threads each taking the next chunk, written
     * through a mapping of the file ({@code mapped}) or with positional writes, read with positional reads; one thread
     * writes and reads in order.
     */
    static double[] fileCopies(Path file, long bytes, int threads, boolean mapped) throws java.io.IOException {
        try (var ch = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.WRITE, java.nio.file.StandardOpenOption.READ,
                java.nio.file.StandardOpenOption.TRUNCATE_EXISTING); Arena shared = Arena.ofShared()) {
            long chunks = (bytes + CHUNK - 1) / CHUNK;
            MemorySegment[] buffers = new MemorySegment[threads];
            for (int i = 0; i < threads; i++) {
                buffers[i] = shared.allocate(CHUNK, 4096).fill((byte) 0x5a);
            }
            long t0 = System.nanoTime();
            if (threads > 1 && mapped) {
                MemorySegment map = ch.map(java.nio.channels.FileChannel.MapMode.READ_WRITE, 0, bytes, shared);
                inParallel(threads, chunks, (t, c) -> MemorySegment.copy(buffers[t], 0, map, c * CHUNK,
                        Math.min(CHUNK, bytes - c * CHUNK)));
            } else {
                inParallel(threads, chunks, (t, c) -> {
                    java.nio.ByteBuffer b = buffers[t].asSlice(0, Math.min(CHUNK, bytes - c * CHUNK)).asByteBuffer();
                    for (long at = c * CHUNK; b.hasRemaining(); ) {
                        at += ch.write(b, at);
                    }
                });
            }
            double w = bytes / (double) (System.nanoTime() - t0);
            t0 = System.nanoTime();
            inParallel(threads, chunks, (t, c) -> {
                java.nio.ByteBuffer b = buffers[t].asSlice(0, Math.min(CHUNK, bytes - c * CHUNK)).asByteBuffer();
                for (long at = c * CHUNK; b.hasRemaining(); ) {
                    int n = ch.read(b, at);
                    if (n < 0) {
                        throw new java.io.EOFException(file + ": shorter than written");
                    }
                    at += n;
                }
            });
            double r = bytes / (double) (System.nanoTime() - t0);
            return new double[] {w, r};
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** One chunk's move: thread {@code t}'s buffer, chunk {@code c}. */
    private interface ChunkMove {
        void move(int t, long c) throws java.io.IOException;
    }

    /** Runs {@code move} over chunks 0 to {@code chunks - 1} with {@code threads} threads, each taking the next chunk. */
    private static void inParallel(int threads, long chunks, ChunkMove move) throws java.io.IOException {
        java.util.concurrent.atomic.AtomicLong next = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            int t = i;
            ts.add(Thread.ofPlatform().start(() -> {
                try {
                    for (long c; failure.get() == null && (c = next.getAndIncrement()) < chunks; ) {
                        move.move(t, c);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        for (Thread t : ts) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.IOException("interrupted");
            }
        }
        if (failure.get() != null) {
            throw new java.io.IOException("file bound: " + failure.get(), failure.get());
        }
    }
}
