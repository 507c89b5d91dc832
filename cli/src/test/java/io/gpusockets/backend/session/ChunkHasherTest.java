package io.gpusockets.backend.session;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@link ChunkHasher} on the emulated device, which runs the hashing kernel from its PTX: hashes equal the Java
 * reference for random data at ragged addresses and sizes, a one-byte change anywhere in a chunk is found and no
 * other chunk is reported, many ranges hash in one launch, the copying variant writes exactly the bytes it hashed,
 * and what the hasher made goes back to the device when it closes or its context goes.
 */
class ChunkHasherTest {
    private static final long SEED = 0x5eed_1234_abcdL;

    /** Counts the hashing kernel's launches and the driver's allocations and frees. */
    private static final class Counting extends DelegatingCudaDriver {
        final AtomicInteger launches = new AtomicInteger();
        final AtomicInteger allocs = new AtomicInteger();
        final AtomicInteger frees = new AtomicInteger();
        final AtomicInteger unloads = new AtomicInteger();

        Counting(CudaDriver d) {
            super(d);
        }

        @Override
        public int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz, int shared, long stream,
                                  MemorySegment params, MemorySegment extra) {
            launches.incrementAndGet();
            return delegate.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
        }

        @Override
        public int cuMemAlloc(MemorySegment dptr, long bytes) {
            allocs.incrementAndGet();
            return delegate.cuMemAlloc(dptr, bytes);
        }

        @Override
        public int cuMemFree(long dptr) {
            frees.incrementAndGet();
            return delegate.cuMemFree(dptr);
        }

