package io.gpusockets.emulated.ptx;

import java.util.List;

/**
 * The texture and surface instructions, as nvcc 13 emits them for texture and surface objects
 * ({@code tex1D/2D/3D}, {@code tex1DLayered/2DLayered}, {@code texCubemap(Layered)}, {@code tex1Dfetch},
 * {@code tex2DLod/Grad}, {@code surf1D/2D/3D(Layered)read/write}): built once, executed by both engines
 * through {@link #execute}, with the arithmetic in the device's {@link TextureUnit}.
 *
 * <pre>
 * tex{.level|.grad|.base}.geom.v4.dtype.ctype  d, [tex, {c}] {, lod | , {dPdx}, {dPdy}}
 * suld.b.geom{.cop}{.v2|.v4}.btype{.trap|.clamp|.zero}  d, [surf, {c}]
 * sust.b.geom{.cop}{.v2|.v4}.btype{.trap|.clamp|.zero}  [surf, {c}], a
 *   geom: 1d {x}, 2d {x, y}, 3d {x, y, z, _}, a1d {layer, x}, a2d {layer, x, y, _}, cube {x, y, z, _},
 *         acube {layer, x, y, z}; dtype .f32 .s32 .u32, ctype .f32 (or .s32: texel indices); suld/sust x in bytes
 * </pre>
 *
 * <p>Not taken (the load fails naming them): texture and sampler references (the unified mode's
 * {@code [tex, sampler, c]}), the sparse-residency predicate ({@code d|p}), {@code tld4} (gather),
 * multisample geometries, formatted surface stores ({@code sust.p}), results other than .v4 of 32 bits.
 */
final class TextureOps {
    private static final String[] GEOMETRIES = {"1d", "2d", "3d", "a1d", "a2d", "cube", "acube"};
    /** Coordinates each geometry's vector holds (the layer included, a padding element of 3d/a2d/cube too). */
    private static final int[] COORDS = {1, 2, 4, 2, 4, 4, 4};
    /** mod bits of TEX. */
    static final int INTEGER_COORDS = 0x10;
    static final int LEVEL = 1;
    static final int GRAD = 2;

    private TextureOps() {
    }

    static boolean layered(int geometry) {
        return geometry == TextureUnit.A1D || geometry == TextureUnit.A2D || geometry == TextureUnit.ACUBE;
    }

    private static int geometry(Mods m, String name) throws PtxUnsupported {
        int g = m.takeOne(GEOMETRIES);
        if (g < 0) {
            throw new PtxUnsupported(name + " without a geometry it covers (.1d .2d .3d .a1d .a2d .cube .acube)");
        }
        return g;
    }

    /** [object, {coordinates}]: the object's slot and the coordinates' operand texts. */
    private static List<String> address(String op, String name) throws PtxUnsupported {
        if (!op.startsWith("[") || !op.endsWith("]")) {
            throw new PtxUnsupported(name + ": operand " + op + " is not [object, {coordinates}]");
        }
        List<String> parts = Operands.split(op.substring(1, op.length() - 1));
        if (parts.size() != 2) {
            throw new PtxUnsupported(name + ": " + op + " (texture or sampler references, or a missing coordinate vector)");
        }
        return parts;
    }

    private static List<String> coordinates(Operands ops, String op, int geometry, String name) throws PtxUnsupported {
        List<String> c = op.startsWith("{") ? ops.vector(op) : List.of(op);
        if (c.size() != COORDS[geometry] && !(COORDS[geometry] == 4 && c.size() == 3)) {
            throw new PtxUnsupported(name + ": " + c.size() + " coordinates for ." + GEOMETRIES[geometry]);
        }
        return c;
    }

    /** Builds tex, suld or sust; {@code name} the opcode without its modifiers. */
    static void build(Insn in, String name, Mods m, List<String> o, Operands ops) throws PtxUnsupported {
        switch (name) {
            case "tex" -> tex(in, m, o, ops);
            case "suld", "sust" -> surface(in, name.equals("suld"), m, o, ops);
            default -> throw new PtxUnsupported(name);
        }
    }

