package io.gpusockets.emulated.ptx;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_ILLEGAL_ADDRESS;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_MISALIGNED_ADDRESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The compiled engine where it differs from the interpreter in how it runs: threads of a warp one
 * after another between meeting points (divergent shuffles, votes and __syncwarp exchanges), faults
 * raised from generated code, kernels that never end, and entries it leaves to the interpreter.
 */
class CompiledEngineTest {
    private static final String OUT_KERNEL = Rig.HEADER + """
            .visible .entry k(.param .u64 out)
            {
                .reg .pred %p<8>;
                .reg .b32 %r<32>;
                .reg .b64 %rd<16>;
                .shared .align 4 .b8 buf[1024];
                ld.param.u64 %rd2, [out];
                cvta.to.global.u64 %rd2, %rd2;
                mov.u32 %r1, %tid.x;
                mul.wide.u32 %rd3, %r1, 4;
                add.s64 %rd1, %rd2, %rd3;
            BODY
                ret;
            }
            """;

    private static void same(String what, String body, int threads, int slots) {
        String ptx = OUT_KERNEL.replace("BODY", body);
        EnginesTest.same(what, rig -> {
            long f = rig.function(rig.module(ptx), "k");
            long out = rig.upload(new int[threads * slots]);
            rig.run(f, 1, threads, out);
            return out;
        }, 4L * threads * slots);
    }

