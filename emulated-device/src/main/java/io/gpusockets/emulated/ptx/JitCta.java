package io.gpusockets.emulated.ptx;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * Runs the CTAs of one launch with an entry's {@link JitCode}, one CTA at a time, on one host thread
 * (a launch has one per core, as {@link Cta} does for the interpreter), and gives the generated code
 * its memory accesses and special registers.
 *
 * <p>Threads run one after another, each as far as it can go: to its exit, or to an instruction it
 * must meet others at. Warp-wide instructions ({@code shfl.sync}, {@code vote.sync}, {@code match.sync},
 * {@code activemask}, {@code bar.warp.sync}) are carried out once none of the warp's threads can go
 * on, for the threads waiting at the lowest such instruction (as the interpreter's min-PC order
 * would meet them); {@code bar.sync} opens once every thread of the block waits there or has
 * exited. Between meeting points the threads of a warp do not run in lockstep: this is the
 * independent thread scheduling the PTX ISA gives targets from sm_70 on, which nvcc's compute_90
 * code is written for (warp-synchronous code without {@code __syncwarp} is not).
 *
 * <p>Memory: .global through the context's checked {@link GlobalMemory}, with the allocation each
 * load or store instruction last touched cached per instruction; .shared per CTA; .param the
 * launch's parameter bytes; .local per thread (one frame: an entry with calls is not compiled);
 * generic shared and local addresses in their windows ({@link Builders#SHARED_WINDOW}).
 */
final class JitCta implements PtxKernel.CtaRunner {
    private static final int READY = 0;
    private static final int WAITING = 1;
    private static final int EXITED = 2;

    private final Program program;
    private final JitCode jit;
    private final boolean meets;
    private final boolean warpWide;
    private final boolean reductions;
    private final PtxKernel.Launch launch;
    private final GlobalMemory memory;
    private final int threads;
    private final int warps;
    final int bx;
    final int by;
    final int bxy;
    /** Shared memory as 32-bit little-endian words: plain array accesses keep the compiled code small. */
    private final int[] shared;
    private final long sharedBytes;
    private final MemorySegment params;
    private final long[] siteBase;
    private final long[] siteLength;
    private final MemorySegment[] siteHost;
    /** Per slot: its constant's value, and whether it is one; per slot: its special register kind, or -1. */
    private final long[] constantOf;
    private final boolean[] constant;
    private final int[] specialOf;
    private final long[][] regs;
    /** Per thread: its .local memory (a compiled entry makes no calls, so one frame of localBytes), made on first use. */
    private final java.lang.foreign.MemorySegment[] locals;
    /** The thread the generated code is running: its local memory is the one accessed. */
    private int thread;
    private final int[] state;
    private final int[] resume;
    private final int[] waitAt;
    private final long[] lanes = new long[6 * 32];
    private final long[] scratch = new long[32];
    /** tex/suld/sust: the sources the generated code hands over, and the results it takes back ({@link #texture}). */
    private final long[] textureArguments = new long[32];
    private final long[] textureResults = new long[4];
    long cx;
    long cy;
    long cz;
    private boolean cancelled;
    /** mbarrier waits that failed in a row in this CTA ({@link Mbarrier#MAX_FAILED_WAITS}). */
    private long failedWaits;
    /** Thread-instructions run so far: the generated code adds its count when a thread returns. */
    long instructions;

    JitCta(Program program, JitCompiler.Compiled compiled, PtxKernel.Launch launch) {
        this.program = program;
        this.jit = compiled.code();
        this.meets = compiled.meets();
        this.warpWide = compiled.warpWide();
        this.reductions = compiled.reductions();
        int sites = compiled.sites();
        this.launch = launch;
        this.memory = launch.memory();
        this.bx = launch.blockX();
        this.by = launch.blockY();
        this.bxy = bx * by;
        this.threads = bx * by * launch.blockZ();
        this.warps = (threads + 31) / 32;
        this.sharedBytes = PtxKernel.sharedBound(program.staticShared + launch.dynamicShared());
        this.shared = new int[(int) (sharedBytes / 4)];
        this.params = launch.params();
        this.siteBase = new long[sites];
        this.siteLength = new long[sites];
        this.siteHost = new MemorySegment[sites];
        this.constantOf = new long[program.slots];
        this.constant = new boolean[program.slots];
        this.specialOf = new int[program.slots];
        Arrays.fill(specialOf, -1);
        for (int i = 0; i < program.constSlots.length; i++) {
            constant[program.constSlots[i]] = true;
            constantOf[program.constSlots[i]] = program.constValues[i];
        }
        for (int i = 0; i < program.specialSlots.length; i++) {
            specialOf[program.specialSlots[i]] = program.specialKinds[i];
        }
        this.regs = meets ? new long[threads][program.slots] : null;
        this.locals = program.localBytes > 0 ? new MemorySegment[threads] : null;
        this.state = new int[threads];
        this.resume = new int[threads];
        this.waitAt = new int[threads];
    }

    @Override
    public long instructions() {
        return instructions;
    }

    @Override
    public boolean cancelled() {
        return cancelled;
    }

    /** Runs CTA {@code index} (x fastest) to completion. */
    @Override
    public void run(long index) {
        cx = index % launch.gridX();
        cy = index / launch.gridX() % launch.gridY();
        cz = index / (launch.gridX() * launch.gridY());
        Arrays.fill(shared, 0);
        failedWaits = 0;
        try {
            if (!meets) {
                for (int t = 0; t < threads; t++) {
                    thread = t;
                    jit.run(this, null, t, 0);
                }
                return;
            }
            Arrays.fill(state, READY);
            Arrays.fill(resume, 0);
            for (long[] r : regs) {
                Arrays.fill(r, 0);
            }
            while (true) {
                for (int w = 0; w < warps; w++) {
                    runWarp(w);
                }
                if (reductions) {
                    reduceAtBarrier();
                }
                boolean released = false;
                for (int t = 0; t < threads; t++) {
                    if (state[t] == WAITING) {   // at bar.sync: every thread waits there or has exited
                        state[t] = READY;
                        resume[t] = waitAt[t] + 1;
                        released = true;
                    }
                }
                if (!released) {
                    return;
                }
            }
        } catch (Cancelled c) {
            cancelled = true;
        }
    }

    /** Runs warp {@code w}'s threads until each waits at bar.sync or has exited. */
    private void runWarp(int w) {
        int first = 32 * w;
        int end = Math.min(threads, first + 32);
        while (true) {
            for (int t = first; t < end; t++) {
                if (state[t] == READY) {
                    thread = t;
                    int r = jit.run(this, regs[t], t, resume[t]);
                    if (r == 0) {
                        state[t] = EXITED;
                    } else {
                        state[t] = WAITING;
                        waitAt[t] = r - 1;
                    }
                }
            }
            if (!warpWide) {
                return;
            }
            int lowest = Integer.MAX_VALUE;
            for (int t = first; t < end; t++) {
                if (state[t] == WAITING && !blockWide(program.code[waitAt[t]].op)) {
                    lowest = Math.min(lowest, waitAt[t]);
                }
            }
            if (lowest == Integer.MAX_VALUE) {
                return;
            }
            int mask = 0;
            for (int t = first; t < end; t++) {
                if (state[t] == WAITING && waitAt[t] == lowest) {
                    mask |= 1 << (t - first);
                    state[t] = READY;
                    resume[t] = lowest + 1;
                }
            }
            meet(program.code[lowest], first, end, mask);
        }
    }

    private static boolean blockWide(int op) {
        return op == Insn.BAR || op == Insn.BAR_RED;
    }

    /**
     * bar.red: the threads waiting at one get the reduction of the predicate over every thread that
     * arrived at the barrier (exited threads do not count), as the interpreter gives it.
     */
    private void reduceAtBarrier() {
        long truths = 0;
        long arrived = 0;
        for (int t = 0; t < threads; t++) {
            Insn in = program.code[waitAt[t]];
            if (state[t] == WAITING && in.op == Insn.BAR_RED) {
                arrived++;
                if (((value(in.c, t) & 1) != 0) != in.negC) {
                    truths++;
                }
            }
        }
        if (arrived == 0) {
            return;
        }
        for (int t = 0; t < threads; t++) {
            Insn in = program.code[waitAt[t]];
            if (state[t] == WAITING && in.op == Insn.BAR_RED) {
                regs[t][in.d] = switch (in.mod) {
                    case Insn.BAR_POPC -> truths;
                    case Insn.BAR_AND -> truths == arrived ? 1 : 0;
                    default -> truths > 0 ? 1 : 0;
                };
            }
        }
    }

    /** A warp-wide instruction for the lanes in {@code mask} of the warp of threads [first, end). */
    private void meet(Insn in, int first, int end, int mask) {
        switch (in.op) {
            case Insn.SHFL -> {
                gather(in.a, 0, first, end, -1);
                gather(in.b, 32, first, end, mask);
                gather(in.c, 64, first, end, mask);
                WarpOps.shuffle(in.mod, mask, lanes, 0, 32, 64, 128, in.d2 >= 0 ? 160 : -1, scratch);
                scatter(in.d, 128, first, mask);
                scatter(in.d2, 160, first, mask);
            }
            case Insn.VOTE -> {
                gather(in.a, 0, first, end, mask);
                gather(in.e, 96, first, end, mask);
                WarpOps.vote(in.mod, in.negA, mask, lanes, 0, 96, 128);
                scatter(in.d, 128, first, mask);
            }
            case Insn.MATCH -> {
                gather(in.a, 0, first, end, mask);
                gather(in.b, 32, first, end, mask);
                WarpOps.match(in.mod == 1, Types.size(in.type) == 8, mask, lanes, 0, 32, 128, in.d2 >= 0 ? 160 : -1);
                scatter(in.d, 128, first, mask);
                scatter(in.d2, 160, first, mask);
            }
            case Insn.ACTIVEMASK -> {
                Arrays.fill(lanes, 128, 160, mask & 0xFFFF_FFFFL);
                scatter(in.d, 128, first, mask);
            }
            case Insn.WARPSYNC -> {
            }
            case Insn.ELECT -> {
                int members = 0;
                for (int m = mask; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    members |= (int) value(in.e, first + l) & (1 << l);
                }
                int leader = Integer.numberOfTrailingZeros(members);
                for (int m = mask; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    if (in.d >= 0) {
                        regs[first + l][in.d] = leader;
                    }
                    if (in.d2 >= 0) {
                        regs[first + l][in.d2] = l == leader ? 1 : 0;
                    }
                }
            }
            case Insn.REDUX -> {
                gather(in.a, 0, first, end, mask);
                gather(in.e, 96, first, end, mask);
                WarpOps.redux(in.mod, in.type, mask, lanes, 0, 96, 128);
                scatter(in.d, 128, first, mask);
            }
            case Insn.WARP_MATRIX -> WarpMatrix.execute(in.matrix, in, end - first == 32 ? mask : mask & ((1 << (end - first)) - 1),
                    new WarpLanes(first), memory);
            default -> throw new IllegalStateException(in.toString());
        }
    }

    /** The registers and memory of the warp of threads [first, first + 32) for {@link WarpMatrix}. */
    private final class WarpLanes implements WarpMatrix.Lanes {
        private final int first;

        WarpLanes(int first) {
            this.first = first;
        }

        @Override
        public long get(int slot, int lane) {
            return value(slot, first + lane);
        }

        @Override
        public void set(int slot, int lane, long v) {
            regs[first + lane][slot] = v;
        }

        @Override
        public long load(int space, long address, int size, int lane) {
            thread = first + lane;
            return switch (space) {
                case Insn.SHARED -> ldShared(address, size);
                case Insn.LOCAL -> ldLocal(address, size);
                default -> ldAny(address, size);
            };
        }

        @Override
        public void store(int space, long address, int size, long v, int lane) {
            thread = first + lane;
            switch (space) {
                case Insn.SHARED -> stShared(address, size, v);
                case Insn.LOCAL -> stLocal(address, size, v);
                default -> stAny(address, size, v);
            }
        }
    }

    /** A global or generic access without a site of its own (the warp-level matrix instructions). */
    private long ldAny(long address, int size) {
        if (inWindow(address, Builders.SHARED_WINDOW)) {
            return ldShared(generic(address, size) - Builders.SHARED_WINDOW, size);
        }
        if (inWindow(address, Builders.LOCAL_WINDOW)) {
            return ldLocal(generic(address, size) - Builders.LOCAL_WINDOW, size);
        }
        GlobalMemory.Region r = memory.region(generic(address, size), size);
        return Cta.get(r.host(), address - r.base(), size);
    }

    private void stAny(long address, int size, long v) {
        if (inWindow(address, Builders.SHARED_WINDOW)) {
            stShared(generic(address, size) - Builders.SHARED_WINDOW, size, v);
        } else if (inWindow(address, Builders.LOCAL_WINDOW)) {
            stLocal(generic(address, size) - Builders.LOCAL_WINDOW, size, v);
        } else {
            GlobalMemory.Region r = memory.region(generic(address, size), size);
            Cta.put(r.host(), address - r.base(), size, v);
        }
    }

    /** mbarrier instruction {@code index} on the object at {@code address}: its result (state or predicate). */
    long mbarrier(int index, long address, long b, long c) {
        Insn in = program.code[index];
        long[] result = new long[1];
        if ((address & 7) != 0) {
            throw memory.misaligned(address, 8);
        }
        if (in.space == Insn.SHARED) {
            stShared(address, 8, Cta.mbarrier(in, ldShared(address, 8), b, c, result));
        } else {
            stAny(address, 8, Cta.mbarrier(in, ldAny(address, 8), b, c, result));
        }
        boolean waiting = in.mod == Insn.MB_WAIT_PARITY || in.mod == Insn.MB_WAIT_STATE;
        failedWaits = !waiting ? 0 : result[0] != 0 ? 0 : failedWaits + 1;
        if (failedWaits > Mbarrier.MAX_FAILED_WAITS) {
            throw memory.trap(Mbarrier.stuck(in));
        }
        return result[0];
    }

    /** cp.async.bulk of {@code size} bytes from global {@code src} to shared {@code dst}, completing them on the mbarrier at {@code bar}. */
    void bulkCopy(long dst, long src, long size, long bar) {
        size &= 0xFFFF_FFFFL;
        if (size % 16 != 0) {
            throw memory.misaligned(size, 16);
        }
        if ((dst & 15) != 0 || (src & 15) != 0) {
            throw memory.misaligned((dst & 15) != 0 ? dst : src, 16);
        }
        GlobalMemory.Region from = size == 0 ? null : memory.region(src, size);
        for (long k = 0; k < size; k += 8) {
            stShared(dst + k, 8, Cta.get(from.host(), src + k - from.base(), 8));
        }
        stShared(bar, 8, Mbarrier.completeTx(ldShared(bar, 8), size));
    }

    /** The tensor copy of instruction {@code index} ({@link TensorCopy}); c0..c4 its coordinates (the unused ones 0). */
    void tensorCopy(int index, long smem, long map, long bar, long c0, long c1, long c2, long c3, long c4) {
        Insn in = program.code[index];
        long[] all = {c0, c1, c2, c3, c4};
        long[] coords = new long[in.vec.length];
        for (int k = 0; k < coords.length; k++) {
            coords[k] = (int) all[k];   // .s32 coordinates
        }
        TensorCopy.execute(in, smem, map, bar, coords, tensorAccess, memory);
    }

    /** What a tensor copy touches: this CTA's shared memory, global memory, the launch's parameters. */
    private final TensorCopy.Access tensorAccess = new TensorCopy.Access() {
        @Override
        public long load(int space, long address, int size) {
            return switch (space) {
                case Insn.SHARED -> ldShared(address, size);
                case Insn.PARAM -> ldParam(address, size);
                default -> {
                    GlobalMemory.Region r = memory.region(address, size);
                    yield Cta.get(r.host(), address - r.base(), size);
                }
            };
        }

        @Override
        public void store(int space, long address, int size, long value) {
            if (space == Insn.SHARED) {
                stShared(address, size, value);
            } else {
                GlobalMemory.Region r = memory.region(address, size);
                Cta.put(r.host(), address - r.base(), size, value);
            }
        }

        @Override
        public long paramBytes() {
            return params.byteSize();
        }
    };

    /** cp.async of instruction {@code index} from global {@code src} to shared {@code dst}; c its src-size or ignore-src. */
    void copyAsync(int index, long dst, long src, long c) {
        Insn in = program.code[index];
        int size = in.mod;
        long n = Cta.copyAsyncBytes(in, c);
        if ((dst & (size - 1)) != 0) {
            throw memory.misaligned(dst, size);
        }
        if ((src & (size - 1)) != 0) {
            throw memory.misaligned(src, size);
        }
        GlobalMemory.Region from = n == 0 ? null : memory.region(src, n);
        for (int k = 0; k < size; k++) {
            stShared(dst + k, 1, k < n ? Cta.get(from.host(), src + k - from.base(), 1) : 0);
        }
    }

    /** Operand {@code slot} of the warp's lanes (those in {@code mask}; all when -1) into lanes[base + lane]. */
    private void gather(int slot, int base, int first, int end, int mask) {
        for (int t = first; t < end; t++) {
            int l = t - first;
            if ((mask >>> l & 1) != 0) {
                lanes[base + l] = value(slot, t);
            }
        }
    }

    private void scatter(int slot, int base, int first, int mask) {
        if (slot < 0) {
            return;
        }
        for (int m = mask; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            regs[first + l][slot] = lanes[base + l];
        }
    }

    private long value(int slot, int t) {
        if (constant[slot]) {
            return constantOf[slot];
        }
        if (specialOf[slot] >= 0) {
            return special(specialOf[slot], t);
        }
        return regs[t][slot];
    }

    /** Special register {@code kind} ({@link Program}'s kinds) of thread t of the current CTA. */
    long special(int kind, int t) {
        int l = t & 31;
        return switch (kind) {
            case Program.TID_X -> t % bx;
            case Program.TID_Y -> t / bx % by;
            case Program.TID_Z -> t / (bx * by);
            case Program.NTID_X -> bx;
            case Program.NTID_Y -> by;
            case Program.NTID_Z -> launch.blockZ();
            case Program.CTAID_X -> cx;
            case Program.CTAID_Y -> cy;
            case Program.CTAID_Z -> cz;
            case Program.NCTAID_X -> launch.gridX();
            case Program.NCTAID_Y -> launch.gridY();
            case Program.NCTAID_Z -> launch.gridZ();
            case Program.LANEID -> l;
            case Program.WARPID -> t >> 5;
            case Program.NWARPID -> warps;
            case Program.LANEMASK_EQ -> 1L << l;
            case Program.LANEMASK_LE -> (2L << l) - 1;
            case Program.LANEMASK_LT -> (1L << l) - 1;
            case Program.LANEMASK_GE -> ~((1L << l) - 1) & 0xFFFF_FFFFL;
            case Program.LANEMASK_GT -> ~((2L << l) - 1) & 0xFFFF_FFFFL;
            case Program.DYNAMIC_SMEM_SIZE -> launch.dynamicShared();
            case Program.TOTAL_SMEM_SIZE -> program.staticShared + launch.dynamicShared();
            case Program.SMID -> (cx + launch.gridX() * (cy + launch.gridY() * cz)) % Program.SM_COUNT;
            case Program.NSMID -> Program.SM_COUNT;
            default -> 0;
        };
    }

    /** Thrown by {@link #poll} once the context is being destroyed: the CTA stops, and the launch with it. */
    static final class Cancelled extends RuntimeException {
        Cancelled() {
            super("the context is being destroyed", null, false, false);
        }
    }

    /** Called by loops now and then: a kernel that never ends stops when its context is destroyed. */
    void poll() {
        if (memory.cancelled()) {
            throw new Cancelled();
        }
    }

    /** trap/brkpt (instruction {@code index}) executed by thread t: the fault the generated code throws. */
    RuntimeException trap(int index, int t) {
        long index0 = cx + launch.gridX() * (cy + launch.gridY() * cz);
        return memory.trap(Cta.trapDetail(program.code[index], t, launch, index0));
    }

    RuntimeException misaligned(long address, long bytes) {
        return memory.misaligned(address, bytes);
    }

    // Loads return the bytes zero-extended (the generated code extends them by the instruction's type).
    // Each access checks its alignment (to its size: a vector's whole alignment the generated code
    // checks before) and its bounds in one test; the slow path says which fault it is, alignment
    // first, as the interpreter does.

    /** True when [offset, offset + size) is not inside [0, limit) or offset is not a multiple of size. */
    private static boolean outside(long offset, int size, long limit, long address) {
        return (offset | (limit - size - offset)) < 0 | (address & (size - 1)) != 0;
    }

    /** The second word of the last {@link #ld16}. */
    private long high;

    /**
     * An ordered 16-byte load of global (or generic) memory as two 8-byte ones under the address's stripe
     * ({@link Cta#paired}); returns the first word, {@link #high} the second.
     */
    long ld16(int site, long address, boolean generic) {
        synchronized (Cta.stripe(address)) {
            long lo = generic ? ldGeneric(site, address, 8) : ldGlobal(site, address, 8);
            high = generic ? ldGeneric(site, address + 8, 8) : ldGlobal(site, address + 8, 8);
            return lo;
        }
    }

    /** The second word of the last {@link #ld16}. */
    long high() {
        return high;
    }

    /** An ordered 16-byte store as two 8-byte ones under the address's stripe ({@link Cta#paired}). */
    void st16(int site, long address, boolean generic, long lo, long hi) {
        synchronized (Cta.stripe(address)) {
            if (generic) {
                stGeneric(site, address, 8, lo);
                stGeneric(site, address + 8, 8, hi);
            } else {
                stGlobal(site, address, 8, lo);
                stGlobal(site, address + 8, 8, hi);
            }
        }
    }

    long ldGlobal(int site, long address, int size) {
        long off = address - siteBase[site];
        if (outside(off, size, siteLength[site], address)) {
            off = refill(site, address, size);
        }
        return Cta.get(siteHost[site], off, size);
    }

    void stGlobal(int site, long address, int size, long v) {
        long off = address - siteBase[site];
        if (outside(off, size, siteLength[site], address)) {
            off = refill(site, address, size);
        }
        Cta.put(siteHost[site], off, size, v);
    }

    private long refill(int site, long address, int size) {
        if ((address & (size - 1)) != 0) {
            throw memory.misaligned(address, size);
        }
        GlobalMemory.Region r = memory.region(address, size);
        siteBase[site] = r.base();
        siteLength[site] = r.end() - r.base();
        siteHost[site] = r.host();
        return address - r.base();
    }

    /**
     * Shared accesses test what the array's own bounds check does not: the offset below 2^31 and
     * aligned to the size, in one test; the array's length (the bound in 4-byte words, a multiple
     * of 8 bytes: {@link PtxKernel#sharedBound}) then bounds it exactly.
     */
    private static final long SHARED_HIGH = 0xFFFF_FFFF_8000_0000L;

    private RuntimeException sharedFault(long offset, int size) {
        if ((offset & (size - 1)) != 0) {
            return memory.misaligned(offset, size);
        }
        return memory.illegalAddress(Cta.SPACES[Insn.SHARED], offset, size);
    }

    // The shared accesses below repeat their word reads and writes rather than share a helper: they
    // are the hottest code a kernel calls and must inline into the generated code, and one more
    // method level risks HotSpot's inlining limits. (A shared helper was tried: SGEMM 1024² ran
    // 2.2 to 2.8 s against 1.9 to 2.4 s without it, on this noisy 2-core VM; not clearly worse,
    // not worth the risk.)

    /**
     * A shared load at base + k where k (an instruction's constant offset) is aligned and below
     * 2^31: only the base is tested, so the compiled code tests a base once for all the accesses
     * through it (an offset at or past 2^31 wraps the int negative: the array's check refuses it).
     */
    long ldSharedAt(long base, long k, int size) {
        if ((base & (SHARED_HIGH | (size - 1))) != 0) {
            throw sharedFault(base + k, size);
        }
        int o = (int) (base + k);
        try {
            int w = shared[o >> 2];
            return switch (size) {
                case 4 -> w & 0xFFFF_FFFFL;
                case 8 -> w & 0xFFFF_FFFFL | (long) shared[(o >> 2) + 1] << 32;
                case 2 -> w >>> ((o & 2) * 8) & 0xFFFF;
                default -> w >>> ((o & 3) * 8) & 0xFF;
            };
        } catch (ArrayIndexOutOfBoundsException e) {
            throw sharedFault(base + k, size);
        }
    }

    /** {@link #ldSharedAt} after an earlier access of this basic block tested the same base for this size. */
    long ldSharedTested(long base, long k, int size) {
        int o = (int) (base + k);
        try {
            int w = shared[o >> 2];
            return switch (size) {
                case 4 -> w & 0xFFFF_FFFFL;
                case 8 -> w & 0xFFFF_FFFFL | (long) shared[(o >> 2) + 1] << 32;
                case 2 -> w >>> ((o & 2) * 8) & 0xFFFF;
                default -> w >>> ((o & 3) * 8) & 0xFF;
            };
        } catch (ArrayIndexOutOfBoundsException e) {
            throw sharedFault(base + k, size);
        }
    }

    /** A shared store at base + k, k as for {@link #ldSharedAt}. */
    void stSharedAt(long base, long k, int size, long v) {
        if (size == 8) {
            stShared(base + k, size, v);
            return;
        }
        if ((base & (SHARED_HIGH | (size - 1))) != 0) {
            throw sharedFault(base + k, size);
        }
        int o = (int) (base + k);
        int i = o >> 2;
        try {
            switch (size) {
                case 4 -> shared[i] = (int) v;
                case 2 -> {
                    int shift = (o & 2) * 8;
                    shared[i] = shared[i] & ~(0xFFFF << shift) | ((int) v & 0xFFFF) << shift;
                }
                default -> {
                    int shift = (o & 3) * 8;
                    shared[i] = shared[i] & ~(0xFF << shift) | ((int) v & 0xFF) << shift;
                }
            }
        } catch (ArrayIndexOutOfBoundsException e) {
            throw sharedFault(base + k, size);
        }
    }

    long ldShared(long offset, int size) {
        if ((offset & (SHARED_HIGH | (size - 1))) != 0) {
            throw sharedFault(offset, size);
        }
        int o = (int) offset;
        try {
            int w = shared[o >> 2];
            return switch (size) {
                case 4 -> w & 0xFFFF_FFFFL;
                case 8 -> w & 0xFFFF_FFFFL | (long) shared[(o >> 2) + 1] << 32;
                case 2 -> w >>> ((o & 2) * 8) & 0xFFFF;
                default -> w >>> ((o & 3) * 8) & 0xFF;
            };
        } catch (ArrayIndexOutOfBoundsException e) {
            throw sharedFault(offset, size);
        }
    }

    void stShared(long offset, int size, long v) {
        if ((offset & (SHARED_HIGH | (size - 1))) != 0) {
            throw sharedFault(offset, size);
        }
        int o = (int) offset;
        int i = o >> 2;
        try {
            switch (size) {
                case 4 -> shared[i] = (int) v;
                case 8 -> {
                    if (i + 1 >= shared.length) {   // both words in bounds before either is written
                        throw sharedFault(offset, size);
                    }
                    shared[i] = (int) v;
                    shared[i + 1] = (int) (v >>> 32);
                }
                case 2 -> {
                    int shift = (o & 2) * 8;
                    shared[i] = shared[i] & ~(0xFFFF << shift) | ((int) v & 0xFFFF) << shift;
                }
                default -> {
                    int shift = (o & 3) * 8;
                    shared[i] = shared[i] & ~(0xFF << shift) | ((int) v & 0xFF) << shift;
                }
            }
        } catch (ArrayIndexOutOfBoundsException e) {
            throw sharedFault(offset, size);
        }
    }

    long ldParam(long offset, int size) {
        if (outside(offset, size, params.byteSize(), offset)) {
            if ((offset & (size - 1)) != 0) {
                throw memory.misaligned(offset, size);
            }
            throw memory.illegalAddress(Cta.SPACES[Insn.PARAM], offset, size);
        }
        return Cta.get(params, offset, size);
    }

    /** The running thread's local memory; only reached past {@link #localOffset}, which refuses every access without .local. */
    private MemorySegment local() {
        MemorySegment s = locals[thread];
        if (s == null) {
            s = MemorySegment.ofArray(new byte[(int) program.localBytes]);
            locals[thread] = s;
        }
        return s;
    }

    private long localOffset(long offset, int size) {
        if (outside(offset, size, program.localBytes, offset)) {
            if ((offset & (size - 1)) != 0) {
                throw memory.misaligned(offset, size);
            }
            throw memory.illegalAddress(Cta.SPACES[Insn.LOCAL], offset, size);
        }
        return offset;
    }

    long ldLocal(long offset, int size) {
        long o = localOffset(offset, size);
        return Cta.get(local(), o, size);
    }

    void stLocal(long offset, int size, long v) {
        long o = localOffset(offset, size);
        Cta.put(local(), o, size, v);
    }

    /** A generic address: shared and local ones lie in their windows, everything else is global. */
    private static boolean inWindow(long address, long window) {
        return Long.compareUnsigned(address - window, Builders.WINDOW_BYTES) < 0;
    }

    private long generic(long address, int size) {
        if ((address & (size - 1)) != 0) {
            throw memory.misaligned(address, size);
        }
        return address;
    }

    long ldGeneric(int site, long address, int size) {
        if (inWindow(address, Builders.SHARED_WINDOW)) {
            return ldShared(generic(address, size) - Builders.SHARED_WINDOW, size);
        }
        if (inWindow(address, Builders.LOCAL_WINDOW)) {
            return ldLocal(generic(address, size) - Builders.LOCAL_WINDOW, size);
        }
        return ldGlobal(site, generic(address, size), size);
    }

    void stGeneric(int site, long address, int size, long v) {
        if (inWindow(address, Builders.SHARED_WINDOW)) {
            stShared(generic(address, size) - Builders.SHARED_WINDOW, size, v);
        } else if (inWindow(address, Builders.LOCAL_WINDOW)) {
            stLocal(generic(address, size) - Builders.LOCAL_WINDOW, size, v);
        } else {
            stGlobal(site, generic(address, size), size, v);
        }
    }

    /** atom/red of instruction {@code index} at {@code address}: the old value, raw. */
    long atom(int index, int site, long address, long b, long c) {
        Insn in = program.code[index];
        int size = Types.size(in.type);
        if ((address & (size - 1)) != 0) {
            throw memory.misaligned(address, size);
        }
        int space = in.space;
        if (space == Insn.GENERIC) {
            if (inWindow(address, Builders.SHARED_WINDOW)) {
                space = Insn.SHARED;
                address -= Builders.SHARED_WINDOW;
            } else if (inWindow(address, Builders.LOCAL_WINDOW)) {
                space = Insn.LOCAL;
                address -= Builders.LOCAL_WINDOW;
            } else {
                space = Insn.GLOBAL;
            }
        }
        if (space == Insn.LOCAL) {   // the thread's own
            long old = ldLocal(address, size);
            stLocal(address, size, Alu.atomic(in, old, b, c));
            return old;
        }
        if (space == Insn.SHARED) {   // this CTA's own: one thread runs it
            long old = ldShared(address, size);
            stShared(address, size, Alu.atomic(in, old, b, c));
            return old;
        }
        synchronized (Cta.GLOBAL_ATOMICS) {
            long old = ldGlobal(site, address, size);
            stGlobal(site, address, size, Alu.atomic(in, old, b, c));
            return old;
        }
    }

    /** The k-th source of the next {@link #texture}. */
    void textureArgument(int k, long value) {
        textureArguments[k] = value;
    }

    /** Runs a tex, suld or sust of the current thread with the sources handed over ({@link TextureOps}). */
    void texture(Insn in) {
        TextureOps.execute(in, textureArguments, textureResults, memory);
    }

    /** The k-th result of the last {@link #texture}. */
    long textureResult(int k) {
        return textureResults[k];
    }
}