    private static void tex(Insn in, Mods m, List<String> o, Operands ops) throws PtxUnsupported {
        int variant = m.takeOne("level", "grad", "base") + 1;   // base: level 0, as without a variant
        if (variant == 3) {
            variant = 0;
        }
        int geometry = geometry(m, "tex");
        if (m.vector() != 4) {
            throw new PtxUnsupported("tex with results other than .v4");
        }
        List<Integer> t = m.types();
        m.done();
        int f32 = Types.F << 4 | 4, s32 = Types.S << 4 | 4, u32 = Types.U << 4 | 4;
        if (t.size() != 2 || (t.get(0) != f32 && t.get(0) != s32 && t.get(0) != u32) || (t.get(1) != f32 && t.get(1) != s32)) {
            throw new PtxUnsupported("tex types other than .v4.{f32,s32,u32}.{f32,s32}");
        }
        int result = t.get(0) == f32 ? TextureUnit.F32 : t.get(0) == s32 ? TextureUnit.S32 : TextureUnit.U32;
        boolean integer = t.get(1) == s32;
        int extra = variant == LEVEL ? 1 : variant == GRAD ? 2 : 0;
        if (o.size() != 2 + extra) {
            throw new PtxUnsupported("tex with " + o.size() + " operands");
        }
        if (o.get(0).contains("|")) {
            throw new PtxUnsupported("tex with a sparse-residency predicate");
        }
        List<String> d = ops.vector(o.get(0));
        if (d.size() != 4) {
            throw new PtxUnsupported("tex with " + d.size() + " destinations");
        }
        in.vec = new int[4];
        for (int k = 0; k < 4; k++) {
            in.vec[k] = d.get(k).equals("_") ? -1 : ops.destination(d.get(k));
        }
        List<String> a = address(o.get(1), "tex");
        List<String> c = coordinates(ops, a.get(1), geometry, "tex");
        List<Integer> srcs = new java.util.ArrayList<>();
        srcs.add(ops.source(a.get(0), Types.U << 4 | 8));
        for (int k = 0; k < c.size(); k++) {
            boolean layer = k == 0 && layered(geometry);
            srcs.add(ops.source(c.get(k), layer ? u32 : t.get(1)));
        }
        if (c.size() == 3) {
            srcs.add(srcs.getLast());   // the padding element some writers leave out
        }
        if (variant == LEVEL) {
            srcs.add(ops.source(o.get(2), f32));
        } else if (variant == GRAD) {
            for (int g = 2; g < 4; g++) {
                List<String> v = ops.vector(o.get(g));
                for (int k = 0; k < 4; k++) {
                    srcs.add(k < v.size() ? ops.source(v.get(k), f32) : srcs.getLast());
                }
            }
        }
        in.op = Insn.TEX;
        in.type = t.get(0);
        in.mod = geometry | (integer ? INTEGER_COORDS : 0) | result << 8 | variant << 12;
        in.srcs = srcs.stream().mapToInt(Integer::intValue).toArray();
    }

