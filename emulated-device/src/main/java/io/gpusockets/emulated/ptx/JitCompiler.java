package io.gpusockets.emulated.ptx;

import static java.lang.constant.ConstantDescs.CD_boolean;
import static java.lang.constant.ConstantDescs.CD_int;
import static java.lang.constant.ConstantDescs.CD_long;
import static java.lang.constant.ConstantDescs.CD_void;

import java.lang.classfile.ClassFile;
import java.lang.classfile.ClassHierarchyResolver;
import java.lang.classfile.CodeBuilder;
import java.lang.classfile.Label;
import java.lang.classfile.instruction.SwitchCase;
import java.lang.constant.ClassDesc;
import java.lang.constant.MethodTypeDesc;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;

/**
 * Compiles an entry ({@link Program}) to JVM bytecode with the JDK's {@code java.lang.classfile}
 * API: one hidden class per entry, whose {@link JitCode#run} runs one thread. PTX registers become
 * JVM locals, branches become jumps, and the JVM's own compiler then makes machine code of it, so a
 * thread runs at the speed of ordinary Java code rather than an instruction at a time through the
 * interpreter's dispatch.
 *
 * <p>Semantics are the interpreter's: each instruction gives the same raw register bits (the
 * hottest forms through {@link JitOps}, every other ALU form through {@link Alu} itself), memory
 * goes through the same checks ({@link JitCta}), and thread-instructions are counted alike.
 * Instructions a warp or block must meet at end the thread's run: the registers live across them
 * (a backward liveness analysis) are saved, {@link JitCta} carries the instruction out for the
 * threads that met, and the threads resume after it.
 *
 * <p>Not compiled (the interpreter runs these): entries with device-function calls,
 * or any instruction outside {@link #supported}; code too large for the JVM to compile
 * ({@link #MAX_BYTECODE} bytes, the JVM's limit for methods it compiles to machine code).
 */
final class JitCompiler {
    /** HotSpot compiles no method with more bytecode than this (-XX:HugeMethodLimit, on by default). */
    static final int MAX_BYTECODE = 8000;
    /** Backward branches between checks whether the context is being destroyed. */
    private static final int FUEL = 1 << 16;

    /**
     * The compiled entry: its code, whether it has meeting points, warp-wide ones and bar.red among
     * them, and how many global-memory sites it caches.
     */
    record Compiled(JitCode code, boolean meets, boolean warpWide, boolean reductions, int sites) {
    }

    private static final ClassDesc CD_CODE = ClassDesc.of(JitCode.class.getName());
    private static final ClassDesc CD_CTA = ClassDesc.of(JitCta.class.getName());
    private static final ClassDesc CD_OPS = ClassDesc.of(JitOps.class.getName());
    private static final ClassDesc CD_ALU = ClassDesc.of(Alu.class.getName());
    private static final ClassDesc CD_TYPES = ClassDesc.of(Types.class.getName());
    private static final ClassDesc CD_INSN = ClassDesc.of(Insn.class.getName());
    private static final ClassDesc CD_INSNS = CD_INSN.arrayType();
    private static final ClassDesc CD_LONGS = CD_long.arrayType();
    private static final MethodTypeDesc JJ_J = MethodTypeDesc.of(CD_long, CD_long, CD_long);
    private static final MethodTypeDesc JJJ_J = MethodTypeDesc.of(CD_long, CD_long, CD_long, CD_long);
    private static final MethodTypeDesc J_J = MethodTypeDesc.of(CD_long, CD_long);
    private static final MethodTypeDesc NORM = MethodTypeDesc.of(CD_long, CD_long, CD_int);

    // Locals of run(JitCta cta, long[] regs, int t, int at).
    private static final int THIS = 0;
    private static final int CTA = 1;
    private static final int REGS = 2;
    private static final int T = 3;
    private static final int AT = 4;
    private static final int COUNT = 5;
    private static final int FUEL_LOCAL = 7;
    private static final int ADDRESS = 8;
    private static final int FLAG = 10;
    private static final int FIRST_SLOT = 12;

    private final Program program;
    private final Insn[] code;
    private final int n;
    private final boolean[] constant;
    private final long[] constantOf;
    private final int[] specialOf;
    /** JVM local of each register slot the code uses (special registers included), or -1. */
    private final int[] local;
    private final int[] site;
    private int sites;
    private BitSet[] liveIn;
    private BitSet[] liveOut;
    private BitSet[] dirtyIn;
    private boolean[] nanBlind;
    private Label[] labels;
    private boolean[] leader;
    private int[] blockCount;

    private JitCompiler(Program program) {
        this.program = program;
        this.code = program.code;
        this.n = code.length;
        this.constant = new boolean[program.slots];
        this.constantOf = new long[program.slots];
        this.specialOf = new int[program.slots];
        java.util.Arrays.fill(specialOf, -1);
        for (int i = 0; i < program.constSlots.length; i++) {
            constant[program.constSlots[i]] = true;
            constantOf[program.constSlots[i]] = program.constValues[i];
        }
        for (int i = 0; i < program.specialSlots.length; i++) {
            specialOf[program.specialSlots[i]] = program.specialKinds[i];
        }
        this.local = new int[program.slots];
        java.util.Arrays.fill(local, -1);
        this.site = new int[n];
    }

    /** Compiles the entry, or says why not (the interpreter runs it then). */
    static Compiled compile(Program program) throws PtxUnsupported {
        return new JitCompiler(program).build();
    }

    private static boolean meeting(int op) {
        return op == Insn.BAR || op == Insn.BAR_RED || op == Insn.SHFL || op == Insn.VOTE || op == Insn.ACTIVEMASK
                || op == Insn.WARPSYNC || op == Insn.MATCH || op == Insn.REDUX || op == Insn.WARP_MATRIX || op == Insn.ELECT;
    }

    /** Why the compiler does not take instruction {@code in}, or null. */
    private static String supported(Insn in) {
        if (in.op < Insn.ALU_END) {
            return null;
        }
        return switch (in.op) {
            case Insn.SETP, Insn.BRA, Insn.EXIT, Insn.BAR, Insn.SHFL, Insn.VOTE, Insn.ACTIVEMASK, Insn.WARPSYNC, Insn.NOP,
                 Insn.PACK, Insn.UNPACK, Insn.CLOCK, Insn.ADD_CARRY, Insn.SUB_CARRY, Insn.MAD_CARRY, Insn.MATCH, Insn.TRAP,
                 Insn.REDUX, Insn.WARP_MATRIX, Insn.FENCE, Insn.CP_ASYNC, Insn.MBARRIER, Insn.BULK_COPY, Insn.ELECT,
                 Insn.TENSOR_COPY -> null;
            case Insn.BAR_RED -> in.guard >= 0 ? "a guarded bar.red" : null;
            case Insn.LD -> null;
            case Insn.ST -> in.space == Insn.PARAM ? "a store to .param" : null;
            case Insn.ATOM -> in.space == Insn.GLOBAL || in.space == Insn.SHARED || in.space == Insn.GENERIC ? null : "atomic space";
            case Insn.CALL, Insn.RET -> "device-function calls";
            case Insn.CVTA_LOCAL -> null;
            case Insn.TEX, Insn.SULD, Insn.SUST -> null;
            default -> "op " + in.op;
        };
    }

