package io.gpusockets.emulated.ptx;

import java.util.List;

/**
 * Fills an {@link Insn} from its opcode and operands, one method per instruction family, checking
 * that every modifier, type and operand form is one the interpreter executes exactly.
 */
final class Builders {
    /** Generic addresses of shared and local memory: windows no device allocation can reach. */
    static final long SHARED_WINDOW = 0x5000_0000_0000L;
    static final long LOCAL_WINDOW = 0x5100_0000_0000L;
    /** Generic addresses of the kernel's parameters (cvta.param): [PARAM_WINDOW, + the parameters' size). */
    static final long PARAM_WINDOW = 0x5200_0000_0000L;
    static final long WINDOW_BYTES = 1L << 32;

    private final Operands ops;
    private final Symbols symbols;
    /** The function being built and its declarations (call-site .param sizes); entry is a function too. */
    private final Calls.Func function;
    private final Declarations declarations;
    private final boolean entry;

    Builders(Operands ops, Symbols symbols, Calls.Func function, Declarations declarations, boolean entry) {
        this.ops = ops;
        this.symbols = symbols;
        this.function = function;
        this.declarations = declarations;
        this.entry = entry;
    }

    /** Builds {@code in}; returns the branch label to resolve, or null. */
    String build(Insn in, String text) throws PtxUnsupported {
        String[] p = PtxParser.pieces(text);
        if (p[0] != null) {
            in.guardNegated = p[0].startsWith("!");
            in.guard = ops.source(in.guardNegated ? p[0].substring(1) : p[0], Types.PRED);
        }
        String opcode = p[1];
        String name = opcode.contains(".") ? opcode.substring(0, opcode.indexOf('.')) : opcode;
        Mods m = new Mods(PtxParser.modifiers(opcode));
        List<String> o = Operands.split(p[2]);
        if (HALF_OPS.contains(name)) {
            int half = m.halfType();
            if (half != 0) {
                halfArithmetic(in, m, o, name, half);
                m.done();
                return null;
            }
        }
        switch (name) {
            case "mov" -> mov(in, m, o);
            case "ld", "ldu" -> load(in, m, o);
            case "st" -> store(in, m, o);
            case "add", "sub" -> arithmetic(in, m, o, name.equals("add") ? Insn.ADD : Insn.SUB);
            case "addc", "subc" -> carried(in, m, o, name.equals("addc") ? Insn.ADD_CARRY : Insn.SUB_CARRY, Insn.CARRY_IN);
            case "mul" -> multiply(in, m, o, false);
            case "mad" -> multiply(in, m, o, true);
            case "madc" -> {
                int half = m.takeOne("lo", "hi");
                if (half < 0) {
                    throw new PtxUnsupported("madc without .lo/.hi");
                }
                carried(in, m, o, Insn.MAD_CARRY, Insn.CARRY_IN | (half == 1 ? Insn.CARRY_HI : 0));
            }
            case "mul24", "mad24" -> {
                int half = m.takeOne("lo", "hi");
                if (half < 0) {
                    throw new PtxUnsupported(name + " without .lo/.hi");
                }
                in.sat = m.take("sat");
                int t = m.type();
                if (t != (Types.U << 4 | 4) && t != (Types.S << 4 | 4)) {
                    throw new PtxUnsupported(name + " of a type other than .u32/.s32");
                }
                boolean mad = name.equals("mad24");
                if (in.sat && !(mad && half == 1 && Types.signed(t))) {
                    throw new PtxUnsupported(".sat other than mad24.hi.sat.s32");
                }
                alu(in, t, mad ? Insn.MAD24 : Insn.MUL24, o, mad ? 3 : 2);
                in.mod = half;
            }
            case "sad" -> {
                int t = m.type();
                if (Types.kind(t) != Types.U && Types.kind(t) != Types.S || Types.size(t) == 1) {
                    throw new PtxUnsupported("sad of a type other than .u16/.u32/.u64/.s16/.s32/.s64");
                }
                alu(in, t, Insn.SAD, o, 3);
            }
            case "fma" -> {
                int round = round(m, true);
                floatFlags(in, m);
                alu(in, floatType(m, round), Insn.FMA, o, 3);
                in.mod = round;
            }
            case "div" -> divide(in, m, o);
            case "rem" -> alu(in, m.type(), Insn.REM, o, 2);
            case "min", "max" -> {
                in.ftz = m.take("ftz");
                alu(in, m.type(), name.equals("min") ? Insn.MIN : Insn.MAX, o, 2);
            }
            case "abs", "neg" -> {
                in.ftz = m.take("ftz");
                alu(in, m.type(), name.equals("abs") ? Insn.ABS : Insn.NEG, o, 1);
            }
            case "and" -> alu(in, m.type(), Insn.AND, o, 2);
            case "or" -> alu(in, m.type(), Insn.OR, o, 2);
            case "xor" -> alu(in, m.type(), Insn.XOR, o, 2);
            case "not" -> alu(in, m.type(), Insn.NOT, o, 1);
            case "cnot" -> alu(in, m.type(), Insn.CNOT, o, 1);
            case "shl" -> alu(in, m.type(), Insn.SHL, o, 2);
            case "shr" -> alu(in, m.type(), Insn.SHR, o, 2);
            case "popc" -> alu(in, m.type(), Insn.POPC, o, 1);
            case "clz" -> alu(in, m.type(), Insn.CLZ, o, 1);
            case "brev" -> alu(in, m.type(), Insn.BREV, o, 1);
            case "bfe" -> alu(in, m.type(), Insn.BFE, o, 3);
            case "bfi" -> alu(in, m.type(), Insn.BFI, o, 4);
            case "prmt" -> alu(in, m.type(), Insn.PRMT, o, 3);
            case "copysign" -> alu(in, m.type(), Insn.COPYSIGN, o, 2);
            case "rcp", "sqrt" -> {
                int round = m.takeOne("rn", "rz", "rm", "rp", "approx") + 1;
                if (round == 0) {
                    throw new PtxUnsupported(name + " without a rounding modifier or .approx");
                }
                floatFlags(in, m);
                alu(in, floatType(m, round), name.equals("rcp") ? Insn.RCP : Insn.SQRT, o, 1);
                in.mod = round > Insn.RP ? 0 : round;   // .approx: computed as .rn
            }
            case "rsqrt", "ex2", "lg2", "sin", "cos", "tanh" -> {
                if (!m.take("approx")) {
                    throw new PtxUnsupported(name + " without .approx");
                }
                in.ftz = m.take("ftz");
                int op = switch (name) {
                    case "rsqrt" -> Insn.RSQRT;
                    case "ex2" -> Insn.EX2;
                    case "lg2" -> Insn.LG2;
                    case "sin" -> Insn.SIN;
                    case "cos" -> Insn.COS;
                    default -> Insn.TANH;
                };
                alu(in, m.type(), op, o, 1);
            }
            case "selp" -> {
                int t = m.type();
                in.op = Insn.SELP;
                in.type = t;
                count(o, 4);
                in.d = ops.destination(o.get(0));
                in.a = ops.source(o.get(1), t);
                in.b = ops.source(o.get(2), t);
                in.c = ops.source(o.get(3), Types.PRED);
            }
            case "slct" -> {
                in.ftz = m.take("ftz");
                List<Integer> t = m.types();
                if (t.size() != 2) {
                    throw new PtxUnsupported("slct needs two types");
                }
                in.op = Insn.SLCT;
                in.type = t.get(0);
                in.type2 = t.get(1);
                count(o, 4);
                in.d = ops.destination(o.get(0));
                in.a = ops.source(o.get(1), in.type);
                in.b = ops.source(o.get(2), in.type);
                in.c = ops.source(o.get(3), in.type2);
            }
            case "cvt" -> convert(in, m, o);
            case "cvta" -> cvta(in, m, o);
            case "setp" -> setp(in, m, o);
            case "set" -> set(in, m, o);
            case "bra" -> {
                m.take("uni");
                in.op = Insn.BRA;
                count(o, 1);
                m.done();
                return o.getFirst();
            }
            case "ret" -> in.op = entry ? Insn.EXIT : Insn.RET;
            case "exit" -> in.op = Insn.EXIT;
            case "call" -> {
                m.take("uni");
                call(in, p[2]);
            }
            case "bar", "barrier" -> barrier(in, m, o);
            case "membar", "fence" -> fence(in, m, o, name);
            case "redux" -> redux(in, m, o);
            case "shf" -> {
                int direction = m.takeOne("l", "r");
                int mode = m.takeOne("wrap", "clamp");
                if (direction < 0 || mode < 0) {
                    throw new PtxUnsupported("shf without .l/.r and .wrap/.clamp");
                }
                int t = m.type();
                if (Types.size(t) != 4 || Types.kind(t) == Types.F || Types.isHalf(t) || t == Types.PRED) {
                    throw new PtxUnsupported("shf of a type other than .b32/.u32/.s32");
                }
                alu(in, Types.B << 4 | 4, Insn.SHF, o, 3);
                in.mod = direction | mode << 1;
            }
            case "griddepcontrol" -> {
                // programmatic dependent launch: a grid starts once the one before it in its stream has completed
                // (the dependent may start no earlier than that), so waiting has nothing to wait for, and signalling
                // that dependents may start changes nothing
                if (m.takeOne("wait", "launch_dependents") < 0) {
                    throw new PtxUnsupported("griddepcontrol other than .wait/.launch_dependents");
                }
                count(o, 0);
                in.op = Insn.NOP;
            }
            case "createpolicy" -> {
                // an L2 cache eviction policy for .L2::cache_hint accesses: this device has no cache to steer,
                // so any 64-bit value will do; the hinted accesses ignore it
                m.rest().removeIf(x -> x.equals("fractional") || x.equals("range") || x.equals("global") || x.startsWith("L2::"));
                if (m.type() != (Types.B << 4 | 8) || o.size() < 2 || o.size() > 4) {
                    throw new PtxUnsupported("createpolicy form");
                }
                in.op = Insn.MOV;
                in.type = Types.B << 4 | 8;
                in.d = ops.destination(o.get(0));
                for (String x : o.subList(1, o.size())) {
                    if (!x.contains(".")) {
                        ops.source(x, Types.B << 4 | 8);
                    }
                }
                in.a = symbols.constant(0);
            }
            case "cp" -> {
                if (m.has("tensor")) {
                    tensorCopy(in, m, o);
                } else if (m.has("bulk")) {
                    bulkCopy(in, m, o);
                } else {
                    copyAsync(in, m, o);
                }
            }
            case "mbarrier" -> mbarrier(in, m, o);
            case "elect" -> {
                if (!m.take("sync")) {
                    throw new PtxUnsupported("elect without .sync");
                }
                count(o, 2);
                String[] dst = o.get(0).split("\\|");
                if (dst.length != 2) {
                    throw new PtxUnsupported("elect.sync without d|p");
                }
                in.op = Insn.ELECT;
                in.d = dst[0].trim().equals("_") ? -1 : ops.destination(dst[0].trim());
                in.d2 = dst[1].trim().equals("_") ? -1 : ops.destination(dst[1].trim());
                in.e = ops.source(o.get(1), Types.U << 4 | 4);
            }
            case "mma" -> {
                new MatrixBuilders(ops).mma(in, m.rest(), o);
                m.rest().clear();
            }
            case "wmma" -> {
                new MatrixBuilders(ops).wmma(in, m.rest(), o);
                m.rest().clear();
            }
            case "ldmatrix" -> {
                new MatrixBuilders(ops).ldmatrix(in, m.rest(), o);
                m.rest().clear();
            }
            case "shfl" -> shuffle(in, m, o);
            case "vote" -> vote(in, m, o);
            case "activemask" -> {
                m.type();
                in.op = Insn.ACTIVEMASK;
                count(o, 1);
                in.d = ops.destination(o.getFirst());
            }
            case "atom", "red" -> atomic(in, m, o, name.equals("atom"));
            case "lop3" -> lop3(in, m, o);
            case "dp4a", "dp2a" -> dotProduct(in, m, o, name.equals("dp2a"));
            case "bfind" -> {
                in.mod = m.take("shiftamt") ? 1 : 0;
                int t = m.type();
                if (Types.kind(t) != Types.U && Types.kind(t) != Types.S || Types.size(t) < 4) {
                    throw new PtxUnsupported("bfind of a type other than .u32/.s32/.u64/.s64");
                }
                int mod = in.mod;
                alu(in, t, Insn.BFIND, o, 1);
                in.mod = mod;
            }
            case "bmsk", "szext" -> {
                int mode = m.takeOne("clamp", "wrap");
                if (mode < 0) {
                    throw new PtxUnsupported(name + " without .clamp/.wrap");
                }
                int t = m.type();
                boolean ok = name.equals("bmsk") ? t == (Types.B << 4 | 4) : t == (Types.U << 4 | 4) || t == (Types.S << 4 | 4);
                if (!ok) {
                    throw new PtxUnsupported(name + " of a type other than " + (name.equals("bmsk") ? ".b32" : ".u32/.s32"));
                }
                alu(in, t, name.equals("bmsk") ? Insn.BMSK : Insn.SZEXT, o, 2);
                in.mod = mode;
            }
            case "testp" -> {
                int op = m.takeOne("finite", "infinite", "number", "notanumber", "normal", "subnormal");
                if (op < 0) {
                    throw new PtxUnsupported("testp without .finite/.infinite/.number/.notanumber/.normal/.subnormal");
                }
                int t = m.type();
                if (!Types.isFloat(t)) {
                    throw new PtxUnsupported("testp of a type other than .f32/.f64");
                }
                in.op = Insn.TESTP;
                in.type = t;
                in.mod = op;
                count(o, 2);
                in.d = ops.destination(o.get(0));
                in.a = ops.source(o.get(1), t);
            }
            case "isspacep" -> isspacep(in, m, o);
            case "fns" -> {
                if (m.type() != (Types.B << 4 | 4)) {
                    throw new PtxUnsupported("fns of a type other than .b32");
                }
                in.op = Insn.FNS;
                in.type = Types.B << 4 | 4;
                count(o, 4);
                in.d = ops.destination(o.get(0));
                in.a = ops.source(o.get(1), Types.B << 4 | 4);
                in.b = ops.source(o.get(2), Types.S << 4 | 4);
                in.c = ops.source(o.get(3), Types.S << 4 | 4);
            }
            case "trap", "brkpt" -> {
                count(o, 0);
                in.op = Insn.TRAP;
                in.mod = name.equals("brkpt") ? 1 : 0;
            }
            case "nanosleep" -> {
                // a hint: the thread may sleep up to the given time; not sleeping at all is one of the behaviours allowed
                if (m.type() != (Types.U << 4 | 4)) {
                    throw new PtxUnsupported("nanosleep of a type other than .u32");
                }
                count(o, 1);
                ops.source(o.getFirst(), Types.U << 4 | 4);
                in.op = Insn.NOP;
            }
            case "prefetch", "prefetchu", "discard", "applypriority" -> cacheHint(in, m, o, name);
            case "match" -> match(in, m, o);
            case "tex", "suld", "sust" -> TextureOps.build(in, name, m, o, ops);
            default -> throw new PtxUnsupported("instruction " + name + " is not supported by the emulated device");
        }
        m.done();
        return null;
    }

