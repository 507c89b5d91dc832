package io.gpusockets.emulated.ptx;

/**
 * One parsed instruction with its operands resolved: registers, immediates, special registers and
 * symbol addresses are all register slots (immediates and addresses are constant slots filled once
 * per warp), labels are instruction indices. Unused slot fields are -1.
 */
final class Insn {
    // Operation codes. ALU operations (below ALU_END) compute d from a, b, c, e lane by lane.
    static final int MOV = 0;
    static final int ADD = 1;
    static final int SUB = 2;
    static final int MUL = 3;
    static final int MUL_HI = 4;
    static final int MUL_WIDE = 5;
    static final int MAD = 6;
    static final int MAD_HI = 7;
    static final int MAD_WIDE = 8;
    static final int DIV = 9;
    static final int REM = 10;
    static final int MIN = 11;
    static final int MAX = 12;
    static final int ABS = 13;
    static final int NEG = 14;
    static final int AND = 15;
    static final int OR = 16;
    static final int XOR = 17;
    static final int NOT = 18;
    static final int CNOT = 19;
    static final int SHL = 20;
    static final int SHR = 21;
    static final int POPC = 22;
    static final int CLZ = 23;
    static final int BREV = 24;
    static final int BFE = 25;
    static final int BFI = 26;
    static final int PRMT = 27;
    static final int FMA = 28;
    static final int RCP = 29;
    static final int SQRT = 30;
    static final int RSQRT = 31;
    static final int EX2 = 32;
    static final int LG2 = 33;
    static final int SIN = 34;
    static final int COS = 35;
    static final int TANH = 36;
    static final int SELP = 37;
    static final int SLCT = 38;
    static final int CVT = 39;
    static final int CVTA = 40;
    static final int COPYSIGN = 41;
    /** mul24.lo/.hi (.u32/.s32): 24-bit operands (sign-extended from bit 23 for .s32); mod 1: .hi, bits 47..16 of the 48-bit product. */
    static final int MUL24 = 42;
    /** mad24.lo/.hi: mul24 plus c; .sat (mad24.hi.sat.s32 only) clamps the sum to the s32 range. */
    static final int MAD24 = 43;
    /** sad (.u16/.u32/.u64/.s16/.s32/.s64): c + |a - b|. */
    static final int SAD = 44;
    /**
     * Arithmetic of .f16/.f16x2/.bf16/.bf16x2 ({@link Half}): mod is the operation (ADD, SUB, MUL, FMA, NEG, ABS,
     * MIN, MAX), always rounded to nearest; ftz, sat (f16 only); an x2 type does it on both halves.
     */
    static final int HALF = 45;
    /** Added to HALF's mod for fma.rn.relu: a negative result is +0 (NaN stays the canonical NaN). */
    static final int HALF_RELU = 0x100;
    /** Added to HALF's mod for min.NaN/max.NaN: a NaN operand makes the result the canonical NaN. */
    static final int HALF_NAN = 0x200;
    /**
     * cvt with a half type on one side ({@link Half#convert}): type the destination, type2 the source, mod the
     * rounding as for CVT; an x2 destination packs two f32 sources: b into the low half, a into the high half;
     * a half type to itself is cvt.rni/rzi/rmi/rpi (rounding to an integral value).
     */
    static final int CVT_HALF = 46;
    /**
     * set.CmpOp{.BoolOp}.dtype.stype: type the destination type, type2 the source, mod the comparison (Alu.EQ...)
     * plus the BoolOp (Alu.BOOL_AND...) times 256 with c the predicate (negC); d is all ones (integer dtype), 1.0
     * (f32/f16/bf16 dtype) or 0; an .f16x2/.bf16x2 source gives one result per half (0xFFFF for an integer dtype).
     */
    static final int SET = 47;
    /** lop3.b32 d, a, b, c, immLut: mod the 8-bit truth table (bit (a << 2 | b << 1 | c) of it per bit position). */
    static final int LOP3 = 48;
    /** dp4a.atype.btype: c + the four byte products of a and b; type atype, type2 btype (.u32/.s32: bytes zero/sign-extended). */
    static final int DP4A = 49;
    /** dp2a.lo/.hi.atype.btype: c + a's two 16-bit halves times bytes 0, 1 (.lo, mod 0) or 2, 3 (.hi, mod 1) of b. */
    static final int DP2A = 50;
    /** bfind(.shiftamt).u32/.s32/.u64/.s64: the most significant non-sign bit's position (mod 1: 31/63 minus it), else 0xFFFFFFFF. */
    static final int BFIND = 51;
    /** bmsk.clamp/.wrap.b32 (mod 0/1): the mask of b bits starting at bit a. */
    static final int BMSK = 52;
    /** szext.clamp/.wrap (mod 0/1) .u32/.s32: the low b bits of a, zero- or sign-extended. */
    static final int SZEXT = 53;
    /** testp.op.f32/.f64 into a predicate; mod the TESTP_ class. */
    static final int TESTP = 54;
    /** isspacep.space: whether generic address a lies in space mod (GLOBAL, SHARED, LOCAL, CONST, PARAM). */
    static final int ISSPACEP = 55;
    /** fns.b32 d, mask, base, offset: the position of the offset-th set bit of mask from base, else 0xFFFFFFFF. */
    static final int FNS = 56;
    /** shf.l/.r.wrap/.clamp.b32 d, a, b, c: the funnel shift of b:a (b the high word) by c; mod bit 0 .r, bit 1 .clamp. */
    static final int SHF = 57;
    static final int ALU_END = 58;
    // testp classes (TESTP's mod)
    static final int TESTP_FINITE = 0;
    static final int TESTP_INFINITE = 1;
    static final int TESTP_NUMBER = 2;
    static final int TESTP_NOTANUMBER = 3;
    static final int TESTP_NORMAL = 4;
    static final int TESTP_SUBNORMAL = 5;
    static final int SETP = 60;
    static final int LD = 61;
    static final int ST = 62;
    static final int ATOM = 63;
    static final int BRA = 64;
    static final int EXIT = 65;
    static final int BAR = 66;
    static final int SHFL = 67;
    static final int VOTE = 68;
    static final int ACTIVEMASK = 69;
    static final int NOP = 70;
    static final int PACK = 71;
    static final int UNPACK = 72;
    static final int CLOCK = 73;
    /** call: {@link #call} says what and with which arguments. */
    static final int CALL = 74;
    /** ret from a .func (in the entry, ret is EXIT). */
    static final int RET = 75;
    /** cvta of the .local space: the frame's place in the thread's stack is added (subtracted by cvta.to). */
    static final int CVTA_LOCAL = 76;
    /**
     * bar.warp.sync (__syncwarp): nothing for the interpreter, whose warps run in lockstep; a
     * warp-wide meeting point for the compiled engine, which runs a warp's threads one after another.
     */
    static final int WARPSYNC = 77;
    /*
     * The carry chain (.u32/.s32/.u64/.s64): not ALU operations, since they read and write the carry flag CC.CF,
     * a hidden register of the function whose slot is {@link #carry}. {@code mod} holds CARRY_IN (the flag is
     * added, or subtracted as a borrow), CARRY_OUT (.cc: the carry, or borrow, out of the operation is written to
     * the flag) and CARRY_HI (mad: the high half of a * b). Sources a, b (and c for mad), destination d, type.
     */
    /** add.cc, addc, addc.cc: d = a + b (+ CF). */
    static final int ADD_CARRY = 80;
    /** sub.cc, subc, subc.cc: d = a - b (- CF); CF is the borrow. */
    static final int SUB_CARRY = 81;
    /** mad.lo.cc, mad.hi.cc, madc.lo, madc.hi, madc.lo.cc, madc.hi.cc: d = (a * b).lo or .hi + c (+ CF), CF out of that addition. */
    static final int MAD_CARRY = 82;
    /**
     * bar.red.popc.u32 / bar.red.and.pred / bar.red.or.pred (mod BAR_POPC, BAR_AND, BAR_OR), all threads of the CTA:
     * c the predicate (negC), d the result; the thread waits like BAR. Barrier id in a (any id: all barriers are CTA-wide).
     */
    static final int BAR_RED = 83;
    /**
     * match.any.sync / match.all.sync (mod 0 / 1) .b32/.b64 d{|p}, a, membermask: warp-wide ({@link WarpOps#match});
     * a the value, b the member mask, d the lane mask, d2 match.all's optional predicate.
     */
    static final int MATCH = 84;
    /** trap, brkpt: the launch fails (the sticky CUDA_ERROR_LAUNCH_FAILED) when a thread executes it; mod 1 for brkpt. */
    static final int TRAP = 85;
    /**
     * tex, tex.level, tex.grad, tex.base ({@link TextureOps}): srcs the texture object and the coordinates (and the
     * level or gradients), vec the four destinations; mod the geometry, coordinate and result types and variant.
     */
    static final int TEX = 86;
    /** suld.b ({@link TextureOps}): srcs the surface object and the coordinates, vec the destinations, type the element type. */
    static final int SULD = 87;
    /** sust.b ({@link TextureOps}): srcs the surface object and the coordinates, vec the values, type the element type. */
    static final int SUST = 88;
    /**
     * redux.sync.op.type d, a, membermask (mod: REDUX_ADD..REDUX_XOR; type .u32/.s32 for add/min/max, .b32 for the
     * bitwise ones): warp-wide, every executing lane gets the reduction of a over the executing lanes.
     */
    static final int REDUX = 100;
    static final int REDUX_ADD = 0;
    static final int REDUX_MIN = 1;
    static final int REDUX_MAX = 2;
    static final int REDUX_AND = 3;
    static final int REDUX_OR = 4;
    static final int REDUX_XOR = 5;
    /**
     * cp.async.ca/.cg.shared.global [a+offset], [b+offset2], mod (the cp-size 4, 8 or 16){, c}: c the src-size
     * (bytes read, the rest zero-filled) or, with type2 = 1, the ignore-src predicate (negC). Done at once: the ISA
     * leaves the destination undefined until a cp.async.wait_group/wait_all (NOPs here) that covers it.
     */
    static final int CP_ASYNC = 101;
    /** membar.cta/.gl/.sys, fence.sc/.acq_rel(.scope): a full fence between this host thread's accesses. */
    static final int FENCE = 102;
    /** mma, wmma.load/mma/store, ldmatrix ({@link WarpMatrix}): warp-wide; {@link #matrix} says which. */
    static final int WARP_MATRIX = 103;
    /**
     * mbarrier.init/arrive/arrive.expect_tx/expect_tx/test_wait/try_wait/inval on the 64-bit object at [a+offset]
     * ({@link Mbarrier}): mod the MB_ kind, b the count, parity, state or bytes, c arrive.expect_tx's bytes, d the state
     * or the wait's predicate (-1: none); space SHARED or GENERIC.
     */
    static final int MBARRIER = 104;
    static final int MB_INIT = 0;
    static final int MB_ARRIVE = 1;
    static final int MB_EXPECT_TX = 2;
    static final int MB_WAIT_PARITY = 3;
    static final int MB_WAIT_STATE = 4;
    static final int MB_INVAL = 5;
    /**
     * cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [a+offset], [b+offset2], c, [e+offset3]: c bytes
     * (a multiple of 16, both addresses 16-aligned) from global to shared memory, done at once, then c bytes of
     * transactions completed on the mbarrier.
     */
    static final int BULK_COPY = 105;
    /** elect.sync d|p, membermask: warp-wide; the lowest executing lane is elected: d its lane id, p whether it is this lane. */
    static final int ELECT = 106;
    /**
     * The tile-mode tensor (TMA) copies of {@link TensorCopy}: mod TENSOR_LOAD ([a+offset] the shared destination,
     * [e+offset3] the mbarrier), TENSOR_STORE or TENSOR_REDUCE_* ([a+offset] the shared source); [b+offset2] the tensor
     * map's generic address, vec the coordinates' slots.
     */
    static final int TENSOR_COPY = 115;
    static final int TENSOR_LOAD = 0;
    static final int TENSOR_STORE = 1;
    static final int TENSOR_REDUCE_ADD = 2;
    static final int TENSOR_REDUCE_MIN = 3;
    static final int TENSOR_REDUCE_MAX = 4;
    static final int BAR_POPC = 1;
    static final int BAR_AND = 2;
    static final int BAR_OR = 3;
    static final int CARRY_IN = 1;
    static final int CARRY_OUT = 2;
    static final int CARRY_HI = 4;

