package io.gpusockets.e2e;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.gpusockets.backend.server.BackendServer;
import io.gpusockets.backend.session.BackendSettings;
import io.gpusockets.backend.session.CheckpointProgress;
import io.gpusockets.backend.session.ChunkHasher;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.backend.session.PreCopy;
import io.gpusockets.backend.session.Session;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.frontend.RemoteCudaDriver;
import io.gpusockets.protocol.transport.TransportUri;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A migration's pre-copy (issue 23 item 1, {@link PreCopy}) while the program's kernels write: a program thread
 * launches, again and again, a kernel that adds to the words of a changing subset of each allocation's 1 KiB chunks;
 * meanwhile the backend runs pre-copy rounds (hash and copy in one pass into a staging buffer), the test plants
 * changes between rounds in memory no kernel writes, and a final round runs on the drained session. What a target
 * would hold (every round's chunks, later ones over earlier ones) equals the memory at the stop byte for byte; the
 * final round sends exactly the chunks whose bytes differ from what was last sent (counted against the memory read
 * at the stop), the planted ones included; every chunk sent carries the hash of its bytes; the program, let go after
 * the drain, ends with the data its own CPU model of the run says.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PreCopyTest extends CheckpointTestSupport {
    /** dirty(base, words, k): word i of chunk c = i / 256 gets k + 1 added when (3c + k) % 5 == 0. */
    static final String PTX = """
            .version 7.0
            .target sm_50
            .address_size 64
            .visible .entry dirty(.param .u64 base, .param .u32 words, .param .u32 k)
            {
                .reg .u32 %r<10>;
                .reg .u64 %rd<4>;
                .reg .pred %p<3>;
                ld.param.u64 %rd1, [base];
                ld.param.u32 %r1, [words];
                ld.param.u32 %r2, [k];
                mov.u32 %r3, %ctaid.x;
                mov.u32 %r4, %ntid.x;
                mov.u32 %r5, %tid.x;
                mad.lo.u32 %r6, %r3, %r4, %r5;
                setp.ge.u32 %p1, %r6, %r1;
                @%p1 bra DONE;
                shr.u32 %r7, %r6, 8;
                mad.lo.u32 %r7, %r7, 3, %r2;
                rem.u32 %r7, %r7, 5;
                setp.ne.u32 %p2, %r7, 0;
                @%p2 bra DONE;
                mul.wide.u32 %rd2, %r6, 4;
                add.u64 %rd3, %rd1, %rd2;
                ld.global.u32 %r8, [%rd3];
                add.u32 %r9, %r2, 1;
                add.u32 %r8, %r8, %r9;
                st.global.u32 [%rd3], %r8;
            DONE:
                ret;
            }
            """;
    static final int CHUNK = 1024;
    static final int ALLOC = 16 << 10;
    /** Allocations the kernel writes; two more (for planted changes) it never touches, and a ragged one. */
    static final int DIRTIED = 6;

    /** What a target would hold: the last bytes and hash sent for each chunk (by address). */
    static final class Target implements PreCopy.Sink {
        final Map<Long, byte[]> bytes = new HashMap<>();
        final Map<Long, Long> hashes = new HashMap<>();
        final List<Long> last = new ArrayList<>();
        final long seed;

        Target(long seed) {
            this.seed = seed;
        }

        @Override
        public void chunk(ChunkHasher.Chunk chunk, long hash, MemorySegment b) {
            assertEquals(ChunkHasher.reference(chunk.address(), b, seed), hash,
                    String.format("the hash sent with chunk 0x%x is that of the bytes sent", chunk.address()));
            bytes.put(chunk.address(), b.toArray(JAVA_BYTE));
            hashes.put(chunk.address(), hash);
            last.add(chunk.address());
        }
    }

    @Test
    void roundsWhileKernelsWriteThenAFinalRoundResendExactlyTheChangedChunks() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        BackendServer server = new BackendServer(DriverHost.initialise(a, "emulated"), BackendSettings.fromSystemProperties());
        server.resumeGrace(Duration.ofSeconds(60));
        try (server) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("a.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                byte[] ptx = (PTX + "\0").getBytes(StandardCharsets.US_ASCII);
                MemorySegment image = cu.arena.allocate(ptx.length);
                MemorySegment.copy(ptx, 0, image, JAVA_BYTE, 0, ptx.length);
                MemorySegment c = cu.cell();
                Cuda.ok(d.cuModuleLoadData(c, image), "cuModuleLoadData");
                long fn = cu.function(c.get(java.lang.foreign.ValueLayout.JAVA_LONG, 0), "dirty");
                int[] sizes = new int[DIRTIED + 3];
                java.util.Arrays.fill(sizes, ALLOC);
                sizes[DIRTIED + 2] = 5000; // ragged: its last chunk is short
                long[] at = new long[sizes.length];
                int[][] model = new int[sizes.length][];
                Random random = new Random(23);
                for (int i = 0; i < sizes.length; i++) {
                    at[i] = cu.alloc(sizes[i]);
                    byte[] data = new byte[sizes[i]];
                    random.nextBytes(data);
                    cu.put(at[i], data);
                    java.nio.IntBuffer ib = java.nio.ByteBuffer.wrap(data).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
                    model[i] = new int[ib.remaining()];
                    ib.get(model[i]);
                }
                long id = server.sessions().get(0).id();
                Session session = server.session(id);
                assertNotNull(session);
                AtomicBoolean stop = new AtomicBoolean();
                int[] launches = new int[1];
                Thread program = Thread.ofPlatform().name("program").start(() -> {
                    cu.primaryContext(); // this thread's lane
                    for (int k = 0; !stop.get(); k++) {
                        for (int i = 0; i < DIRTIED; i++) {
                            int words = ALLOC / 4;
                            Cuda.ok(d.cuLaunchKernel(fn, words / 256, 1, 1, 256, 1, 1, 0, 0,
                                    cu.params(cu.u64(at[i]), cu.u32(words), cu.u32(k)), MemorySegment.NULL), "launch");
                            for (int w = 0; w < words; w++) {
                                if (((w >> 8) * 3 + k) % 5 == 0) {
                                    model[i][w] += k + 1;
                                }
                            }
                        }
                        Cuda.ok(d.cuCtxSynchronize(), "cuCtxSynchronize");
                        launches[0]++;
                    }
                });
                Target target = new Target(session.chunkHasher().seed());
                Set<Long> planted = new HashSet<>();
                try (PreCopy pc = new PreCopy(session, CHUNK, 4 * CHUNK)) { // a staging buffer of 4 chunks: batches
                    PreCopy.Round r0 = pc.round(target);
                    assertEquals(r0.chunks(), r0.sentChunks(), "round 0 sends everything");
                    int total = r0.chunks();
                    assertEquals((DIRTIED + 2) * (ALLOC / CHUNK) + 5, total);
                    plant(cu, at[DIRTIED] + 3 * CHUNK + 17, model[DIRTIED], 3 * CHUNK + 17, planted, at[DIRTIED] + 3 * CHUNK);
                    target.last.clear();
                    PreCopy.Round r1 = pc.round(target);
                    assertTrue(target.last.contains(at[DIRTIED] + 3 * CHUNK), "a change planted before round 1 is sent in it");
                    pc.round(target);
                    // a change after the last pre-copy round, in the short last chunk of the ragged allocation
                    plant(cu, at[DIRTIED + 2] + 4 * CHUNK + 900, model[DIRTIED + 2], 4 * CHUNK + 900, planted,
                            at[DIRTIED + 2] + 4 * CHUNK);
                    Map<Long, byte[]> before = new HashMap<>(target.bytes);
                    Target truth = new Target(target.seed);
                    PreCopy.Round[] fin = new PreCopy.Round[1];
                    session.drained(false, CheckpointProgress.NONE, drainNanos -> {
                        target.last.clear();
                        fin[0] = pc.finalRound(target);
                        try (PreCopy all = new PreCopy(session, CHUNK, CHUNK)) {
                            all.finalRound(truth); // nothing sent yet: every chunk, as it is at the stop
                        }
                        return null;
                    }, "pre-copy test's stop");
                    assertEquals(total, truth.bytes.size());
                    Set<Long> changed = new HashSet<>();
                    for (Map.Entry<Long, byte[]> e : truth.bytes.entrySet()) {
                        assertArrayEquals(e.getValue(), target.bytes.get(e.getKey()),
                                String.format("the target's chunk 0x%x is the memory at the stop", e.getKey()));
                        if (!java.util.Arrays.equals(e.getValue(), before.get(e.getKey()))) {
                            changed.add(e.getKey());
                        }
                    }
                    assertEquals(changed, new HashSet<>(target.last), "the final round resends exactly the changed chunks");
                    assertEquals(changed.size(), fin[0].sentChunks());
                    assertTrue(target.last.contains(at[DIRTIED + 2] + 4 * CHUNK), "the change planted after the last round");
                    assertTrue(fin[0].sentChunks() < total, "not everything: " + fin[0]);
                    assertTrue(r1.sentChunks() < total, "round 1 resends what changed, not everything: " + r1);
                    assertEquals(4, pc.rounds().size());
                }
                stop.set(true);
                program.join();
                assertTrue(launches[0] > 0);
                for (int i = 0; i < sizes.length; i++) {
                    byte[] expected = new byte[sizes[i]];
                    java.nio.ByteBuffer.wrap(expected).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(model[i]);
                    assertArrayEquals(expected, cu.get(at[i], sizes[i]), "allocation " + i + " after the run");
                }
            }
        } finally {
            a.close();
        }
    }

    /**
     * The program frees an allocation in the middle of a pre-copy round (while the round sends its first batch, after
     * the round's hash pass read every chunk): the free completes at once (the round holds no use of memory while it
     * sends), and the round's later batches leave the freed allocation out instead of reading it (the emulated device
     * fails a kernel that reads unmapped memory, as a GPU faults the context); the next round no longer has it.
     */
    @Test
    void anAllocationFreedDuringARoundIsNeverReadAfterItsFree() throws Exception {
        EmulatedDevice a = new EmulatedDevice();
        BackendServer server = new BackendServer(DriverHost.initialise(a, "emulated"), BackendSettings.fromSystemProperties());
        try (server) {
            String uri = server.listen(TransportUri.parse("unix://" + dir.resolve("f.sock"))).toString();
            try (RemoteCudaDriver d = RemoteCudaDriver.connect(uri)) {
                Cuda cu = new Cuda(d);
                cu.primaryContext();
                long[] at = new long[3];
                for (int i = 0; i < at.length; i++) {
                    at[i] = cu.alloc(ALLOC);
                    cu.put(at[i], new byte[ALLOC]);
                }
                Session session = server.session(server.sessions().get(0).id());
                Set<Long> sentAfterFree = new HashSet<>();
                int[] frees = {-1};
                boolean[] freed = new boolean[1];
                PreCopy.Sink sink = (chunk, hash, bytes) -> {
                    if (!freed[0]) {
                        freed[0] = true;
                        Thread t = Thread.ofPlatform().start(() -> {
                            cu.primaryContext();
                            frees[0] = d.cuMemFree(at[2]);
                        });
                        try {
                            t.join(); // would never end if the round held a use of at[2] while it sends
                        } catch (InterruptedException e) {
                            throw new java.io.InterruptedIOException();
                        }
                    } else if (chunk.address() >= at[2] && chunk.address() < at[2] + ALLOC) {
                        sentAfterFree.add(chunk.address());
                    }
                };
                try (PreCopy pc = new PreCopy(session, CHUNK, 4 * CHUNK)) {
                    PreCopy.Round r0 = pc.round(sink);
                    assertEquals(0, frees[0], "cuMemFree during the round");
                    assertEquals(3 * ALLOC / CHUNK, r0.chunks(), "the round's hash pass read all three allocations");
                    assertEquals(Set.of(), sentAfterFree, "no chunk of the freed allocation is read after its free");
                    assertEquals(2 * ALLOC / CHUNK, r0.sentChunks(), "the freed allocation's chunks are left out");
                    PreCopy.Round r1 = pc.round((chunk, hash, bytes) -> { });
                    assertEquals(2 * ALLOC / CHUNK, r1.chunks(), "the next round no longer has it");
                    assertEquals(0, r1.sentChunks());
                }
            }
        } finally {
            a.close();
        }
    }

    /** Writes a new 4-byte word at {@code dptr} (word-aligned offset {@code offset} of an allocation) and its model. */
    private static void plant(Cuda cu, long dptr, int[] model, int offset, Set<Long> planted, long chunk) {
        int word = offset / 4;
        model[word] ^= 0x5a5a5a5a;
        cu.put(dptr - offset % 4, java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN)
                .putInt(model[word]).array());
        planted.add(chunk);
    }
}