    /** The instructions with .f16/.f16x2/.bf16/.bf16x2 forms, computed by {@link Half}. */
    private static final java.util.Set<String> HALF_OPS = java.util.Set.of("add", "sub", "mul", "fma", "neg", "abs", "min", "max");

    /**
     * add/sub/mul{.rn}{.ftz}{.sat}, fma.rn{.ftz}{.sat|.relu}, neg/abs{.ftz}, min/max{.ftz}{.NaN} of .f16/.f16x2; the same without
     * .ftz/.sat for .bf16/.bf16x2. Rounding is to nearest only (what the ISA defines for these).
     */
    private void halfArithmetic(Insn in, Mods m, List<String> o, String name, int type) throws PtxUnsupported {
        boolean arithmetic = !name.equals("neg") && !name.equals("abs") && !name.equals("min") && !name.equals("max");
        int relu = 0;
        if (arithmetic) {
            if (m.takeOne("rz", "rm", "rp") >= 0) {
                throw new PtxUnsupported("directed rounding of ." + (Half.bf(type) ? "bf16" : "f16") + " arithmetic");
            }
            if (!m.take("rn") && name.equals("fma")) {
                throw new PtxUnsupported("fma without .rn");
            }
            in.sat = m.take("sat");
            if (name.equals("fma") && m.take("relu")) {
                if (in.sat) {
                    throw new PtxUnsupported("fma with .relu and .sat");
                }
                relu = Insn.HALF_RELU;
            }
        }
        in.ftz = m.take("ftz");
        if (Half.bf(type) && (in.ftz || in.sat)) {
            throw new PtxUnsupported(".ftz/.sat on .bf16");
        }
        if ((name.equals("min") || name.equals("max")) && m.take("NaN")) {
            relu = Insn.HALF_NAN;   // min.NaN/max.NaN: a NaN operand gives the canonical NaN
        }
        int sources = switch (name) {
            case "fma" -> 3;
            case "neg", "abs" -> 1;
            default -> 2;
        };
        alu(in, type, Insn.HALF, o, sources);
        in.mod = switch (name) {
            case "add" -> Insn.ADD;
            case "sub" -> Insn.SUB;
            case "mul" -> Insn.MUL;
            case "fma" -> Insn.FMA;
            case "neg" -> Insn.NEG;
            case "abs" -> Insn.ABS;
            case "min" -> Insn.MIN;
            default -> Insn.MAX;
        } | relu;
    }

