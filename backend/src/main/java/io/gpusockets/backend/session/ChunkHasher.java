package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Hashes chunks of a session's device memory on the device itself (issue 23: finding what changed since a chunk was
 * sent, whatever the program's kernels wrote), with a kernel the backend loads into each context of the session that
 * holds memory to hash: {@code gpusockets_hash_chunks} in {@code chunk_hash.ptx} (hand-written PTX, ISA 6.0 for
 * sm_50, so any driver since CUDA 9 JIT-compiles it and the emulated device runs it as it is). One launch hashes
 * every chunk of a context (up to {@link #BATCH} per launch), one block of {@link #THREADS} threads per chunk,
 * reading the chunk once in 16-byte loads: bound by the GPU's memory bandwidth, not by the host.
 *
 * <p>The hash of the {@code n} bytes at {@code a0}, under a 64-bit {@code seed} ({@link #reference} computes it in
 * Java; the PTX file's header states the same): for every 8-aligned address {@code a} whose word overlaps the bytes,
 * {@code w(a)} is the overlapping bytes in their places of that little-endian word (the others 0), and
 * <pre>
 * mix(x) = x ^= x >>> 32; x *= M; x ^= x >>> 32; x *= M; x ^= x >>> 32       M = 0xD6E8FEB86659FD93
 * S      = sum over a of mix(w(a) ^ (seed + (a >>> 3) * K))                   K = 0x9E3779B97F4A7C15
 * hash   = mix(S + n)                                                          all mod 2^64
 * </pre>
 * {@code mix} is a bijection (an xor-shift by half the width and a multiplication by an odd number each undo), so
 * for one chunk at one address: <b>a change confined to one aligned 8-byte word is always found</b> (that word's
 * term changes, no other does; every one-byte change, every aligned store of up to 8 bytes). A change of several
 * words is missed only when their terms' differences add up to 0 mod 2^64: with mix taken as a random function, a
 * probability of 2^-64 per changed chunk compared (a million changed chunks a second for a century: about 2 x 10^-4
 * expected misses in all). The key per word (position and seed) makes words swapped between places, or moved
 * between chunks, change the hash. The seed is random per hasher ({@link #ChunkHasher(CudaDriver)}) so that a
 * program cannot choose data that collide under it without learning it; the hash is not cryptographic (mix is
 * invertible): a program that knew the seed could make a change be missed, which would corrupt only its own memory
 * at the target.
 *
 * <p>Soundness while the program runs: a hash taken at one moment and a copy at another may disagree when a kernel
 * writes in between, and a later write back to the hashed value would then hide a stale copy. {@link #hashAndCopy}
 * therefore writes the very bytes it hashed to a destination in device memory, from which the caller sends them; a
 * hash taken while the session is drained (the stop) needs no copy.
 *
 * <p>What the program sees: nothing. The module, its stream (non-blocking, so hashing during a pre-copy neither waits
 * for the program's legacy-stream work nor holds it up) and two device buffers (32 + 8 bytes per chunk of a launch:
 * at most 2.5 MiB per context) are made through the session's driver in the session's real context but not through
 * its dispatcher: no handle id is issued for them, no address of theirs enters {@link SessionMemory} (no call of the
 * program may name them), the checkpoint recorder never sees them, and the tenant is not charged (they are the
 * backend's own, as the checkpoint's streams are; the device memory a session takes can exceed its charge by them
 * while a hasher holds them). They go at {@link #close}, or, for one context, at {@link #contextGoing}, which the
 * session calls before it destroys a context; a session that holds a hasher ({@link Session#chunkHasher}) closes it
 * at its end, before its contexts go. Calls are serialised per hasher.
 */
public final class ChunkHasher implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** The kernel's entry name. */
    public static final String ENTRY = "gpusockets_hash_chunks";
    /** The chunk size a migration hashes and sends in: the checkpoint's. */
    public static final long DEFAULT_CHUNK_BYTES = CheckpointImage.CHUNK_BYTES;
    /** Threads per block (a multiple of 32): 8 warps keep 4 KiB of 16-byte loads in flight per block. */
    static final int THREADS = 256;
    /** Chunks per launch, bounding the device and host buffers (32 + 8 bytes each). */
    static final int BATCH = 65536;
    /** Bytes of one chunk's descriptor: address, bytes, copy destination, unused. */
    static final int DESCRIPTOR_BYTES = 32;
    /** cuda.h CU_STREAM_NON_BLOCKING. */
    private static final int STREAM_NON_BLOCKING = 1;
    private static final long K = 0x9E3779B97F4A7C15L;
    private static final long M = 0xD6E8FEB86659FD93L;
    private static final byte[] PTX = loadPtx();

    /** A chunk to hash: {@code bytes} at {@code address}, in the real context {@code context}. */
    public record Chunk(long context, long address, long bytes) {
        public Chunk {
            if (bytes < 0 || Long.compareUnsigned(address + bytes, address) < 0) {
                throw new IllegalArgumentException(String.format("chunk address=0x%x bytes=%d", address, bytes));
            }
        }
    }

    /** What this hasher made in one context. */
    private static final class InContext {
        long module;
        long function;
        long stream;
        long descriptors;
        long hashes;
        /** Chunks the device buffers hold room for. */
        int capacity;
    }

    private final CudaDriver driver;
    private final long seed;
    private final Map<Long, InContext> contexts = new LinkedHashMap<>();
    private boolean closed;

    /** A hasher under a random seed. */
    public ChunkHasher(CudaDriver driver) {
        this(driver, new java.security.SecureRandom().nextLong());
    }

    /** A hasher under {@code seed} (hashes compare only under one seed). */
    public ChunkHasher(CudaDriver driver, long seed) {
        this.driver = driver;
        this.seed = seed;
    }

    public long seed() {
        return seed;
    }

    /**
     * Splits {@code size} bytes at {@code base} of {@code context} into chunks of {@code chunkBytes}, the last
     * ragged, appending them to {@code out}; returns {@code out}.
     */
    public static List<Chunk> split(long context, long base, long size, long chunkBytes, List<Chunk> out) {
        if (chunkBytes <= 0 || size < 0) {
            throw new IllegalArgumentException("chunkBytes=" + chunkBytes + " size=" + size);
        }
        for (long off = 0; off < size; off += chunkBytes) {
            out.add(new Chunk(context, base + off, Math.min(chunkBytes, size - off)));
        }
        return out;
    }

    /** The hashes of {@code chunks}, in their order, all taken on the device. */
    public ChunkHashes hash(List<Chunk> chunks) throws IOException {
        return run(chunks, null);
    }

    /**
     * As {@link #hash}, also writing the bytes each chunk had when it was hashed to {@code copyTo[i]} (device memory
     * of the chunk's context, as large as the chunk, equal to its address mod 16; ranges that do not overlap the
     * chunks), in the same pass: what is sent from there is exactly what the hash says.
     */
    public ChunkHashes hashAndCopy(List<Chunk> chunks, long[] copyTo) throws IOException {
        if (copyTo.length != chunks.size()) {
            throw new IllegalArgumentException("copyTo.length=" + copyTo.length + " chunks=" + chunks.size());
        }
        for (int i = 0; i < copyTo.length; i++) {
            if (copyTo[i] == 0 || ((copyTo[i] ^ chunks.get(i).address()) & 15) != 0) {
                throw new IllegalArgumentException(String.format("copyTo[%d]=0x%x for chunk address=0x%x: not 0, and"
                        + " equal to it mod 16", i, copyTo[i], chunks.get(i).address()));
            }
        }
        return run(chunks, copyTo);
    }

    private synchronized ChunkHashes run(List<Chunk> chunks, long[] copyTo) throws IOException {
        if (closed) {
            throw new IllegalStateException("chunk hasher closed");
        }
        long[] out = new long[chunks.size()];
        // one launch per context and batch, chunks in the order given
        Map<Long, List<Integer>> byContext = new LinkedHashMap<>();
        for (int i = 0; i < chunks.size(); i++) {
            byContext.computeIfAbsent(chunks.get(i).context(), c -> new ArrayList<>()).add(i);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment scratch = arena.allocate(8);
            for (Map.Entry<Long, List<Integer>> e : byContext.entrySet()) {
                long ctx = e.getKey();
                List<Integer> indices = e.getValue();
                if (driver.cuCtxPushCurrent(ctx) != CuResult.CUDA_SUCCESS) {
                    throw new IOException(String.format("hashing chunks: context 0x%x cannot be made current", ctx));
                }
                try {
                    InContext in = prepare(ctx, Math.min(indices.size(), BATCH), scratch);
                    for (int from = 0; from < indices.size(); from += BATCH) {
                        launch(in, chunks, copyTo, indices.subList(from, Math.min(indices.size(), from + BATCH)), out,
                                arena);
                    }
                } finally {
                    driver.cuCtxPopCurrent(scratch);
                }
            }
        }
        return new ChunkHashes(seed, List.copyOf(chunks), out);
    }

    /** The module, stream and buffers in the current context {@code ctx}, made or grown to {@code chunks}. */
    private InContext prepare(long ctx, int chunks, MemorySegment scratch) throws IOException {
        InContext in = contexts.get(ctx);
        if (in == null) {
            in = new InContext();
            contexts.put(ctx, in);
            try (Arena a = Arena.ofConfined()) {
                MemorySegment image = a.allocate(PTX.length + 1);
                image.copyFrom(MemorySegment.ofArray(PTX));
                image.set(ValueLayout.JAVA_BYTE, PTX.length, (byte) 0);
                check(driver.cuModuleLoadData(scratch, image), "cuModuleLoadData of the hashing kernel");
                in.module = scratch.get(ValueLayout.JAVA_LONG, 0);
                check(driver.cuModuleGetFunction(scratch, in.module, a.allocateFrom(ENTRY)), "cuModuleGetFunction " + ENTRY);
                in.function = scratch.get(ValueLayout.JAVA_LONG, 0);
            }
            check(driver.cuStreamCreate(scratch, STREAM_NON_BLOCKING), "cuStreamCreate for hashing");
            in.stream = scratch.get(ValueLayout.JAVA_LONG, 0);
        }
        if (in.capacity < chunks) {
            freeBuffers(in);
            check(driver.cuMemAlloc(scratch, (long) chunks * DESCRIPTOR_BYTES), "cuMemAlloc of the chunk descriptors");
            in.descriptors = scratch.get(ValueLayout.JAVA_LONG, 0);
            check(driver.cuMemAlloc(scratch, (long) chunks * 8), "cuMemAlloc of the chunk hashes");
            in.hashes = scratch.get(ValueLayout.JAVA_LONG, 0);
            in.capacity = chunks;
        }
        return in;
    }

    /** Hashes the chunks at {@code indices} (at most {@link #BATCH}) in one launch on the context's stream. */
    private void launch(InContext in, List<Chunk> chunks, long[] copyTo, List<Integer> indices, long[] out, Arena arena)
            throws IOException {
        int n = indices.size();
        MemorySegment descriptors = arena.allocate((long) n * DESCRIPTOR_BYTES, 16);
        for (int j = 0; j < n; j++) {
            int i = indices.get(j);
            Chunk c = chunks.get(i);
            long at = (long) j * DESCRIPTOR_BYTES;
            descriptors.set(ValueLayout.JAVA_LONG, at, c.address());
            descriptors.set(ValueLayout.JAVA_LONG, at + 8, c.bytes());
            descriptors.set(ValueLayout.JAVA_LONG, at + 16, copyTo == null ? 0 : copyTo[i]);
            descriptors.set(ValueLayout.JAVA_LONG, at + 24, 0);
        }
        MemorySegment hashes = arena.allocate((long) n * 8, 8);
        MemorySegment args = arena.allocate(32, 8);
        args.set(ValueLayout.JAVA_LONG, 0, in.descriptors);
        args.set(ValueLayout.JAVA_LONG, 8, in.hashes);
        args.set(ValueLayout.JAVA_INT, 16, n);
        args.set(ValueLayout.JAVA_LONG, 24, seed);
        MemorySegment params = arena.allocate(ValueLayout.ADDRESS, 4);
        for (int p = 0; p < 4; p++) {
            params.setAtIndex(ValueLayout.ADDRESS, p, args.asSlice(new long[] {0, 8, 16, 24}[p]));
        }
        check(driver.cuMemcpyHtoDAsync(in.descriptors, descriptors, descriptors.byteSize(), in.stream),
                "copying the chunk descriptors");
        check(driver.cuLaunchKernel(in.function, Math.min(n, 65535), 1, 1, THREADS, 1, 1, 0, in.stream, params,
                MemorySegment.NULL), "launching " + ENTRY);
        check(driver.cuMemcpyDtoHAsync(hashes, in.hashes, hashes.byteSize(), in.stream), "copying the chunk hashes back");
        check(driver.cuStreamSynchronize(in.stream), "hashing " + n + " chunk(s)");
        for (int j = 0; j < n; j++) {
            out[indices.get(j)] = hashes.getAtIndex(ValueLayout.JAVA_LONG, j);
        }
    }

    /** Frees what this hasher made in {@code ctx} (about to be destroyed); waits for a hash in progress. */
    public synchronized void contextGoing(long ctx) {
        InContext in = contexts.remove(ctx);
        if (in != null) {
            release(ctx, in);
        }
    }

    /** Frees everything this hasher made, in every context it used; later hashes are refused. */
    @Override
    public synchronized void close() {
        closed = true;
        contexts.forEach(this::release);
        contexts.clear();
    }

    private void release(long ctx, InContext in) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment scratch = a.allocate(8);
            if (driver.cuCtxPushCurrent(ctx) != CuResult.CUDA_SUCCESS) {
                LOG.log(System.Logger.Level.WARNING, String.format("chunk hasher: context 0x%x cannot be made current"
                        + " to free its module, stream and buffers", ctx));
                return;
            }
            try {
                if (in.stream != 0) {
                    quietly(driver.cuStreamSynchronize(in.stream), "cuStreamSynchronize");
                    quietly(driver.cuStreamDestroy(in.stream), "cuStreamDestroy");
                }
                freeBuffers(in);
                if (in.module != 0) {
                    quietly(driver.cuModuleUnload(in.module), "cuModuleUnload");
                }
            } finally {
                driver.cuCtxPopCurrent(scratch);
            }
        }
    }

    private void freeBuffers(InContext in) {
        if (in.descriptors != 0) {
            quietly(driver.cuMemFree(in.descriptors), "cuMemFree");
        }
        if (in.hashes != 0) {
            quietly(driver.cuMemFree(in.hashes), "cuMemFree");
        }
        in.descriptors = 0;
        in.hashes = 0;
        in.capacity = 0;
    }

    private static void quietly(int r, String what) {
        if (r != CuResult.CUDA_SUCCESS) {
            LOG.log(System.Logger.Level.WARNING, "chunk hasher: " + what + " failed: " + CuResult.name(r));
        }
    }

    private static void check(int r, String what) throws IOException {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IOException(what + " failed: " + CuResult.name(r));
        }
    }

    /** The hash of {@code bytes} (their size n) as if they lay at {@code address}: what the kernel computes. */
    public static long reference(long address, MemorySegment bytes, long seed) {
        long n = bytes.byteSize();
        long end = address + n;
        long sum = 0;
        for (long a = address & -8L; a < end; a += 8) {
            long lo = Math.max(a, address);
            long hi = Math.min(a + 8, end);
            long w = 0;
            for (long b = lo; b < hi; b++) {
                w |= (bytes.get(ValueLayout.JAVA_BYTE, b - address) & 0xffL) << (8 * (b - a));
            }
            if (lo < hi) {
                sum += mix(w ^ (seed + (a >>> 3) * K));
            }
        }
        return mix(sum + n);
    }

    /** The bijective 64-bit mixing function of the hash. */
    static long mix(long x) {
        x ^= x >>> 32;
        x *= M;
        x ^= x >>> 32;
        x *= M;
        return x ^ (x >>> 32);
    }

    private static byte[] loadPtx() {
        try (InputStream in = ChunkHasher.class.getResourceAsStream("chunk_hash.ptx")) {
            if (in == null) {
                throw new IllegalStateException("chunk_hash.ptx is missing from the backend's resources");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
