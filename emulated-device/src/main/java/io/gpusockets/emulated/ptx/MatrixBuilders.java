package io.gpusockets.emulated.ptx;

import java.util.List;

/**
 * Builds the warp-level matrix instructions ({@link WarpMatrix}): {@code mma.sync.aligned}, {@code wmma.load/mma/store}
 * and {@code ldmatrix}, checking shape, types, layouts and operand counts against what {@link WarpMatrix} computes;
 * anything else (other shapes, integer, fp8 and f64 types, .satfinite, sparse {@code mma.sp}) is refused.
 */
final class MatrixBuilders {
    private final Operands ops;

    MatrixBuilders(Operands ops) {
        this.ops = ops;
    }

    private static int elementType(String m) {
        return switch (m) {
            case "f16" -> WarpMatrix.F16;
            case "bf16" -> WarpMatrix.BF16;
            case "tf32" -> WarpMatrix.TF32;
            case "f32" -> WarpMatrix.F32;
            default -> 0;
        };
    }

    /** Takes the shape modifier mMnNkK. */
    private static int[] shape(List<String> mods) throws PtxUnsupported {
        for (String s : mods) {
            java.util.regex.Matcher x = java.util.regex.Pattern.compile("m(\\d+)n(\\d+)k(\\d+)").matcher(s);
            if (x.matches()) {
                mods.remove(s);
                return new int[] {Integer.parseInt(x.group(1)), Integer.parseInt(x.group(2)), Integer.parseInt(x.group(3))};
            }
        }
        throw new PtxUnsupported("no shape");
    }

    private static void require(List<String> mods, String... needed) throws PtxUnsupported {
        for (String n : needed) {
            if (!mods.remove(n)) {
                throw new PtxUnsupported("without ." + n);
            }
        }
    }

    /** The remaining modifiers as element types, in order; anything else is refused. */
    private static int[] types(List<String> mods) throws PtxUnsupported {
        int[] out = new int[mods.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = elementType(mods.get(i));
            if (out[i] == 0) {
                throw new PtxUnsupported("modifier or type ." + mods.get(i));
            }
        }
        return out;
    }

    private int[] registers(String op, boolean destination, int expected) throws PtxUnsupported {
        List<String> names = ops.vector(op);
        if (names.size() != expected) {
            throw new PtxUnsupported("a vector of " + names.size() + " registers where " + expected + " are expected");
        }
        int[] out = new int[names.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = destination ? ops.destination(names.get(i)) : ops.source(names.get(i), Types.B << 4 | 4);
        }
        return out;
    }

    private static int registersOf(WarpMatrix.Op op, char f, int type) {
        return WarpMatrix.elements(op, f) / WarpMatrix.perRegister(type);
    }

    /** mma.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c. */
    void mma(Insn in, List<String> mods, List<String> o) throws PtxUnsupported {
        require(mods, "sync", "aligned");
        int[] s = shape(mods);
        require(mods, "row", "col");
        int[] t = types(mods);
        if (t.length != 4) {
            throw new PtxUnsupported("mma needs .dtype.atype.btype.ctype");
        }
        WarpMatrix.Op op = new WarpMatrix.Op();
        op.kind = WarpMatrix.MMA;
        op.m = s[0];
        op.n = s[1];
        op.k = s[2];
        op.d = t[0];
        op.a = t[1];
        op.b = t[2];
        op.c = t[3];
        boolean half = op.a == op.b && (op.a == WarpMatrix.F16 || op.a == WarpMatrix.BF16) && op.m == 16 && op.n == 8
                && (op.k == 8 || op.k == 16);
        boolean tf32 = op.a == WarpMatrix.TF32 && op.b == WarpMatrix.TF32 && op.m == 16 && op.n == 8 && (op.k == 4 || op.k == 8);
        boolean accumulators = op.a == WarpMatrix.F16 ? (op.c == WarpMatrix.F16 || op.c == WarpMatrix.F32)
                && (op.d == WarpMatrix.F16 || op.d == WarpMatrix.F32) : op.c == WarpMatrix.F32 && op.d == WarpMatrix.F32;
        if (!(half || tf32) || !accumulators) {
            throw new PtxUnsupported("mma of this shape and these types (m16n8k8/m16n8k16 .f16/.bf16, m16n8k4/m16n8k8 .tf32 are covered)");
        }
        build(in, op, o);
    }