    private Compiled build() throws PtxUnsupported {
        if (n > MAX_BYTECODE) {   // every instruction but a nop takes several bytes: over the limit for sure
            throw new PtxUnsupported(program.entry + ": " + n + " instructions, too many to compile");
        }
        boolean meets = false;
        boolean warpWide = false;
        boolean reductions = false;
        for (Insn in : code) {
            String why = supported(in);
            if (why != null) {
                throw new PtxUnsupported(program.entry + ": " + why + " (" + in + ") is not compiled");
            }
            meets |= meeting(in.op);
            warpWide |= meeting(in.op) && in.op != Insn.BAR && in.op != Insn.BAR_RED;
            reductions |= in.op == Insn.BAR_RED;
        }
        int next = FIRST_SLOT;
        for (Insn in : code) {
            for (int s : slotsOf(in)) {
                if (s >= 0 && !constant[s] && local[s] < 0) {
                    local[s] = next;
                    next += 2;
                }
            }
        }
        if (next > 60000) {
            throw new PtxUnsupported(program.entry + ": too many registers to compile");
        }
        for (int i = 0; i < n; i++) {
            Insn in = code[i];
            boolean global = in.space == Insn.GLOBAL || in.space == Insn.GENERIC;
            site[i] = (in.op == Insn.LD || in.op == Insn.ST || in.op == Insn.ATOM) && global ? sites++ : -1;
        }
        nanBlindness();
        if (meets) {
            liveness();
            dirtiness();
        }
        blocks();
        byte[] bytes = classBytes();
        try {
            JitCode jit = (JitCode) LOADED.constructor(bytes, this::dump).invoke(code);
            return new Compiled(jit, meets, warpWide, reductions, sites);
        } catch (Throwable e) {
            throw new IllegalStateException(program.entry + ": the generated class does not load: " + e, e);
        }
    }

    /** The classes generated lately, shared by every module that compiles to the same bytes. */
    static final LoadedClasses LOADED = new LoadedClasses(512);

    /**
     * Generated classes by their bytes, the most recently used {@code capacity} of them: a module loaded again
     * (every session of a program loads the same PTX) gets the class, and the JVM's compiled code for it,
     * that the last load made, instead of a new hidden class whose code the JIT compiles again and keeps
     * until the class is unloaded. Equal bytes are the same code: what differs per module (its instructions'
     * operands, the addresses of its globals) is in the bytes or in the {@code Insn[]} each instance is given.
     * An evicted class is unloaded once no kernel uses it (hidden classes are not kept by their loader).
     */
    static final class LoadedClasses {
        private final int capacity;
        private final java.util.LinkedHashMap<java.nio.ByteBuffer, java.lang.invoke.MethodHandle> byBytes;
        private long hits;
        private long defined;

        LoadedClasses(int capacity) {
            this.capacity = capacity;
            this.byBytes = new java.util.LinkedHashMap<>(16, 0.75f, true);
        }

        /** The constructor (taking Insn[]) of the class with these bytes, defining it (and telling {@code defining}) when new. */
        synchronized java.lang.invoke.MethodHandle constructor(byte[] bytes, java.util.function.Consumer<byte[]> defining)
                throws ReflectiveOperationException {
            java.nio.ByteBuffer key = java.nio.ByteBuffer.wrap(bytes);
            java.lang.invoke.MethodHandle c = byBytes.get(key);
            if (c != null) {
                hits++;
                return c;
            }
            defining.accept(bytes);
            MethodHandles.Lookup lookup = MethodHandles.lookup().defineHiddenClass(bytes, true);
            c = lookup.findConstructor(lookup.lookupClass(), MethodType.methodType(void.class, Insn[].class));
            defined++;
            byBytes.put(key, c);
            if (byBytes.size() > capacity) {
                byBytes.pollFirstEntry();
            }
            return c;
        }

        /** Compilations that reused a class. */
        synchronized long hits() {
            return hits;
        }

        /** Classes defined. */
        synchronized long defined() {
            return defined;
        }

        synchronized int size() {
            return byBytes.size();
        }
    }

    /** With -D{@value #DUMP_PROPERTY}=DIR, each generated class is also written there (ENTRY.class), for javap. */
    static final String DUMP_PROPERTY = "gpusockets.emulated.ptx.dump";

