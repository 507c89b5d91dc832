package io.gpusockets.emulated.ptx;

/**
 * The warp-level matrix instructions, which the tensor cores run on a GPU: {@code mma.sync} (shapes m16n8k8 and
 * m16n8k16 of .f16/.bf16, m16n8k4 and m16n8k8 of .tf32, f16 or f32 accumulators), {@code wmma.load/mma/store}
 * (m16n16k16, m32n8k16, m8n32k16 of .f16/.bf16, m16n16k8 of .tf32) and {@code ldmatrix} (m8n8 .b16, .x1/.x2/.x4,
 * .trans). Each is warp-wide: every lane of the warp must execute it, else the launch faults (the ISA leaves it
 * undefined).
 *
 * <p>{@code mma} fragments are laid out as the PTX ISA's "Matrix Fragments for mma" figures give them (groupID =
 * %laneid / 4, threadID_in_group = %laneid % 4). The ISA leaves the layout of {@code wmma} fragments unspecified
 * (programs may only load, store, fill and operate on all of a fragment's elements alike): here lane l's element
 * i is element {@code (l * E + i % E)} of the matrix in row-major order, E being the elements per lane (a fragment
 * with more registers than that, as .f16 multiplicands of some shapes have, holds its elements twice; the
 * multiplication reads the first copy).
 *
 * <p>Arithmetic: D = A * B + C with the products and their sum exact (in double, exact for the magnitudes of any
 * test data) and rounded once to the accumulator type, to nearest; the ISA leaves the order and intermediate
 * precision of the accumulation unspecified. .tf32 operands lose their 13 low mantissa bits, as the tensor cores
 * ignore them.
 */
final class WarpMatrix {
    // element types
    static final int F16 = 1;
    static final int BF16 = 2;
    static final int TF32 = 3;
    static final int F32 = 4;

    static final int MMA = 0;
    static final int WMMA_LOAD = 1;
    static final int WMMA_STORE = 2;
    static final int WMMA_MMA = 3;
    static final int LDMATRIX = 4;

    /** One matrix instruction: its kind, shape and types; the register slots are the Insn's. */
    static final class Op {
        int kind;
        int m;
        int n;
        int k;
        /** The multiplicand and accumulator element types (for a wmma load/store, {@code a} is the fragment's). */
        int a;
        int b;
        int c;
        int d;
        /** wmma load/store: which fragment ('a', 'b', 'c'; 'd' stores), row-major or not; ldmatrix: the count, .trans. */
        char fragment;
        boolean row;
        int count;
        boolean trans;
        int space;
        /** Register slots: destinations, then the sources of A, B, C (mma). */
        int[] dRegs;
        int[] aRegs;
        int[] bRegs;
        int[] cRegs;
    }

    /** The registers and memory of one warp's lanes, as each engine keeps them. */
    interface Lanes {
        long get(int slot, int lane);

        void set(int slot, int lane, long value);

        /** A load or store of lane {@code lane} in {@code space} (Insn.GLOBAL...), checked as any access of that lane. */
        long load(int space, long address, int size, int lane);

        void store(int space, long address, int size, long value, int lane);
    }

    private WarpMatrix() {
    }

    static int elementBytes(int type) {
        return type == F16 || type == BF16 ? 2 : 4;
    }

    /** Elements a 32-bit register holds. */
    static int perRegister(int type) {
        return 4 / elementBytes(type);
    }

    /** Fragment geometry: rows and columns of the matrix (A: m x k, B: k x n, C/D: m x n). */
    static int rows(Op op, char f) {
        return f == 'a' || f == 'c' || f == 'd' ? op.m : op.k;
    }

    static int cols(Op op, char f) {
        return f == 'a' ? op.k : op.n;
    }

    /** Elements each lane holds of fragment f (without the copies). */
    static int elements(Op op, char f) {
        return rows(op, f) * cols(op, f) / 32;
    }