    private void build(Insn in, WarpMatrix.Op op, List<String> o) throws PtxUnsupported {
        if (o.size() != 4) {
            throw new PtxUnsupported("4 operands expected, found " + o.size());
        }
        op.dRegs = registers(o.get(0), true, registersOf(op, 'd', op.d));
        op.aRegs = registers(o.get(1), false, wmmaRegisters(op, 'a', op.a, o.get(1)));
        op.bRegs = registers(o.get(2), false, wmmaRegisters(op, 'b', op.b, o.get(2)));
        op.cRegs = registers(o.get(3), false, registersOf(op, 'c', op.c));
        finish(in, op);
    }

    /** The multiplicand registers: exact for mma; for wmma a multiple of the elements (some .f16 fragments hold them twice). */
    private int wmmaRegisters(WarpMatrix.Op op, char f, int type, String operand) throws PtxUnsupported {
        int exact = registersOf(op, f, type);
        if (op.kind != WarpMatrix.WMMA_MMA) {
            return exact;
        }
        int given = ops.vector(operand).size();
        return given % exact == 0 && given > 0 ? given : exact;
    }

    private static void finish(Insn in, WarpMatrix.Op op) {
        in.op = Insn.WARP_MATRIX;
        in.matrix = op;
        int[] d = op.dRegs;
        int[] sources = new int[(op.aRegs == null ? 0 : op.aRegs.length) + (op.bRegs == null ? 0 : op.bRegs.length)
                + (op.cRegs == null ? 0 : op.cRegs.length)];
        int k = 0;
        for (int[] part : new int[][] {op.aRegs, op.bRegs, op.cRegs}) {
            if (part != null) {
                for (int x : part) {
                    sources[k++] = x;
                }
            }
        }
        in.vec = d == null ? new int[0] : d;
        in.vec2 = sources;
    }

    private static boolean wmmaShape(WarpMatrix.Op op, int type) {
        if (type == WarpMatrix.TF32) {
            return op.m == 16 && op.n == 16 && op.k == 8;
        }
        return op.k == 16 && (op.m == 16 && op.n == 16 || op.m == 32 && op.n == 8 || op.m == 8 && op.n == 32);
    }

    private int space(List<String> mods) throws PtxUnsupported {
        int space = Insn.GENERIC;
        for (String sp : List.of("global", "shared", "shared::cta", "local")) {
            if (mods.remove(sp)) {
                space = sp.equals("global") ? Insn.GLOBAL : sp.equals("local") ? Insn.LOCAL : Insn.SHARED;
            }
        }
        return space;
    }