    @Test
    void aModuleLoadedAgainReusesTheClassItsFirstLoadGeneratedAndEachComputesWithItsOwnMemory() throws Exception {
        // an unusual constant, so that no other test generates these bytes
        String ptx = OUT_KERNEL.replace("BODY", """
                    mul.lo.s32 %r2, %r1, 1234577;
                    st.global.u32 [%rd1], %r2;
                """);
        String other = ptx.replace("1234577", "7654319");
        EnginesTest.withEngine(PtxEngine.JIT, () -> {
            long definedBefore = JitCompiler.LOADED.defined();
            long hitsBefore = JitCompiler.LOADED.hits();
            for (int load = 0; load < 3; load++) {
                try (Rig rig = new Rig()) { // a new context and module each time, as each session of a program makes
                    long f = rig.function(rig.module(ptx), "k");
                    long out = rig.upload(new int[32]);
                    rig.run(f, 1, 32, out);
                    int[] got = rig.ints(out, 32);
                    for (int i = 0; i < 32; i++) {
                        assertEquals(i * 1234577, got[i], "load " + load + ", thread " + i);
                    }
                }
            }
            assertEquals(1, JitCompiler.LOADED.defined() - definedBefore, "one class for three loads of one module");
            assertEquals(2, JitCompiler.LOADED.hits() - hitsBefore);
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(other), "k");
                long out = rig.upload(new int[32]);
                rig.run(f, 1, 32, out);
                assertEquals(31 * 7654319, rig.ints(out, 32)[31]);
            }
            assertEquals(2, JitCompiler.LOADED.defined() - definedBefore, "other code, another class");
            return null;
        });
    }

    @Test
    void theClassCacheKeepsOnlyTheMostRecentlyUsed() throws Exception {
        JitCompiler.LoadedClasses cache = new JitCompiler.LoadedClasses(2);
        java.util.List<byte[]> defined = new java.util.ArrayList<>();
        byte[][] classes = new byte[3][];
        for (int i = 0; i < 3; i++) {
            String ptx = OUT_KERNEL.replace("BODY", "    mul.lo.s32 %r2, %r1, " + (1000 + i) + ";\n    st.global.u32 [%rd1], %r2;\n");
            try (Rig rig = new Rig()) {
                java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("jit");
                String before = System.getProperty(JitCompiler.DUMP_PROPERTY);
                System.setProperty(JitCompiler.DUMP_PROPERTY, dir.toString());
                try {
                    EnginesTest.withEngine(PtxEngine.JIT, () -> {
                        long f = rig.function(rig.module(ptx), "k");
                        rig.run(f, 1, 1, rig.upload(new int[1]));
                        return null;
                    });
                } finally {
                    if (before == null) {
                        System.clearProperty(JitCompiler.DUMP_PROPERTY);
                    } else {
                        System.setProperty(JitCompiler.DUMP_PROPERTY, before);
                    }
                }
                try (var files = java.nio.file.Files.list(dir)) {
                    classes[i] = java.nio.file.Files.readAllBytes(files.findFirst().orElseThrow());
                }
            }
        }
        cache.constructor(classes[0], defined::add);
        cache.constructor(classes[1], defined::add);
        cache.constructor(classes[0], defined::add); // used: 1 is now the eldest
        cache.constructor(classes[2], defined::add); // evicts 1
        assertEquals(2, cache.size());
        assertEquals(3, defined.size());
        cache.constructor(classes[0], defined::add);
        assertEquals(3, defined.size(), "0 was kept");
        cache.constructor(classes[1], defined::add);
        assertEquals(4, defined.size(), "1 was evicted, so defined again");
    }

    @Test
    void divergentShufflesMeetOnlyTheLanesThatReachThem() {
        // lanes below 16 shuffle among themselves (mask 0xffff, clamped to lane 15); the others take
        // another shuffle. (A source lane outside the mask is undefined in PTX, so none is read.)
        same("divergent shuffles", """
                    mov.u32 %r9, %laneid;
                    setp.lt.u32 %p1, %r9, 16;
                    @!%p1 bra HIGH;
                    shfl.sync.down.b32 %r2|%p2, %r1, 3, 15, 65535;
                    selp.u32 %r3, 1, 0, %p2;
                    bra.uni JOIN;
                HIGH:
                    mul.lo.s32 %r4, %r1, 7;
                    shfl.sync.bfly.b32 %r2|%p2, %r4, 5, 31, -65536;
                    selp.u32 %r3, 2, 0, %p2;
                JOIN:
                    shfl.sync.idx.b32 %r5, %r2, 9, 31, -1;
                    add.s32 %r6, %r2, %r5;
                    add.s32 %r6, %r6, %r3;
                    st.global.u32 [%rd1], %r6;
                """, 64, 1);
    }

    @Test
    void votesAndActivemaskInsideDivergentCodeOfAPartialWarp() {
        same("votes", """
                    and.b32 %r2, %r1, 3;
                    setp.eq.s32 %p1, %r2, 0;
                    @%p1 bra SKIP;
                    activemask.b32 %r3;
                    setp.gt.u32 %p2, %r1, 20;
                    vote.sync.ballot.b32 %r4, %p2, %r3;
                    vote.sync.any.pred %p3, %p2, %r3;
                    vote.sync.all.pred %p4, %p2, %r3;
                    selp.u32 %r5, 1, 0, %p3;
                    selp.u32 %r6, 2, 0, %p4;
                    xor.b32 %r3, %r3, %r4;
                    add.s32 %r3, %r3, %r5;
                    add.s32 %r3, %r3, %r6;
                    st.global.u32 [%rd1], %r3;
                SKIP:
                """, 45, 1);
    }

    @Test
    void matchInsideDivergentCodeOfAPartialWarpWith64BitValues() {
        // lanes below 16 match b32 values among themselves; the others match b64 values (equal low words,
        // high words by tid / 8) and match.all over theirs; then all meet at a match over the active mask
        same("match", """
                    mov.u32 %r9, %laneid;
                    setp.lt.u32 %p1, %r9, 16;
                    @!%p1 bra HIGH;
                    rem.u32 %r2, %r1, 3;
                    match.any.sync.b32 %r3, %r2, 0xffff;
                    match.all.sync.b32 %r4|%p2, %r2, 0xffff;
                    bra.uni JOIN;
                HIGH:
                    shr.u32 %r5, %r1, 3;
                    cvt.u64.u32 %rd4, %r5;
                    shl.b64 %rd4, %rd4, 33;
                    or.b64 %rd4, %rd4, 5;
                    match.any.sync.b64 %r3, %rd4, 0xffff0000;
                    match.all.sync.b64 %r4|%p2, %rd4, 0xffff0000;
                    and.b32 %r6, %r9, 0xffffff00;
                    match.all.sync.b64 %r7, %rd4, %r6;
                    xor.b32 %r4, %r4, %r7;
                JOIN:
                    selp.u32 %r8, 0x10000, 0, %p2;
                    activemask.b32 %r10;
                    and.b32 %r11, %r1, 1;
                    match.any.sync.b32 %r12, %r11, %r10;
                    add.s32 %r3, %r3, %r4;
                    add.s32 %r3, %r3, %r8;
                    xor.b32 %r3, %r3, %r12;
                    st.global.u32 [%rd1], %r3;
                """, 45, 1);
    }

    @Test
    void aGuardedTrapNotTakenAndCacheHintsCompileAsNoOps() {
        same("trap not taken, hints", """
                    setp.gt.u32 %p1, %r1, 1000;
                    @%p1 trap;
                    @%p1 brkpt;
                    nanosleep.u32 %r1;
                    prefetch.global.L2 [%rd1];
                    prefetch.L1 [%rd1+4];
                    prefetch.global.L2::evict_last [%rd1];
                    prefetchu.L1 [%rd1];
                    discard.global.L2 [%rd2], 128;
                    applypriority.global.L2::evict_normal [%rd2], 128;
                    mov.u32 %r2, %smid;
                    mov.u32 %r3, %nsmid;
                    mov.u32 %r4, %total_smem_size;
                    mad.lo.s32 %r5, %r3, 1000, %r2;
                    add.s32 %r5, %r5, %r4;
                    add.s32 %r5, %r5, %r1;
                    st.global.u32 [%rd1], %r5;
                """, 64, 1);
    }

    @Test
    void barrierReductionsOverABlockWithExitedThreads() {
        // threads 70.. exit first; the others reduce (tid % 3 == 0) three ways at two barriers
        same("bar.red", """
                    setp.ge.u32 %p5, %r1, 70;
                    @%p5 bra DONE;
                    rem.u32 %r2, %r1, 3;
                    setp.eq.u32 %p1, %r2, 0;
                    bar.red.popc.u32 %r3, 0, %p1;
                    bar.red.and.pred %p2, 1, %p1;
                    bar.red.or.pred %p3, 0, !%p1;
                    selp.u32 %r4, 1000, 0, %p2;
                    selp.u32 %r5, 100000, 0, %p3;
                    add.s32 %r3, %r3, %r4;
                    add.s32 %r3, %r3, %r5;
                    st.global.u32 [%rd1], %r3;
                DONE:
                """, 96, 1);
    }

    @Test
    void registersChangedBetweenBarriersOnSomePathsOnlyAreSavedAcrossTheNext() {
        // %r5 changes between the barriers only for odd threads (a guarded add, and a branch for
        // threads above 40); %r6 never changes after the first barrier: both must survive the second
        same("saves across barriers", """
                    mul.lo.s32 %r5, %r1, 3;
                    add.s32 %r6, %r1, 1000;
                    bar.sync 0;
                    and.b32 %r2, %r1, 1;
                    setp.eq.s32 %p1, %r2, 1;
                    @%p1 add.s32 %r5, %r5, 7;
                    setp.gt.u32 %p2, %r1, 40;
                    @!%p2 bra SKIP;
                    shl.b32 %r5, %r5, 1;
                SKIP:
                    bar.sync 0;
                    bar.sync 0;
                    add.s32 %r7, %r5, %r6;
                    st.global.u32 [%rd1], %r7;
                """, 64, 1);
    }

    @Test
    void aNanPayloadNoInstructionSeesIsNotCanonicalisedButOneAMovSeesIs() {
        // %r4 is read only by an fma (its payload is invisible); %r6 also by a mov.b32: canonical
        same("NaN payloads", """
                    mov.b32 %r2, 0x7FC01234;
                    cvt.rn.f32.u32 %r3, %r1;
                    add.f32 %r4, %r2, %r3;
                    fma.rn.f32 %r5, %r4, %r3, %r3;
                    add.f32 %r6, %r2, %r3;
                    fma.rn.f32 %r7, %r6, %r3, %r3;
                    mov.b32 %r8, %r6;
                    xor.b32 %r9, %r5, %r7;
                    xor.b32 %r9, %r9, %r8;
                    st.global.u32 [%rd1], %r9;
                """, 32, 1);
    }

    @Test
    void aRegisterRedeclaredInANestedScopeIsAnotherRegisterThere() {
        // nvcc's inline-PTX blocks redeclare %p1 inside a body whose %p<8> has one: the outer %p1
        // (tid == 5) must survive the block, whose own %p1 is tid != 0
        String ptx = OUT_KERNEL.replace("BODY", """
                    setp.eq.u32 %p1, %r1, 5;
                    {
                    .reg .pred %p1;
                    setp.ne.u32 %p1, %r1, 0;
                    bar.red.popc.u32 %r3, 0, %p1;
                    }
                    selp.u32 %r4, 100, 0, %p1;
                    add.s32 %r4, %r4, %r3;
                    st.global.u32 [%rd1], %r4;
                """);
        for (PtxEngine engine : new PtxEngine[] {PtxEngine.INTERPRETER, PtxEngine.JIT}) {
            EnginesTest.Outcome o = EnginesTest.runWith(engine, rig -> {
                long f = rig.function(rig.module(ptx), "k");
                long out = rig.upload(new int[64]);
                rig.run(f, 1, 64, out);
                return out;
            }, 4L * 64);
            java.nio.IntBuffer got = java.nio.ByteBuffer.wrap(o.output()).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            for (int t = 0; t < 64; t++) {
                assertEquals((t == 5 ? 100 : 0) + 63, got.get(t), engine + ", thread " + t);
            }
        }
    }

    @Test
    void anEntryTooLargeToCompileRunsInterpretedWithItsResult() {
        // 30000 adds: far past the 8000 bytes of bytecode HotSpot compiles, and past a method's 64 KiB
        StringBuilder body = new StringBuilder("    mov.u32 %r2, 0;\n");
        for (int i = 0; i < 30000; i++) {
            body.append("    add.s32 %r2, %r2, %r1;\n");
        }
        body.append("    st.global.u32 [%rd1], %r2;\n");
        String ptx = OUT_KERNEL.replace("BODY", body);
        EnginesTest.Outcome o = EnginesTest.runWith(PtxEngine.JIT, rig -> {
            long f = rig.function(rig.module(ptx), "k");
            long out = rig.upload(new int[32]);
            rig.run(f, 1, 32, out);
            return out;
        }, 128);
        assertEquals(1, o.interpretedLaunches(), "interpreted");
        java.nio.IntBuffer got = java.nio.ByteBuffer.wrap(o.output()).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        for (int t = 0; t < 32; t++) {
            assertEquals(30000 * t, got.get(t), "thread " + t);
        }
    }

    @Test
    void localMemoryPerThreadAcrossABarrierThroughLocalAndGenericAddresses() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .local .align 8 .b8 arr[64];
                    .reg .pred %p<4>;
                    .reg .b32 %r<16>;
                    .reg .b64 %rd<16>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    mov.u64 %rd2, arr;
                    cvta.local.u64 %rd3, %rd2;
                    mov.u32 %r2, 0;
                FILL:
                    mul.lo.s32 %r3, %r1, %r2;
                    mul.wide.u32 %rd4, %r2, 4;
                    add.s64 %rd5, %rd2, %rd4;
                    st.local.u32 [%rd5], %r3;
                    add.s32 %r2, %r2, 1;
                    setp.lt.u32 %p1, %r2, 16;
                    @%p1 bra FILL;
                    bar.sync 0;
                    mul.lo.s32 %r4, %r1, 7;
                    and.b32 %r4, %r4, 15;
                    mul.wide.u32 %rd6, %r4, 4;
                    add.s64 %rd7, %rd3, %rd6;
                    ld.u32 %r5, [%rd7];
                    atom.add.u32 %r6, [%rd7], 5;
                    ld.local.u32 %r7, [%rd2+60];
                    ld.u32 %r8, [%rd7];
                    add.s32 %r9, %r5, %r7;
                    add.s32 %r9, %r9, %r8;
                    add.s32 %r9, %r9, %r6;
                    mul.wide.u32 %rd8, %r1, 4;
                    add.s64 %rd9, %rd1, %rd8;
                    st.global.u32 [%rd9], %r9;
                    ret;
                }
                """;
        EnginesTest.same(".local", rig -> {
            long f = rig.function(rig.module(ptx), "k");
            long out = rig.upload(new int[96]);
            rig.run(f, 1, 96, out);
            return out;
        }, 4L * 96);
        try (Rig rig = new Rig()) {
            long f = rig.function(rig.module(ptx), "k");
            long out = rig.upload(new int[96]);
            rig.run(f, 1, 96, out);
            int[] got = rig.ints(out, 96);
            for (int t = 0; t < 96; t++) {
                int k = t * 7 & 15;
                int last = t * 15 + (k == 15 ? 5 : 0);   // arr[15], read after the atomic add when k is 15
                assertEquals(t * k + last + (t * k + 5) + t * k, got[t], "thread " + t);
            }
        }
    }

    @Test
    void syncwarpOrdersAWarpsSharedMemoryExchange() {
        // each lane writes its slot, __syncwarp, then reads its neighbour's: without the meeting
        // point, a lane running ahead would read a slot not yet written
        String body = """
                    mov.u32 %r7, buf;
                    shl.b32 %r2, %r1, 2;
                    add.s32 %r3, %r7, %r2;
                    mul.lo.s32 %r4, %r1, 3;
                    add.s32 %r4, %r4, 1;
                    st.shared.u32 [%r3], %r4;
                    bar.warp.sync -1;
                    add.s32 %r5, %r1, 1;
                    and.b32 %r5, %r5, 31;
                    shl.b32 %r5, %r5, 2;
                    add.s32 %r5, %r7, %r5;
                    ld.shared.u32 %r6, [%r5];
                    st.global.u32 [%rd1], %r6;
                """;
        same("syncwarp", body, 32, 1);
        try (Rig rig = new Rig()) {
            long f = rig.function(rig.module(OUT_KERNEL.replace("BODY", body)), "k");
            long out = rig.upload(new int[32]);
            rig.run(f, 1, 32, out);
            int[] got = rig.ints(out, 32);
            for (int i = 0; i < 32; i++) {
                assertEquals(3 * ((i + 1) % 32) + 1, got[i], "lane " + i);
            }
        }
    }

    @Test
    void faultsFromCompiledCodeAreTheInterpretersErrors() throws Exception {
        String oob = """
                    mul.wide.u32 %rd4, %r1, 1024;
                    add.s64 %rd5, %rd1, %rd4;
                    st.global.u32 [%rd5], %r1;
                """;
        String shared = """
                    mov.u32 %r7, buf;
                    shl.b32 %r2, %r1, 6;
                    add.s32 %r3, %r7, %r2;
                    ld.shared.u32 %r4, [%r3];
                    st.global.u32 [%rd1], %r4;
                """;
        String misaligned = """
                    add.s64 %rd5, %rd1, 2;
                    st.global.u32 [%rd5], %r1;
                """;
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, compiledResult(oob), "a store past the allocation");
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, compiledResult(shared), "a load past the shared memory");
        assertEquals(CUDA_ERROR_MISALIGNED_ADDRESS, compiledResult(misaligned), "a misaligned store");
    }

    @Test
    void aSharedBaseTestedOnceIsTestedAgainOnceItChanges() throws Exception {
        // two loads through %r3: the second after %r3 moved to a misaligned address in the same block
        String body = """
                    mov.u32 %r7, buf;
                    shl.b32 %r2, %r1, 2;
                    add.s32 %r3, %r7, %r2;
                    ld.shared.u32 %r4, [%r3];
                    ld.shared.u32 %r5, [%r3+8];
                    add.s32 %r3, %r3, 2;
                    ld.shared.u32 %r6, [%r3+4];
                    st.global.u32 [%rd1], %r6;
                """;
        assertEquals(CUDA_ERROR_MISALIGNED_ADDRESS, compiledResult(body), "the moved base is tested again");
        assertEquals(CUDA_ERROR_MISALIGNED_ADDRESS, interpretedResult(body), "as the interpreter says");
    }

    @Test
    void sharedAccessesAreBoundedByTheBlocksSharedBytesRoundedUpToEight() throws Exception {
        // 1024 static bytes: [1020, 1024) is the last word; 1024 is past it
        String last = """
                    mov.u32 %r7, buf;
                    ld.shared.u32 %r4, [%r7+1020];
                    st.global.u32 [%rd1], %r4;
                """;
        String past = last.replace("1020", "1024");
        assertEquals(0, compiledResult(last));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, compiledResult(past));
        assertEquals(CUDA_ERROR_ILLEGAL_ADDRESS, interpretedResult(past));
    }

    private static int interpretedResult(String body) throws Exception {
        return result(PtxEngine.INTERPRETER, body);
    }

    private static int compiledResult(String body) throws Exception {
        return result(PtxEngine.JIT, body);
    }

    /** The synchronising call's result after running {@code body} with {@code engine} (asserting that engine ran it). */
    private static int result(PtxEngine engine, String body) throws Exception {
        return EnginesTest.withEngine(engine, () -> {
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(OUT_KERNEL.replace("BODY", body)), "k");
                long out = rig.upload(new int[32]);
                PtxEngine.Statistics before = PtxEngine.statistics();
                rig.ok(rig.launch(f, new int[] {1, 1, 1}, new int[] {32, 1, 1}, 0, out));
                int rc = rig.device.cuCtxSynchronize();
                PtxEngine.Statistics after = PtxEngine.statistics();
                if (engine == PtxEngine.JIT) {
                    assertEquals(before.compiledLaunches() + 1, after.compiledLaunches(), "compiled");
                } else {
                    assertEquals(before.interpretedLaunches() + 1, after.interpretedLaunches(), "interpreted");
                }
                return rc;
            }
        });
    }

    @Test
    void aCompiledKernelThatNeverEndsStopsWhenItsContextIsDestroyed() throws Exception {
        String spin = """
                LOOP:
                    add.s32 %r2, %r2, 1;
                    bra.uni LOOP;
                """;
        EnginesTest.withEngine(PtxEngine.JIT, () -> {
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(OUT_KERNEL.replace("BODY", spin)), "k");
                long out = rig.upload(new int[64]);
                long compiled = PtxEngine.statistics().compiledLaunches();
                rig.ok(rig.launch(f, new int[] {4, 1, 1}, new int[] {64, 1, 1}, 0, out));
                Thread.sleep(300);
                MemorySegment ctx = rig.arena.allocate(8);
                rig.ok(rig.device.cuCtxGetCurrent(ctx));
                long start = System.nanoTime();
                CompletableFuture<Integer> destroyed = CompletableFuture.supplyAsync(() -> rig.device.cuCtxDestroy(ctx.get(
                        java.lang.foreign.ValueLayout.JAVA_LONG, 0)));
                destroyed.get(20, TimeUnit.SECONDS);
                // the launch is counted when its CTAs have all returned: it must end, compiled, soon after
                while (PtxEngine.statistics().compiledLaunches() == compiled
                        && System.nanoTime() - start < TimeUnit.SECONDS.toNanos(20)) {
                    Thread.sleep(10);
                }
                assertEquals(compiled + 1, PtxEngine.statistics().compiledLaunches(), "the spinning launch ended, compiled");
            }
            return null;
        });
    }

    @Test
    void entriesWithCallsOrLocalMemoryRunInterpretedUnderJit() {
        String ptx = Rig.HEADER + """
                .func (.param .b32 r) twice(.param .b32 x)
                {
                    .reg .b32 %v<3>;
                    ld.param.b32 %v1, [x];
                    add.s32 %v2, %v1, %v1;
                    st.param.b32 [r], %v2;
                    ret;
                }
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<8>;
                    .reg .b64 %rd<8>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, %tid.x;
                    {
                    .param .b32 a;
                    st.param.b32 [a], %r1;
                    .param .b32 b;
                    call (b), twice, (a);
                    ld.param.b32 %r2, [b];
                    }
                    mul.wide.u32 %rd2, %r1, 4;
                    add.s64 %rd3, %rd1, %rd2;
                    st.global.u32 [%rd3], %r2;
                    ret;
                }
                """;
        EnginesTest.Outcome o = EnginesTest.runWith(PtxEngine.JIT, rig -> {
            long f = rig.function(rig.module(ptx), "k");
            long out = rig.upload(new int[32]);
            rig.run(f, 1, 32, out);
            return out;
        }, 128);
        assertEquals(1, o.interpretedLaunches(), "interpreted");
        assertEquals(0, o.compiledLaunches(), "not compiled");
        java.nio.IntBuffer got = java.nio.ByteBuffer.wrap(o.output()).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
        for (int i = 0; i < 32; i++) {
            assertEquals(2 * i, got.get(i), "thread " + i);
        }
    }
}