    /** Row and column of element i of lane l of an mma fragment (the ISA's figures), as {row, col}. */
    static int[] mmaPosition(Op op, char f, int l, int i) {
        int g = l >> 2;
        int t = l & 3;
        if (f == 'c' || f == 'd') {
            return new int[] {g + 8 * (i >> 1), t * 2 + (i & 1)};
        }
        boolean tf32 = (f == 'a' ? op.a : op.b) == TF32;
        if (f == 'a') {
            if (tf32) {
                return op.k == 4 ? new int[] {g + 8 * i, t} : new int[] {g + 8 * (i & 1), t + 4 * (i >> 1)};
            }
            return op.k == 8 ? new int[] {g + 8 * (i >> 1), t * 2 + (i & 1)}
                    : new int[] {g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >> 2)};
        }
        if (tf32) {
            return op.k == 4 ? new int[] {t, g} : new int[] {t + 4 * i, g};
        }
        return op.k == 8 ? new int[] {t * 2 + i, g} : new int[] {t * 2 + (i & 1) + 8 * (i >> 1), g};
    }

    /** Row and column of element i of lane l of a wmma fragment (this device's layout: see the class comment). */
    static int[] wmmaPosition(Op op, char f, int l, int i) {
        int e = elements(op, f);
        int index = l * e + i % e;
        int cols = cols(op, f);
        return new int[] {index / cols, index % cols};
    }

    private static int[] position(Op op, char f, int l, int i) {
        return op.kind == MMA ? mmaPosition(op, f, l, i) : wmmaPosition(op, f, l, i);
    }

    /** The value of element i of a fragment held in {@code regs} of lane l. */
    private static double read(Lanes lanes, int[] regs, int type, int l, int i) {
        int per = perRegister(type);
        long raw = lanes.get(regs[i / per], l);
        return decode(type, per == 2 ? (int) (raw >>> (16 * (i % per))) & 0xFFFF : (int) raw);
    }

    static double decode(int type, int bits) {
        return switch (type) {
            case F16 -> Half.decode(bits, false);
            case BF16 -> Half.decode(bits, true);
            case TF32 -> Float.intBitsToFloat(bits & 0xFFFF_E000);
            default -> Float.intBitsToFloat(bits);
        };
    }

    /** The bits of {@code v} in the accumulator type, rounded to nearest (f32: canonical NaN as the engines give). */
    static int encode(int type, double v) {
        if (type == F16) {
            return Half.encode(v, 0, Insn.RN, false);
        }
        if (type == BF16) {
            return Half.encode(v, 0, Insn.RN, true);
        }
        float f = (float) v;
        return Float.isNaN(f) ? 0x7FFF_FFFF : Float.floatToRawIntBits(f);
    }

    private static void write(Lanes lanes, int[] regs, int type, int l, int i, int bits) {
        int per = perRegister(type);
        int slot = regs[i / per];
        if (slot < 0) {
            return;
        }
        if (per == 1) {
            lanes.set(slot, l, bits & 0xFFFF_FFFFL);
        } else {
            long old = lanes.get(slot, l);
            int shift = 16 * (i % per);
            long v = old & ~(0xFFFFL << shift) | (long) (bits & 0xFFFF) << shift;
            lanes.set(slot, l, v & 0xFFFF_FFFFL);
        }
    }

    /** Executes {@code op} for the warp; {@code exec} must be every lane. */
    static void execute(Op op, Insn in, int exec, Lanes lanes, GlobalMemory memory) {
        if (exec != -1) {
            throw memory.trap(in.text + " (line " + in.line + ") executed by lanes 0x" + Integer.toHexString(exec)
                    + " of a warp: the warp-level matrix instructions need all 32 lanes");
        }
        switch (op.kind) {
            case MMA, WMMA_MMA -> multiply(op, lanes);
            case WMMA_LOAD -> load(op, in, lanes);
            case WMMA_STORE -> store(op, in, lanes);
            default -> ldmatrix(op, in, lanes);
        }
    }

    private static void multiply(Op op, Lanes lanes) {
        double[][] a = new double[op.m][op.k];
        double[][] b = new double[op.k][op.n];
        double[][] c = new double[op.m][op.n];
        for (int l = 0; l < 32; l++) {
            for (int i = 0; i < elements(op, 'a'); i++) {
                int[] p = position(op, 'a', l, i);
                a[p[0]][p[1]] = read(lanes, op.aRegs, op.a, l, i);
            }
            for (int i = 0; i < elements(op, 'b'); i++) {
                int[] p = position(op, 'b', l, i);
                b[p[0]][p[1]] = read(lanes, op.bRegs, op.b, l, i);
            }
            for (int i = 0; i < elements(op, 'c'); i++) {
                int[] p = position(op, 'c', l, i);
                c[p[0]][p[1]] = read(lanes, op.cRegs, op.c, l, i);
            }
        }
        int[][] out = new int[op.m][op.n];
        for (int r = 0; r < op.m; r++) {
            for (int col = 0; col < op.n; col++) {
                double s = c[r][col];
                for (int x = 0; x < op.k; x++) {
                    s += a[r][x] * b[x][col];
                }
                out[r][col] = encode(op.d, s);
            }
        }
        int e = elements(op, 'd');
        int slots = op.dRegs.length * perRegister(op.d);
        for (int l = 0; l < 32; l++) {
            for (int i = 0; i < slots; i++) {
                int[] p = position(op, 'd', l, i % e);
                write(lanes, op.dRegs, op.d, l, i, out[p[0]][p[1]]);
            }
        }
    }

    /** The address of fragment element (row, col) of a wmma load/store: stride in elements between rows (or columns). */
    private static long address(Op op, long base, long stride, int row, int col) {
        long index = op.row ? row * stride + col : col * stride + row;
        return base + index * elementBytes(op.a);
    }

    private static void load(Op op, Insn in, Lanes lanes) {
        int slots = op.dRegs.length * perRegister(op.a);
        for (int l = 0; l < 32; l++) {
            long base = (lanes.get(in.a, l) & in.addressMask) + in.offset;
            long stride = in.b < 0 ? (op.row ? cols(op, op.fragment) : rows(op, op.fragment)) : (int) lanes.get(in.b, l);
            for (int i = 0; i < slots; i++) {
                int[] p = wmmaPosition(op, op.fragment, l, i);
                int size = elementBytes(op.a);
                int bits = (int) lanes.load(op.space, address(op, base, stride, p[0], p[1]), size, l);
                write(lanes, op.dRegs, op.a, l, i, bits);
            }
        }
    }

    private static void store(Op op, Insn in, Lanes lanes) {
        int e = elements(op, 'd');
        for (int l = 0; l < 32; l++) {
            long base = (lanes.get(in.a, l) & in.addressMask) + in.offset;
            long stride = in.b < 0 ? (op.row ? op.n : op.m) : (int) lanes.get(in.b, l);
            int per = perRegister(op.a);
            for (int i = 0; i < e; i++) {
                int[] p = wmmaPosition(op, 'd', l, i);
                long raw = lanes.get(op.aRegs[i / per], l);
                long bits = per == 2 ? (raw >>> (16 * (i % per))) & 0xFFFF : raw & 0xFFFF_FFFFL;
                lanes.store(op.space, address(op, base, stride, p[0], p[1]), elementBytes(op.a), bits, l);
            }
        }
    }

    /** ldmatrix.m8n8.xN{.trans}.b16: lanes 8j..8j+7 give the row addresses of matrix j; each lane gets two elements of each. */
    private static void ldmatrix(Op op, Insn in, Lanes lanes) {
        int[][] m = new int[op.count][64];
        for (int j = 0; j < op.count; j++) {
            for (int row = 0; row < 8; row++) {
                int l = 8 * j + row;
                long base = (lanes.get(in.a, l) & in.addressMask) + in.offset;
                for (int col = 0; col < 8; col++) {
                    m[j][row * 8 + col] = (int) lanes.load(op.space, base + 2L * col, 2, l) & 0xFFFF;
                }
            }
        }
        for (int l = 0; l < 32; l++) {
            int row = l >> 2;
            int col = 2 * (l & 3);
            for (int j = 0; j < op.count; j++) {
                int lo = op.trans ? m[j][col * 8 + row] : m[j][row * 8 + col];
                int hi = op.trans ? m[j][(col + 1) * 8 + row] : m[j][row * 8 + col + 1];
                if (op.dRegs[j] >= 0) {
                    lanes.set(op.dRegs[j], l, (lo | (long) hi << 16) & 0xFFFF_FFFFL);
                }
            }
        }
    }
}
