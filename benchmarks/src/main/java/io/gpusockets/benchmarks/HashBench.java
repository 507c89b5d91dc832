package io.gpusockets.benchmarks;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.backend.session.ChunkHasher;
import io.gpusockets.backend.session.ChunkHashes;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.cli.DeviceChoice;
import io.gpusockets.cli.workloads.Cu;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Hashing a session's memory on the device (issue 23, {@link ChunkHasher}) against the device-to-device copy bound
 * measured in the same run: for each size, one context on the driver holds that much memory (allocations of at most
 * 1 GiB, bytes set), which is copied device to device (cuMemcpyDtoD into a second allocation of the same size, then
 * cuCtxSynchronize: the GPU's memory bandwidth as a copy sees it, each byte read and written once) and hashed in
 * chunks of {@code --chunk} MiB (one launch, hashes copied back: what a migration's stop pays per byte, each byte
 * read once). Prints, per size, the medians over the rounds (a first, untimed round warms up) in GB/s of the bytes
 * covered, and hash/copy; writes DIR/hash.md with {@code --out}.
 */
@Command(name = "bench-hash", mixinStandardHelpOptions = true,
        description = "Hashing device memory in chunks on the device, against the device-to-device copy bound.")
public final class HashBench implements Callable<Integer> {
    private static final long MIB = 1L << 20;
    private static final long MAX_ALLOCATION = 1024 * MIB;

    @Option(names = "--sizes", split = ",", paramLabel = "MIB", defaultValue = "64,256,1024",
            description = "Memory sizes in MiB. Default: ${DEFAULT-VALUE} (the GPU pass: 1024,8192,32768).")
    List<Long> sizesMib;

    @Option(names = "--chunk", paramLabel = "MIB", defaultValue = "8", description = "Chunk size in MiB. Default: ${DEFAULT-VALUE}.")
    long chunkMib;

    @Option(names = "--rounds", defaultValue = "3", description = "Timed rounds per size. Default: ${DEFAULT-VALUE}.")
    int rounds;

    @Option(names = "--device", paramLabel = "auto|native|emulated", defaultValue = "emulated",
            description = "Driver. Default: ${DEFAULT-VALUE}.")
    DeviceChoice device;

    @Option(names = "--out", paramLabel = "DIR", description = "Also write DIR/hash.md.")
    Path out;

    private final PrintStream console = System.out;

    public static void main(String[] args) {
        java.util.logging.Logger.getLogger("gpusockets").setLevel(java.util.logging.Level.WARNING);
        System.exit(new CommandLine(new HashBench()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        DriverHost host = device.open(null);
        CudaDriver cu = host.driver();
        String header = "bench-hash: " + Runtime.getRuntime().availableProcessors() + " cores, " + host.description()
                + ", chunks of " + chunkMib + " MiB, " + rounds + " rounds (medians)";
        console.println(header);
        StringBuilder t = new StringBuilder(String.format("%8s %8s %14s %14s %10s%n", "MiB", "chunks", "copy DtoD GB/s",
                "hash GB/s", "hash/copy"));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment p = arena.allocate(8);
            Cu.check(cu.cuCtxCreate(p, MemorySegment.NULL, 0, 0), "cuCtxCreate");
            long ctx = p.get(JAVA_LONG, 0);
            try (ChunkHasher hasher = new ChunkHasher(cu)) {
                for (long mib : sizesMib) {
                    long bytes = mib * MIB;
                    List<Long> src = new ArrayList<>(), dst = new ArrayList<>();
                    List<ChunkHasher.Chunk> chunks = new ArrayList<>();
                    for (long off = 0; off < bytes; off += MAX_ALLOCATION) {
                        long n = Math.min(MAX_ALLOCATION, bytes - off);
                        Cu.check(cu.cuMemAlloc(p, n), "cuMemAlloc");
                        long a = p.get(JAVA_LONG, 0);
                        src.add(a);
                        Cu.check(cu.cuMemsetD8(a, (byte) 0x5a, n), "cuMemsetD8");
                        Cu.check(cu.cuMemAlloc(p, n), "cuMemAlloc");
                        dst.add(p.get(JAVA_LONG, 0));
                        ChunkHasher.split(ctx, a, n, chunkMib * MIB, chunks);
                    }
                    Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                    double[] copy = new double[rounds], hash = new double[rounds];
                    ChunkHashes first = null;
                    for (int r = -1; r < rounds; r++) {
                        long t0 = System.nanoTime();
                        for (int i = 0; i < src.size(); i++) {
                            long n = Math.min(MAX_ALLOCATION, bytes - i * MAX_ALLOCATION);
                            Cu.check(cu.cuMemcpyDtoD(dst.get(i), src.get(i), n), "cuMemcpyDtoD");
                        }
                        Cu.check(cu.cuCtxSynchronize(), "cuCtxSynchronize");
                        long t1 = System.nanoTime();
                        ChunkHashes h = hasher.hash(chunks);
                        long t2 = System.nanoTime();
                        if (first == null) {
                            first = h;
                        } else if (h.changedSince(first).length != 0) {
                            throw new IllegalStateException("unchanged memory hashed differently");
                        }
                        if (r >= 0) {
                            copy[r] = bytes / ((t1 - t0) / 1e9) / 1e9;
                            hash[r] = bytes / ((t2 - t1) / 1e9) / 1e9;
                        }
                    }
                    double c = DriverBench.median(copy), h = DriverBench.median(hash);
                    String line = String.format("%8d %8d %14.2f %14.2f %10.2f%n", mib, chunks.size(), c, h, h / c);
                    console.print(line);
                    t.append(line);
                    for (int i = 0; i < src.size(); i++) {
                        Cu.check(cu.cuMemFree(src.get(i)), "cuMemFree");
                        Cu.check(cu.cuMemFree(dst.get(i)), "cuMemFree");
                    }
                }
            }
            Cu.check(cu.cuCtxDestroy(ctx), "cuCtxDestroy");
        }
        console.print(t);
        if (out != null) {
            Files.createDirectories(out);
            Files.writeString(out.resolve("hash.md"), "# bench-hash\n\n" + header + "\n\n```\n" + t + "```\n");
        }
        return 0;
    }
}