    // State spaces of ld/st/atom.
    static final int GENERIC = 0;
    static final int GLOBAL = 1;
    static final int SHARED = 2;
    static final int LOCAL = 3;
    static final int PARAM = 4;
    static final int CONST = 5;

    // Rounding (cvt and float ops).
    static final int RN = 1;
    static final int RZ = 2;
    static final int RM = 3;
    static final int RP = 4;
    static final int RNI = 5;
    static final int RZI = 6;
    static final int RMI = 7;
    static final int RPI = 8;

    final int line;
    final String text;
    int op;
    /** The instruction type; for cvt the destination type; for mul/mad.wide the operands' type. */
    int type;
    /** cvt's source type; slct's selector type; setp's second compare-combining op. */
    int type2;
    /**
     * Sub-operation: setp's comparison, cvt's rounding, shfl/vote mode, atom op, special register; the rounding of
     * f32/f64 ADD, SUB, MUL, MAD, FMA, DIV, RCP, SQRT (0 or RN: to nearest, Java's operators; RZ/RM/RP: directed,
     * {@link Rounding}); HALF's operation, MUL24/MAD24's .hi (1), SET's comparison and BoolOp, the carry flags.
     */
    int mod;
    boolean ftz;
    boolean sat;
    int d = -1;
    int d2 = -1;
    int a = -1;
    int b = -1;
    int c = -1;
    int e = -1;
    boolean negA;
    boolean negC;
    int[] vec;
    int space;
    long offset;
    /** Mask applied to the address register (32-bit registers address shared/local by their low bits). */
    long addressMask = -1L;
    int guard = -1;
    boolean guardNegated;
    int target = -1;
    Calls.Site call;
    /** The carry flag's register slot (ADD_CARRY, SUB_CARRY, MAD_CARRY), or -1. */
    int carry = -1;
    /** TEX, SULD, SUST: the source slots, the texture or surface object first ({@link TextureOps}). */
    int[] srcs;
    /** WARP_MATRIX: the instruction's shape, types and registers ({@code vec} its destinations, {@code vec2} its sources). */
    WarpMatrix.Op matrix;
    int[] vec2;
    /** CP_ASYNC: the source address's constant offset and register mask ({@code offset}/{@code addressMask} are the destination's). */
    long offset2;
    long addressMask2 = -1L;
    /** BULK_COPY: the mbarrier address's constant offset and register mask. */
    long offset3;
    long addressMask3 = -1L;
    /**
     * ld/st with .volatile, .relaxed or .acquire/.release at a scope wider than the thread: the engines order them
     * against other host threads' accesses (an acquire fence after the load, a release fence before the store), so
     * that a loop polling a flag another CTA writes sees it (CUB's decoupled look-back does).
     */
    boolean ordered;

    Insn(int line, String text) {
        this.line = line;
        this.text = text;
    }

    @Override
    public String toString() {
        return "line " + line + ": " + text;
    }
}