        @Override
        public int cuModuleUnload(long hmod) {
            unloads.incrementAndGet();
            return delegate.cuModuleUnload(hmod);
        }
    }

    private EmulatedDevice device;
    private Counting driver;
    private Arena arena;
    private MemorySegment out;
    private long ctx;

    private static void ok(int r) {
        assertEquals(CuResult.name(CuResult.CUDA_SUCCESS), CuResult.name(r));
    }

    @BeforeEach
    void setUp() {
        device = new EmulatedDevice();
        driver = new Counting(device);
        arena = Arena.ofConfined();
        out = arena.allocate(8);
        ok(driver.cuInit(0));
        ok(driver.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
        ctx = out.get(JAVA_LONG, 0);
    }

    @AfterEach
    void tearDown() {
        arena.close();
        device.close();
    }

    private long alloc(long bytes) {
        ok(driver.cuMemAlloc(out, bytes));
        return out.get(JAVA_LONG, 0);
    }

    private MemorySegment random(long bytes, long seed) {
        MemorySegment s = arena.allocate(Math.max(1, bytes));
        byte[] b = new byte[(int) bytes];
        new Random(seed).nextBytes(b);
        s.copyFrom(MemorySegment.ofArray(b));
        return s.asSlice(0, bytes);
    }

    private void write(long address, MemorySegment bytes) {
        MemorySegment n = arena.allocate(Math.max(1, bytes.byteSize())).asSlice(0, bytes.byteSize()).copyFrom(bytes);
        ok(driver.cuMemcpyHtoD(address, n, n.byteSize()));
    }

    private MemorySegment read(long address, long bytes) {
        MemorySegment s = arena.allocate(Math.max(1, bytes)).asSlice(0, bytes);
        ok(driver.cuMemcpyDtoH(s, address, bytes));
        return s;
    }

    private long reference(ChunkHasher.Chunk c) {
        return ChunkHasher.reference(c.address(), read(c.address(), c.bytes()), SEED);
    }

    @Test
    void hashesEqualTheReferenceForRandomDataAtRaggedAddressesAndSizes() throws IOException {
        long size = 3 * 65536 + 4099;
        long base = alloc(size);
        write(base, random(size, 1));
        List<ChunkHasher.Chunk> chunks = new ArrayList<>();
        long[] offsets = {0, 1, 3, 7, 8, 9, 15, 16, 17, 24, 31};
        long[] sizes = {0, 1, 2, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 48, 100, 255, 4096 + 3, 70001};
        for (long off : offsets) {
            for (long n : sizes) {
                chunks.add(new ChunkHasher.Chunk(ctx, base + off, n));
            }
        }
        ChunkHasher.split(ctx, base + 5, size - 5, 65536, chunks); // ragged last chunk, unaligned start
        ChunkHasher.split(ctx, base, size, 1 << 20, chunks);       // one chunk, larger than any other
        try (ChunkHasher hasher = new ChunkHasher(driver, SEED)) {
            ChunkHashes h = hasher.hash(chunks);
            assertEquals(1, driver.launches.get(), "every chunk of one context in one launch");
            for (int i = 0; i < chunks.size(); i++) {
                assertEquals(reference(chunks.get(i)), h.hash(i), "chunk " + i + ": " + chunks.get(i));
            }
            // a chunk's hash depends on its bytes, size, address and the seed
            assertNotEquals(h.hash(0), h.hash(1));
            try (ChunkHasher other = new ChunkHasher(driver, SEED + 1)) {
                assertNotEquals(h.hash(chunks.size() - 1), other.hash(List.of(chunks.getLast())).hash(0));
            }
        }
    }

    @Test
    void referenceFollowsTheDefinition() {
        // 3 bytes at an odd address: one word, the bytes in their places
        MemorySegment b = MemorySegment.ofArray(new byte[] {1, 2, 3});
        long a = 0x1000;
        long w = (1L << 24) | (2L << 32) | (3L << 40);
        long expect = ChunkHasher.mix(ChunkHasher.mix(w ^ (SEED + (a >>> 3) * 0x9E3779B97F4A7C15L)) + 3);
        assertEquals(expect, ChunkHasher.reference(a + 3, b, SEED));
        assertEquals(ChunkHasher.mix(0), ChunkHasher.reference(a + 3, MemorySegment.ofArray(new byte[0]), SEED));
    }

    @Test
    void aOneByteChangeInAnyChunkIsFoundAndNoOtherChunkReported() throws IOException {
        long chunk = 65536;
        long size = 6 * chunk + 777;   // a ragged last chunk
        long base = alloc(size);
        write(base, random(size, 2));
        List<ChunkHasher.Chunk> chunks = ChunkHasher.split(ctx, base, size, chunk, new ArrayList<>());
        try (ChunkHasher hasher = new ChunkHasher(driver, SEED)) {
            ChunkHashes before = hasher.hash(chunks);
            assertEquals(0, hasher.hash(chunks).changedSince(before).length, "nothing changed");
            for (int i = 0; i < chunks.size(); i++) {
                ChunkHasher.Chunk c = chunks.get(i);
                for (long at : new long[] {0, 1, c.bytes() / 2, c.bytes() - 1}) {
                    long p = c.address() + at;
                    MemorySegment old = read(p, 1);
                    byte was = old.get(JAVA_BYTE, 0);
                    for (int bit = 0; bit < 8; bit += 7) {
                        write(p, MemorySegment.ofArray(new byte[] {(byte) (was ^ (1 << bit))}));
                        ChunkHashes now = hasher.hash(chunks);
                        assertArrayEquals(new int[] {i}, now.changedSince(before),
                                "byte " + at + " bit " + bit + " of chunk " + i);
                        assertEquals(List.of(c), now.changedChunksSince(before));
                        assertEquals(reference(c), now.hash(i));
                    }
                    write(p, MemorySegment.ofArray(new byte[] {was}));
                }
            }
            assertEquals(0, hasher.hash(chunks).changedSince(before).length, "every byte written back");
            // two changes in two chunks: both found
            write(chunks.get(1).address() + 100, MemorySegment.ofArray(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9}));
            write(chunks.get(4).address() + chunk - 8, random(8, 3));
            assertArrayEquals(new int[] {1, 4}, hasher.hash(chunks).changedSince(before));
        }
    }

    @Test
    void manyRangesHashInOneLaunch() throws IOException {
        List<ChunkHasher.Chunk> chunks = new ArrayList<>();
        List<Long> reference = new ArrayList<>();
        Random r = new Random(4);
        for (int i = 0; i < 400; i++) {
            long n = 1 + r.nextInt(20000);
            long a = alloc(n);
            MemorySegment data = random(n, 100 + i);
            write(a, data);
            ChunkHasher.split(ctx, a, n, 4096, chunks);
        }
        for (ChunkHasher.Chunk c : chunks) {
            reference.add(reference(c));
        }
        try (ChunkHasher hasher = new ChunkHasher(driver, SEED)) {
            ChunkHashes h = hasher.hash(chunks);
            assertEquals(1, driver.launches.get());
            for (int i = 0; i < chunks.size(); i++) {
                assertEquals(reference.get(i), h.hash(i), "chunk " + i);
            }
        }
    }

    @Test
    void hashAndCopyWritesTheBytesItHashed() throws IOException {
        long size = 2 * 65536 + 123;
        long base = alloc(size + 3) + 3; // an odd start
        MemorySegment data = random(size, 5);
        write(base, data);
        List<ChunkHasher.Chunk> chunks = ChunkHasher.split(ctx, base, size, 65536, new ArrayList<>());
        long staging = alloc(size + 16L * (chunks.size() + 1));
        long[] copyTo = new long[chunks.size()];
        for (int i = 0; i < copyTo.length; i++) { // apart from each other, each equal to its chunk mod 16
            copyTo[i] = staging + (chunks.get(i).address() - base) + 16L * i + (base & 15);
        }
        try (ChunkHasher hasher = new ChunkHasher(driver, SEED)) {
            ChunkHashes copied = hasher.hashAndCopy(chunks, copyTo);
            ChunkHashes plain = hasher.hash(chunks);
            assertArrayEquals(plain.hashes(), copied.hashes());
            for (int i = 0; i < chunks.size(); i++) {
                ChunkHasher.Chunk c = chunks.get(i);
                assertEquals(-1, read(copyTo[i], c.bytes()).mismatch(read(c.address(), c.bytes())), "chunk " + i);
            }
            long[] misaligned = copyTo.clone();
            misaligned[0] += 8;
            assertThrows(IllegalArgumentException.class, () -> hasher.hashAndCopy(chunks, misaligned));
            assertThrows(IllegalArgumentException.class, () -> hasher.hashAndCopy(chunks, new long[1]));
        }
    }

    @Test
    void changedSinceCountsNewChunksAndRefusesAnotherSeed() {
        ChunkHasher.Chunk a = new ChunkHasher.Chunk(1, 0x1000, 64);
        ChunkHasher.Chunk b = new ChunkHasher.Chunk(1, 0x2000, 64);
        ChunkHasher.Chunk c = new ChunkHasher.Chunk(1, 0x3000, 64);
        ChunkHashes before = new ChunkHashes(7, List.of(a, b), new long[] {10, 20});
        ChunkHashes after = new ChunkHashes(7, List.of(c, b, a), new long[] {30, 21, 10});
        assertArrayEquals(new int[] {0, 1}, after.changedSince(before));   // c is new, b changed, a is as it was
        assertThrows(IllegalArgumentException.class, () -> after.changedSince(new ChunkHashes(8, List.of(), new long[0])));
        assertThrows(IllegalArgumentException.class, () -> new ChunkHashes(7, List.of(a), new long[0]));
        assertThrows(IllegalArgumentException.class, () -> new ChunkHasher.Chunk(1, -8, 16));
    }

    @Test
    void whatTheHasherMadeGoesAtCloseAndWithItsContext() throws IOException {
        long base = alloc(4096);
        List<ChunkHasher.Chunk> chunks = ChunkHasher.split(ctx, base, 4096, 1024, new ArrayList<>());
        ChunkHasher hasher = new ChunkHasher(driver, SEED);
        int allocs = driver.allocs.get();
        hasher.hash(chunks);
        assertEquals(allocs + 2, driver.allocs.get(), "descriptors and hashes");
        hasher.hash(chunks);
        assertEquals(allocs + 2, driver.allocs.get(), "kept while large enough");
        hasher.contextGoing(ctx);
        assertEquals(2, driver.frees.get());
        assertEquals(1, driver.unloads.get());
        hasher.hash(chunks); // made again
        hasher.close();
        assertEquals(4, driver.frees.get());
        assertEquals(2, driver.unloads.get());
        assertThrows(IllegalStateException.class, () -> hasher.hash(chunks));
        // a second context: its own module
        ok(driver.cuCtxCreate(out, MemorySegment.NULL, 0, 0));
        long ctx2 = out.get(JAVA_LONG, 0);
        long other = alloc(512);
        try (ChunkHasher h2 = new ChunkHasher(driver, SEED)) {
            ChunkHashes both = h2.hash(List.of(new ChunkHasher.Chunk(ctx, base, 512), new ChunkHasher.Chunk(ctx2, other, 512)));
            assertEquals(2, driver.launches.get() - 3);
            assertEquals(reference(new ChunkHasher.Chunk(ctx2, other, 512)), both.hash(1));
        }
        assertEquals(4, driver.unloads.get());
    }
}