    /**
     * wmma.load.{a,b,c}.sync.aligned.layout.shape{.space}.type r, [p]{, stride}; wmma.store.d.sync.aligned.layout.shape{.space}.type
     * [p], r{, stride}; wmma.mma.sync.aligned.alayout.blayout.shape.dtype.ctype (f16) or .dtype.atype.btype.ctype d, a, b, c.
     */
    void wmma(Insn in, List<String> mods, List<String> o) throws PtxUnsupported {
        String what = mods.removeFirst();
        WarpMatrix.Op op = new WarpMatrix.Op();
        if (what.equals("mma")) {
            require(mods, "sync", "aligned");
            mods.remove("row");   // the layouts are the loads' (a mismatch is undefined in the ISA)
            mods.remove("col");
            mods.remove("row");
            mods.remove("col");
            int[] s = shape(mods);
            op.m = s[0];
            op.n = s[1];
            op.k = s[2];
            op.kind = WarpMatrix.WMMA_MMA;
            int[] t = types(mods);
            if (t.length == 2) {   // .dtype.ctype: .f16 multiplicands
                op.d = t[0];
                op.c = t[1];
                op.a = WarpMatrix.F16;
                op.b = WarpMatrix.F16;
            } else if (t.length == 4) {
                op.d = t[0];
                op.a = t[1];
                op.b = t[2];
                op.c = t[3];
            } else {
                throw new PtxUnsupported("wmma.mma types");
            }
            boolean ok = op.a == op.b && wmmaShape(op, op.a) && (op.a == WarpMatrix.F16
                    ? (op.c == WarpMatrix.F16 || op.c == WarpMatrix.F32) && (op.d == WarpMatrix.F16 || op.d == WarpMatrix.F32)
                    : op.a != WarpMatrix.F32 && op.c == WarpMatrix.F32 && op.d == WarpMatrix.F32);
            if (!ok) {
                throw new PtxUnsupported("wmma.mma of this shape and these types (.f16/.bf16 m16n16k16/m32n8k16/m8n32k16, .tf32 m16n16k8)");
            }
            build(in, op, o);
            return;
        }
        boolean load = what.equals("load");
        if (!load && !what.equals("store")) {
            throw new PtxUnsupported("wmma." + what);
        }
        String f = mods.removeFirst();
        if (load ? !(f.equals("a") || f.equals("b") || f.equals("c")) : !f.equals("d")) {
            throw new PtxUnsupported("wmma." + what + "." + f);
        }
        op.fragment = f.charAt(0);
        op.kind = load ? WarpMatrix.WMMA_LOAD : WarpMatrix.WMMA_STORE;
        require(mods, "sync", "aligned");
        int layout = mods.remove("row") ? 1 : mods.remove("col") ? 0 : -1;
        if (layout < 0) {
            throw new PtxUnsupported("wmma." + what + " without .row/.col");
        }
        op.row = layout == 1;
        int[] s = shape(mods);
        op.m = s[0];
        op.n = s[1];
        op.k = s[2];
        op.space = space(mods);
        int[] t = types(mods);
        if (t.length != 1) {
            throw new PtxUnsupported("wmma." + what + " needs one type");
        }
        op.a = t[0];
        boolean multiplicand = op.fragment == 'a' || op.fragment == 'b';
        int shapeType = multiplicand ? op.a : op.a == WarpMatrix.F32 ? WarpMatrix.F16 : op.a;
        boolean ok = multiplicand ? op.a != WarpMatrix.F32 && wmmaShape(op, op.a)
                : (op.a == WarpMatrix.F16 || op.a == WarpMatrix.F32) && (wmmaShape(op, shapeType) || wmmaShape(op, WarpMatrix.TF32));
        if (!ok) {
            throw new PtxUnsupported("wmma." + what + " of this shape and type");
        }
        if (o.size() != 2 && o.size() != 3) {
            throw new PtxUnsupported("wmma." + what + " operands");
        }
        int exact = registersOf(op, op.fragment, op.a);
        String vector = load ? o.get(0) : o.get(1);
        int given = ops.vector(vector).size();
        if (given <= 0 || given % exact != 0 || !multiplicand && given != exact) {
            throw new PtxUnsupported("wmma." + what + " with " + given + " registers (" + exact + " elements' worth)");
        }
        if (load) {
            op.dRegs = registers(vector, true, given);
        } else {
            op.aRegs = registers(vector, false, given);
        }
        int symbolSpace = ops.address(in, load ? o.get(1) : o.get(0));
        if (op.space == Insn.GENERIC && symbolSpace >= 0) {
            op.space = symbolSpace;   // [variable] without a space: the variable's own
        }
        if (o.size() == 3) {
            in.b = ops.source(o.get(2), Types.U << 4 | 4);
        }
        int a = in.a;
        int b = in.b;
        finish(in, op);
        in.a = a;
        in.b = b;
    }

    /** ldmatrix.sync.aligned.m8n8.x1/.x2/.x4{.trans}{.shared{::cta}}.b16 r, [p]. */
    void ldmatrix(Insn in, List<String> mods, List<String> o) throws PtxUnsupported {
        require(mods, "sync", "aligned", "m8n8");
        int count = mods.remove("x1") ? 1 : mods.remove("x2") ? 2 : mods.remove("x4") ? 4 : 0;
        if (count == 0) {
            throw new PtxUnsupported("ldmatrix without .x1/.x2/.x4");
        }
        WarpMatrix.Op op = new WarpMatrix.Op();
        op.kind = WarpMatrix.LDMATRIX;
        op.count = count;
        op.trans = mods.remove("trans");
        op.space = space(mods);
        if (!mods.remove("b16") || !mods.isEmpty()) {
            throw new PtxUnsupported("ldmatrix other than .b16" + (mods.isEmpty() ? "" : ": modifier ." + String.join(".", mods)));
        }
        if (o.size() != 2) {
            throw new PtxUnsupported("ldmatrix operands");
        }
        op.dRegs = count == 1 && !o.get(0).startsWith("{") ? new int[] {ops.destination(o.get(0))} : registers(o.get(0), true, count);
        int symbolSpace = ops.address(in, o.get(1));
        if (op.space == Insn.GENERIC && symbolSpace >= 0) {
            op.space = symbolSpace;
        }
        int a = in.a;
        finish(in, op);
        in.a = a;
    }
}
