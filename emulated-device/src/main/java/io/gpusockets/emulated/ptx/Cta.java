package io.gpusockets.emulated.ptx;

import static io.gpusockets.emulated.ptx.Types.norm;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * Runs the CTAs of one launch, one at a time, on one host thread (a launch has one per core).
 *
 * <p>Threads are grouped in warps of 32 that execute in lockstep with an active mask, scheduled
 * min-PC first: each step runs the instruction at the smallest PC among the warp's live lanes that
 * are not waiting at a barrier, for the lanes at that PC, so divergent lanes reconverge where their
 * paths meet. (Min-PC reconvergence as described for GPGPU-Sim and Ocelot's emulator: facts only.)
 * With device functions the key is (call depth, PC): the deepest lanes go first, then the smallest
 * PC among them, so lanes inside a call run it to its return before the others go on, and lanes
 * that return meet the others after the call ({@link Calls}).
 * A warp runs until all its live lanes wait at {@code bar.sync} or have exited; when every warp of
 * the CTA is in that state the barrier opens (exited threads count as arrived).
 *
 * <p>Registers are longs, {@code regs[w][slot * 32 + lane]}. Memory: .global through the context's
 * checked {@link GlobalMemory} (the last allocation is cached), .shared per CTA, .local per thread
 * (a stack of call frames),
 * .param the launch's parameter bytes; generic addresses of shared and local memory lie in windows
 * of their own ({@link Builders#SHARED_WINDOW}), anything else generic is global.
 */
final class Cta implements PtxKernel.CtaRunner {
    /** Held by every atomic on global memory, of either engine: one atomic at a time across the host's threads. */
    static final Object GLOBAL_ATOMICS = new Object();
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final String[] SPACES = {"generic", "global", "shared", "local", "param", "const"};

    private final Program program;
    private final Insn[] code;
    private final PtxKernel.Launch launch;
    private final GlobalMemory memory;
    private final int threads;
    private final int warpCount;
    private final long[][] regs;
    private final int[][] pcs;
    private final int[] live;
    private final int[] waiting;
    /** Per warp: the PC of all its live lanes while they are converged, else -1 (then {@code pcs} holds each lane's). */
    private final int[] convergedPc;
    private final MemorySegment shared;
    private final long sharedBytes;
    /** Per lane: its local memory (the stack of frames, grown on demand), the current frame's [base, top), call depth and frames. */
    private final MemorySegment[][] stacks;
    private final long[][] frameBase;
    private final long[][] frameTop;
    private final int[][] depth;
    private final Calls.Frame[][] frames;
    private final long[] scratch = new long[32];
    /** Bytes of all lanes' stacks (local memory and call frames) allocated so far. */
    private long stackBytes;
    private long cachedBase;
    private long cachedLength;
    private MemorySegment cachedHost;
    private long steps;
    long instructions;
    /** The CTA {@link #run} runs (x fastest), for the block index of an assertion message. */
    private long ctaIndex;
    /** mbarrier waits that failed in a row in this CTA ({@link Mbarrier#MAX_FAILED_WAITS}). */
    private long failedWaits;
    /** The grid's device-side launches (set when the entry launches kernels). */
    DeviceLaunches launches;
    /** Per warp and lane: the device runtime's last error of the thread (cudaGetLastError), made at first use. */
    private int[][] lastErrors;

    private int[] lastError(int w) {
        if (lastErrors == null) {
            lastErrors = new int[warpCount][32];
        }
        return lastErrors[w];
    }
    /** The fault detail of the first failed assert() of the call instruction being executed, else null. */
    private String assertion;

    Cta(Program program, PtxKernel.Launch launch) {
        this.program = program;
        this.code = program.code;
        this.launch = launch;
        this.memory = launch.memory();
        this.threads = launch.blockX() * launch.blockY() * launch.blockZ();
        this.warpCount = (threads + 31) / 32;
        this.regs = new long[warpCount][program.slots * 32];
        this.pcs = new int[warpCount][32];
        this.live = new int[warpCount];
        this.waiting = new int[warpCount];
        this.convergedPc = new int[warpCount];
        this.sharedBytes = PtxKernel.sharedBound(program.staticShared + launch.dynamicShared());
        this.shared = MemorySegment.ofArray(new byte[(int) sharedBytes]);
        this.stacks = new MemorySegment[warpCount][32];
        this.frameBase = new long[warpCount][32];
        this.frameTop = new long[warpCount][32];
        this.depth = new int[warpCount][32];
        this.frames = new Calls.Frame[warpCount][32];
        for (long[] r : regs) {
            for (int i = 0; i < program.constSlots.length; i++) {
                java.util.Arrays.fill(r, program.constSlots[i] * 32, program.constSlots[i] * 32 + 32, program.constValues[i]);
            }
        }
    }

    @Override
    public long instructions() {
        return instructions;
    }

    @Override
    public boolean cancelled() {
        return false;   // a cancelled CTA ends its lanes; the next CTA notices again
    }

    /** Runs CTA {@code index} (x fastest) to completion. */
    @Override
    public void run(long index) {
        ctaIndex = index;
        long cx = index % launch.gridX();
        long cy = index / launch.gridX() % launch.gridY();
        long cz = index / (launch.gridX() * launch.gridY());
        shared.fill((byte) 0);
        failedWaits = 0;
        reductionArrived = null;   // no bar.red of this CTA yet
        for (int w = 0; w < warpCount; w++) {
            int lanes = Math.min(32, threads - 32 * w);
            live[w] = lanes == 32 ? -1 : (1 << lanes) - 1;
            waiting[w] = 0;
            convergedPc[w] = 0;
            java.util.Arrays.fill(frameBase[w], 0);
            java.util.Arrays.fill(frameTop[w], program.localBytes);
            java.util.Arrays.fill(depth[w], 0);
            java.util.Arrays.fill(frames[w], null);
            if (lastErrors != null) {
                java.util.Arrays.fill(lastErrors[w], 0);
            }
            fillSpecials(w, cx, cy, cz);
        }
        while (true) {
            boolean alive = false;
            for (int w = 0; w < warpCount; w++) {
                if ((live[w] & ~waiting[w]) != 0) {
                    runWarp(w);
                }
                alive |= live[w] != 0;
            }
            if (!alive) {
                return;
            }
            for (int w = 0; w < warpCount; w++) {
                waiting[w] = 0;   // every warp waits or has exited: the barrier opens
            }
        }
    }

    private void fillSpecials(int w, long cx, long cy, long cz) {
        long[] r = regs[w];
        int bx = launch.blockX();
        int by = launch.blockY();
        for (int i = 0; i < program.specialSlots.length; i++) {
            int base = program.specialSlots[i] * 32;
            int kind = program.specialKinds[i];
            for (int l = 0; l < 32; l++) {
                int t = 32 * w + l;
                r[base + l] = switch (kind) {
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
                    case Program.WARPID -> w;
                    case Program.NWARPID -> warpCount;
                    case Program.LANEMASK_EQ -> 1L << l;
                    case Program.LANEMASK_LE -> (2L << l) - 1;
                    case Program.LANEMASK_LT -> (1L << l) - 1;
                    case Program.LANEMASK_GE -> ~((1L << l) - 1) & 0xFFFF_FFFFL;
                    case Program.LANEMASK_GT -> ~((2L << l) - 1) & 0xFFFF_FFFFL;
                    case Program.DYNAMIC_SMEM_SIZE -> launch.dynamicShared();
                    case Program.TOTAL_SMEM_SIZE -> program.staticShared + launch.dynamicShared();
                    case Program.SMID -> ctaIndex % Program.SM_COUNT;
                    case Program.NSMID -> Program.SM_COUNT;
                    default -> 0;
                };
            }
        }
    }

    /**
     * Runs warp {@code w} until none of its live lanes is ready. While every live lane is at one PC
     * (converged, the common case) that PC is kept per warp and the lanes' PCs are not touched; a
     * branch taken by some of the lanes only, or a guarded barrier, makes the warp diverge, and it is
     * converged again once min-PC scheduling finds every live lane at the same instruction.
     */
    private void runWarp(int w) {
        long[] r = regs[w];
        int[] pc = pcs[w];
        int converged = convergedPc[w];
        while (true) {
            int ready = live[w] & ~waiting[w];
            if (ready == 0) {
                convergedPc[w] = converged;
                return;
            }
            int min;
            int mask;
            if (converged >= 0) {
                min = converged;
                mask = ready;
            } else {
                // The deepest call frames first, then the smallest PC: lanes inside a call run it to its
                // return before the others go on, and lanes at one depth and PC run together.
                int[] dp = depth[w];
                min = Integer.MAX_VALUE;
                int deepest = -1;
                mask = 0;
                for (int m = ready; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    int p = pc[l];
                    int dl = dp[l];
                    if (dl > deepest || dl == deepest && p < min) {
                        deepest = dl;
                        min = p;
                        mask = 1 << l;
                    } else if (dl == deepest && p == min) {
                        mask |= 1 << l;
                    }
                }
                if (mask == ready && waiting[w] == 0) {
                    converged = min;
                }
            }
            Insn in = code[min];
            int exec = mask;
            if (in.guard >= 0) {
                exec = 0;
                int g = in.guard * 32;
                for (int m = mask; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    if (((r[g + l] & 1) != 0) != in.guardNegated) {
                        exec |= 1 << l;
                    }
                }
            }
            instructions += Integer.bitCount(exec);
            int next = min + 1;
            if (converged >= 0) {
                if (exec != mask && (in.op == Insn.BRA || in.op == Insn.BAR) && exec != 0
                        || in.op == Insn.CALL || in.op == Insn.RET) {
                    // some lanes branch or wait, the others go on; or a call or return, whose targets
                    // are per lane: diverge (the next min-PC scan converges the warp again)
                    converged = -1;
                    for (int m = mask; m != 0; m &= m - 1) {
                        pc[Integer.numberOfTrailingZeros(m)] = next;
                    }
                    execute(w, in, exec, mask, r, pc);
                } else if (in.op == Insn.BRA) {
                    converged = exec == 0 ? next : in.target;
                } else {
                    converged = next;
                    execute(w, in, exec, mask, r, pc);
                }
            } else {
                for (int m = mask; m != 0; m &= m - 1) {
                    pc[Integer.numberOfTrailingZeros(m)] = next;
                }
                execute(w, in, exec, mask, r, pc);
            }
            if ((++steps & 0xFFFFF) == 0 && memory.cancelled()) {
                java.util.Arrays.fill(live, 0);
                return;
            }
        }
    }

    private void execute(int w, Insn in, int exec, int mask, long[] r, int[] pc) {
        if (in.op < Insn.ALU_END) {
            int d = in.d * 32;
            int a = in.a * 32;
            int b = in.b * 32;
            int c = in.c * 32;
            int e = in.e * 32;
            for (int m = exec; m != 0; m &= m - 1) {
                int l = Integer.numberOfTrailingZeros(m);
                r[d + l] = Alu.eval(in, r[a + l], b < 0 ? 0 : r[b + l], c < 0 ? 0 : r[c + l], e < 0 ? 0 : r[e + l]);
            }
            return;
        }
        switch (in.op) {
            case Insn.SETP -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    boolean t = Alu.compare(in, r[in.a * 32 + l], r[in.b * 32 + l]);
                    boolean p = t;
                    boolean q = !t;
                    if (in.type2 > 0) {
                        boolean cv = ((r[in.c * 32 + l] & 1) != 0) != in.negC;
                        p = combine(in.type2, t, cv);
                        q = combine(in.type2, !t, cv);
                    }
                    r[in.d * 32 + l] = p ? 1 : 0;
                    if (in.d2 >= 0) {
                        r[in.d2 * 32 + l] = q ? 1 : 0;
                    }
                }
            }
            case Insn.LD -> {
                int size = Types.size(in.type);
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long address = (r[in.a * 32 + l] & in.addressMask) + in.offset;
                    aligned(address, (long) size * in.vec.length);
                    if (whole(in, size)) {
                        // one access, as the device makes it: a v2.u32 tile status is never seen half written
                        long word = load(in.space, address, size * in.vec.length, w, l);
                        for (int k = 0; k < in.vec.length; k++) {
                            if (in.vec[k] >= 0) {
                                r[in.vec[k] * 32 + l] = norm(word >>> (k * size * 8) & sizeMask(size), in.type);
                            }
                        }
                        continue;
                    }
                    if (paired(in, size)) {
                        long lo;
                        long hi;
                        synchronized (stripe(address)) {
                            lo = load(in.space, address, 8, w, l);
                            hi = load(in.space, address + 8, 8, w, l);
                        }
                        for (int k = 0; k < in.vec.length; k++) {
                            if (in.vec[k] >= 0) {
                                int at = k * size;
                                r[in.vec[k] * 32 + l] = norm((at < 8 ? lo : hi) >>> (at % 8 * 8) & sizeMask(size), in.type);
                            }
                        }
                        continue;
                    }
                    for (int k = 0; k < in.vec.length; k++) {
                        long v = norm(load(in.space, address + (long) k * size, size, w, l), in.type);
                        if (in.vec[k] >= 0) {
                            r[in.vec[k] * 32 + l] = v;
                        }
                    }
                }
                if (in.ordered) {
                    VarHandle.acquireFence();
                }
            }
            case Insn.ST -> {
                if (in.ordered) {
                    VarHandle.releaseFence();
                }
                int size = Types.size(in.type);
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long address = (r[in.a * 32 + l] & in.addressMask) + in.offset;
                    aligned(address, (long) size * in.vec.length);
                    if (whole(in, size)) {
                        long word = 0;
                        for (int k = 0; k < in.vec.length; k++) {
                            word |= (r[in.vec[k] * 32 + l] & sizeMask(size)) << (k * size * 8);
                        }
                        store(in.space, address, size * in.vec.length, word, w, l);
                        continue;
                    }
                    if (paired(in, size)) {
                        long lo = 0;
                        long hi = 0;
                        for (int k = 0; k < in.vec.length; k++) {
                            int at = k * size;
                            long bits = (r[in.vec[k] * 32 + l] & sizeMask(size)) << (at % 8 * 8);
                            if (at < 8) {
                                lo |= bits;
                            } else {
                                hi |= bits;
                            }
                        }
                        synchronized (stripe(address)) {
                            store(in.space, address, 8, lo, w, l);
                            store(in.space, address + 8, 8, hi, w, l);
                        }
                        continue;
                    }
                    for (int k = 0; k < in.vec.length; k++) {
                        store(in.space, address + (long) k * size, size, r[in.vec[k] * 32 + l], w, l);
                    }
                }
            }
            case Insn.ATOM -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long old = atomic(in, (r[in.a * 32 + l] & in.addressMask) + in.offset, r[in.b * 32 + l],
                            in.c < 0 ? 0 : r[in.c * 32 + l], w, l);
                    if (in.vec[0] >= 0) {
                        r[in.vec[0] * 32 + l] = norm(old, in.type);
                    }
                }
            }
            case Insn.BRA -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    pc[Integer.numberOfTrailingZeros(m)] = in.target;
                }
            }
            case Insn.EXIT -> live[w] &= ~exec;
            case Insn.CALL -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    call(in, w, Integer.numberOfTrailingZeros(m), r, pc);
                }
                if (assertion != null) {
                    // every lane of the warp that failed its assert() here has printed its message: the launch ends
                    String detail = assertion;
                    assertion = null;
                    throw memory.assertion(detail);
                }
            }
            case Insn.RET -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    if (!ret(w, l, r, pc)) {
                        live[w] &= ~(1 << l);
                    }
                }
            }
            case Insn.CVTA_LOCAL -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long v = in.offset > 0 ? r[in.a * 32 + l] + frameBase[w][l] + in.offset : r[in.a * 32 + l] + in.offset - frameBase[w][l];
                    r[in.d * 32 + l] = Types.size(in.type) == 4 ? v & 0xFFFF_FFFFL : v;
                }
            }
            case Insn.BAR -> waiting[w] |= exec;
            case Insn.SHFL -> WarpOps.shuffle(in.mod, exec, r, in.a * 32, in.b * 32, in.c * 32, in.d * 32, in.d2 * 32, scratch);
            case Insn.VOTE -> WarpOps.vote(in.mod, in.negA, exec, r, in.a * 32, in.e * 32, in.d * 32);
            case Insn.WARPSYNC -> {
            }
            case Insn.ACTIVEMASK -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    r[in.d * 32 + Integer.numberOfTrailingZeros(m)] = mask & 0xFFFF_FFFFL;
                }
            }
            case Insn.PACK -> {
                int bits = Types.bits(in.type) / in.vec.length;
                long part = bits == 64 ? -1L : (1L << bits) - 1;
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long v = 0;
                    for (int k = 0; k < in.vec.length; k++) {
                        v |= (r[in.vec[k] * 32 + l] & part) << (k * bits);
                    }
                    r[in.d * 32 + l] = v;
                }
            }
            case Insn.UNPACK -> {
                int bits = Types.bits(in.type) / in.vec.length;
                long part = (1L << bits) - 1;
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long v = r[in.a * 32 + l];
                    for (int k = 0; k < in.vec.length; k++) {
                        if (in.vec[k] >= 0) {
                            r[in.vec[k] * 32 + l] = (v >>> (k * bits)) & part;
                        }
                    }
                }
            }
            case Insn.CLOCK -> {
                long now = System.nanoTime();
                for (int m = exec; m != 0; m &= m - 1) {
                    r[in.d * 32 + Integer.numberOfTrailingZeros(m)] = in.mod == Program.CLOCK ? now & 0xFFFF_FFFFL : now;
                }
            }
            case Insn.NOP -> {
            }
            case Insn.ADD_CARRY, Insn.SUB_CARRY, Insn.MAD_CARRY -> carryChain(in, exec, r);
            case Insn.MATCH -> WarpOps.match(in.mod == 1, Types.size(in.type) == 8, exec, r, in.a * 32, in.b * 32, in.d * 32,
                    in.d2 * 32);
            case Insn.TRAP -> {
                if (exec != 0) {
                    throw memory.trap(trapDetail(in, 32 * w + Integer.numberOfTrailingZeros(exec), launch, ctaIndex));
                }
            }
            case Insn.BAR_RED -> barrierReduction(in, w, exec, r);
            case Insn.TEX, Insn.SULD, Insn.SUST -> texture(in, exec, r);
            case Insn.FENCE -> VarHandle.fullFence();
            case Insn.MBARRIER -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long address = (r[in.a * 32 + l] & in.addressMask) + in.offset;
                    aligned(address, 8);
                    long[] result = new long[1];
                    long word = mbarrier(in, load(in.space, address, 8, w, l), r[in.b * 32 + l], in.c < 0 ? 0 : r[in.c * 32 + l], result);
                    store(in.space, address, 8, word, w, l);
                    if (in.d >= 0) {
                        r[in.d * 32 + l] = result[0];
                    }
                    boolean waiting = in.mod == Insn.MB_WAIT_PARITY || in.mod == Insn.MB_WAIT_STATE;
                    failedWaits = !waiting ? 0 : result[0] != 0 ? 0 : failedWaits + 1;
                    if (failedWaits > Mbarrier.MAX_FAILED_WAITS) {
                        throw memory.trap(Mbarrier.stuck(in));
                    }
                }
            }
            case Insn.BULK_COPY -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long dst = (r[in.a * 32 + l] & in.addressMask) + in.offset;
                    long src = (r[in.b * 32 + l] & in.addressMask2) + in.offset2;
                    long bar = (r[in.e * 32 + l] & in.addressMask3) + in.offset3;
                    long size = r[in.c * 32 + l] & 0xFFFF_FFFFL;
                    if (size % 16 != 0) {
                        throw memory.misaligned(size, 16);
                    }
                    aligned(dst, 16);
                    aligned(src, 16);
                    aligned(bar, 8);
                    for (long k = 0; k < size; k += 8) {
                        store(Insn.SHARED, dst + k, 8, load(Insn.GLOBAL, src + k, 8, w, l), w, l);
                    }
                    store(Insn.SHARED, bar, 8, Mbarrier.completeTx(load(Insn.SHARED, bar, 8, w, l), size), w, l);
                }
            }
            case Insn.TENSOR_COPY -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    long smem = (r[in.a * 32 + l] & in.addressMask) + in.offset;
                    long map = (r[in.b * 32 + l] & in.addressMask2) + in.offset2;
                    long bar = in.e < 0 ? 0 : (r[in.e * 32 + l] & in.addressMask3) + in.offset3;
                    long[] coords = new long[in.vec.length];
                    for (int k = 0; k < coords.length; k++) {
                        coords[k] = (int) r[in.vec[k] * 32 + l];   // .s32 coordinates
                    }
                    TensorCopy.execute(in, smem, map, bar, coords, tensorAccess(w, l), memory);
                }
            }
            case Insn.ELECT -> {
                int members = 0;
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    members |= (int) r[in.e * 32 + l] & (1 << l);
                }
                int leader = Integer.numberOfTrailingZeros(members);
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    if (in.d >= 0) {
                        r[in.d * 32 + l] = leader;
                    }
                    if (in.d2 >= 0) {
                        r[in.d2 * 32 + l] = l == leader ? 1 : 0;
                    }
                }
            }
            case Insn.REDUX -> WarpOps.redux(in.mod, in.type, exec, r, in.a * 32, in.e * 32, in.d * 32);
            case Insn.CP_ASYNC -> {
                for (int m = exec; m != 0; m &= m - 1) {
                    int l = Integer.numberOfTrailingZeros(m);
                    copyAsync(in, w, l, (r[in.a * 32 + l] & in.addressMask) + in.offset, (r[in.b * 32 + l] & in.addressMask2) + in.offset2,
                            in.c < 0 ? 0 : r[in.c * 32 + l]);
                }
            }
            case Insn.WARP_MATRIX -> WarpMatrix.execute(in.matrix, in, exec, new WarpMatrix.Lanes() {
                @Override
                public long get(int slot, int lane) {
                    return r[slot * 32 + lane];
                }

                @Override
                public void set(int slot, int lane, long value) {
                    r[slot * 32 + lane] = value;
                }

                @Override
                public long load(int space, long address, int size, int lane) {
                    aligned(address, size);
                    return Cta.this.load(space, address, size, w, lane);
                }

                @Override
                public void store(int space, long address, int size, long value, int lane) {
                    aligned(address, size);
                    Cta.this.store(space, address, size, value, w, lane);
                }
            }, memory);
            default -> throw new IllegalStateException(in.toString());
        }
    }

    /** tex, suld, sust lane by lane ({@link TextureOps}); sust's values follow the sources. */
    private void texture(Insn in, int exec, long[] r) {
        int n = in.srcs.length;
        boolean store = in.op == Insn.SUST;
        long[] src = new long[n + (store ? in.vec.length : 0)];
        long[] out = new long[in.vec.length];
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            for (int k = 0; k < n; k++) {
                src[k] = r[in.srcs[k] * 32 + l];
            }
            if (store) {
                for (int k = 0; k < in.vec.length; k++) {
                    src[n + k] = r[in.vec[k] * 32 + l];
                }
            }
            TextureOps.execute(in, src, out, memory);
            if (!store) {
                for (int k = 0; k < in.vec.length; k++) {
                    if (in.vec[k] >= 0) {
                        r[in.vec[k] * 32 + l] = Types.norm(out[k], in.type);
                    }
                }
            }
        }
    }

    /**
     * One mbarrier operation (Insn.MB_*) on the object's word {@code word} with operands b, c: returns the new word and
     * puts the instruction's result (the arrival's state: the phase it arrived in, in bit 63; a wait's 0/1) in result[0].
     */
    static long mbarrier(Insn in, long word, long b, long c, long[] result) {
        return switch (in.mod) {
            case Insn.MB_INIT -> Mbarrier.init(Math.max(1, Math.min(b & 0xFFFF_FFFFL, Mbarrier.MAX_COUNT)));
            case Insn.MB_ARRIVE -> {
                result[0] = Mbarrier.phase(word) << 63;
                yield Mbarrier.arrive(word, b & 0xFFFF_FFFFL, c & 0xFFFF_FFFFL);
            }
            case Insn.MB_EXPECT_TX -> Mbarrier.expectTx(word, b & 0xFFFF_FFFFL);
            case Insn.MB_WAIT_PARITY -> {
                result[0] = Mbarrier.done(word, b) ? 1 : 0;
                yield word;
            }
            case Insn.MB_WAIT_STATE -> {
                result[0] = Mbarrier.done(word, b >>> 63) ? 1 : 0;
                yield word;
            }
            default -> 0;   // inval
        };
    }

    /** The bytes a cp.async reads from its source: its src-size, none when its ignore-src predicate holds, else all. */
    static long copyAsyncBytes(Insn in, long c) {
        if (in.c < 0) {
            return in.mod;
        }
        if (in.type2 == 1) {
            return ((c & 1) != 0) != in.negC ? 0 : in.mod;
        }
        return Math.min(c & 0xFFFF_FFFFL, in.mod);
    }

    /** cp.async by lane l: the bytes read from global src, the rest of the cp-size zeros, into shared dst. */
    private void copyAsync(Insn in, int w, int l, long dst, long src, long c) {
        int size = in.mod;
        aligned(dst, size);
        aligned(src, size);
        long n = copyAsyncBytes(in, c);
        for (int k = 0; k < size; k++) {
            store(Insn.SHARED, dst + k, 1, k < n ? load(Insn.GLOBAL, src + k, 1, w, l) : 0, w, l);
        }
    }

    /** What a trap (brkpt) fault says: the instruction, the first thread that executed it and its block. */
    static String trapDetail(Insn in, int t, PtxKernel.Launch launch, long ctaIndex) {
        int bx = launch.blockX();
        int by = launch.blockY();
        long gx = launch.gridX();
        long gy = launch.gridY();
        return (in.mod == 1 ? "brkpt" : "trap") + " (line " + in.line + ") executed by thread [" + t % bx + "," + t / bx % by + ","
                + t / (bx * by) + "] of block [" + ctaIndex % gx + "," + ctaIndex / gx % gy + "," + ctaIndex / (gx * gy) + "]";
    }

    /** bar.red: per warp the lanes that arrived at the current reduction and their destination slot; its counts so far. */
    private int[] reductionArrived;
    private int[] reductionDestination;
    private long reductionTrue;
    private long reductionCount;

    /**
     * bar.red: the lanes wait as at bar.sync; their predicates are counted, and every thread that arrived at this
     * reduction gets the result so far, so the last arrival leaves the final one in all (a thread that exits instead
     * changes nothing). A lane arriving again starts the next reduction: it only can once the last one opened.
     */
    private void barrierReduction(Insn in, int w, int exec, long[] r) {
        if (reductionArrived == null) {
            reductionArrived = new int[warpCount];
            reductionDestination = new int[warpCount];
            reductionTrue = 0;
            reductionCount = 0;
        } else if ((reductionArrived[w] & exec) != 0) {
            java.util.Arrays.fill(reductionArrived, 0);
            reductionTrue = 0;
            reductionCount = 0;
        }
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            if (((r[in.c * 32 + l] & 1) != 0) != in.negC) {
                reductionTrue++;
            }
            reductionCount++;
        }
        reductionArrived[w] |= exec;
        reductionDestination[w] = in.d;
        waiting[w] |= exec;
        long v = switch (in.mod) {
            case Insn.BAR_POPC -> reductionTrue;
            case Insn.BAR_AND -> reductionTrue == reductionCount ? 1 : 0;
            default -> reductionTrue > 0 ? 1 : 0;
        };
        for (int x = 0; x < warpCount; x++) {
            long[] rx = regs[x];
            int d = reductionDestination[x] * 32;
            for (int m = reductionArrived[x]; m != 0; m &= m - 1) {
                rx[d + Integer.numberOfTrailingZeros(m)] = v;
            }
        }
    }

    /** add.cc/addc, sub.cc/subc, mad.cc/madc lane by lane: d, and the carry flag in slot {@code in.carry} read and/or written. */
    private static void carryChain(Insn in, int exec, long[] r) {
        int f = in.carry * 32;
        boolean out = (in.mod & Insn.CARRY_OUT) != 0;
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            long a = r[in.a * 32 + l];
            long b = r[in.b * 32 + l];
            long c = in.c < 0 ? 0 : r[in.c * 32 + l];
            long cf = r[f + l];
            r[in.d * 32 + l] = Alu.carrySum(in, a, b, c, cf);
            if (out) {
                r[f + l] = Alu.carryFlag(in, a, b, c, cf);
            }
        }
    }

    /** A call by lane l: a device function gets a frame after the caller's; an extern one runs here. */
    private void call(Insn in, int w, int l, long[] r, int[] pc) {
        Calls.Site site = in.call;
        long base = frameBase[w][l];
        if (site.extern != 0) {
            externCall(site, w, l, base);
            return;
        }
        Calls.Func f = site.target;
        if (depth[w][l] + 1 >= Calls.MAX_DEPTH) {
            throw memory.fault("call of " + f.name + " (line " + in.line + ") by thread " + (32 * w + l) + " exceeds the call depth limit of "
                    + Calls.MAX_DEPTH + " frames");
        }
        long nb = base + site.caller.frameBytes;
        long nt = nb + f.frameBytes;
        if (nt > Calls.MAX_STACK_BYTES) {
            throw memory.fault("call of " + f.name + " (line " + in.line + ") by thread " + (32 * w + l) + " overflows the "
                    + Calls.MAX_STACK_BYTES + "-byte stack");
        }
        MemorySegment stack = stack(w, l, nt);
        for (int k = 0; k < site.argOffsets.length; k++) {
            MemorySegment.copy(stack, base + site.argOffsets[k], stack, nb + f.paramOffsets[k], f.paramSizes[k]);
        }
        int[] regsOf = f.registers;
        long[] saved = new long[regsOf.length];
        for (int k = 0; k < regsOf.length; k++) {
            saved[k] = r[regsOf[k] * 32 + l];
        }
        frames[w][l] = new Calls.Frame(frames[w][l], pc[l], base, frameTop[w][l], saved, site);
        depth[w][l]++;
        frameBase[w][l] = nb;
        frameTop[w][l] = nt;
        pc[l] = in.target;
    }

    /** ret of lane l: back to the caller with the return value; false when the lane is in the entry (it exits). */
    private boolean ret(int w, int l, long[] r, int[] pc) {
        Calls.Frame fr = frames[w][l];
        if (fr == null) {
            return false;
        }
        Calls.Site site = fr.site();
        Calls.Func f = site.target;
        MemorySegment stack = stacks[w][l];
        if (site.returnOffset >= 0) {
            MemorySegment.copy(stack, frameBase[w][l] + f.returnOffset, stack, fr.base() + site.returnOffset, f.returnSize);
        }
        int[] regsOf = f.registers;
        long[] saved = fr.saved();
        for (int k = 0; k < regsOf.length; k++) {
            r[regsOf[k] * 32 + l] = saved[k];
        }
        frames[w][l] = fr.parent();
        depth[w][l]--;
        frameBase[w][l] = fr.base();
        frameTop[w][l] = fr.top();
        pc[l] = fr.returnPc();
        return true;
    }

    /** Lane l's local memory, at least {@code bytes} long. */
    private MemorySegment stack(int w, int l, long bytes) {
        MemorySegment s = stacks[w][l];
        if (s == null || s.byteSize() < bytes) {
            long size = Math.max(Math.max(64, bytes), s == null ? 0 : Math.min(Calls.MAX_STACK_BYTES, 2 * s.byteSize()));
            // The block's stacks together stay within what one CTA may hold: client PTX recursing in every
            // thread of a large block must not make the backend allocate without bound.
            long added = size - (s == null ? 0 : s.byteSize());
            if (stackBytes + added > PtxKernel.MAX_CTA_STATE_BYTES) {
                throw memory.fault("the call stacks of a block of " + threads + " threads would exceed the emulated device's "
                        + PtxKernel.MAX_CTA_STATE_BYTES + " bytes (thread " + (32 * w + l) + ", " + bytes + " bytes)");
            }
            stackBytes += added;
            MemorySegment grown = MemorySegment.ofArray(new byte[(int) size]);
            if (s != null) {
                MemorySegment.copy(s, 0, grown, 0, s.byteSize());
            }
            stacks[w][l] = grown;
            s = grown;
        }
        return s;
    }

    /**
     * vprintf, malloc, free, __assertfail, the device runtime's launch calls, cudaGraphSetConditional: their
     * arguments are the caller's call-site variables (8 bytes each, __assertfail's line and
     * cudaGraphSetConditional's value 4, a launch's grid and block 12).
     */
    private void externCall(Calls.Site site, int w, int l, long base) {
        MemorySegment stack = stack(w, l, frameTop[w][l]);
        long first = site.argOffsets.length == 0 ? 0 : stack.get(LONG, base + site.argOffsets[0]);
        switch (site.extern) {
            case Calls.VPRINTF -> {
                int result = -1;   // a NULL format prints nothing and returns -1
                if (first != 0) {
                    long args = stack.get(LONG, base + site.argOffsets[1]);
                    DevicePrintf.Result printed = DevicePrintf.format((address, size) -> load(Insn.GENERIC, address, size, w, l),
                            first, args);
                    // One write per call: PrintStream writes hold its lock, so calls of other threads never interleave with it.
                    System.out.write(printed.text(), 0, printed.text().length);
                    System.out.flush();
                    result = printed.arguments();
                }
                if (site.returnOffset >= 0) {
                    stack.set(INT, base + site.returnOffset, result);
                }
            }
            case Calls.MALLOC -> {
                long block = memory.malloc(first);
                if (site.returnOffset >= 0) {
                    stack.set(LONG, base + site.returnOffset, block);
                }
            }
            case Calls.FREE -> {
                if (!memory.free(first)) {
                    throw memory.fault("free(0x" + Long.toHexString(first) + ") by thread " + (32 * w + l)
                            + ": not a block malloc returned, or freed already");
                }
            }
            case Calls.ASSERTFAIL -> {
                // What the CUDA driver prints for each thread whose assert() failed (on stderr, the CUDA C++
                // Programming Guide says), e.g. "k.cu:12: void k(int *): block: [1,0,0], thread: [5,0,0] Assertion `x < n` failed."
                String message = cString(first, w, l);
                String file = cString(stack.get(LONG, base + site.argOffsets[1]), w, l);
                int line = stack.get(INT, base + site.argOffsets[2]);
                String function = cString(stack.get(LONG, base + site.argOffsets[3]), w, l);
                int t = 32 * w + l;
                int bx = launch.blockX();
                int by = launch.blockY();
                long gx = launch.gridX();
                long gy = launch.gridY();
                String text = file + ":" + Integer.toUnsignedString(line) + ": " + function + ": block: [" + ctaIndex % gx + ","
                        + ctaIndex / gx % gy + "," + ctaIndex / (gx * gy) + "], thread: [" + t % bx + "," + t / bx % by + ","
                        + t / (bx * by) + "] Assertion `" + message + "` failed.";
                byte[] bytes = (text + "\n").getBytes(StandardCharsets.UTF_8);
                System.err.write(bytes, 0, bytes.length);
                System.err.flush();
                if (assertion == null) {
                    assertion = "device-side assert: " + text;
                }
            }
            case Calls.SET_CONDITIONAL -> {
                int value = stack.get(INT, base + site.argOffsets[1]);
                if (!memory.setConditional(first, value)) {
                    throw memory.fault("cudaGraphSetConditional(0x" + Long.toHexString(first) + ") by thread " + (32 * w + l)
                            + ": not a conditional handle of the kernel's context");
                }
            }
            case Calls.PARAMETER_BUFFER -> {
                long[] grid = new long[3];
                int[] block = new int[3];
                for (int k = 0; k < 3; k++) {
                    grid[k] = stack.get(INT, base + site.argOffsets[1] + 4L * k) & 0xFFFF_FFFFL;
                    block[k] = stack.get(INT, base + site.argOffsets[2] + 4L * k);
                }
                long shared = stack.get(INT, base + site.argOffsets[3]) & 0xFFFF_FFFFL;
                long buffer = launches == null ? -DeviceLaunches.NOT_SUPPORTED : launches.parameterBuffer(first, grid, block, shared);
                if (buffer < 0) {
                    lastError(w)[l] = (int) -buffer;
                    buffer = 0;
                }
                if (site.returnOffset >= 0) {
                    stack.set(LONG, base + site.returnOffset, buffer);
                }
            }
            case Calls.LAUNCH_DEVICE -> {
                int error = launches == null ? DeviceLaunches.NOT_SUPPORTED
                        : launches.launch(first, stack.get(LONG, base + site.argOffsets[1]));
                if (error != 0) {
                    lastError(w)[l] = error;
                }
                if (site.returnOffset >= 0) {
                    stack.set(INT, base + site.returnOffset, error);
                }
            }
            case Calls.GET_LAST_ERROR, Calls.PEEK_AT_LAST_ERROR -> {
                int[] errors = lastError(w);
                if (site.returnOffset >= 0) {
                    stack.set(INT, base + site.returnOffset, errors[l]);
                }
                if (site.extern == Calls.GET_LAST_ERROR) {
                    errors[l] = 0;
                }
            }
            default -> throw new IllegalStateException("extern " + site.callee);
        }
    }

    /** A NUL-terminated string at a generic address of lane l (at most 4096 bytes of it), read through the checked memory. */
    private String cString(long address, int w, int l) {
        java.io.ByteArrayOutputStream s = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < 4096; i++) {
            int b = (int) load(Insn.GENERIC, address + i, 1, w, l) & 0xFF;
            if (b == 0) {
                break;
            }
            s.write(b);
        }
        return s.toString(StandardCharsets.UTF_8);
    }

    private static boolean combine(int op, boolean x, boolean c) {
        return switch (op) {
            case Alu.BOOL_AND -> x && c;
            case Alu.BOOL_OR -> x || c;
            default -> x ^ c;
        };
    }

    private void aligned(long address, long bytes) {
        if ((address & (bytes - 1)) != 0 && Long.bitCount(bytes) == 1) {
            throw memory.misaligned(address, bytes);
        }
    }

    private long atomic(Insn in, long address, long b, long c, int w, int l) {
        int size = Types.size(in.type);
        aligned(address, size);
        int space = resolvedSpace(in.space, address);
        if (space == Insn.GLOBAL) {
            synchronized (GLOBAL_ATOMICS) {
                long old = load(Insn.GLOBAL, address, size, w, l);
                store(Insn.GLOBAL, address, size, Alu.atomic(in, old, b, c), w, l);
                return old;
            }
        }
        long old = load(space, address, size, w, l);   // shared: this CTA's own, one thread runs it
        store(space, address, size, Alu.atomic(in, old, b, c), w, l);
        return old;
    }

    /** What a tensor copy of lane {@code l} of warp {@code w} touches, checked as that lane's accesses. */
    private TensorCopy.Access tensorAccess(int w, int l) {
        return new TensorCopy.Access() {
            @Override
            public long load(int space, long address, int size) {
                return Cta.this.load(space, address, size, w, l);
            }

            @Override
            public void store(int space, long address, int size, long value) {
                Cta.this.store(space, address, size, value, w, l);
            }

            @Override
            public long paramBytes() {
                return launch.params().byteSize();
            }
        };
    }

    private static int resolvedSpace(int space, long address) {
        if (space != Insn.GENERIC) {
            return space;
        }
        if (Long.compareUnsigned(address - Builders.SHARED_WINDOW, Builders.WINDOW_BYTES) < 0) {
            return Insn.SHARED + 16;
        }
        if (Long.compareUnsigned(address - Builders.LOCAL_WINDOW, Builders.WINDOW_BYTES) < 0) {
            return Insn.LOCAL + 16;
        }
        return Insn.GLOBAL;
    }

    private long load(int space, long address, int size, int w, int l) {
        return switch (resolvedSpace(space, address)) {
            case Insn.GLOBAL -> get(global(address, size), address - cachedBase, size);
            case Insn.SHARED -> get(shared, sharedOffset(address, size), size);
            case Insn.SHARED + 16 -> get(shared, sharedOffset(address - Builders.SHARED_WINDOW, size), size);
            case Insn.LOCAL -> get(stack(w, l, frameTop[w][l]), localOffset(address + frameBase[w][l], size, w, l), size);
            case Insn.LOCAL + 16 -> get(stack(w, l, frameTop[w][l]), localOffset(address - Builders.LOCAL_WINDOW, size, w, l), size);
            case Insn.PARAM -> get(launch.params(), paramOffset(address, size), size);
            default -> throw new IllegalStateException("space " + space);
        };
    }

    private void store(int space, long address, int size, long value, int w, int l) {
        switch (resolvedSpace(space, address)) {
            case Insn.GLOBAL -> put(global(address, size), address - cachedBase, size, value);
            case Insn.SHARED -> put(shared, sharedOffset(address, size), size, value);
            case Insn.SHARED + 16 -> put(shared, sharedOffset(address - Builders.SHARED_WINDOW, size), size, value);
            case Insn.LOCAL -> put(stack(w, l, frameTop[w][l]), localOffset(address + frameBase[w][l], size, w, l), size, value);
            case Insn.LOCAL + 16 -> put(stack(w, l, frameTop[w][l]), localOffset(address - Builders.LOCAL_WINDOW, size, w, l), size, value);
            default -> throw new IllegalStateException("space " + space);
        }
    }

    private MemorySegment global(long address, int size) {
        long offset = address - cachedBase;
        if (cachedHost == null || offset < 0 || offset > cachedLength - size) {
            GlobalMemory.Region region = memory.region(address, size);
            cachedBase = region.base();
            cachedLength = region.end() - region.base();
            cachedHost = region.host();
        }
        return cachedHost;
    }

    private long sharedOffset(long offset, int size) {
        if (offset < 0 || offset > sharedBytes - size) {
            throw memory.illegalAddress(SPACES[Insn.SHARED], offset, size);
        }
        return offset;
    }

    /** An offset in the lane's stack: it must lie in the live frames, [0, the current frame's top). */
    private long localOffset(long offset, int size, int w, int l) {
        if (offset < 0 || offset > frameTop[w][l] - size) {
            throw memory.illegalAddress(SPACES[Insn.LOCAL], offset, size);
        }
        return offset;
    }

    private long paramOffset(long offset, int size) {
        if (offset < 0 || offset > launch.params().byteSize() - size) {
            throw memory.illegalAddress(SPACES[Insn.PARAM], offset, size);
        }
        return offset;
    }

    /**
     * Whether a vector access is made as one access of its whole width: a vector of at most 8 bytes (v2.u32, v4.u16,
     * v2.f32...). The device makes such an aligned access in one transaction, and code relies on it: CUB's decoupled
     * look-back writes a tile's status and value with one st.relaxed.gpu.v2.u32 and reads them with one ld, so
     * element-wise accesses let a reader in a CTA running beside the writer see the status with a stale value.
     * Wider vectors are made element by element (the PTX memory model promises no more; 16-byte host accesses are not
     * single-copy atomic either).
     */
    static boolean whole(Insn in, int size) {
        return in.vec.length > 1 && size * in.vec.length <= 8;
    }

    /**
     * Whether a vector access is an ordered (relaxed, volatile, acquire, release) 16-byte one of global memory (v2.u64,
     * v4.u32, v2.f64...): made as two 8-byte accesses under {@link #stripe}, so that such accesses are whole to one
     * another, as the device's single transaction is. CUB's look-back keeps the tile status of 8-byte values in such
     * a pair (st.relaxed.gpu.v2.u64). Shared memory needs no lock: a CTA runs on one host thread at a time.
     */
    static boolean paired(Insn in, int size) {
        return in.ordered && size * in.vec.length == 16 && (in.space == Insn.GLOBAL || in.space == Insn.GENERIC);
    }

    private static final Object[] STRIPES = new Object[256];

    static {
        for (int i = 0; i < STRIPES.length; i++) {
            STRIPES[i] = new Object();
        }
    }

    /** The lock of the 16-byte ordered accesses at {@code address} ({@link #paired}). */
    static Object stripe(long address) {
        return STRIPES[(int) (address >>> 4) & (STRIPES.length - 1)];
    }

    /** The bits of a value of {@code size} bytes. */
    static long sizeMask(int size) {
        return size == 8 ? -1L : (1L << (size * 8)) - 1;
    }

    static long get(MemorySegment s, long offset, int size) {
        return switch (size) {
            case 1 -> s.get(ValueLayout.JAVA_BYTE, offset) & 0xFFL;
            case 2 -> s.get(SHORT, offset) & 0xFFFFL;
            case 4 -> s.get(INT, offset) & 0xFFFF_FFFFL;
            default -> s.get(LONG, offset);
        };
    }

    static void put(MemorySegment s, long offset, int size, long v) {
        switch (size) {
            case 1 -> s.set(ValueLayout.JAVA_BYTE, offset, (byte) v);
            case 2 -> s.set(SHORT, offset, (short) v);
            case 4 -> s.set(INT, offset, (int) v);
            default -> s.set(LONG, offset, v);
        }
    }
}