    /**
     * cvt to or from .f16/.bf16: from f32/f64 and integers with .rn/.rz/.rm/.rp (two f32 into an x2: cvt.rn.f16x2.f32
     * d, a, b), to f32/f64 exactly, to integers with .rni/.rzi/.rmi/.rpi; .ftz (an f32 source), .sat.
     */
    private void convertHalf(Insn in, List<String> o, int dst, int src, int round) throws PtxUnsupported {
        boolean toHalf = Types.isHalf(dst);
        if (toHalf && Types.isHalf(src)) {
            // only the rounding to an integral value in the same scalar type (cvt.rni.f16.f16: hrint, htrunc...)
            if (dst != src || Types.size(dst) != 2 || round < Insn.RNI || in.sat || in.ftz) {
                throw new PtxUnsupported("cvt between half types other than cvt.rni/rzi/rmi/rpi of .f16/.bf16 to itself");
            }
            in.op = Insn.CVT_HALF;
            in.type = dst;
            in.type2 = src;
            in.mod = round;
            count(o, 2);
            in.d = ops.destination(o.get(0));
            in.a = ops.source(o.get(1), src);
            return;
        }
        if (Types.isHalf(src) && Types.size(src) != 2 || src == Types.PRED || dst == Types.PRED) {
            throw new PtxUnsupported("cvt from a packed half type or of .pred");
        }
        if (toHalf && (round == 0 || round >= Insn.RNI)) {
            throw new PtxUnsupported("cvt to a half type without .rn/.rz/.rm/.rp");
        }
        if (toHalf && Types.size(dst) == 4 && src != (Types.F << 4 | 4)) {
            throw new PtxUnsupported("cvt to .f16x2/.bf16x2 from a type other than .f32");
        }
        if (!toHalf && Types.isFloat(dst) && (round != 0 || in.sat)) {
            throw new PtxUnsupported("rounding or .sat on a widening cvt from a half type");
        }
        if (!toHalf && !Types.isFloat(dst) && round < Insn.RNI) {
            throw new PtxUnsupported("half to integer cvt without .rni/.rzi/.rmi/.rpi");
        }
        if (in.ftz && src != (Types.F << 4 | 4) && !(Types.isHalf(src) && dst == (Types.F << 4 | 4))) {
            throw new PtxUnsupported(".ftz on a cvt whose source is not .f32");   // f16/bf16 to f32: no f32 denormal results
        }
        in.op = Insn.CVT_HALF;
        in.type = dst;
        in.type2 = src;
        in.mod = round;
        boolean pair = toHalf && Types.size(dst) == 4;
        count(o, pair ? 3 : 2);
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), src);
        if (pair) {
            in.b = ops.source(o.get(2), src);
        }
    }

    private static void count(List<String> o, int n) throws PtxUnsupported {
        if (o.size() != n) {
            throw new PtxUnsupported(n + " operands expected, found " + o.size());
        }
    }

    private void alu(Insn in, int type, int op, List<String> o, int sources) throws PtxUnsupported {
        in.op = op;
        in.type = type;
        count(o, sources + 1);
        in.d = ops.destination(o.get(0));
        int shiftType = Types.U << 4 | 4;
        boolean u32Rest = op == Insn.SHL || op == Insn.SHR || op == Insn.BFE || op == Insn.BFI;
        in.a = ops.source(o.get(1), type);
        if (sources > 1) {
            in.b = ops.source(o.get(2), u32Rest && op != Insn.BFI ? shiftType : type);
        }
        if (sources > 2) {
            in.c = ops.source(o.get(3), u32Rest ? shiftType : type);
        }
        if (sources > 3) {
            in.e = ops.source(o.get(4), shiftType);
        }
    }

    /** A float rounding modifier as Insn.RN..RP, 0 for none (round to nearest), refused where the ISA requires one. */
    private static int round(Mods m, boolean required) throws PtxUnsupported {
        int round = m.takeOne("rn", "rz", "rm", "rp") + 1;
        if (round == 0 && required) {
            throw new PtxUnsupported("no rounding modifier");
        }
        return round;
    }

    /** The instruction's type, which must be .f32/.f64 when a rounding modifier was given. */
    private static int floatType(Mods m, int round) throws PtxUnsupported {
        int t = m.type();
        if (round > 0 && !Types.isFloat(t)) {
            throw new PtxUnsupported("rounding ." + List.of("rn", "rz", "rm", "rp", "approx", "full").get(round - 1)
                    + " on a type other than .f32/.f64");
        }
        return t;
    }

    private static void floatFlags(Insn in, Mods m) {
        in.ftz = m.take("ftz");
        in.sat = m.take("sat");
    }

    private void arithmetic(Insn in, Mods m, List<String> o, int op) throws PtxUnsupported {
        if (m.take("cc")) {
            carried(in, m, o, op == Insn.ADD ? Insn.ADD_CARRY : Insn.SUB_CARRY, Insn.CARRY_OUT);
            return;
        }
        int round = round(m, false);
        floatFlags(in, m);
        int t = floatType(m, round);
        if (in.sat && !Types.isFloat(t) && t != (Types.S << 4 | 4)) {
            throw new PtxUnsupported(".sat on a type other than .s32/.f32/.f64");
        }
        alu(in, t, op, o, 2);
        in.mod = round;
    }

    private void multiply(Insn in, Mods m, List<String> o, boolean add) throws PtxUnsupported {
        int mode = m.takeOne("lo", "hi", "wide");
        if (m.take("cc")) {
            if (!add || mode < 0 || mode == 2) {
                throw new PtxUnsupported("carry (.cc) on mul or mad.wide, or mad.cc without .lo/.hi");
            }
            carried(in, m, o, Insn.MAD_CARRY, Insn.CARRY_OUT | (mode == 1 ? Insn.CARRY_HI : 0));
            return;
        }
        int round = round(m, false);
        floatFlags(in, m);
        int t = floatType(m, round);
        int op = add ? Insn.MAD : Insn.MUL;
        if (!Types.isFloat(t)) {
            if (in.sat) {
                throw new PtxUnsupported(".sat on an integer mul/mad");
            }
            op = mode == 1 ? (add ? Insn.MAD_HI : Insn.MUL_HI) : mode == 2 ? (add ? Insn.MAD_WIDE : Insn.MUL_WIDE) : op;
        } else if (mode >= 0) {
            throw new PtxUnsupported(".lo/.hi/.wide on a float type");
        }
        alu(in, t, op, o, add ? 3 : 2);
        in.mod = round;
        if (op == Insn.MAD_WIDE) {
            in.c = ops.source(o.get(3), Types.kind(t) << 4 | 2 * Types.size(t));
        }
    }

    /** The hidden register of this function's carry flag (CC.CF), made on first use; saved around calls like the others. */
    private static final String CARRY_REGISTER = "%%cc";

    /** add.cc/addc(.cc), sub.cc/subc(.cc), mad.cc/madc(.cc): {@code flags} the CARRY_ bits known so far. */
    private void carried(Insn in, Mods m, List<String> o, int op, int flags) throws PtxUnsupported {
        if (m.take("cc")) {
            flags |= Insn.CARRY_OUT;
        }
        int t = m.type();
        if (Types.kind(t) != Types.U && Types.kind(t) != Types.S || Types.size(t) < 4) {
            throw new PtxUnsupported("carry arithmetic on a type other than .u32/.s32/.u64/.s64");
        }
        alu(in, t, op, o, op == Insn.MAD_CARRY ? 3 : 2);
        in.mod = flags;
        Integer slot = symbols.registers.get(CARRY_REGISTER);
        if (slot == null) {
            slot = symbols.newRegister(4);
            symbols.registers.put(CARRY_REGISTER, slot);
            if (function.registers != null) {
                int[] regs = java.util.Arrays.copyOf(function.registers, function.registers.length + 1);
                regs[regs.length - 1] = slot;
                function.registers = regs;
            }
        }
        in.carry = slot;
    }

    private void divide(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int mode = m.takeOne("rn", "rz", "rm", "rp", "approx", "full") + 1;
        floatFlags(in, m);
        int t = floatType(m, mode);
        if (Types.isFloat(t) && mode == 0) {
            throw new PtxUnsupported("div of a float type without a rounding modifier or .approx/.full");
        }
        alu(in, t, Insn.DIV, o, 2);
        in.mod = mode > Insn.RP ? 0 : mode;   // .approx/.full: computed as .rn
    }

    private void mov(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int t = m.type();
        in.type = t;
        count(o, 2);
        String d = o.get(0);
        String a = o.get(1);
        if (d.startsWith("{")) {
            in.op = Insn.UNPACK;
            in.vec = slots(ops.vector(d), true, t);
            in.a = ops.source(a, t);
        } else if (a.startsWith("{")) {
            in.op = Insn.PACK;
            in.d = ops.destination(d);
            in.vec = slots(ops.vector(a), false, t);
        } else if (!symbols.registers.containsKey(a) && Symbols.specialKind(a) < -1) {
            in.op = Insn.CLOCK;
            in.mod = -2 - Symbols.specialKind(a);
            in.d = ops.destination(d);
        } else {
            in.op = Insn.MOV;
            in.d = ops.destination(d);
            in.a = ops.source(a, t);
        }
    }

    private int[] slots(List<String> names, boolean destinations, int type) throws PtxUnsupported {
        int[] out = new int[names.size()];
        for (int i = 0; i < out.length; i++) {
            String n = names.get(i);
            out[i] = destinations ? (n.equals("_") ? -1 : ops.destination(n)) : ops.source(n, type);
        }
        return out;
    }

    private int space(Mods m) {
        return switch (m.takeOne("global", "shared", "local", "param", "const")) {
            case 0 -> Insn.GLOBAL;
            case 1 -> Insn.SHARED;
            case 2 -> Insn.LOCAL;
            case 3 -> Insn.PARAM;
            case 4 -> Insn.CONST;
            default -> Insn.GENERIC;
        };
    }

    private void memory(Insn in, Mods m) throws PtxUnsupported {
        in.space = space(m);
        if (m.take("shared::cta")) {
            in.space = Insn.SHARED;
        }
        in.ordered = m.has("volatile") || m.has("relaxed") || m.has("acquire") || m.has("release") || m.has("mmio");
        m.dropNoEffect();
        if (in.space == Insn.CONST) {
            in.space = Insn.GLOBAL;   // .const variables live in device memory at their cuModuleGetGlobal address
        }
    }

    private void load(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        o = cacheHint(m, o, 2);
        memory(in, m);
        int vec = m.vector();
        in.type = m.type();
        in.op = Insn.LD;
        count(o, 2);
        int[] d = vec == 1 ? new int[] {ops.destination(o.get(0))} : slots(ops.vector(o.get(0)), true, in.type);
        if (d.length != vec) {
            throw new PtxUnsupported("vector of " + d.length + " for .v" + vec);
        }
        in.vec = d;
        addressed(in, o.get(1));
    }

    private void store(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        o = cacheHint(m, o, 2);
        memory(in, m);
        int vec = m.vector();
        in.type = m.type();
        in.op = Insn.ST;
        count(o, 2);
        int[] s = vec == 1 ? new int[] {ops.source(o.get(1), in.type)} : slots(ops.vector(o.get(1)), false, in.type);
        if (s.length != vec) {
            throw new PtxUnsupported("vector of " + s.length + " for .v" + vec);
        }
        in.vec = s;
        addressed(in, o.get(0));
    }

    /** .L2::cache_hint: the last operand is a cache policy (createpolicy's), read and ignored; the others remain. */
    private List<String> cacheHint(Mods m, List<String> o, int operands) throws PtxUnsupported {
        if (!m.take("L2::cache_hint")) {
            return o;
        }
        if (o.size() != operands + 1) {
            throw new PtxUnsupported(".L2::cache_hint without a cache policy operand");
        }
        ops.source(o.getLast(), Types.B << 4 | 8);
        return o.subList(0, operands);
    }

    private void addressed(Insn in, String op) throws PtxUnsupported {
        int symbolSpace = ops.address(in, op);
        if (in.space == Insn.GENERIC && symbolSpace >= 0) {
            in.space = symbolSpace;   // [var] without a space: the variable's own space
        }
        if (in.space == Insn.PARAM && symbolSpace == Insn.LOCAL) {
            in.space = Insn.LOCAL;   // a .func's parameter or a call site's: a variable of the frame
        }
        if (in.space == Insn.PARAM && in.op != Insn.LD) {
            throw new PtxUnsupported("st/atom on .param");
        }
    }

    private void convert(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int round = m.takeOne("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi") + 1;
        floatFlags(in, m);
        m.allowHalves();
        List<Integer> t = m.types();
        if (t.size() != 2) {
            throw new PtxUnsupported("cvt needs two types");
        }
        int dst = t.get(0);
        int src = t.get(1);
        if (Types.isHalf(dst) || Types.isHalf(src)) {
            convertHalf(in, o, dst, src, round);
            return;
        }
        boolean fd = Types.isFloat(dst);
        boolean fs = Types.isFloat(src);
        if (dst == Types.PRED || src == Types.PRED) {
            throw new PtxUnsupported("cvt of .pred");
        }
        if (fs && !fd && round < Insn.RNI) {
            throw new PtxUnsupported("float to integer cvt without .rni/.rzi/.rmi/.rpi");
        }
        if (!fs && fd && (round == 0 || round >= Insn.RNI)) {
            throw new PtxUnsupported("integer to float cvt without .rn/.rz/.rm/.rp");
        }
        if (!fs && fd && Types.size(src) == 8 && round != Insn.RN) {
            throw new PtxUnsupported("64-bit integer to float cvt with directed rounding");
        }
        if (!fs && fd && Types.size(dst) == 8 && round != Insn.RN && Types.size(src) == 8) {
            throw new PtxUnsupported("64-bit integer to f64 with directed rounding");
        }
        if (fs && fd && Types.size(src) == 8 && Types.size(dst) == 4 && (round == 0 || round >= Insn.RNI)) {
            throw new PtxUnsupported("f64 to f32 cvt without .rn/.rz/.rm/.rp");
        }
        if (fs && fd && Types.size(dst) >= Types.size(src) && round > 0 && round < Insn.RNI) {
            throw new PtxUnsupported("cvt rounding ." + List.of("rn", "rz", "rm", "rp").get(round - 1) + " on a widening float cvt");
        }
        in.op = Insn.CVT;
        in.type = dst;
        in.type2 = src;
        in.mod = round;
        count(o, 2);
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), src);
    }

    private void cvta(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        boolean to = m.take("to");
        int space = space(m);
        in.type = m.type();
        long window = switch (space) {
            case Insn.GLOBAL, Insn.CONST -> 0;
            case Insn.SHARED -> SHARED_WINDOW;
            case Insn.LOCAL -> LOCAL_WINDOW;
            // a kernel's __grid_constant__ parameter, whose address only TMA instructions read (TensorCopy)
            case Insn.PARAM -> PARAM_WINDOW;
            default -> throw new PtxUnsupported("cvta of the generic space");
        };
        in.op = space == Insn.LOCAL ? Insn.CVTA_LOCAL : Insn.CVTA;
        in.offset = to ? -window : window;
        count(o, 2);
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), in.type);
    }

    /** {@code call (ret), f, (a, b)}, {@code call f, (a)}, {@code call f}: direct calls only. */
    private void call(Insn in, String text) throws PtxUnsupported {
        List<String> parts = new java.util.ArrayList<>();
        int depth = 0;
        StringBuilder cur = new StringBuilder();
        for (char ch : text.toCharArray()) {
            if (ch == '(') {
                depth++;
            } else if (ch == ')') {
                depth--;
            }
            if (ch == ',' && depth == 0) {
                parts.add(cur.toString().trim());
                cur.setLength(0);
            } else {
                cur.append(ch);
            }
        }
        if (!cur.toString().isBlank()) {
            parts.add(cur.toString().trim());
        }
        int i = 0;
        String ret = null;
        if (!parts.isEmpty() && parts.getFirst().startsWith("(")) {
            ret = inner(parts.get(i++));
        }
        if (i >= parts.size()) {
            throw new PtxUnsupported("call without a function");
        }
        String callee = parts.get(i++);
        if (callee.startsWith("%") || symbols.registers.containsKey(callee)) {
            throw new PtxUnsupported("indirect call through register " + callee + " (only direct calls are covered)");
        }
        List<String> args = i < parts.size() && parts.get(i).startsWith("(") ? Operands.split(inner(parts.get(i++))) : List.of();
        if (i < parts.size()) {
            throw new PtxUnsupported("call with a prototype or target list (indirect calls are not covered)");
        }
        long[] offsets = new long[args.size()];
        long[] sizes = new long[args.size()];
        for (int k = 0; k < args.size(); k++) {
            offsets[k] = callVariable(args.get(k));
            sizes[k] = declarations.callParams.get(args.get(k))[0];
        }
        long retOffset = -1;
        long retSize = 0;
        if (ret != null) {
            List<String> rets = Operands.split(ret);
            if (rets.size() != 1) {
                throw new PtxUnsupported("call with " + rets.size() + " return values");
            }
            retOffset = callVariable(rets.getFirst());
            retSize = declarations.callParams.get(rets.getFirst())[0];
        }
        in.op = Insn.CALL;
        in.call = new Calls.Site(callee, function, offsets, sizes, retOffset, retSize);
        java.util.List<java.util.Set<Long>> declared = new java.util.ArrayList<>();
        for (String a : args) {
            declared.add(declarations.callParamSizes.getOrDefault(a, java.util.Set.of()));
        }
        in.call.argDeclared = declared;
        if (ret != null) {
            in.call.returnDeclared = declarations.callParamSizes.getOrDefault(Operands.split(ret).getFirst(), java.util.Set.of());
        }
    }

    private static String inner(String group) throws PtxUnsupported {
        if (!group.startsWith("(") || !group.endsWith(")")) {
            throw new PtxUnsupported("call operand " + group);
        }
        return group.substring(1, group.length() - 1).trim();
    }

    /** A call argument or return variable: a .param declared in this body; its frame offset. */
    private long callVariable(String name) throws PtxUnsupported {
        Symbols.Symbol sym = symbols.symbols.get(name);
        if (sym == null || sym.space() != Insn.LOCAL || declarations == null || !declarations.callParams.containsKey(name)) {
            throw new PtxUnsupported("call argument " + name + " is not a .param variable of the call sequence");
        }
        return sym.address();
    }

    private void setp(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int cmp = m.takeOne("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs",
                "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan") + 1;
        if (cmp == 0) {
            throw new PtxUnsupported("setp without a comparison");
        }
        in.type2 = m.takeOne("and", "or", "xor") + 1;
        in.ftz = m.take("ftz");
        m.allowHalves();
        in.type = m.type();
        if (Types.isHalf(in.type) && (Types.size(in.type) != 2 || Half.bf(in.type) && in.ftz)) {
            throw new PtxUnsupported("setp of .f16x2/.bf16x2 (two predicates), or .ftz on .bf16");
        }
        if ((Types.isFloat(in.type) || Types.isHalf(in.type)) && cmp >= Alu.LO && cmp <= Alu.HS) {
            throw new PtxUnsupported("unsigned comparison on a float type");
        }
        if (!Types.isFloat(in.type) && !Types.isHalf(in.type) && cmp > Alu.HS) {
            throw new PtxUnsupported("unordered comparison on an integer type");
        }
        in.op = Insn.SETP;
        in.mod = cmp;
        if (o.size() != 3 + (in.type2 > 0 ? 1 : 0)) {
            throw new PtxUnsupported("setp operand count");
        }
        String[] dst = o.get(0).split("\\|");
        in.d = ops.destination(dst[0].trim());
        in.d2 = dst.length > 1 ? ops.destination(dst[1].trim()) : -1;
        in.a = ops.source(o.get(1), in.type);
        in.b = ops.source(o.get(2), in.type);
        if (in.type2 > 0) {
            String c = o.get(3);
            in.negC = c.startsWith("!");
            in.c = ops.source(in.negC ? c.substring(1) : c, Types.PRED);
        }
    }

    /**
     * set.CmpOp{.BoolOp}{.ftz}.dtype.stype d, a, b{, {!}c}: integer, f32/f64 and .f16/.bf16 sources into a u32/s32/f32
     * (or u16/s16/f16/bf16) d; .f16x2/.bf16x2 sources into the same pair type or a u32/s32 mask.
     */
    private void set(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int cmp = m.takeOne("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs",
                "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan") + 1;
        if (cmp == 0) {
            throw new PtxUnsupported("set without a comparison");
        }
        int bool = m.takeOne("and", "or", "xor") + 1;
        in.ftz = m.take("ftz");
        m.allowHalves();
        List<Integer> t = m.types();
        if (t.size() != 2) {
            throw new PtxUnsupported("set needs two types");
        }
        int dst = t.get(0);
        int src = t.get(1);
        int u32 = Types.U << 4 | 4;
        int s32 = Types.S << 4 | 4;
        boolean floating = Types.isFloat(src) || Types.isHalf(src);
        boolean ok;
        if (Types.isHalf(src) && Types.size(src) == 4) {
            ok = dst == src || dst == u32 || dst == s32;
        } else {
            ok = src != Types.PRED && (dst == u32 || dst == s32 || dst == (Types.F << 4 | 4) || dst == Types.F16 || dst == Types.BF16
                    || Types.isHalf(src) && (dst == (Types.U << 4 | 2) || dst == (Types.S << 4 | 2)));
        }
        if (!ok) {
            throw new PtxUnsupported("set of these destination and source types");
        }
        if (floating && cmp >= Alu.LO && cmp <= Alu.HS || !floating && cmp > Alu.HS) {
            throw new PtxUnsupported("set comparison for the source type");
        }
        if (in.ftz && src != (Types.F << 4 | 4) && Types.kind(src) != Types.H) {
            throw new PtxUnsupported(".ftz on set of a source other than .f32/.f16");
        }
        in.op = Insn.SET;
        in.type = dst;
        in.type2 = src;
        in.mod = cmp | bool << 8;
        count(o, bool > 0 ? 4 : 3);
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), src);
        in.b = ops.source(o.get(2), src);
        if (bool > 0) {
            String c = o.get(3);
            in.negC = c.startsWith("!");
            in.c = ops.source(in.negC ? c.substring(1) : c, Types.PRED);
        }
    }

    private void barrier(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (m.take("warp")) {
            m.take("sync");
            in.op = Insn.WARPSYNC;
            return;
        }
        if (m.take("red")) {
            reduction(in, m, o);
            return;
        }
        if (!m.take("sync")) {
            throw new PtxUnsupported("barrier other than .sync and .red (arrive)");
        }
        m.dropNoEffect();
        if (o.size() != 1) {
            throw new PtxUnsupported("barrier with a thread count");
        }
        in.op = Insn.BAR;
        ops.source(o.getFirst(), Types.U << 4 | 4);
    }

    /** bar.red.popc.u32 d, a, {!}c and bar.red.and/.or.pred p, a, {!}c: every thread of the CTA; no thread count, no guard. */
    private void reduction(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        m.take("sync");
        m.dropNoEffect();
        int op = m.takeOne("popc", "and", "or") + 1;
        if (op == 0) {
            throw new PtxUnsupported("bar.red without .popc/.and/.or");
        }
        int t = m.type();
        if (op == Insn.BAR_POPC ? t != (Types.U << 4 | 4) : t != Types.PRED) {
            throw new PtxUnsupported("bar.red type (.popc.u32, .and.pred, .or.pred)");
        }
        if (o.size() != 3) {
            throw new PtxUnsupported("bar.red with a thread count (" + o.size() + " operands)");
        }
        if (in.guard >= 0) {
            throw new PtxUnsupported("guarded bar.red");
        }
        in.op = Insn.BAR_RED;
        in.mod = op;
        in.type = t;
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), Types.U << 4 | 4);
        String c = o.get(2);
        in.negC = c.startsWith("!");
        in.c = ops.source(in.negC ? c.substring(1) : c, Types.PRED);
    }

    private void shuffle(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (!m.take("sync")) {
            throw new PtxUnsupported("shfl without .sync");
        }
        int mode = m.takeOne("up", "down", "bfly", "idx");
        if (mode < 0) {
            throw new PtxUnsupported("shfl mode");
        }
        in.type = m.type();
        if (Types.size(in.type) != 4) {
            throw new PtxUnsupported("shfl of a type other than .b32");
        }
        in.op = Insn.SHFL;
        in.mod = mode;
        count(o, 5);
        String[] dst = o.get(0).split("\\|");
        in.d = ops.destination(dst[0].trim());
        in.d2 = dst.length > 1 ? ops.destination(dst[1].trim()) : -1;
        int u32 = Types.U << 4 | 4;
        in.a = ops.source(o.get(1), in.type);
        in.b = ops.source(o.get(2), u32);
        in.c = ops.source(o.get(3), u32);
        in.e = ops.source(o.get(4), u32);
    }

    private void vote(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (!m.take("sync")) {
            throw new PtxUnsupported("vote without .sync");
        }
        int mode = m.takeOne("all", "any", "uni", "ballot");
        if (mode < 0) {
            throw new PtxUnsupported("vote mode");
        }
        in.type = m.type();
        in.op = Insn.VOTE;
        in.mod = mode;
        count(o, 3);
        in.d = ops.destination(o.get(0));
        String a = o.get(1);
        in.negA = a.startsWith("!");
        in.a = ops.source(in.negA ? a.substring(1) : a, Types.PRED);
        in.e = ops.source(o.get(2), Types.U << 4 | 4);
    }

    /** lop3.b32 d, a, b, c, immLut (an immediate 0..255); the predicate form lop3.BoolOp.b32 d|p, ..., q is not covered. */
    private void lop3(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (m.takeOne("or", "and") >= 0 || !o.isEmpty() && o.getFirst().contains("|")) {
            throw new PtxUnsupported("lop3 with a predicate result (lop3.or/.and.b32 d|p)");
        }
        if (m.type() != (Types.B << 4 | 4)) {
            throw new PtxUnsupported("lop3 of a type other than .b32");
        }
        count(o, 5);
        String lut = o.get(4);
        if (lut.startsWith("%") || symbols.registers.containsKey(lut) || symbols.symbols.containsKey(lut)) {
            throw new PtxUnsupported("lop3 with a truth table other than an immediate");
        }
        long v = Operands.immediate(lut, Types.B << 4 | 4);
        if (v < 0 || v > 255) {
            throw new PtxUnsupported("lop3 truth table " + lut + " outside 0..255");
        }
        alu(in, Types.B << 4 | 4, Insn.LOP3, o.subList(0, 4), 3);
        in.mod = (int) v;
    }

    /** dp4a.atype.btype d, a, b, c and dp2a.lo/.hi.atype.btype d, a, b, c (atype, btype .u32/.s32; c and d .s32 if either is). */
    private void dotProduct(Insn in, Mods m, List<String> o, boolean two) throws PtxUnsupported {
        int half = two ? m.takeOne("lo", "hi") : 0;
        if (half < 0) {
            throw new PtxUnsupported("dp2a without .lo/.hi");
        }
        List<Integer> t = m.types();
        int u32 = Types.U << 4 | 4;
        int s32 = Types.S << 4 | 4;
        if (t.size() != 2 || t.get(0) != u32 && t.get(0) != s32 || t.get(1) != u32 && t.get(1) != s32) {
            throw new PtxUnsupported((two ? "dp2a" : "dp4a") + " types other than .u32/.s32 .u32/.s32");
        }
        in.op = two ? Insn.DP2A : Insn.DP4A;
        in.type = t.get(0);
        in.type2 = t.get(1);
        in.mod = half;
        count(o, 4);
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), in.type);
        in.b = ops.source(o.get(2), in.type2);
        in.c = ops.source(o.get(3), in.type == s32 || in.type2 == s32 ? s32 : u32);
    }

    /** isspacep.global/.shared(::cta/::cluster)/.local/.const/.param p, a (a .u32 or .u64 generic address). */
    private void isspacep(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int space = m.takeOne("global", "shared", "shared::cta", "shared::cluster", "local", "const", "param");
        if (space < 0) {
            throw new PtxUnsupported("isspacep of a space other than .global/.shared/.local/.const/.param");
        }
        in.op = Insn.ISSPACEP;
        in.mod = switch (space) {
            case 0 -> Insn.GLOBAL;
            case 1, 2, 3 -> Insn.SHARED;   // a cluster is one CTA here: its shared window is the CTA's
            case 4 -> Insn.LOCAL;
            case 5 -> Insn.CONST;
            default -> Insn.PARAM;
        };
        count(o, 2);
        in.d = ops.destination(o.get(0));
        Integer reg = symbols.registers.get(o.get(1));
        in.type = reg != null && symbols.slotBytes.get(reg) == 4 ? Types.U << 4 | 4 : Types.U << 4 | 8;
        in.a = ops.source(o.get(1), in.type);
    }

    /**
     * prefetch{.global|.local}.L1/.L2 [a], prefetch.global.L2::evict_last/evict_normal [a], prefetchu.L1 [a],
     * discard.global.L2 [a], 128, applypriority.global.L2::evict_normal [a], 128: hints about caches this device has
     * none of, so no-ops (a discarded line reads as what memory holds, one of the values the ISA allows).
     */
    private void cacheHint(Insn in, Mods m, List<String> o, String name) throws PtxUnsupported {
        if (name.equals("prefetch") && m.take("tensormap")) {
            // prefetch{.param|.const|.global}.tensormap [a]: fetches a TMA descriptor early; nothing to fetch here
            m.takeOne("param", "const", "global");
            count(o, 1);
            ops.address(new Insn(in.line, in.text), o.get(0));
            in.op = Insn.NOP;
            return;
        }
        boolean sized = name.equals("discard") || name.equals("applypriority");
        int space = m.takeOne("global", "local");
        if (name.equals("prefetchu") || sized) {
            if (space == 1) {
                throw new PtxUnsupported(name + " of the .local space");
            }
        }
        boolean level = switch (name) {
            case "prefetchu" -> m.take("L1");
            case "discard" -> m.take("L2");
            case "applypriority" -> m.take("L2::evict_normal");
            default -> m.take("L1") || m.take("L2") || space != 1 && (m.take("L2::evict_last") || m.take("L2::evict_normal"));
        };
        if (!level) {
            throw new PtxUnsupported(name + " without a cache level this form takes");
        }
        count(o, sized ? 2 : 1);
        if (sized && Operands.immediate(o.get(1), Types.U << 4 | 8) != 128) {
            throw new PtxUnsupported(name + " of a size other than 128");
        }
        Insn probe = new Insn(in.line, in.text);
        ops.address(probe, o.get(0));   // the address must parse; nothing is accessed
        in.op = Insn.NOP;
    }

    /** match.any.sync.b32/.b64 d, a, membermask and match.all.sync.b32/.b64 d{|p}, a, membermask. */
    private void match(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int mode = m.takeOne("any", "all");
        if (mode < 0 || !m.take("sync")) {
            throw new PtxUnsupported("match other than match.any.sync/match.all.sync");
        }
        int t = m.type();
        if (t != (Types.B << 4 | 4) && t != (Types.B << 4 | 8)) {
            throw new PtxUnsupported("match of a type other than .b32/.b64");
        }
        count(o, 3);
        String[] dst = o.get(0).split("\\|");
        if (dst.length > 1 && mode == 0) {
            throw new PtxUnsupported("match.any with a predicate destination");
        }
        in.op = Insn.MATCH;
        in.mod = mode;
        in.type = t;
        in.d = ops.destination(dst[0].trim());
        in.d2 = dst.length > 1 ? ops.destination(dst[1].trim()) : -1;
        in.a = ops.source(o.get(1), t);
        in.b = ops.source(o.get(2), Types.U << 4 | 4);
    }

    private void atomic(Insn in, Mods m, List<String> o, boolean returns) throws PtxUnsupported {
        in.space = space(m);
        if (in.space != Insn.GLOBAL && in.space != Insn.SHARED && in.space != Insn.GENERIC) {
            throw new PtxUnsupported("atomic on the ." + List.of("", "global", "shared", "local", "param", "const").get(in.space) + " space");
        }
        m.dropNoEffect();
        int op = m.takeOne("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec");
        if (op < 0) {
            throw new PtxUnsupported("atomic operation");
        }
        in.mod = Alu.ATOM_ADD + op;   // the order of takeOne's options above
        in.type = m.type();
        if (Types.isFloat(in.type) && op != 0 || in.type == Types.PRED || Types.size(in.type) < 4
                || (op == 8 || op == 9) && in.type != (Types.U << 4 | 4)) {
            throw new PtxUnsupported("atomic type for this operation");
        }
        in.op = Insn.ATOM;
        int first = returns ? 1 : 0;
        count(o, first + (op == 7 ? 3 : 2));
        in.vec = new int[] {returns ? ops.destination(o.get(0)) : -1};
        addressed(in, o.get(first));
        in.b = ops.source(o.get(first + 1), in.type);
        if (op == 7) {
            in.c = ops.source(o.get(first + 2), in.type);
        }
    }

    /**
     * membar.cta/.gl/.sys and fence{.sc|.acq_rel|.acquire|.release}.cta/.cluster/.gpu/.sys: a full fence of the host
     * thread (CTAs run on several host threads); fence.proxy.* and membar.proxy.*: no-ops (one proxy here: the
     * async proxy's bulk copies are not supported); fence.mbarrier_init: a release fence.
     */
    private void fence(Insn in, Mods m, List<String> o, String name) throws PtxUnsupported {
        count(o, 0);
        if (m.take("proxy")) {
            m.rest().removeIf(x -> List.of("alias", "async", "async.global", "async.shared::cta", "async.shared::cluster", "global",
                    "shared::cta", "shared::cluster", "tensormap::generic", "release", "acquire", "cta", "cluster", "gpu", "sys")
                    .contains(x));
            in.op = Insn.NOP;
            return;
        }
        if (name.equals("membar")) {
            if (m.takeOne("cta", "gl", "sys") < 0) {
                throw new PtxUnsupported("membar without .cta/.gl/.sys");
            }
            in.op = Insn.FENCE;
            return;
        }
        if (m.take("mbarrier_init")) {
            m.take("release");
            m.take("cluster");
            in.op = Insn.FENCE;
            return;
        }
        m.takeOne("sc", "acq_rel", "acquire", "release");
        if (m.takeOne("cta", "cluster", "gpu", "sys") < 0) {
            throw new PtxUnsupported("fence without a scope");
        }
        in.op = Insn.FENCE;
    }

    /** redux.sync.add/.min/.max.u32/.s32 and redux.sync.and/.or/.xor.b32 d, a, membermask. */
    private void redux(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (!m.take("sync")) {
            throw new PtxUnsupported("redux without .sync");
        }
        int op = m.takeOne("add", "min", "max", "and", "or", "xor");
        if (op < 0) {
            throw new PtxUnsupported("redux operation (.add/.min/.max/.and/.or/.xor; f32 .min/.max need sm_100a)");
        }
        int t = m.type();
        boolean ok = op <= Insn.REDUX_MAX ? t == (Types.U << 4 | 4) || t == (Types.S << 4 | 4) : t == (Types.B << 4 | 4);
        if (!ok) {
            throw new PtxUnsupported("redux type (.u32/.s32 for add/min/max, .b32 for and/or/xor)");
        }
        count(o, 3);
        in.op = Insn.REDUX;
        in.mod = op;
        in.type = t;
        in.d = ops.destination(o.get(0));
        in.a = ops.source(o.get(1), t);
        in.e = ops.source(o.get(2), Types.U << 4 | 4);
    }

    /**
     * cp.async.ca/.cg.shared{::cta}.global{.L2::cache_hint}{.L2::64B/128B/256B} [d], [s], cp-size{, src-size | ignore-src}
     * {, cache-policy} (.cg: cp-size 16), cp.async.commit_group, cp.async.wait_group N and cp.async.wait_all. The copy is
     * done when issued; commit and wait have nothing left to wait for.
     */
    private void copyAsync(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        if (!m.take("async")) {
            throw new PtxUnsupported("cp other than cp.async");
        }
        if (m.take("commit_group") || m.take("wait_all")) {
            count(o, 0);
            in.op = Insn.NOP;
            return;
        }
        if (m.take("wait_group")) {
            count(o, 1);
            Operands.immediate(o.getFirst(), Types.U << 4 | 4);
            in.op = Insn.NOP;
            return;
        }
        int level = m.takeOne("ca", "cg");
        if (level < 0 || !(m.take("shared") || m.take("shared::cta")) || !m.take("global")) {
            throw new PtxUnsupported("cp.async other than .ca/.cg.shared.global and commit/wait (bulk copies are not supported)");
        }
        boolean hint = m.take("L2::cache_hint");
        m.takeOne("L2::64B", "L2::128B", "L2::256B");
        List<String> rest = new java.util.ArrayList<>(o);
        if (hint) {
            if (rest.size() < 4) {
                throw new PtxUnsupported("cp.async.L2::cache_hint without a cache policy");
            }
            ops.source(rest.removeLast(), Types.B << 4 | 8);
        }
        if (rest.size() != 3 && rest.size() != 4) {
            throw new PtxUnsupported("cp.async operands");
        }
        long size = Operands.immediate(rest.get(2), Types.U << 4 | 4);
        if (size != 4 && size != 8 && size != 16 || level == 1 && size != 16) {
            throw new PtxUnsupported("cp.async of " + size + " bytes (.ca: 4, 8, 16; .cg: 16)");
        }
        in.op = Insn.CP_ASYNC;
        in.mod = (int) size;
        Insn src = new Insn(in.line, in.text);
        int srcSpace = ops.address(src, rest.get(1));
        int dstSpace = ops.address(in, rest.get(0));
        if (srcSpace >= 0 && srcSpace != Insn.GLOBAL || dstSpace >= 0 && dstSpace != Insn.SHARED) {
            throw new PtxUnsupported("cp.async from a symbol outside .global or into one outside .shared");
        }
        in.b = src.a;
        in.offset2 = src.offset;
        in.addressMask2 = src.addressMask;
        if (rest.size() == 4) {
            String x = rest.get(3);
            in.negC = x.startsWith("!");
            String name = in.negC ? x.substring(1) : x;
            if (symbols.predicates.contains(name)) {
                in.type2 = 1;   // ignore-src
                in.c = ops.source(name, Types.PRED);
            } else if (in.negC) {
                throw new PtxUnsupported("cp.async src-size " + x);
            } else {
                in.c = ops.source(name, Types.U << 4 | 4);
            }
        }
    }

    /**
     * cp.async.bulk.shared::cluster(or ::cta).global.mbarrier::complete_tx::bytes{.L2::cache_hint} [dst], [src], size, [mbar]
     * {, policy}: the global-to-shared bulk copy; other directions, multicast and tensor copies are refused.
     */
    private void bulkCopy(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        m.take("async");
        m.take("bulk");
        if (m.take("commit_group")) {
            // bulk copies and tensor stores are done when issued: a group has nothing left to wait for
            count(o, 0);
            in.op = Insn.NOP;
            return;
        }
        if (m.take("wait_group")) {
            m.take("read");
            count(o, 1);
            Operands.immediate(o.getFirst(), Types.U << 4 | 4);
            in.op = Insn.NOP;
            return;
        }
        if (m.take("prefetch")) {
            // cp.async.bulk.prefetch.L2.global [a], size: a cache hint; nothing to do without a cache
            if (!m.take("L2") || !m.take("global")) {
                throw new PtxUnsupported("cp.async.bulk.prefetch other than .L2.global");
            }
            o = cacheHint(m, o, 2);
            count(o, 2);
            ops.address(new Insn(in.line, in.text), o.get(0));
            ops.source(o.get(1), Types.U << 4 | 4);
            in.op = Insn.NOP;
            return;
        }
        if (!(m.take("shared::cluster") || m.take("shared::cta")) || !m.take("global") || !m.take("mbarrier::complete_tx::bytes")) {
            throw new PtxUnsupported("cp.async.bulk other than .shared::cluster.global.mbarrier::complete_tx::bytes");
        }
        o = cacheHint(m, o, 4);
        count(o, 4);
        in.op = Insn.BULK_COPY;
        Insn src = new Insn(in.line, in.text);
        ops.address(src, o.get(1));
        Insn bar = new Insn(in.line, in.text);
        ops.address(bar, o.get(3));
        ops.address(in, o.get(0));
        in.b = src.a;
        in.offset2 = src.offset;
        in.addressMask2 = src.addressMask;
        in.e = bar.a;
        in.offset3 = bar.offset;
        in.addressMask3 = bar.addressMask;
        in.c = ops.source(o.get(2), Types.U << 4 | 4);
    }

    /**
     * The tensor (TMA) copies of {@link TensorCopy}, tile mode, 1d..5d:
     * cp.async.bulk.tensor.Nd.shared::cluster(or ::cta).global{.tile}.mbarrier::complete_tx::bytes{.L2::cache_hint}
     * [dst], [map, {c..}], [mbar]{, policy} (a load); cp.async.bulk.tensor.Nd.global.shared::cta{.tile}.bulk_group
     * {.L2::cache_hint} [map, {c..}], [src]{, policy} (a store); cp.reduce.async.bulk.tensor.Nd.global.shared::cta
     * .add/.min/.max{.tile}.bulk_group [map, {c..}], [src]{, policy}; cp.async.bulk.prefetch.tensor.Nd.L2.global{.tile}
     * [map, {c..}]{, policy} (a no-op: no cache here). Im2col, gather4/scatter4, multicast and CTA-pair forms are refused.
     */
    private void tensorCopy(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        boolean reduce = m.take("reduce");
        m.take("async");
        m.take("bulk");
        m.take("tensor");
        boolean prefetch = !reduce && m.take("prefetch");
        int dims = m.takeOne("1d", "2d", "3d", "4d", "5d") + 1;
        if (dims == 0) {
            throw new PtxUnsupported("cp.async.bulk.tensor without .1d to .5d");
        }
        for (String mode : List.of("im2col", "im2col::w", "im2col::w::128", "tile::gather4", "tile::scatter4", "im2col_no_offs")) {
            if (m.has(mode)) {
                throw new PtxUnsupported("cp.async.bulk.tensor ." + mode + " (only .tile is emulated)");
            }
        }
        if (m.has("multicast::cluster") || m.rest().stream().anyMatch(x -> x.startsWith("cta_group"))) {
            throw new PtxUnsupported("cp.async.bulk.tensor across a cluster (.multicast::cluster, .cta_group)");
        }
        m.take("tile");
        if (prefetch) {
            if (!m.take("L2") || !m.take("global")) {
                throw new PtxUnsupported("cp.async.bulk.prefetch.tensor other than .L2.global");
            }
            o = cacheHint(m, o, 1);
            count(o, 1);
            tensorOperand(new Insn(in.line, in.text), o.get(0), dims);
            in.op = Insn.NOP;
            return;
        }
        in.op = Insn.TENSOR_COPY;
        // .dst.src: a load names shared memory before global memory
        List<String> spaces = m.rest().stream().filter(x -> x.equals("global") || x.startsWith("shared")).toList();
        if (!reduce && !spaces.isEmpty() && spaces.getFirst().startsWith("shared")) {
            if (!(m.take("shared::cluster") || m.take("shared::cta")) || !m.take("global") || !m.take("mbarrier::complete_tx::bytes")) {
                throw new PtxUnsupported("cp.async.bulk.tensor load other than .global.mbarrier::complete_tx::bytes");
            }
            in.mod = Insn.TENSOR_LOAD;
            o = cacheHint(m, o, 3);
            count(o, 3);
            ops.address(in, o.get(0));
            tensorOperand(in, o.get(1), dims);
            Insn bar = new Insn(in.line, in.text);
            ops.address(bar, o.get(2));
            in.e = bar.a;
            in.offset3 = bar.offset;
            in.addressMask3 = bar.addressMask;
            return;
        }
        if (!m.take("global") || !m.take("shared::cta") || !m.take("bulk_group")) {
            throw new PtxUnsupported("cp" + (reduce ? ".reduce" : "") + ".async.bulk.tensor store other than .global.shared::cta.bulk_group");
        }
        in.mod = Insn.TENSOR_STORE;
        if (reduce) {
            int op = m.takeOne("add", "min", "max");
            if (op < 0) {
                throw new PtxUnsupported("cp.reduce.async.bulk.tensor operation (.add/.min/.max are emulated)");
            }
            in.mod = Insn.TENSOR_REDUCE_ADD + op;
        }
        o = cacheHint(m, o, 2);
        count(o, 2);
        tensorOperand(in, o.get(0), dims);
        ops.address(in, o.get(1));
    }

    /** {@code [map, {c0, ...}]}: the map's address in b/offset2/addressMask2, the coordinates' slots in vec. */
    private void tensorOperand(Insn in, String op, int dims) throws PtxUnsupported {
        if (!op.startsWith("[") || !op.endsWith("]")) {
            throw new PtxUnsupported("operand " + op + " is not [tensorMap, {coordinates}]");
        }
        List<String> parts = Operands.split(op.substring(1, op.length() - 1));
        if (parts.size() != 2) {
            throw new PtxUnsupported("operand " + op + " is not [tensorMap, {coordinates}]");
        }
        Insn map = new Insn(in.line, in.text);
        ops.address(map, "[" + parts.get(0) + "]");
        in.b = map.a;
        in.offset2 = map.offset;
        in.addressMask2 = map.addressMask;
        List<String> coords = ops.vector(parts.get(1));
        if (coords.size() != dims) {
            throw new PtxUnsupported(dims + " tensor coordinates expected, found " + coords.size());
        }
        in.vec = new int[dims];
        for (int i = 0; i < dims; i++) {
            in.vec[i] = ops.source(coords.get(i), Types.S << 4 | 4);
        }
    }

    /**
     * mbarrier.init, .arrive{.expect_tx}, .expect_tx, .test_wait/.try_wait{.parity}, .inval on .shared{::cta} (or generic)
     * .b64 objects, with their .release/.acquire/.relaxed and .cta scopes (one order here); try_wait's suspend-time hint
     * is read and ignored. .arrive_drop, .pending_count, remote (::cluster) arrivals and .noComplete are refused.
     */
    private void mbarrier(Insn in, Mods m, List<String> o) throws PtxUnsupported {
        int kind = m.takeOne("init", "arrive", "expect_tx", "test_wait", "try_wait", "inval");
        if (kind < 0) {
            throw new PtxUnsupported("mbarrier operation");
        }
        boolean expect = kind == 1 && m.take("expect_tx");
        boolean parity = (kind == 3 || kind == 4) && m.take("parity");
        m.takeOne("release", "acquire", "relaxed");
        m.take("cta");
        in.space = m.take("shared") || m.take("shared::cta") ? Insn.SHARED : Insn.GENERIC;
        if (m.type() != (Types.B << 4 | 8)) {
            throw new PtxUnsupported("mbarrier of a type other than .b64");
        }
        int u32 = Types.U << 4 | 4;
        in.op = Insn.MBARRIER;
        switch (kind) {
            case 0 -> {   // init [addr], count
                count(o, 2);
                in.mod = Insn.MB_INIT;
                addressed(in, o.get(0));
                in.b = ops.source(o.get(1), u32);
            }
            case 1 -> {   // arrive state, [addr]{, count} ; arrive.expect_tx state, [addr], tx
                if (o.size() != (expect ? 3 : 2) && !(!expect && o.size() == 3)) {
                    throw new PtxUnsupported("mbarrier.arrive operands");
                }
                in.mod = Insn.MB_ARRIVE;
                in.d = o.get(0).equals("_") ? -1 : ops.destination(o.get(0));
                addressed(in, o.get(1));
                in.b = !expect && o.size() == 3 ? ops.source(o.get(2), u32) : symbols.constant(1);
                in.c = expect ? ops.source(o.get(2), u32) : symbols.constant(0);
            }
            case 2 -> {   // expect_tx [addr], tx
                count(o, 2);
                in.mod = Insn.MB_EXPECT_TX;
                addressed(in, o.get(0));
                in.b = ops.source(o.get(1), u32);
            }
            case 3, 4 -> {   // test_wait/try_wait{.parity} p, [addr], state|parity{, hint}
                if (o.size() != 3 && !(kind == 4 && o.size() == 4)) {
                    throw new PtxUnsupported("mbarrier." + (kind == 3 ? "test_wait" : "try_wait") + " operands");
                }
                if (o.size() == 4) {
                    ops.source(o.get(3), u32);   // a suspend-time hint
                }
                in.mod = parity ? Insn.MB_WAIT_PARITY : Insn.MB_WAIT_STATE;
                in.d = ops.destination(o.get(0));
                addressed(in, o.get(1));
                in.b = ops.source(o.get(2), parity ? u32 : Types.B << 4 | 8);
            }
            default -> {
                count(o, 1);
                in.mod = Insn.MB_INVAL;
                addressed(in, o.get(0));
            }
        }
        if (in.space != Insn.SHARED && in.space != Insn.GENERIC) {
            throw new PtxUnsupported("mbarrier outside shared memory");
        }
    }
}