    private static void surface(Insn in, boolean load, Mods m, List<String> o, Operands ops) throws PtxUnsupported {
        String name = load ? "suld" : "sust";
        if (!m.take("b")) {
            throw new PtxUnsupported(name + " other than ." + "b (formatted surface access)");
        }
        int geometry = geometry(m, name);
        if (geometry == TextureUnit.CUBE || geometry == TextureUnit.ACUBE) {
            throw new PtxUnsupported(name + " of a cubemap geometry");
        }
        m.dropNoEffect();
        int vec = m.vector();
        int boundary = Math.max(m.takeOne("trap", "clamp", "zero"), 0);   // .trap is the default
        int type = m.type();
        m.done();
        int size = Types.size(type);
        if (type == Types.PRED || Types.isHalf(type) || size > 8) {
            throw new PtxUnsupported(name + " of type " + type);
        }
        if (o.size() != 2) {
            throw new PtxUnsupported(name + " with " + o.size() + " operands");
        }
        String values = load ? o.get(0) : o.get(1);
        List<String> v = vec == 1 && !values.startsWith("{") ? List.of(values) : ops.vector(values);
        if (v.size() != vec) {
            throw new PtxUnsupported(name + ": " + v.size() + " values for .v" + vec);
        }
        in.vec = new int[vec];
        for (int k = 0; k < vec; k++) {
            in.vec[k] = load ? (v.get(k).equals("_") ? -1 : ops.destination(v.get(k))) : ops.source(v.get(k), type);
        }
        List<String> a = address(load ? o.get(1) : o.get(0), name);
        List<String> c = coordinates(ops, a.get(1), geometry, name);
        int s32 = Types.S << 4 | 4;
        int[] srcs = new int[1 + COORDS[geometry]];
        srcs[0] = ops.source(a.get(0), Types.U << 4 | 8);
        for (int k = 0; k < COORDS[geometry]; k++) {
            srcs[1 + k] = ops.source(c.get(Math.min(k, c.size() - 1)), s32);
        }
        in.op = load ? Insn.SULD : Insn.SUST;
        in.type = type;
        in.mod = geometry | boundary << 4;
        in.srcs = srcs;
    }

    /**
     * Runs one thread's instruction: {@code src} holds the values of {@code in.srcs} (for sust the values to
     * store follow them), {@code out} receives the results of tex and suld in the order of {@code in.vec}.
     */
    static void execute(Insn in, long[] src, long[] out, GlobalMemory memory) {
        TextureUnit unit = memory.textures();
        int geometry = in.mod & 0xF;
        boolean layered = layered(geometry);
        int first = layered ? 2 : 1;
        int layer = layered ? (int) src[1] : 0;
        if (in.op == Insn.TEX) {
            boolean integer = (in.mod & INTEGER_COORDS) != 0;
            int variant = in.mod >> 12 & 0xF;
            int dims = geometry == TextureUnit.G1D || geometry == TextureUnit.A1D ? 1
                    : geometry == TextureUnit.G2D || geometry == TextureUnit.A2D ? 2 : 3;
            float[] f = new float[3];
            int[] i = new int[3];
            for (int k = 0; k < dims; k++) {
                i[k] = (int) src[first + k];
                f[k] = Float.intBitsToFloat(i[k]);
            }
            int coordsEnd = 1 + COORDS[geometry];
            float level = 0;
            float[] gradients = null;
            if (variant == LEVEL) {
                level = Float.intBitsToFloat((int) src[coordsEnd]);
            } else if (variant == GRAD) {
                level = Float.NaN;   // the unit derives it from the gradients
                gradients = new float[8];
                for (int k = 0; k < 8; k++) {
                    gradients[k] = Float.intBitsToFloat((int) src[coordsEnd + k]);
                }
            }
            unit.sample(src[0], geometry, integer, f[0], f[1], f[2], i[0], i[1], i[2], layer, level, gradients,
                    in.mod >> 8 & 0xF, out);
            return;
        }
        int x = (int) src[first];
        int y = geometry == TextureUnit.G1D || geometry == TextureUnit.A1D ? 0 : (int) src[first + 1];
        int z = geometry == TextureUnit.G3D ? (int) src[3] : layer;
        int bytes = Types.size(in.type);
        int boundary = in.mod >> 4 & 0xF;
        if (in.op == Insn.SULD) {
            unit.load(src[0], geometry, x, y, z, bytes, in.vec.length, boundary, out);
        } else {
            long[] values = new long[in.vec.length];
            System.arraycopy(src, in.srcs.length, values, 0, values.length);
            unit.store(src[0], geometry, x, y, z, bytes, in.vec.length, boundary, values);
        }
    }
}