    private void dump(byte[] bytes) {
        String dir = System.getProperty(DUMP_PROPERTY);
        if (dir != null) {
            try {
                java.nio.file.Path d = java.nio.file.Path.of(dir);
                java.nio.file.Files.createDirectories(d);
                java.nio.file.Files.write(d.resolve(program.entry.replaceAll("[^A-Za-z0-9_$]", "_") + ".class"), bytes);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    }

    /** Every slot an instruction names (sources, destinations, guard). */
    private static List<Integer> slotsOf(Insn in) {
        List<Integer> out = new ArrayList<>();
        for (int s : new int[] {in.d, in.d2, in.a, in.b, in.c, in.e, in.guard, in.carry}) {
            out.add(s);
        }
        for (int[] v : new int[][] {in.vec, in.vec2}) {
            if (v != null) {
                for (int s : v) {
                    out.add(s);
                }
            }
        }
        if (in.srcs != null) {
            for (int s : in.srcs) {
                out.add(s);
            }
        }
        return out;
    }

    /** A slot with a JVM local of its own: registers, and special registers (computed once, kept like registers). */
    private boolean register(int s) {
        return s >= 0 && !constant[s];
    }

    private void use(BitSet b, int s) {
        if (register(s)) {
            b.set(s);
        }
    }

    private void uses(Insn in, BitSet b) {
        use(b, in.guard);
        switch (in.op) {
            case Insn.SETP -> {
                use(b, in.a);
                use(b, in.b);
                if (in.type2 > 0) {
                    use(b, in.c);
                }
            }
            case Insn.LD, Insn.UNPACK -> use(b, in.a);
            case Insn.ST, Insn.PACK -> {
                use(b, in.a);
                for (int s : in.vec) {
                    use(b, s);
                }
            }
            case Insn.ATOM, Insn.SHFL -> {
                use(b, in.a);
                use(b, in.b);
                use(b, in.c);
                use(b, in.e);
            }
            case Insn.VOTE -> {
                use(b, in.a);
                use(b, in.e);
            }
            case Insn.MATCH -> {
                use(b, in.a);
                use(b, in.b);
            }
            case Insn.ADD_CARRY, Insn.SUB_CARRY, Insn.MAD_CARRY -> {
                use(b, in.a);
                use(b, in.b);
                use(b, in.c);
                use(b, in.carry);
            }
            case Insn.BAR_RED -> use(b, in.c);
            case Insn.CVTA_LOCAL -> use(b, in.a);
            case Insn.TEX, Insn.SULD, Insn.SUST -> {
                for (int s : in.srcs) {
                    use(b, s);
                }
                if (in.op == Insn.SUST) {
                    for (int s : in.vec) {
                        use(b, s);
                    }
                }
            }
            case Insn.REDUX -> {
                use(b, in.a);
                use(b, in.e);
            }
            case Insn.CP_ASYNC, Insn.MBARRIER -> {
                use(b, in.a);
                use(b, in.b);
                use(b, in.c);
            }
            case Insn.BULK_COPY -> {
                use(b, in.a);
                use(b, in.b);
                use(b, in.c);
                use(b, in.e);
            }
            case Insn.TENSOR_COPY -> {
                use(b, in.a);
                use(b, in.b);
                use(b, in.e);
                for (int s : in.vec) {
                    use(b, s);
                }
            }
            case Insn.ELECT -> use(b, in.e);
            case Insn.WARP_MATRIX -> {
                use(b, in.a);
                use(b, in.b);
                for (int s : in.vec2) {
                    use(b, s);
                }
                if (in.matrix.kind == WarpMatrix.WMMA_LOAD || in.matrix.kind == WarpMatrix.LDMATRIX
                        || in.matrix.d == WarpMatrix.F16 || in.matrix.d == WarpMatrix.BF16) {
                    for (int s : in.vec) {
                        use(b, s);   // a 16-bit element's register keeps its other half: read, then written
                    }
                }
            }
            case Insn.FENCE -> {
            }
            default -> {
                if (in.op < Insn.ALU_END) {
                    use(b, in.a);
                    use(b, in.b);
                    use(b, in.c);
                    use(b, in.e);
                }
            }
        }
    }

    private void defs(Insn in, BitSet b) {
        switch (in.op) {
            case Insn.SETP, Insn.SHFL, Insn.MATCH -> {
                use(b, in.d);
                use(b, in.d2);
            }
            case Insn.LD, Insn.UNPACK, Insn.ATOM, Insn.TEX, Insn.SULD -> {
                for (int s : in.vec) {
                    use(b, s);
                }
            }
            case Insn.VOTE, Insn.ACTIVEMASK, Insn.PACK, Insn.CLOCK, Insn.BAR_RED, Insn.CVTA_LOCAL, Insn.REDUX, Insn.MBARRIER -> use(b, in.d);
            case Insn.ELECT -> {
                use(b, in.d);
                use(b, in.d2);
            }
            case Insn.WARP_MATRIX -> {
                for (int s : in.vec) {
                    use(b, s);
                }
            }
            case Insn.ADD_CARRY, Insn.SUB_CARRY, Insn.MAD_CARRY -> {
                use(b, in.d);
                if ((in.mod & Insn.CARRY_OUT) != 0) {
                    use(b, in.carry);
                }
            }
            default -> {
                if (in.op < Insn.ALU_END) {
                    use(b, in.d);
                }
            }
        }
    }

    private int[] successors(int i) {
        Insn in = code[i];
        boolean guarded = in.guard >= 0;
        if (in.op == Insn.BRA) {
            return guarded && i + 1 < n ? new int[] {in.target, i + 1} : new int[] {in.target};
        }
        if (in.op == Insn.EXIT && !guarded || i + 1 >= n) {
            return new int[0];
        }
        return new int[] {i + 1};
    }

    /** Registers live into and out of each instruction (a guarded definition kills nothing). */
    private void liveness() {
        liveIn = new BitSet[n];
        liveOut = new BitSet[n];
        BitSet[] use = new BitSet[n];
        BitSet[] kill = new BitSet[n];
        for (int i = 0; i < n; i++) {
            liveIn[i] = new BitSet();
            liveOut[i] = new BitSet();
            use[i] = new BitSet();
            kill[i] = new BitSet();
            uses(code[i], use[i]);
            if (code[i].guard < 0) {
                defs(code[i], kill[i]);
            }
        }
        boolean changed = true;
        while (changed) {
            changed = false;
            for (int i = n - 1; i >= 0; i--) {
                BitSet out = new BitSet();
                for (int s : successors(i)) {
                    out.or(liveIn[s]);
                }
                BitSet in = (BitSet) out.clone();
                in.andNot(kill[i]);
                in.or(use[i]);
                if (!in.equals(liveIn[i]) || !out.equals(liveOut[i])) {
                    liveIn[i] = in;
                    liveOut[i] = out;
                    changed = true;
                }
            }
        }
    }

    /**
     * Float registers whose NaN payload nothing can see: every instruction that reads one is f32/f64
     * add, sub, mul, fma or div in the round-to-nearest form {@link JitOps} computes (which makes any
     * NaN the canonical one in its own result) or a setp (which sees only whether it is a NaN). Their
     * add/sub/mul/fma results skip the NaN canonicalisation (the next instruction does it); a
     * register any other instruction reads (a store, a mov, a shuffle...) keeps it.
     */
    private void nanBlindness() {
        nanBlind = new boolean[program.slots];
        boolean[] read = new boolean[program.slots];
        boolean[] seen = new boolean[program.slots];
        BitSet u = new BitSet();
        for (Insn in : code) {
            u.clear();
            uses(in, u);
            boolean f = in.type == (Types.F << 4 | 4) || in.type == (Types.F << 4 | 8);
            boolean blind = in.op == Insn.SETP && Types.isFloat(in.type)
                    || f && plainFloat(in) && (in.op == Insn.ADD || in.op == Insn.SUB || in.op == Insn.MUL || in.op == Insn.FMA
                    || in.op == Insn.MAD || in.op == Insn.DIV);
            for (int s = u.nextSetBit(0); s >= 0; s = u.nextSetBit(s + 1)) {
                if (s == in.guard || in.op == Insn.SETP && s == in.c) {
                    continue;   // a guard or a combined predicate is no float operand
                }
                seen[s] = true;
                read[s] |= !blind;
            }
        }
        for (int s = 0; s < program.slots; s++) {
            nanBlind[s] = seen[s] && !read[s];
        }
    }

    /**
     * Registers that may differ from the thread's saved copy in {@code regs} at each instruction:
     * the special registers at the start (computed into locals; regs holds zeros, as every other
     * register's local does), then whatever an instruction defines; a meeting point's resume loads
     * the live registers from regs, so none is dirty after it. A meeting point saves only the live
     * registers that are dirty there: the others are in regs already.
     */
    private void dirtiness() {
        dirtyIn = new BitSet[n];
        for (int i = 0; i < n; i++) {
            dirtyIn[i] = new BitSet();
        }
        for (int s = 0; s < program.slots; s++) {
            if (local[s] >= 0 && specialOf[s] >= 0) {
                dirtyIn[0].set(s);
            }
        }
        boolean changed = true;
        BitSet out = new BitSet();
        while (changed) {
            changed = false;
            for (int i = 0; i < n; i++) {
                Insn in = code[i];
                out.clear();
                out.or(dirtyIn[i]);
                defs(in, out);
                for (int succ : successors(i)) {
                    if (meeting(in.op) && in.guard < 0 && succ == i + 1) {
                        continue;   // reached only through the resume, which leaves nothing dirty
                    }
                    BitSet target = dirtyIn[succ];
                    int before = target.cardinality();
                    target.or(out);
                    changed |= target.cardinality() != before;
                }
            }
        }
    }

    /** Basic blocks, for counting: each leader adds the unguarded instructions up to the next leader. */
    private void blocks() {
        leader = new boolean[n + 1];
        leader[0] = true;
        leader[n] = true;
        for (int i = 0; i < n; i++) {
            Insn in = code[i];
            if (in.op == Insn.BRA) {
                leader[in.target] = true;
            }
            if (in.op == Insn.BRA || in.op == Insn.EXIT || in.op == Insn.TRAP || meeting(in.op) || in.guard >= 0) {
                leader[i + 1] = true;
            }
        }
        blockCount = new int[n + 1];
        int start = 0;
        for (int i = 0; i <= n; i++) {
            if (i > 0 && leader[i]) {
                start = i;
            }
            if (i < n && code[i].guard < 0) {
                blockCount[start]++;
            }
        }
    }

    private byte[] build(ClassFile cf, ClassDesc self) {
        return cf.build(self, cb -> {
            cb.withFlags(ClassFile.ACC_FINAL | ClassFile.ACC_SYNTHETIC);
            cb.withSuperclass(CD_CODE);
            cb.withMethodBody("<init>", MethodTypeDesc.of(CD_void, CD_INSNS), ClassFile.ACC_PUBLIC, c -> {
                c.aload(0);
                c.aload(1);
                c.invokespecial(CD_CODE, "<init>", MethodTypeDesc.of(CD_void, CD_INSNS));
                c.return_();
            });
            cb.withMethodBody("run", MethodTypeDesc.of(CD_int, CD_CTA, CD_LONGS, CD_int, CD_int), ClassFile.ACC_FINAL, this::emitRun);
        });
    }

    private byte[] classBytes() throws PtxUnsupported {
        ClassFile cf = ClassFile.of(ClassFile.ClassHierarchyResolverOption.of(
                ClassHierarchyResolver.defaultResolver().orElse(ClassHierarchyResolver.ofClassLoading(JitCompiler.class.getClassLoader()))));
        ClassDesc self = ClassDesc.of(JitCompiler.class.getPackageName() + ".JitKernel");
        byte[] bytes;
        try {
            bytes = build(cf, self);
        } catch (IllegalArgumentException e) {
            if (String.valueOf(e.getMessage()).startsWith("Code length")) {   // past a method's 64 KiB: too large, as below
                throw new PtxUnsupported(program.entry + ": more bytecode than a JVM method may hold (" + e.getMessage() + ")");
            }
            throw e;
        }
        var model = cf.parse(bytes);
        for (var m : model.methods()) {
            if (m.methodName().equalsString("run")) {
                int length = m.findAttribute(java.lang.classfile.Attributes.code()).orElseThrow().codeLength();
                if (length > MAX_BYTECODE) {
                    throw new PtxUnsupported(program.entry + ": " + length + " bytes of bytecode, over the " + MAX_BYTECODE
                            + " the JVM compiles");
                }
            }
        }
        return bytes;
    }

    private void emitRun(CodeBuilder c) {
        labels = new Label[n + 1];
        for (int i = 0; i <= n; i++) {
            labels[i] = c.newLabel();
        }
        c.lconst_0();
        c.lstore(COUNT);
        c.loadConstant(FUEL);
        c.istore(FUEL_LOCAL);
        c.lconst_0();
        c.lstore(ADDRESS);
        c.iconst_0();
        c.istore(FLAG);
        for (int s = 0; s < program.slots; s++) {
            if (local[s] < 0) {
                continue;
            }
            c.lconst_0();
            c.lstore(local[s]);
        }
        Label start = c.newLabel();
        List<Integer> resumes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (meeting(code[i].op)) {
                resumes.add(i);
            }
        }
        Label[] resumeLabels = new Label[resumes.size()];
        if (!resumes.isEmpty()) {
            List<SwitchCase> cases = new ArrayList<>();
            for (int k = 0; k < resumes.size(); k++) {
                resumeLabels[k] = c.newLabel();
                cases.add(SwitchCase.of(resumes.get(k) + 1, resumeLabels[k]));
            }
            c.iload(AT);
            c.lookupswitch(start, cases);
            for (int k = 0; k < resumes.size(); k++) {
                int i = resumes.get(k);
                c.labelBinding(resumeLabels[k]);
                BitSet live = liveOut[i];
                for (int s = live.nextSetBit(0); s >= 0; s = live.nextSetBit(s + 1)) {
                    c.aload(REGS);
                    c.loadConstant(s);
                    c.laload();
                    c.lstore(local[s]);
                }
                c.goto_(labels[i + 1]);
            }
        }
        // A thread's start: its special registers, which the resume points then load like registers.
        c.labelBinding(start);
        for (int s = 0; s < program.slots; s++) {
            if (local[s] >= 0 && specialOf[s] >= 0) {
                special(c, specialOf[s]);
                c.lstore(local[s]);
            }
        }
        for (int i = 0; i < n; i++) {
            emitInstruction(c, i);
        }
        c.labelBinding(labels[n]);
        if (blockCount[n] > 0) {
            addCount(c, blockCount[n]);
        }
        exit(c, 0);
    }

    /** Special register {@code kind} of thread T, inline for the common ones. */
    private static void special(CodeBuilder c, int kind) {
        switch (kind) {
            case Program.TID_X -> {
                c.iload(T);
                ctaInt(c, "bx");
                c.irem();
                c.i2l();
            }
            case Program.TID_Y -> {
                c.iload(T);
                ctaInt(c, "bx");
                c.idiv();
                ctaInt(c, "by");
                c.irem();
                c.i2l();
            }
            case Program.TID_Z -> {
                c.iload(T);
                ctaInt(c, "bxy");
                c.idiv();
                c.i2l();
            }
            case Program.NTID_X -> {
                ctaInt(c, "bx");
                c.i2l();
            }
            case Program.NTID_Y -> {
                ctaInt(c, "by");
                c.i2l();
            }
            case Program.CTAID_X, Program.CTAID_Y, Program.CTAID_Z -> {
                c.aload(CTA);
                c.getfield(CD_CTA, kind == Program.CTAID_X ? "cx" : kind == Program.CTAID_Y ? "cy" : "cz", CD_long);
            }
            case Program.LANEID -> {
                c.iload(T);
                c.loadConstant(31);
                c.iand();
                c.i2l();
            }
            case Program.WARPID -> {
                c.iload(T);
                c.iconst_5();
                c.ishr();
                c.i2l();
            }
            default -> {
                c.aload(CTA);
                c.loadConstant(kind);
                c.iload(T);
                c.invokevirtual(CD_CTA, "special", MethodTypeDesc.of(CD_long, CD_int, CD_int));
            }
        }
    }

    private static void ctaInt(CodeBuilder c, String field) {
        c.aload(CTA);
        c.getfield(CD_CTA, field, CD_int);
    }

    private void addCount(CodeBuilder c, int k) {
        c.lload(COUNT);
        c.loadConstant((long) k);
        c.ladd();
        c.lstore(COUNT);
    }

    /** Adds the count to the CTA's and returns {@code result}. */
    private static void exit(CodeBuilder c, int result) {
        c.aload(CTA);
        c.dup();
        c.getfield(CD_CTA, "instructions", CD_long);
        c.lload(COUNT);
        c.ladd();
        c.putfield(CD_CTA, "instructions", CD_long);
        c.loadConstant(result);
        c.ireturn();
    }

    private void load(CodeBuilder c, int slot) {
        if (slot < 0) {
            c.lconst_0();
        } else if (constant[slot]) {
            c.loadConstant(constantOf[slot]);
        } else {
            c.lload(local[slot]);
        }
    }

    private void store(CodeBuilder c, int slot) {
        c.lstore(local[slot]);
    }

    /** {@link Types#norm} of the long on the stack, inline. */
    private static void norm(CodeBuilder c, int type) {
        switch (type) {
            case Types.S << 4 | 1 -> {
                c.l2i();
                c.i2b();
                c.i2l();
            }
            case Types.S << 4 | 2 -> {
                c.l2i();
                c.i2s();
                c.i2l();
            }
            case Types.S << 4 | 4 -> {
                c.l2i();
                c.i2l();
            }
            case Types.U << 4 | 1, Types.B << 4 | 1 -> mask(c, 0xFFL);
            case Types.U << 4 | 2, Types.B << 4 | 2 -> mask(c, 0xFFFFL);
            case Types.U << 4 | 4, Types.B << 4 | 4, Types.F << 4 | 4 -> mask(c, 0xFFFF_FFFFL);
            case Types.PRED -> mask(c, 1L);
            default -> {
                if (Types.size(type) != 8) {   // a type norm would extend in a way not written out here
                    c.loadConstant(type);
                    c.invokestatic(CD_TYPES, "norm", NORM);
                }
            }
        }
    }

    private static void mask(CodeBuilder c, long m) {
        c.loadConstant(m);
        c.land();
    }

    /** A loaded value, zero-extended from its size already, extended by the instruction's type. */
    private static void loaded(CodeBuilder c, int type) {
        if (Types.signed(type) || type == Types.PRED || Types.size(type) == 8) {
            norm(c, type);
        }
    }

    private void ops(CodeBuilder c, String name, MethodTypeDesc type) {
        c.invokestatic(CD_OPS, name, type);
    }

    /** Within the current basic block: base slots a shared access tested, with the alignment tested. */
    private final java.util.Map<Integer, Integer> testedBase = new java.util.HashMap<>();
    private final BitSet scratchDefs = new BitSet();

    private void emitInstruction(CodeBuilder c, int i) {
        Insn in = code[i];
        if (leader[i]) {
            testedBase.clear();
        }
        emitBody(c, i, in);
        scratchDefs.clear();
        defs(in, scratchDefs);
        for (int s = scratchDefs.nextSetBit(0); s >= 0; s = scratchDefs.nextSetBit(s + 1)) {
            testedBase.remove(s);
        }
    }

    private void emitBody(CodeBuilder c, int i, Insn in) {
        c.labelBinding(labels[i]);
        if (leader[i] && blockCount[i] > 0) {
            addCount(c, blockCount[i]);
        }
        if (in.guard >= 0) {
            load(c, in.guard);
            c.l2i();
            c.iconst_1();
            c.iand();
            if (in.guardNegated) {
                c.ifne(labels[i + 1]);
            } else {
                c.ifeq(labels[i + 1]);
            }
            addCount(c, 1);
        }
        if (in.op < Insn.ALU_END) {
            alu(c, i, in);
            return;
        }
        switch (in.op) {
            case Insn.SETP -> setp(c, i, in);
            case Insn.LD -> ld(c, i, in);
            case Insn.ST -> st(c, i, in);
            case Insn.ATOM -> atom(c, i, in);
            case Insn.BRA -> branch(c, i, in);
            case Insn.EXIT -> exit(c, 0);
            case Insn.ADD_CARRY, Insn.SUB_CARRY, Insn.MAD_CARRY -> carry(c, i, in);
            case Insn.CVTA_LOCAL -> {
                // a compiled entry makes no calls: its frame starts at 0 of the thread's local memory
                load(c, in.a);
                c.loadConstant(in.offset);
                c.ladd();
                if (Types.size(in.type) == 4) {
                    mask(c, 0xFFFF_FFFFL);
                }
                store(c, in.d);
            }
            case Insn.BAR, Insn.BAR_RED, Insn.SHFL, Insn.VOTE, Insn.ACTIVEMASK, Insn.WARPSYNC, Insn.MATCH, Insn.REDUX, Insn.WARP_MATRIX,
                 Insn.ELECT -> {
                BitSet save = (BitSet) liveIn[i].clone();
                save.and(dirtyIn[i]);
                for (int s = save.nextSetBit(0); s >= 0; s = save.nextSetBit(s + 1)) {
                    c.aload(REGS);
                    c.loadConstant(s);
                    c.lload(local[s]);
                    c.lastore();
                }
                exit(c, i + 1);
            }
            case Insn.PACK -> {
                int bits = Types.bits(in.type) / in.vec.length;
                long part = bits == 64 ? -1L : (1L << bits) - 1;
                c.lconst_0();
                for (int k = 0; k < in.vec.length; k++) {
                    load(c, in.vec[k]);
                    c.loadConstant(part);
                    c.land();
                    c.loadConstant(k * bits);
                    c.lshl();
                    c.lor();
                }
                store(c, in.d);
            }
            case Insn.UNPACK -> {
                int bits = Types.bits(in.type) / in.vec.length;
                long part = (1L << bits) - 1;
                load(c, in.a);
                c.lstore(ADDRESS);
                for (int k = 0; k < in.vec.length; k++) {
                    if (in.vec[k] >= 0) {
                        c.lload(ADDRESS);
                        c.loadConstant(k * bits);
                        c.lushr();
                        c.loadConstant(part);
                        c.land();
                        store(c, in.vec[k]);
                    }
                }
            }
            case Insn.CLOCK -> {
                c.invokestatic(ClassDesc.of("java.lang.System"), "nanoTime", MethodTypeDesc.of(CD_long));
                if (in.mod == Program.CLOCK) {
                    c.loadConstant(0xFFFF_FFFFL);
                    c.land();
                }
                store(c, in.d);
            }
            case Insn.NOP -> {
            }
            case Insn.TEX, Insn.SULD, Insn.SUST -> texture(c, i, in);
            case Insn.FENCE -> c.invokestatic(ClassDesc.of("java.lang.invoke.VarHandle"), "fullFence", MethodTypeDesc.of(CD_void));
            case Insn.MBARRIER -> {
                c.aload(CTA);
                c.loadConstant(i);
                pushAddress(c, in.a, in.addressMask, in.offset);
                load(c, in.b);
                load(c, in.c);
                c.invokevirtual(CD_CTA, "mbarrier", MethodTypeDesc.of(CD_long, CD_int, CD_long, CD_long, CD_long));
                if (in.d >= 0) {
                    store(c, in.d);
                } else {
                    c.pop2();
                }
            }
            case Insn.BULK_COPY -> {
                c.aload(CTA);
                pushAddress(c, in.a, in.addressMask, in.offset);
                pushAddress(c, in.b, in.addressMask2, in.offset2);
                load(c, in.c);
                pushAddress(c, in.e, in.addressMask3, in.offset3);
                c.invokevirtual(CD_CTA, "bulkCopy", MethodTypeDesc.of(CD_void, CD_long, CD_long, CD_long, CD_long));
            }
            case Insn.TENSOR_COPY -> {
                c.aload(CTA);
                c.loadConstant(i);
                pushAddress(c, in.a, in.addressMask, in.offset);
                pushAddress(c, in.b, in.addressMask2, in.offset2);
                pushAddress(c, in.e, in.addressMask3, in.offset3);   // no mbarrier (a store): 0
                for (int k = 0; k < 5; k++) {
                    load(c, k < in.vec.length ? in.vec[k] : -1);
                }
                c.invokevirtual(CD_CTA, "tensorCopy", MethodTypeDesc.of(CD_void, CD_int, CD_long, CD_long, CD_long, CD_long,
                        CD_long, CD_long, CD_long, CD_long));
            }
            case Insn.CP_ASYNC -> {
                c.aload(CTA);
                c.loadConstant(i);
                pushAddress(c, in.a, in.addressMask, in.offset);
                pushAddress(c, in.b, in.addressMask2, in.offset2);
                load(c, in.c);
                c.invokevirtual(CD_CTA, "copyAsync", MethodTypeDesc.of(CD_void, CD_int, CD_long, CD_long, CD_long));
            }
            case Insn.TRAP -> {
                // the launch fails: JitCta makes the fault (reached only when the guard, if any, holds)
                c.aload(CTA);
                c.loadConstant(i);
                c.iload(T);
                c.invokevirtual(CD_CTA, "trap", MethodTypeDesc.of(ClassDesc.of("java.lang.RuntimeException"), CD_int, CD_int));
                c.athrow();
            }
            default -> throw new IllegalStateException(in.toString());
        }
    }

    /**
     * tex, suld, sust through {@link JitCta#texture}: the sources (and sust's values) handed over one by one,
     * the instruction run by {@link TextureOps} as the interpreter runs it, tex's and suld's results taken back.
     */
    private void texture(CodeBuilder c, int i, Insn in) {
        boolean store = in.op == Insn.SUST;
        int k = 0;
        for (int s : in.srcs) {
            c.aload(CTA);
            c.loadConstant(k++);
            load(c, s);
            c.invokevirtual(CD_CTA, "textureArgument", MethodTypeDesc.of(CD_void, CD_int, CD_long));
        }
        if (store) {
            for (int s : in.vec) {
                c.aload(CTA);
                c.loadConstant(k++);
                load(c, s);
                c.invokevirtual(CD_CTA, "textureArgument", MethodTypeDesc.of(CD_void, CD_int, CD_long));
            }
        }
        c.aload(CTA);
        insn(c, i);
        c.invokevirtual(CD_CTA, "texture", MethodTypeDesc.of(CD_void, CD_INSN));
        if (!store) {
            for (k = 0; k < in.vec.length; k++) {
                if (in.vec[k] >= 0) {
                    c.aload(CTA);
                    c.loadConstant(k);
                    c.invokevirtual(CD_CTA, "textureResult", MethodTypeDesc.of(CD_long, CD_int));
                    norm(c, in.type);
                    store(c, in.vec[k]);
                }
            }
        }
    }

    /** The carry chain through {@link Alu}: the sum and the flag from the same sources, then d and the flag written. */
    private void carry(CodeBuilder c, int i, Insn in) {
        MethodTypeDesc type = MethodTypeDesc.of(CD_long, CD_INSN, CD_long, CD_long, CD_long, CD_long);
        insn(c, i);
        load(c, in.a);
        load(c, in.b);
        load(c, in.c);
        load(c, in.carry);
        c.invokestatic(CD_ALU, "carrySum", type);
        c.lstore(ADDRESS);
        if ((in.mod & Insn.CARRY_OUT) != 0) {
            insn(c, i);
            load(c, in.a);
            load(c, in.b);
            load(c, in.c);
            load(c, in.carry);
            c.invokestatic(CD_ALU, "carryFlag", type);
            store(c, in.carry);
        }
        c.lload(ADDRESS);
        store(c, in.d);
    }

    private void branch(CodeBuilder c, int i, Insn in) {
        if (in.target > i) {
            c.goto_(labels[in.target]);
            return;
        }
        // A backward branch: now and then, see whether the context is being destroyed.
        c.iinc(FUEL_LOCAL, -1);
        c.iload(FUEL_LOCAL);
        c.ifgt(labels[in.target]);
        c.aload(CTA);
        c.invokevirtual(CD_CTA, "poll", MethodTypeDesc.of(CD_void));
        c.loadConstant(FUEL);
        c.istore(FUEL_LOCAL);
        c.goto_(labels[in.target]);
    }

    /** Pushes (register & addressMask) + offset: an operand's address, for the instructions whose Cta method takes it as an argument. */
    private void pushAddress(CodeBuilder c, int register, long addressMask, long offset) {
        load(c, register);
        if (addressMask != -1L) {
            mask(c, addressMask);
        }
        if (offset != 0) {
            c.loadConstant(offset);
            c.ladd();
        }
    }

    /** (a & mask) + offset into ADDRESS, and the alignment check of {@code bytes}. */
    private void address(CodeBuilder c, Insn in, long bytes) {
        load(c, in.a);
        if (in.addressMask != -1L) {
            c.loadConstant(in.addressMask);
            c.land();
        }
        if (in.offset != 0) {
            c.loadConstant(in.offset);
            c.ladd();
        }
        c.lstore(ADDRESS);
        if (bytes > 1 && Long.bitCount(bytes) == 1) {
            Label ok = c.newLabel();
            c.lload(ADDRESS);
            c.loadConstant(bytes - 1);
            c.land();
            c.lconst_0();
            c.lcmp();
            c.ifeq(ok);
            c.aload(CTA);
            c.lload(ADDRESS);
            c.loadConstant(bytes);
            c.invokevirtual(CD_CTA, "misaligned", MethodTypeDesc.of(ClassDesc.of("java.lang.RuntimeException"), CD_long, CD_long));
            c.athrow();
            c.labelBinding(ok);
        }
    }

    /** Pushes the CTA, the site where the space needs one, and ADDRESS + delta. */
    private void access(CodeBuilder c, int i, Insn in, long delta) {
        c.aload(CTA);
        if (in.space == Insn.GLOBAL || in.space == Insn.GENERIC) {
            c.loadConstant(site[i]);
        }
        c.lload(ADDRESS);
        if (delta != 0) {
            c.loadConstant(delta);
            c.ladd();
        }
    }

    /** A scalar .shared access whose constant offset keeps the base's alignment: JitCta tests only the base. */
    private static boolean sharedAtBase(Insn in, int size) {
        return in.space == Insn.SHARED && in.vec.length == 1 && (in.offset & (0xFFFF_FFFF_8000_0000L | (size - 1))) == 0;
    }

    /** Pushes the CTA, (a & mask) and the constant offset. */
    private void base(CodeBuilder c, Insn in) {
        c.aload(CTA);
        load(c, in.a);
        if (in.addressMask != -1L) {
            c.loadConstant(in.addressMask);
            c.land();
        }
        c.loadConstant(in.offset);
    }

    private void ld(CodeBuilder c, int i, Insn in) {
        ldPlain(c, i, in);
        if (in.ordered) {
            c.invokestatic(ClassDesc.of("java.lang.invoke.VarHandle"), "acquireFence", MethodTypeDesc.of(CD_void));
        }
    }

    private void ldPlain(CodeBuilder c, int i, Insn in) {
        int size = Types.size(in.type);
        if (sharedAtBase(in, size)) {
            base(c, in);
            c.loadConstant(size);
            // a base an earlier unguarded access of this block tested for this alignment needs no test again
            boolean tested = testedBase.getOrDefault(in.a, 0) >= size;
            c.invokevirtual(CD_CTA, tested ? "ldSharedTested" : "ldSharedAt", MethodTypeDesc.of(CD_long, CD_long, CD_long, CD_int));
            if (in.guard < 0 && !tested) {
                testedBase.put(in.a, size);
            }
            if (in.vec[0] >= 0) {
                loaded(c, in.type);
                store(c, in.vec[0]);
            } else {
                c.pop2();
            }
            return;
        }
        address(c, in, in.vec.length > 1 ? (long) size * in.vec.length : 1);   // a scalar's alignment: JitCta checks it
        if (Cta.whole(in, size)) {
            // one access of the vector's width, split into its elements (Cta.whole says why)
            access(c, i, in, 0);
            c.loadConstant(size * in.vec.length);
            ldCall(c, in);
            for (int k = 0; k < in.vec.length; k++) {
                if (in.vec[k] < 0) {
                    continue;
                }
                c.dup2();
                if (k > 0) {
                    c.loadConstant(k * size * 8);
                    c.lushr();
                }
                mask(c, Cta.sizeMask(size));
                loaded(c, in.type);
                store(c, in.vec[k]);
            }
            c.pop2();
            return;
        }
        if (Cta.paired(in, size)) {
            pairedAccess(c, i, in);
            c.invokevirtual(CD_CTA, "ld16", MethodTypeDesc.of(CD_long, CD_int, CD_long, CD_boolean));
            split(c, in, size, 0);
            c.aload(CTA);
            c.invokevirtual(CD_CTA, "high", MethodTypeDesc.of(CD_long));
            split(c, in, size, 1);
            return;
        }
        for (int k = 0; k < in.vec.length; k++) {
            access(c, i, in, (long) k * size);
            c.loadConstant(size);
            ldCall(c, in);
            if (in.vec[k] >= 0) {
                loaded(c, in.type);
                store(c, in.vec[k]);
            } else {
                c.pop2();
            }
        }
    }

    /** The first arguments of JitCta's ld16/st16: the CTA, the site, the address, whether the space is generic. */
    private void pairedAccess(CodeBuilder c, int i, Insn in) {
        c.aload(CTA);
        c.loadConstant(site[i]);
        c.lload(ADDRESS);
        c.loadConstant(in.space == Insn.GENERIC ? 1 : 0);
    }

    /** Takes the 8-byte word {@code word} of a paired load off the stack into the elements that lie in it. */
    private void split(CodeBuilder c, Insn in, int size, int word) {
        for (int k = 0; k < in.vec.length; k++) {
            int at = k * size;
            if (at / 8 != word || in.vec[k] < 0) {
                continue;
            }
            c.dup2();
            if (at % 8 != 0) {
                c.loadConstant(at % 8 * 8);
                c.lushr();
            }
            mask(c, Cta.sizeMask(size));
            loaded(c, in.type);
            store(c, in.vec[k]);
        }
        c.pop2();
    }

    /** Pushes the 8-byte word {@code word} of a paired store, made of the elements that lie in it. */
    private void combine(CodeBuilder c, Insn in, int size, int word) {
        c.lconst_0();
        for (int k = 0; k < in.vec.length; k++) {
            int at = k * size;
            if (at / 8 != word) {
                continue;
            }
            load(c, in.vec[k]);
            mask(c, Cta.sizeMask(size));
            if (at % 8 != 0) {
                c.loadConstant(at % 8 * 8);
                c.lshl();
            }
            c.lor();
        }
    }

    /** The load of the instruction's space: the CTA, (site,) address and size on the stack, the value left. */
    private static void ldCall(CodeBuilder c, Insn in) {
        switch (in.space) {
            case Insn.GLOBAL -> c.invokevirtual(CD_CTA, "ldGlobal", MethodTypeDesc.of(CD_long, CD_int, CD_long, CD_int));
            case Insn.GENERIC -> c.invokevirtual(CD_CTA, "ldGeneric", MethodTypeDesc.of(CD_long, CD_int, CD_long, CD_int));
            case Insn.SHARED -> c.invokevirtual(CD_CTA, "ldShared", MethodTypeDesc.of(CD_long, CD_long, CD_int));
            case Insn.PARAM -> c.invokevirtual(CD_CTA, "ldParam", MethodTypeDesc.of(CD_long, CD_long, CD_int));
            case Insn.LOCAL -> c.invokevirtual(CD_CTA, "ldLocal", MethodTypeDesc.of(CD_long, CD_long, CD_int));
            default -> throw new IllegalStateException(in.toString());
        }
    }

    /** The store of the instruction's space: the CTA, (site,) address, size and value on the stack. */
    private static void stCall(CodeBuilder c, Insn in) {
        switch (in.space) {
            case Insn.GLOBAL -> c.invokevirtual(CD_CTA, "stGlobal", MethodTypeDesc.of(CD_void, CD_int, CD_long, CD_int, CD_long));
            case Insn.GENERIC -> c.invokevirtual(CD_CTA, "stGeneric", MethodTypeDesc.of(CD_void, CD_int, CD_long, CD_int, CD_long));
            case Insn.SHARED -> c.invokevirtual(CD_CTA, "stShared", MethodTypeDesc.of(CD_void, CD_long, CD_int, CD_long));
            case Insn.LOCAL -> c.invokevirtual(CD_CTA, "stLocal", MethodTypeDesc.of(CD_void, CD_long, CD_int, CD_long));
            default -> throw new IllegalStateException(in.toString());
        }
    }

    private void st(CodeBuilder c, int i, Insn in) {
        if (in.ordered) {
            c.invokestatic(ClassDesc.of("java.lang.invoke.VarHandle"), "releaseFence", MethodTypeDesc.of(CD_void));
        }
        int size = Types.size(in.type);
        if (sharedAtBase(in, size)) {
            base(c, in);
            c.loadConstant(size);
            load(c, in.vec[0]);
            c.invokevirtual(CD_CTA, "stSharedAt", MethodTypeDesc.of(CD_void, CD_long, CD_long, CD_int, CD_long));
            return;
        }
        address(c, in, in.vec.length > 1 ? (long) size * in.vec.length : 1);
        if (Cta.whole(in, size)) {
            access(c, i, in, 0);
            c.loadConstant(size * in.vec.length);
            for (int k = 0; k < in.vec.length; k++) {
                load(c, in.vec[k]);
                mask(c, Cta.sizeMask(size));
                if (k > 0) {
                    c.loadConstant(k * size * 8);
                    c.lshl();
                    c.lor();
                }
            }
            stCall(c, in);
            return;
        }
        if (Cta.paired(in, size)) {
            pairedAccess(c, i, in);
            combine(c, in, size, 0);
            combine(c, in, size, 1);
            c.invokevirtual(CD_CTA, "st16", MethodTypeDesc.of(CD_void, CD_int, CD_long, CD_boolean, CD_long, CD_long));
            return;
        }
        for (int k = 0; k < in.vec.length; k++) {
            access(c, i, in, (long) k * size);
            c.loadConstant(size);
            load(c, in.vec[k]);
            stCall(c, in);
        }
    }

    private void atom(CodeBuilder c, int i, Insn in) {
        address(c, in, 1);
        c.aload(CTA);
        c.loadConstant(i);
        c.loadConstant(Math.max(site[i], 0));
        c.lload(ADDRESS);
        load(c, in.b);
        load(c, in.c);
        c.invokevirtual(CD_CTA, "atom", MethodTypeDesc.of(CD_long, CD_int, CD_int, CD_long, CD_long, CD_long));
        if (in.vec[0] >= 0) {
            norm(c, in.type);
            store(c, in.vec[0]);
        } else {
            c.pop2();
        }
    }

    /** .u/.s/.b types (and .pred): what the integer forms here cover; halves and floats go elsewhere. */
    private static boolean integer(int t) {
        int k = Types.kind(t);
        return k == Types.U || k == Types.S || k == Types.B || t == Types.PRED;
    }

    private static boolean plainFloat(Insn in) {
        return !in.ftz && !in.sat && (in.mod == 0 || in.mod == Insn.RN);
    }

    private void setp(CodeBuilder c, int i, Insn in) {
        int t = in.type;
        if (t == (Types.F << 4 | 4) && !in.ftz) {
            load(c, in.a);
            load(c, in.b);
            c.loadConstant(in.mod);
            ops(c, "compareF32", MethodTypeDesc.of(CD_boolean, CD_long, CD_long, CD_int));
        } else if (t == (Types.F << 4 | 8)) {
            load(c, in.a);
            load(c, in.b);
            c.loadConstant(in.mod);
            ops(c, "compareF64", MethodTypeDesc.of(CD_boolean, CD_long, CD_long, CD_int));
        } else if (integer(t)) {
            load(c, in.a);
            load(c, in.b);
            c.loadConstant(t);
            c.loadConstant(in.mod);
            ops(c, "compareInt", MethodTypeDesc.of(CD_boolean, CD_long, CD_long, CD_int, CD_int));
        } else {
            insn(c, i);
            load(c, in.a);
            load(c, in.b);
            c.invokestatic(CD_ALU, "compare", MethodTypeDesc.of(CD_boolean, CD_INSN, CD_long, CD_long));
        }
        c.istore(FLAG);
        if (in.type2 > 0) {
            c.loadConstant(in.type2);
            c.iload(FLAG);
            load(c, in.c);
            c.loadConstant(in.negC ? 1 : 0);
            ops(c, "combine", MethodTypeDesc.of(CD_long, CD_int, CD_boolean, CD_long, CD_boolean));
            // both are computed before either is written (c may be d or d2), and d is written first (d may be d2)
            c.lstore(ADDRESS);
            if (in.d2 >= 0) {
                c.loadConstant(in.type2);
                c.iload(FLAG);
                c.iconst_1();
                c.ixor();
                load(c, in.c);
                c.loadConstant(in.negC ? 1 : 0);
                ops(c, "combine", MethodTypeDesc.of(CD_long, CD_int, CD_boolean, CD_long, CD_boolean));
            }
            c.lload(ADDRESS);
            store(c, in.d);
            if (in.d2 >= 0) {
                store(c, in.d2);
            }
            return;
        }
        c.iload(FLAG);
        c.i2l();
        store(c, in.d);
        if (in.d2 >= 0) {
            c.iload(FLAG);
            c.iconst_1();
            c.ixor();
            c.i2l();
            store(c, in.d2);
        }
    }

    /** Pushes code[i], the instruction itself, for the helpers that read it. */
    private static void insn(CodeBuilder c, int i) {
        c.aload(THIS);
        c.getfield(CD_CODE, "code", CD_INSNS);
        c.loadConstant(i);
        c.aaload();
    }

    private void generic(CodeBuilder c, int i, Insn in) {
        insn(c, i);
        load(c, in.a);
        load(c, in.b);
        load(c, in.c);
        load(c, in.e);
        c.invokestatic(CD_ALU, "eval", MethodTypeDesc.of(CD_long, CD_INSN, CD_long, CD_long, CD_long, CD_long));
        store(c, in.d);
    }

    private void alu(CodeBuilder c, int i, Insn in) {
        int t = in.type;
        String f = null;
        int arity = 2;
        if (in.op == Insn.MOV) {
            load(c, in.a);
            store(c, in.d);
            return;
        }
        if (in.op == Insn.SELP) {
            load(c, in.a);
            load(c, in.b);
            load(c, in.c);
            ops(c, "selp", JJJ_J);
            store(c, in.d);
            return;
        }
        if (in.op == Insn.CVTA) {
            load(c, in.a);
            c.loadConstant(in.offset);
            c.ladd();
            store(c, in.d);
            return;
        }
        boolean f32 = t == (Types.F << 4 | 4);
        boolean f64 = t == (Types.F << 4 | 8);
        if ((f32 || f64) && plainFloat(in)) {
            String w = f32 ? "F32" : "F64";
            switch (in.op) {
                case Insn.ADD -> f = "add" + w;
                case Insn.SUB -> f = "sub" + w;
                case Insn.MUL -> f = "mul" + w;
                case Insn.DIV -> f = "div" + w;
                case Insn.MIN -> f = "min" + w;
                case Insn.MAX -> f = "max" + w;
                case Insn.FMA, Insn.MAD -> {
                    f = "fma" + w;
                    arity = 3;
                }
                case Insn.NEG, Insn.ABS -> {
                    load(c, in.a);
                    if (f32) {
                        ops(c, in.op == Insn.NEG ? "negF32" : "absF32", J_J);
                    } else {
                        c.loadConstant(in.op == Insn.NEG ? Long.MIN_VALUE : Long.MAX_VALUE);
                        if (in.op == Insn.NEG) {
                            c.lxor();
                        } else {
                            c.land();
                        }
                    }
                    store(c, in.d);
                    return;
                }
                default -> {
                }
            }
            if (f != null) {
                load(c, in.a);
                load(c, in.b);
                if (arity == 3) {
                    load(c, in.c);
                }
                boolean raw = nanBlind[in.d] && (in.op == Insn.ADD || in.op == Insn.SUB || in.op == Insn.MUL || in.op == Insn.FMA
                        || in.op == Insn.MAD);
                ops(c, raw ? f + "Raw" : f, arity == 3 ? JJJ_J : JJ_J);
                store(c, in.d);
                return;
            }
        } else if (integer(t) && !in.sat) {
            int bits = Types.bits(t);
            switch (in.op) {
                case Insn.ADD, Insn.SUB, Insn.MUL, Insn.AND, Insn.OR, Insn.XOR -> {
                    load(c, in.a);
                    load(c, in.b);
                    switch (in.op) {
                        case Insn.ADD -> c.ladd();
                        case Insn.SUB -> c.lsub();
                        case Insn.MUL -> c.lmul();
                        case Insn.AND -> c.land();
                        case Insn.OR -> c.lor();
                        default -> c.lxor();
                    }
                    store(c, in.d);
                    return;
                }
                case Insn.MAD -> {
                    load(c, in.a);
                    load(c, in.b);
                    c.lmul();
                    load(c, in.c);
                    c.ladd();
                    store(c, in.d);
                    return;
                }
                case Insn.MUL_WIDE, Insn.MAD_WIDE -> {
                    load(c, in.a);
                    norm(c, t);
                    load(c, in.b);
                    norm(c, t);
                    c.lmul();
                    if (in.op == Insn.MAD_WIDE) {
                        load(c, in.c);
                        c.ladd();
                    }
                    store(c, in.d);
                    return;
                }
                case Insn.NOT -> {
                    load(c, in.a);
                    c.loadConstant(t == Types.PRED ? 1L : -1L);
                    c.lxor();
                    store(c, in.d);
                    return;
                }
                case Insn.SHL -> {
                    load(c, in.a);
                    load(c, in.b);
                    c.loadConstant(bits);
                    ops(c, "shl", MethodTypeDesc.of(CD_long, CD_long, CD_long, CD_int));
                    store(c, in.d);
                    return;
                }
                case Insn.SHR -> {
                    load(c, in.a);
                    norm(c, t);
                    load(c, in.b);
                    c.loadConstant(bits);
                    c.loadConstant(Types.signed(t) ? 1 : 0);
                    ops(c, "shr", MethodTypeDesc.of(CD_long, CD_long, CD_long, CD_int, CD_boolean));
                    store(c, in.d);
                    return;
                }
                case Insn.MIN, Insn.MAX -> {
                    load(c, in.a);
                    load(c, in.b);
                    c.loadConstant(t);
                    ops(c, in.op == Insn.MIN ? "min" : "max", MethodTypeDesc.of(CD_long, CD_long, CD_long, CD_int));
                    store(c, in.d);
                    return;
                }
                default -> {
                }
            }
        }
        generic(c, i, in);
    }
}
