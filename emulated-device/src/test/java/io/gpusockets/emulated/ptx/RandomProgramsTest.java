package io.gpusockets.emulated.ptx;

import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Random straight-line and guarded programs over every register class, on inputs full of edge
 * cases (NaN, infinities, signed zeros, denormals, INT_MIN, shift counts at and past the width),
 * run by both engines: the compiled engine must give the interpreter's bits in every register and
 * the same thread-instruction count ({@link EnginesTest#same}).
 *
 * <p>Registers: %r1..%r8 (.b32), %l1..%l5 (.b64), %f1..%f6 (.f32), %d1..%d4 (.f64), %p1..%p4, %h1..%h4
 * (.b16, for halves). A template's R, L, F, D, P, H stand for a random register of that class; I5
 * for a shift-sized immediate, X for an 8-bit one.
 */
class RandomProgramsTest {
    private static final List<String> TEMPLATES = List.of(
            "add.s32 R, R, R", "sub.s32 R, R, R", "mul.lo.s32 R, R, R", "mul.hi.s32 R, R, R", "mul.hi.u32 R, R, R",
            "mad.lo.s32 R, R, R, R", "mad.hi.u32 R, R, R, R", "div.s32 R, R, R", "div.u32 R, R, R", "rem.s32 R, R, R",
            "rem.u32 R, R, R", "min.s32 R, R, R", "max.u32 R, R, R", "min.u32 R, R, R", "abs.s32 R, R", "neg.s32 R, R",
            "and.b32 R, R, R", "or.b32 R, R, R", "xor.b32 R, R, R", "not.b32 R, R", "cnot.b32 R, R", "shl.b32 R, R, R",
            "shr.u32 R, R, R", "shr.s32 R, R, R", "shl.b32 R, R, I5", "shr.s32 R, R, I5", "popc.b32 R, R", "clz.b32 R, R",
            "brev.b32 R, R", "bfe.u32 R, R, R, R", "bfe.s32 R, R, R, R", "bfi.b32 R, R, R, R, R", "prmt.b32 R, R, R, R",
            "selp.b32 R, R, R, P", "add.sat.s32 R, R, R", "sub.sat.s32 R, R, R", "mov.b32 R, R", "mov.u32 R, 1000",
            "add.s64 L, L, L", "sub.s64 L, L, L", "mul.lo.s64 L, L, L", "mul.hi.u64 L, L, L", "mul.hi.s64 L, L, L",
            "mul.wide.s32 L, R, R", "mul.wide.u32 L, R, R", "mad.wide.s32 L, R, R, L", "mad.lo.s64 L, L, L, L",
            "shr.s64 L, L, R", "shr.u64 L, L, R", "shl.b64 L, L, R", "min.u64 L, L, L", "max.s64 L, L, L",
            "xor.b64 L, L, L", "and.b64 L, L, L", "popc.b64 R, L", "clz.b64 R, L", "brev.b64 L, L", "div.u64 L, L, L",
            "rem.s64 L, L, L", "cvt.u64.u32 L, R", "cvt.s64.s32 L, R", "cvt.u32.u64 R, L", "selp.b64 L, L, L, P",
            "add.f32 F, F, F", "add.rn.f32 F, F, F", "sub.f32 F, F, F", "mul.f32 F, F, F", "mul.rn.f32 F, F, F",
            "fma.rn.f32 F, F, F, F", "div.rn.f32 F, F, F", "div.approx.f32 F, F, F", "div.full.f32 F, F, F",
            "min.f32 F, F, F", "max.f32 F, F, F", "neg.f32 F, F", "abs.f32 F, F", "add.ftz.f32 F, F, F",
            "mul.ftz.f32 F, F, F", "fma.rn.ftz.f32 F, F, F, F", "add.sat.f32 F, F, F", "min.ftz.f32 F, F, F",
            "neg.ftz.f32 F, F", "abs.ftz.f32 F, F", "sqrt.rn.f32 F, F", "rcp.rn.f32 F, F", "sqrt.approx.f32 F, F",
            "rsqrt.approx.f32 F, F", "ex2.approx.f32 F, F", "lg2.approx.f32 F, F", "sin.approx.f32 F, F",
            "cos.approx.f32 F, F", "copysign.f32 F, F, F", "selp.f32 F, F, F, P", "mov.f32 F, F", "mov.b32 F, R",
            "mov.b32 R, F", "cvt.rn.f32.s32 F, R", "cvt.rn.f32.u32 F, R", "cvt.rzi.s32.f32 R, F",
            "cvt.rni.s32.f32 R, F", "cvt.rmi.u32.f32 R, F", "cvt.rn.f32.u64 F, L", "cvt.f64.f32 D, F",
            "cvt.rn.f32.f64 F, D", "cvt.rzi.f32.f32 F, F", "cvt.rpi.f32.f32 F, F", "cvt.sat.f32.f32 F, F",
            "cvt.rzi.s64.f64 L, D", "cvt.rn.f64.s64 D, L", "cvt.rn.f64.u32 D, R",
            "add.f64 D, D, D", "sub.f64 D, D, D", "mul.f64 D, D, D", "fma.rn.f64 D, D, D, D", "div.rn.f64 D, D, D",
            "min.f64 D, D, D", "max.f64 D, D, D", "neg.f64 D, D", "abs.f64 D, D", "sqrt.rn.f64 D, D",
            "rcp.rn.f64 D, D", "selp.f64 D, D, D, P", "mov.b64 D, L", "mov.b64 L, D",
            "setp.lt.s32 P, R, R", "setp.lo.u32 P, R, R", "setp.ge.u32 P, R, R", "setp.ne.s32 P, R, R",
            "setp.eq.s64 P, L, L", "setp.hi.u64 P, L, L", "setp.gt.s64 P, L, L", "setp.lt.f32 P, F, F",
            "setp.gtu.f32 P, F, F", "setp.nan.f32 P, F, F", "setp.num.f64 P, D, D", "setp.neu.f64 P, D, D",
            "setp.le.ftz.f32 P, F, F", "setp.ge.f64 P, D, D", "setp.lt.and.s32 P, R, R, P", "setp.ne.or.f32 P, F, F, !P",
            "setp.eq.xor.s32 P|P, R, R, P", "setp.gt.s32 P|P, R, R", "and.pred P, P, P", "or.pred P, P, P",
            "xor.pred P, P, P", "not.pred P, P", "mov.pred P, P",
            "mul24.lo.s32 R, R, R", "mul24.hi.u32 R, R, R", "mad24.lo.u32 R, R, R, R", "sad.u32 R, R, R, R", "sad.s32 R, R, R, R",
            "add.rz.f32 F, F, F", "sub.rm.f32 F, F, F", "mul.rp.f32 F, F, F", "fma.rz.f32 F, F, F, F", "div.rm.f32 F, F, F",
            "sqrt.rp.f32 F, F", "rcp.rz.f32 F, F", "add.rm.f64 D, D, D", "fma.rp.f64 D, D, D, D", "div.rz.f64 D, D, D",
            "sqrt.rm.f64 D, D", "add.cc.u32 R, R, R", "addc.cc.u32 R, R, R", "addc.u32 R, R, R", "sub.cc.u32 R, R, R",
            "subc.u32 R, R, R", "mad.lo.cc.u32 R, R, R, R", "madc.hi.u32 R, R, R, R", "add.cc.u64 L, L, L", "addc.u64 L, L, L",
            "cvt.rn.f16.f32 H, F", "cvt.f32.f16 F, H", "add.f16 H, H, H", "mul.rn.f16 H, H, H", "fma.rn.f16 H, H, H, H",
            "neg.f16 H, H", "min.f16 H, H, H", "cvt.rn.bf16.f32 H, F", "cvt.f32.bf16 F, H", "fma.rn.bf16 H, H, H, H",
            "setp.lt.f16 P, H, H", "cvt.rzi.s32.f16 R, H", "cvt.rz.f16.f64 H, D",
            "lop3.b32 R, R, R, R, X", "lop3.b32 R, R, 0x0ff0, R, X", "dp4a.u32.u32 R, R, R, R", "dp4a.u32.s32 R, R, R, R",
            "dp4a.s32.u32 R, R, R, R", "dp4a.s32.s32 R, R, R, R", "dp2a.lo.u32.u32 R, R, R, R", "dp2a.hi.u32.s32 R, R, R, R",
            "dp2a.lo.s32.u32 R, R, R, R", "dp2a.hi.s32.s32 R, R, R, R", "bfind.u32 R, R", "bfind.s32 R, R",
            "bfind.shiftamt.u32 R, R", "bfind.u64 R, L", "bfind.s64 R, L", "bfind.shiftamt.s64 R, L", "bmsk.clamp.b32 R, R, R",
            "bmsk.wrap.b32 R, R, R", "bmsk.clamp.b32 R, R, I5", "szext.clamp.s32 R, R, R", "szext.wrap.u32 R, R, R",
            "szext.wrap.s32 R, R, I5", "szext.clamp.u32 R, R, R", "fns.b32 R, R, R, R", "fns.b32 R, R, I5, R",
            "testp.finite.f32 P, F", "testp.infinite.f32 P, F", "testp.number.f64 P, D", "testp.notanumber.f32 P, F",
            "testp.normal.f64 P, D", "testp.subnormal.f32 P, F", "testp.subnormal.f64 P, D", "isspacep.global P, L",
            "isspacep.shared P, L", "isspacep.local P, L", "isspacep.const P, R");

    private static final int[] INTS = {0, 1, -1, 2, 31, 32, 33, 63, 64, 0x80, 0xFF, 0x7FFF_FFFF, 0x8000_0000, 0x1234_5678,
        0xFFFF_0000, 7, -7, 100, 65535, 65536};
    private static final float[] FLOATS = {0f, -0f, 1f, -1f, 0.5f, 1.5f, -2.5f, Float.NaN, Float.POSITIVE_INFINITY,
        Float.NEGATIVE_INFINITY, Float.MIN_VALUE, 1e-40f, -1e-39f, Float.MIN_NORMAL, Float.MAX_VALUE, 3.14159f, 1e10f,
        -1e-10f, 2.5e9f, 4.2949673e9f};
    private static final double[] DOUBLES = {0.0, -0.0, 1.0, -1.0, 0.1, Double.NaN, Double.POSITIVE_INFINITY,
        Double.NEGATIVE_INFINITY, Double.MIN_VALUE, 1e-310, Double.MAX_VALUE, 9.2e18, -9.3e18, 3.5, 1e300};

    private static final int THREADS = 64;
    /** Input bytes per thread: 8 b32, 6 f32, 5 b64, 4 f64. */
    private static final int IN = 8 * 4 + 6 * 4 + 5 * 8 + 4 * 8;
    /** Output bytes per thread: the same plus 4 predicates as u32. */
    private static final int OUT = IN + 4 * 4;

    private static String program(Random r, int length) {
        StringBuilder b = new StringBuilder(Rig.HEADER).append("""
                .visible .entry k(.param .u64 in, .param .u64 out)
                {
                    .reg .pred %p<5>;
                    .reg .b32 %r<9>;
                    .reg .b32 %t<4>;
                    .reg .b64 %l<6>;
                    .reg .b64 %a<4>;
                    .reg .f32 %f<7>;
                    .reg .f64 %d<5>;
                    .reg .b16 %h<5>;
                    mov.u32 %t1, %tid.x;
                    ld.param.u64 %a1, [in];
                    mul.wide.u32 %a2, %t1, %IN;
                    add.s64 %a1, %a1, %a2;
                    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%a1];
                    ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%a1+16];
                    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%a1+32];
                    ld.global.v2.f32 {%f5, %f6}, [%a1+48];
                    ld.global.u64 %l1, [%a1+56];
                    ld.global.v2.u64 {%l2, %l3}, [%a1+64];
                    ld.global.v2.u64 {%l4, %l5}, [%a1+80];
                    ld.global.v2.f64 {%d1, %d2}, [%a1+96];
                    ld.global.v2.f64 {%d3, %d4}, [%a1+112];
                    setp.ne.s32 %p1, %r1, 0;
                    setp.lt.s32 %p2, %r2, %r3;
                    setp.gt.f32 %p3, %f1, %f2;
                    setp.eq.s64 %p4, %l1, 0;
                    cvt.u16.u32 %h1, %r5;
                    cvt.u16.u32 %h2, %r6;
                    cvt.rn.f16.f32 %h3, %f3;
                    cvt.rn.bf16.f32 %h4, %f4;
                """.replace("%IN", String.valueOf(IN)));
        for (int i = 0; i < length; i++) {
            String t = TEMPLATES.get(r.nextInt(TEMPLATES.size()));
            StringBuilder line = new StringBuilder();
            if (r.nextInt(4) == 0) {
                line.append(r.nextBoolean() ? "@%p" : "@!%p").append(1 + r.nextInt(4)).append(' ');
            }
            for (int k = 0; k < t.length(); k++) {
                char c = t.charAt(k);
                switch (c) {
                    case 'R' -> line.append("%r").append(1 + r.nextInt(8));
                    case 'L' -> line.append("%l").append(1 + r.nextInt(5));
                    case 'F' -> line.append("%f").append(1 + r.nextInt(6));
                    case 'D' -> line.append("%d").append(1 + r.nextInt(4));
                    case 'P' -> line.append("%p").append(1 + r.nextInt(4));
                    case 'H' -> line.append("%h").append(1 + r.nextInt(4));
                    case 'X' -> line.append(r.nextInt(256));
                    case 'I' -> {
                        line.append(new int[] {0, 1, 5, 31, 32, 40}[r.nextInt(6)]);
                        k++;   // the 5 of I5
                    }
                    default -> line.append(c);
                }
            }
            b.append("    ").append(line).append(";\n");
        }
        b.append("""
                    ld.param.u64 %a1, [out];
                    mul.wide.u32 %a2, %t1, %OUT;
                    add.s64 %a1, %a1, %a2;
                    st.global.v4.u32 [%a1], {%r1, %r2, %r3, %r4};
                    st.global.v4.u32 [%a1+16], {%r5, %r6, %r7, %r8};
                    st.global.v4.f32 [%a1+32], {%f1, %f2, %f3, %f4};
                    st.global.v2.f32 [%a1+48], {%f5, %f6};
                    st.global.u64 [%a1+56], %l1;
                    st.global.v2.u64 [%a1+64], {%l2, %l3};
                    st.global.v2.u64 [%a1+80], {%l4, %l5};
                    st.global.v2.f64 [%a1+96], {%d1, %d2};
                    st.global.v2.f64 [%a1+112], {%d3, %d4};
                    cvt.u32.u16 %t2, %h1;
                    cvt.u32.u16 %t3, %h2;
                    xor.b32 %r1, %r1, %t2;
                    xor.b32 %r2, %r2, %t3;
                    cvt.u32.u16 %t2, %h3;
                    cvt.u32.u16 %t3, %h4;
                    xor.b32 %r3, %r3, %t2;
                    xor.b32 %r4, %r4, %t3;
                    st.global.v4.u32 [%a1], {%r1, %r2, %r3, %r4};
                    selp.u32 %t2, 1, 0, %p1;
                    st.global.u32 [%a1+128], %t2;
                    selp.u32 %t2, 1, 0, %p2;
                    st.global.u32 [%a1+132], %t2;
                    selp.u32 %t2, 1, 0, %p3;
                    st.global.u32 [%a1+136], %t2;
                    selp.u32 %t2, 1, 0, %p4;
                    st.global.u32 [%a1+140], %t2;
                    ret;
                }
                """.replace("%OUT", String.valueOf(OUT)));
        return b.toString();
    }

    private static byte[] inputs(Random r) {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(THREADS * IN).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (int t = 0; t < THREADS; t++) {
            for (int i = 0; i < 8; i++) {
                b.putInt(r.nextInt(3) == 0 ? r.nextInt() : INTS[r.nextInt(INTS.length)]);
            }
            for (int i = 0; i < 6; i++) {
                b.putFloat(r.nextInt(3) == 0 ? (float) (r.nextGaussian() * 1e3) : FLOATS[r.nextInt(FLOATS.length)]);
            }
            for (int i = 0; i < 5; i++) {
                b.putLong(r.nextInt(3) == 0 ? r.nextLong() : INTS[r.nextInt(INTS.length)] * (r.nextBoolean() ? 1L : 0x1_0000_0001L));
            }
            for (int i = 0; i < 4; i++) {
                b.putDouble(r.nextInt(3) == 0 ? r.nextGaussian() * 1e6 : DOUBLES[r.nextInt(DOUBLES.length)]);
            }
        }
        return b.array();
    }

    @Test
    void everyTemplateIsOneTheEmulatedDeviceRuns() {
        for (String t : TEMPLATES) {
            String ptx = program(new Random(t.hashCode()), 0).replace("    ld.param.u64 %a1, [out];",
                    "    " + t.replace("R", "%r1").replace("L", "%l1").replace("F", "%f1").replace("D", "%d1")
                            .replace("P", "%p1").replace("H", "%h1").replace("I5", "3").replace("X", "0x96") + ";\n    ld.param.u64 %a1, [out];");
            try (Rig rig = new Rig()) {
                long f = rig.function(rig.module(ptx), "k");
                rig.run(f, 1, THREADS, rig.upload(rig.arena.allocateFrom(ValueLayout.JAVA_BYTE, inputs(new Random(1)))),
                        rig.upload(new int[THREADS * OUT / 4]));
            } catch (AssertionError e) {
                throw new AssertionError(t + ": " + e.getMessage(), e);
            }
        }
    }

    @Test
    void randomProgramsGiveTheInterpretersBitsCompiled() {
        Random r = new Random(20261201);
        for (int p = 0; p < 120; p++) {
            String ptx = program(r, 30 + r.nextInt(30));
            byte[] in = inputs(r);
            String what = "random program " + p + ":\n" + ptx;
            EnginesTest.same(what, rig -> {
                long f = rig.function(rig.module(ptx), "k");
                long din = rig.upload(rig.arena.allocateFrom(ValueLayout.JAVA_BYTE, in));
                long dout = rig.upload(new int[THREADS * OUT / 4]);
                rig.run(f, 1, THREADS, din, dout);
                return dout;
            }, (long) THREADS * OUT);
        }
    }
}
