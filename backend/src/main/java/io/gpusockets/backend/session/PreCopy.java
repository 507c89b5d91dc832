package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The source side of a migration's memory copy (issue 23 item 1): pre-copy rounds while the program runs, then a
 * final round while the session is drained, each sending a {@link Sink} only the chunks whose bytes differ from what
 * it was last sent. Soundness: in a round while the program runs, a chunk is sent from the bytes
 * {@link ChunkHasher#hashAndCopy} wrote to a device staging buffer in the same pass that hashed them, and that hash
 * is remembered as the chunk's "sent" hash; so whatever kernels write meanwhile (and write back), the target holds
 * bytes whose hash is the one remembered. The final round, on the drained session, hashes every chunk once more and
 * sends those whose hash differs from the remembered one (or that are new): every chunk whose bytes changed since it
 * was sent, with probability 1 - 2^-64 per chunk (exactly, for a change within one aligned 8-byte word). One hasher
 * (the session's, one seed) serves every round.
 *
 * <p>Bounds: the staging buffer ({@code stagingBytes}, at least one chunk) is allocated in each context that holds
 * chunks, through the session's driver outside its dispatcher (as the hasher's buffers are: invisible to the
 * program, not charged to the tenant), a pre-copy round goes through it in batches, and each chunk comes to the host
 * through one reused buffer of one chunk; at {@link #close} they go. A round of the pre-copy sends every changed
 * chunk; the caller decides how many rounds (while the changed set shrinks).
 *
 * <p>Frees meanwhile: the program may free (or unmap, or destroy the context of) memory during a round. Each pass of
 * the hashing kernel over the program's memory (the hash of a round, each batch's hash and copy) first uses the ranges
 * its chunks lie in, as a call does ({@link SessionUses}: through a {@link UseSlot} of its own, registered with the
 * session's uses), and lets them go when the pass returned: a free waits for the pass, and a chunk whose range is gone
 * or dying when a pass starts is left out of it (not sent; its range is gone at the next round). So the kernel never
 * reads memory freed under it, and a free waits at most one pass (never for the sink: chunks are sent from the staging
 * buffer, after the uses ended).
 */
public final class PreCopy implements AutoCloseable {
    /** Where the chunks go (the target, or a test): each with the hash of its bytes under the session's hasher. */
    @FunctionalInterface
    public interface Sink {
        void chunk(ChunkHasher.Chunk chunk, long hash, MemorySegment bytes) throws IOException;
    }

    /** What one round did: chunks and bytes hashed, chunks and bytes sent, and the hash and copy times. */
    public record Round(int round, boolean drained, int chunks, long bytes, int sentChunks, long sentBytes,
                        long hashNanos, long copyNanos) {
    }

    private final Session session;
    private final CudaDriver driver;
    private final ChunkHasher hasher;
    private final long chunkBytes;
    private final long stagingBytes;
    /** The hash each chunk was last sent with. */
    private final Map<ChunkHasher.Chunk, Long> sent = new HashMap<>();
    /** Staging buffers by real context. */
    private final Map<Long, Long> staging = new HashMap<>();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment host;
    private final List<Round> rounds = new ArrayList<>();
    /** This pre-copy's uses of the ranges a pass of the kernel reads: a free waits for them. */
    private final UseSlot uses = new UseSlot();
    private boolean closed;

    /**
     * For {@code session} (with address-stable memory): chunks of {@code chunkBytes} (a multiple of 16), staged
     * through {@code stagingBytes} of device memory per context (rounded up to one chunk).
     */
    public PreCopy(Session session, long chunkBytes, long stagingBytes) throws CheckpointRefused {
        if (chunkBytes <= 0 || chunkBytes % 16 != 0 || chunkBytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("chunkBytes=" + chunkBytes + " (a positive multiple of 16)");
        }
        this.session = session;
        this.driver = session.driver();
        this.hasher = session.chunkHasher();
        if (hasher == null) {
            throw new CheckpointRefused("session " + session.id() + " has ended");
        }
        session.memoryChunks(chunkBytes); // refused without address-stable memory
        this.chunkBytes = chunkBytes;
        this.stagingBytes = Math.max(chunkBytes, stagingBytes / chunkBytes * chunkBytes);
        this.host = arena.allocate(chunkBytes, 16);
        session.uses().register(uses);
    }

    /**
     * The window layout the target was last told ({@link MigrationLanding}), by address: each entry's end; null
     * before the first.
     */
    private TreeMap<Long, long[]> layout;

    /**
     * Tells the pre-copy the window layout ({@link Session#windowLayout}) the caller is about to send the target,
     * which lands the memory there: a chunk sent while another physical allocation (or none) covered it is no longer
     * counted as sent (the target's memory under it was made anew or is gone), so the next round sends it again.
     */
    public synchronized void layout(List<PhysicalMemory> now) {
        check();
        TreeMap<Long, long[]> next = new TreeMap<>();
        for (PhysicalMemory m : now) {
            next.put(m.address(), new long[] {m.address(), m.size(), m.device()});
        }
        if (layout != null) {
            sent.keySet().removeIf(c -> !java.util.Arrays.equals(covering(layout, c), covering(next, c)));
        }
        layout = next;
    }

    /** The entry of {@code l} that holds all of chunk {@code c}, or null. */
    private static long[] covering(TreeMap<Long, long[]> l, ChunkHasher.Chunk c) {
        Map.Entry<Long, long[]> e = l.floorEntry(c.address());
        return e != null && c.address() + c.bytes() <= e.getValue()[0] + e.getValue()[1] ? e.getValue() : null;
    }

    /** The rounds so far. */
    public synchronized List<Round> rounds() {
        return List.copyOf(rounds);
    }

    /**
     * A pre-copy round while the program runs: hashes every chunk of the session's memory, and for those never sent
     * or whose hash differs from the one they were sent with, hashes and copies them in one pass into the staging
     * buffer, then sends each from there with that pass's hash.
     */
    public synchronized Round round(Sink sink) throws IOException, CheckpointRefused {
        check();
        long t0 = System.nanoTime();
        List<ChunkHasher.Chunk> chunks = use(session.memoryChunks(chunkBytes));
        ChunkHashes now;
        try {
            now = hasher.hash(chunks);
        } finally {
            release();
        }
        long hashNanos = System.nanoTime() - t0;
        List<ChunkHasher.Chunk> changed = changed(now);
        long copyNanos = 0;
        int sentChunks = 0;
        long sentBytes = 0;
        // a batch per context that fits its staging buffer
        Map<Long, List<ChunkHasher.Chunk>> byContext = new java.util.LinkedHashMap<>();
        for (ChunkHasher.Chunk c : changed) {
            byContext.computeIfAbsent(c.context(), k -> new ArrayList<>()).add(c);
        }
        for (Map.Entry<Long, List<ChunkHasher.Chunk>> e : byContext.entrySet()) {
            long base = staging(e.getKey());
            List<ChunkHasher.Chunk> batch = new ArrayList<>();
            for (ChunkHasher.Chunk c : e.getValue()) {
                if (batch.size() == stagingBytes / chunkBytes) {
                    long[] did = sendStaged(e.getKey(), base, batch, sink);
                    copyNanos += did[0];
                    sentChunks += (int) did[1];
                    sentBytes += did[2];
                    batch.clear();
                }
                batch.add(c);
            }
            if (!batch.isEmpty()) {
                long[] did = sendStaged(e.getKey(), base, batch, sink);
                copyNanos += did[0];
                sentChunks += (int) did[1];
                sentBytes += did[2];
            }
        }
        Round r = new Round(rounds.size(), false, chunks.size(), total(chunks), sentChunks, sentBytes, hashNanos,
                copyNanos);
        rounds.add(r);
        return r;
    }

    /**
     * The final round, on a drained session ({@link Session#drained}: nothing writes its memory): hashes every chunk
     * and sends, copied straight from where it is, each one never sent or whose hash differs from the one it was
     * sent with. Returns the round; its sent chunks are exactly the chunks that changed since they were sent.
     */
    public synchronized Round finalRound(Sink sink) throws IOException, CheckpointRefused {
        check();
        List<ChunkHasher.Chunk> chunks = session.memoryChunks(chunkBytes);
        long t0 = System.nanoTime();
        ChunkHashes now = hasher.hash(chunks);
        long hashNanos = System.nanoTime() - t0;
        Map<ChunkHasher.Chunk, Long> hashOf = new HashMap<>();
        for (int i = 0; i < chunks.size(); i++) {
            hashOf.put(chunks.get(i), now.hash(i));
        }
        List<ChunkHasher.Chunk> changed = changed(now);
        long t1 = System.nanoTime();
        long sentBytes = 0;
        for (ChunkHasher.Chunk c : changed) {
            copyOut(c.context(), c.address(), c.bytes());
            long h = hashOf.get(c);
            sink.chunk(c, h, host.asSlice(0, c.bytes()));
            sent.put(c, h);
            sentBytes += c.bytes();
        }
        Round r = new Round(rounds.size(), true, chunks.size(), total(chunks), changed.size(), sentBytes, hashNanos,
                System.nanoTime() - t1);
        rounds.add(r);
        return r;
    }

    /** The chunks of {@code now} not sent yet or sent with another hash. */
    private List<ChunkHasher.Chunk> changed(ChunkHashes now) {
        List<ChunkHasher.Chunk> out = new ArrayList<>();
        for (int i = 0; i < now.chunks().size(); i++) {
            Long h = sent.get(now.chunks().get(i));
            if (h == null || h != now.hash(i)) {
                out.add(now.chunks().get(i));
            }
        }
        return out;
    }

    /**
     * Hashes and copies {@code batch} (less the chunks whose range went meanwhile) into the staging buffer at
     * {@code base} in one pass, then sends each; returns the time, the chunks and the bytes sent.
     */
    private long[] sendStaged(long ctx, long base, List<ChunkHasher.Chunk> all, Sink sink) throws IOException {
        long t = System.nanoTime();
        List<ChunkHasher.Chunk> batch = use(all);
        ChunkHashes copied;
        long[] to = new long[batch.size()];
        long at = base;
        for (int i = 0; i < batch.size(); i++) {
            ChunkHasher.Chunk c = batch.get(i);
            to[i] = at + (c.address() & 15); // equal to the chunk's address mod 16
            at += align(c.bytes());
        }
        try {
            if (batch.isEmpty()) {
                return new long[] {System.nanoTime() - t, 0, 0};
            }
            copied = hasher.hashAndCopy(batch, to);
        } finally {
            release();
        }
        long bytes = 0;
        for (int i = 0; i < batch.size(); i++) {
            ChunkHasher.Chunk c = batch.get(i);
            copyOut(ctx, to[i], c.bytes());
            sink.chunk(c, copied.hash(i), host.asSlice(0, c.bytes()));
            sent.put(c, copied.hash(i));
            bytes += c.bytes();
        }
        return new long[] {System.nanoTime() - t, batch.size(), bytes};
    }

    /**
     * Uses the ranges {@code chunks} lie in (each mapping of a span over adjacent VMM mappings) until
     * {@link #release}, and returns the chunks whose ranges are all there and not dying (being freed): a free of
     * one of those waits until the release. The chunks left out are not read.
     */
    private List<ChunkHasher.Chunk> use(List<ChunkHasher.Chunk> chunks) {
        SessionMemory memory = session.memory();
        List<ChunkHasher.Chunk> out = new ArrayList<>(chunks.size());
        java.util.Set<SessionMemory.Range> using = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        java.util.Set<SessionMemory.Range> refused = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (ChunkHasher.Chunk c : chunks) {
            SessionMemory.Range first = memory.covering(c.address(), c.bytes());
            boolean ok = first != null;
            for (SessionMemory.Range r = first; ok && r != null; ) {
                if (refused.contains(r)) {
                    ok = false;
                } else if (!using.contains(r)) {
                    if (uses.use(r.uses)) {
                        using.add(r);
                    } else {
                        refused.add(r);
                        ok = false;
                    }
                }
                r = r.base() + r.size() < c.address() + c.bytes() ? memory.next(r) : null;
            }
            if (ok) {
                out.add(c);
            }
        }
        return out;
    }

    /** Ends the uses of {@link #use}; tells a free waiting for one of them. */
    private void release() {
        if (uses.endAll()) {
            session.uses().released();
        }
    }

    /**
     * Room a chunk takes in the staging buffer: its size and up to 15 bytes of offset, in 16-byte units; at most
     * {@code chunkBytes + 32}, which the buffer has for each of the {@code stagingBytes / chunkBytes} chunks of a batch.
     */
    private static long align(long bytes) {
        return (bytes + 15 + 15) & ~15L;
    }

    private static long total(List<ChunkHasher.Chunk> chunks) {
        long n = 0;
        for (ChunkHasher.Chunk c : chunks) {
            n += c.bytes();
        }
        return n;
    }

    /** The staging buffer in context {@code ctx}, made at first use: room for {@code stagingBytes} plus offsets. */
    private long staging(long ctx) throws IOException {
        Long b = staging.get(ctx);
        if (b != null) {
            return b;
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(8);
            push(ctx, a);
            try {
                long bytes = stagingBytes + stagingBytes / chunkBytes * 32;
                int r = driver.cuMemAlloc(out, bytes);
                if (r != CuResult.CUDA_SUCCESS) {
                    throw new IOException("migration: a staging buffer of " + bytes + " bytes in the session's context: "
                            + CuResult.name(r));
                }
                long base = out.get(ValueLayout.JAVA_LONG, 0);
                staging.put(ctx, base);
                return base;
            } finally {
                driver.cuCtxPopCurrent(out);
            }
        }
    }

    /** Copies {@code bytes} at {@code address} of context {@code ctx} into the host buffer. */
    private void copyOut(long ctx, long address, long bytes) throws IOException {
        try (Arena a = Arena.ofConfined()) {
            push(ctx, a);
            try {
                int r = driver.cuMemcpyDtoH(host, address, bytes);
                if (r != CuResult.CUDA_SUCCESS) {
                    throw new IOException(String.format("migration: copying %d bytes at 0x%x off the device: %s", bytes,
                            address, CuResult.name(r)));
                }
            } finally {
                driver.cuCtxPopCurrent(a.allocate(8));
            }
        }
    }

    private void push(long ctx, Arena a) throws IOException {
        if (driver.cuCtxPushCurrent(ctx) != CuResult.CUDA_SUCCESS) {
            throw new IOException(String.format("migration: context 0x%x cannot be made current", ctx));
        }
    }

    private void check() {
        if (closed) {
            throw new IllegalStateException("pre-copy closed");
        }
    }

    /** Frees the staging buffers (before the session's contexts go) and the host buffer. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(8);
            for (Map.Entry<Long, Long> e : staging.entrySet()) {
                if (driver.cuCtxPushCurrent(e.getKey()) == CuResult.CUDA_SUCCESS) {
                    driver.cuMemFree(e.getValue());
                    driver.cuCtxPopCurrent(out);
                }
            }
        }
        staging.clear();
        arena.close();
        session.uses().unregister(uses);
    }
}
