package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

/**
 * cuMemcpyHtoD then cuMemcpyDtoH of random data at each size (pageable host memory), compared byte
 * for byte with what was sent; HtoD and DtoH throughput per size. Small sizes repeat (up to 16 times,
 * at most 64 MiB per direction) so that their times are not a single syscall's noise.
 *
 * <p>The comparable output is the SHA-256 of all data read back, in order: each run has already
 * compared its data byte for byte with the same seeded input, so equal inputs and passing runs imply
 * equal outputs; the digest keeps ~85 MiB per run out of the heap while still catching any difference.
 */
public final class MemcpyRoundTrips {
    /** 4 KiB, 16 KiB, ... 64 MiB. */
    public static final List<Long> DEFAULT_SIZES = sizes(4L << 10, 64L << 20, 4);
    private static final long BYTES_PER_SIZE = 64L << 20;
    private static final int MAX_REPS = 16;

    private MemcpyRoundTrips() {
    }

    public record SizeResult(long bytes, int reps, double htodGBs, double dtohGBs, long firstMismatch) {
        public boolean intact() {
            return firstMismatch < 0;
        }
    }

    public record Result(List<SizeResult> sizes, byte[] digest, long driverNanos) implements WorkloadResult {
        public Result {
            sizes = List.copyOf(sizes);
        }

        @Override
        public boolean passed() {
            return !sizes.isEmpty() && sizes.stream().allMatch(SizeResult::intact);
        }

        /** The largest size, which the summary reports. */
        public SizeResult largest() {
            return sizes.getLast();
        }

        @Override
        public String summary() {
            SizeResult big = largest();
            String intact = sizes.stream().filter(s -> !s.intact())
                    .map(s -> human(s.bytes()) + " differs at byte " + s.firstMismatch())
                    .reduce((x, y) -> x + ", " + y).orElse(sizes.size() + " sizes byte-exact");
            return String.format("%s: HtoD %.2f GB/s, DtoH %.2f GB/s; %s", human(big.bytes()), big.htodGBs(), big.dtohGBs(), intact);
        }

        @Override
        public byte[] comparableOutput() {
            return digest.clone();
        }
    }

    /** {@code sizes} ascending; the largest is allocated once on the device and on the host. */
    public static Result run(CudaDriver cu, List<Long> sizes, long seed) {
        if (sizes.isEmpty()) {
            throw new IllegalArgumentException("sizes=[]");
        }
        long max = sizes.stream().mapToLong(Long::longValue).max().orElseThrow();
        SplittableRandom random = new SplittableRandom(seed);
        MessageDigest sha = sha256();
        List<SizeResult> results = new ArrayList<>();
        long driverNanos = 0;
        try (Arena arena = Arena.ofConfined(); DeviceBuffer device = DeviceBuffer.allocate(cu, max)) {
            MemorySegment src = arena.allocate(max, 64);
            MemorySegment dst = arena.allocate(max, 64);
            for (long size : sizes) {
                MemorySegment s = src.asSlice(0, size);
                MemorySegment d = dst.asSlice(0, size);
                fillRandom(s, random);
                d.fill((byte) 0);
                int reps = (int) Math.clamp(BYTES_PER_SIZE / size, 1, MAX_REPS);
                long t0 = System.nanoTime();
                for (int r = 0; r < reps; r++) {
                    device.copyFrom(s);
                }
                long t1 = System.nanoTime();
                for (int r = 0; r < reps; r++) {
                    device.copyTo(d);
                }
                long t2 = System.nanoTime();
                driverNanos += t2 - t0;
                sha.update(d.asByteBuffer());
                results.add(new SizeResult(size, reps, gbs(size * reps, t1 - t0), gbs(size * reps, t2 - t1), s.mismatch(d)));
            }
        }
        return new Result(results, sha.digest(), driverNanos);
    }

    /** from, from*factor, ... up to and including to. */
    public static List<Long> sizes(long from, long to, long factor) {
        List<Long> out = new ArrayList<>();
        for (long s = from; s <= to; s *= factor) {
            out.add(s);
        }
        return List.copyOf(out);
    }

    static String human(long bytes) {
        if (bytes >= 1L << 20 && bytes % (1L << 20) == 0) {
            return (bytes >> 20) + " MiB";
        }
        if (bytes >= 1L << 10 && bytes % (1L << 10) == 0) {
            return (bytes >> 10) + " KiB";
        }
        return bytes + " B";
    }

    private static double gbs(long bytes, long nanos) {
        return nanos <= 0 ? Double.POSITIVE_INFINITY : bytes / (double) nanos;
    }

    private static void fillRandom(MemorySegment s, SplittableRandom random) {
        long words = s.byteSize() / Long.BYTES;
        for (long i = 0; i < words; i++) {
            s.setAtIndex(JAVA_LONG_UNALIGNED, i, random.nextLong());
        }
        for (long i = words * Long.BYTES; i < s.byteSize(); i++) {
            s.set(JAVA_BYTE, i, (byte) random.nextInt());
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every Java platform", e);
        }
    }
}
