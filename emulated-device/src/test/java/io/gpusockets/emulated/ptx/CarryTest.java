package io.gpusockets.emulated.ptx;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigInteger;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The carry chain (add.cc, addc(.cc), sub.cc, subc(.cc), mad.lo/.hi.cc, madc.lo/.hi(.cc)) as multiword
 * arithmetic checked against BigInteger, with all-ones operands for carries through every limb; and
 * mul24/mad24 (.lo/.hi, .sat) and sad.
 */
class CarryTest {
    private static final BigInteger TWO_128 = BigInteger.ONE.shiftLeft(128);

    private final Rig rig = new Rig();

    @AfterEach
    void close() {
        rig.close();
    }

    private static BigInteger unsigned(long v) {
        return new BigInteger(Long.toUnsignedString(v));
    }

    private static BigInteger u128(long lo, long hi) {
        return unsigned(hi).shiftLeft(64).add(unsigned(lo));
    }

    @Test
    void multiwordAddSubtractAndMultiplyMatchBigInteger() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out, .param .u64 in, .param .u32 n)
                {
                    .reg .pred %p<2>;
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    mov.u32 %r1, %tid.x;
                    ld.param.u32 %r2, [n];
                    setp.ge.u32 %p1, %r1, %r2;
                    @%p1 bra DONE;
                    ld.param.u64 %rd1, [out];
                    ld.param.u64 %rd2, [in];
                    mul.wide.u32 %rd3, %r1, 32;
                    add.s64 %rd4, %rd2, %rd3;
                    mul.wide.u32 %rd5, %r1, 64;
                    add.s64 %rd6, %rd1, %rd5;
                    ld.global.u64 %rd7, [%rd4];
                    ld.global.u64 %rd8, [%rd4+8];
                    ld.global.u64 %rd9, [%rd4+16];
                    ld.global.u64 %rd10, [%rd4+24];
                    // 128-bit a + b, carry out
                    add.cc.u64 %rd11, %rd7, %rd9;
                    addc.cc.u64 %rd12, %rd8, %rd10;
                    addc.u32 %r3, 0, 0;
                    st.global.u64 [%rd6], %rd11;
                    st.global.u64 [%rd6+8], %rd12;
                    st.global.u32 [%rd6+16], %r3;
                    // 128-bit a - b, borrow out as 0 - 0 - borrow
                    sub.cc.u64 %rd13, %rd7, %rd9;
                    subc.cc.u64 %rd14, %rd8, %rd10;
                    subc.u32 %r4, 0, 0;
                    st.global.u64 [%rd6+24], %rd13;
                    st.global.u64 [%rd6+32], %rd14;
                    st.global.u32 [%rd6+20], %r4;
                    // 64 x 64 -> 128 from 32-bit limbs: a = a1:a0 (the low u64 of a), b = b1:b0 (the low u64 of b)
                    ld.global.u32 %r10, [%rd4];
                    ld.global.u32 %r11, [%rd4+4];
                    ld.global.u32 %r12, [%rd4+16];
                    ld.global.u32 %r13, [%rd4+20];
                    mul.lo.u32 %r20, %r10, %r12;
                    mul.hi.u32 %r21, %r10, %r12;
                    mad.lo.cc.u32 %r21, %r11, %r12, %r21;
                    madc.hi.u32 %r22, %r11, %r12, 0;
                    mad.lo.cc.u32 %r21, %r10, %r13, %r21;
                    madc.hi.cc.u32 %r22, %r10, %r13, %r22;
                    addc.u32 %r23, 0, 0;
                    mad.lo.cc.u32 %r22, %r11, %r13, %r22;
                    madc.hi.u32 %r23, %r11, %r13, %r23;
                    st.global.u32 [%rd6+40], %r20;
                    st.global.u32 [%rd6+44], %r21;
                    st.global.u32 [%rd6+48], %r22;
                    st.global.u32 [%rd6+52], %r23;
                    // 96-bit add in 32-bit limbs with a carry through the middle limb: a0:a1:a1 + b0:b1:b1
                    add.cc.u32 %r24, %r10, %r12;
                    addc.cc.u32 %r25, %r11, %r13;
                    addc.cc.s32 %r26, %r11, %r13;
                    addc.u32 %r27, 0, 0;
                    st.global.u32 [%rd6+56], %r26;
                    st.global.u32 [%rd6+60], %r27;
                DONE:
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        Random random = new Random(7);
        int n = 200;
        long[] in = new long[4 * n];
        for (int i = 0; i < in.length; i++) {
            in[i] = switch (i % 9) {
                case 0 -> -1L;
                case 1 -> 0;
                case 2 -> 1;
                case 3 -> Long.MIN_VALUE;
                default -> random.nextLong();
            };
        }
        in[0] = in[1] = -1L;   // all ones + 1: a carry through every limb
        in[2] = 1;
        in[3] = 0;
        long out = rig.alloc(64L * n);
        rig.run(f, 1, n, out, rig.upload(in), n);
        long[] r = rig.longs(out, 8 * n);
        for (int i = 0; i < n; i++) {
            long a0 = in[4 * i];
            long a1 = in[4 * i + 1];
            long b0 = in[4 * i + 2];
            long b1 = in[4 * i + 3];
            BigInteger a = u128(a0, a1);
            BigInteger b = u128(b0, b1);
            BigInteger sum = a.add(b);
            assertEquals(sum.mod(TWO_128), u128(r[8 * i], r[8 * i + 1]), "sum " + i);
            assertEquals(sum.compareTo(TWO_128) >= 0 ? 1 : 0, (int) r[8 * i + 2], "carry out " + i);
            BigInteger difference = a.subtract(b);
            assertEquals(difference.mod(TWO_128), u128(r[8 * i + 3], r[8 * i + 4]), "difference " + i);
            assertEquals(difference.signum() < 0 ? -1 : 0, (int) (r[8 * i + 2] >>> 32), "borrow out " + i);
            BigInteger product = unsigned(a0).multiply(unsigned(b0));
            assertEquals(product, u128(r[8 * i + 5], r[8 * i + 6]), "product " + i);
            long x = a0 >>> 32;
            BigInteger limbs = BigInteger.valueOf(Integer.toUnsignedLong((int) a0))
                    .add(BigInteger.valueOf(x).shiftLeft(32)).add(BigInteger.valueOf(x).shiftLeft(64));
            BigInteger limbsB = BigInteger.valueOf(Integer.toUnsignedLong((int) b0))
                    .add(BigInteger.valueOf(b0 >>> 32).shiftLeft(32)).add(BigInteger.valueOf(b0 >>> 32).shiftLeft(64));
            BigInteger wide = limbs.add(limbsB);
            assertEquals(wide.shiftRight(64).intValue(), (int) r[8 * i + 7], "96-bit add's top limb " + i);
            assertEquals(wide.shiftRight(96).intValue(), (int) (r[8 * i + 7] >>> 32), "96-bit add's carry " + i);
        }
    }

    @Test
    void nvccInt128ArithmeticMatchesBigInteger() throws Exception {
        String ptx = CallsTest.nvcc(java.nio.file.Files.createTempDirectory("int128"), """
                extern "C" __global__ void k(const unsigned long long* in, unsigned long long* out) {
                    int i = threadIdx.x;
                    unsigned __int128 a = ((unsigned __int128) in[4 * i + 1] << 64) | in[4 * i];
                    unsigned __int128 b = ((unsigned __int128) in[4 * i + 3] << 64) | in[4 * i + 2];
                    unsigned __int128 s = a + b, d = a - b, p = a * b;
                    out[6 * i] = (unsigned long long) s;
                    out[6 * i + 1] = (unsigned long long) (s >> 64);
                    out[6 * i + 2] = (unsigned long long) d;
                    out[6 * i + 3] = (unsigned long long) (d >> 64);
                    out[6 * i + 4] = (unsigned long long) p;
                    out[6 * i + 5] = (unsigned long long) (p >> 64);
                }
                """);
        Random random = new Random(9);
        int n = 256;
        long[] in = new long[4 * n];
        for (int i = 0; i < in.length; i++) {
            in[i] = random.nextInt(3) == 0 ? (random.nextBoolean() ? -1L : 0) : random.nextLong();
        }
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.alloc(48L * n);
        rig.run(f, 1, n, rig.upload(in), out);
        long[] r = rig.longs(out, 6 * n);
        for (int i = 0; i < n; i++) {
            BigInteger a = u128(in[4 * i], in[4 * i + 1]);
            BigInteger b = u128(in[4 * i + 2], in[4 * i + 3]);
            assertEquals(a.add(b).mod(TWO_128), u128(r[6 * i], r[6 * i + 1]), "a + b, " + i);
            assertEquals(a.subtract(b).mod(TWO_128), u128(r[6 * i + 2], r[6 * i + 3]), "a - b, " + i);
            assertEquals(a.multiply(b).mod(TWO_128), u128(r[6 * i + 4], r[6 * i + 5]), "a * b, " + i);
        }
    }

    @Test
    void signedHighHalvesMul24Mad24AndSad() {
        String ptx = Rig.HEADER + """
                .visible .entry k(.param .u64 out)
                {
                    .reg .b32 %r<32>;
                    .reg .b64 %rd<16>;
                    ld.param.u64 %rd1, [out];
                    mov.u32 %r1, -3;
                    mov.u32 %r2, 5;
                    mov.u32 %r3, -1;
                    // mad.hi.cc.s32: hi(-3 * 5) = -1 = 0xFFFFFFFF, + (-1): carry out 1
                    mad.hi.cc.s32 %r4, %r1, %r2, %r3;
                    addc.u32 %r5, 0, 0;
                    st.global.u32 [%rd1], %r4;
                    st.global.u32 [%rd1+4], %r5;
                    // mul24: bits above 23 are ignored; -1 in 24 bits is 0xFFFFFF (u32) or -1 (s32)
                    mov.u32 %r6, 0x7F000003;
                    mov.u32 %r7, 0x00FFFFFF;
                    mul24.lo.u32 %r8, %r6, %r7;
                    st.global.u32 [%rd1+8], %r8;
                    mul24.hi.u32 %r9, %r6, %r7;
                    st.global.u32 [%rd1+12], %r9;
                    mul24.lo.s32 %r10, %r6, %r7;
                    st.global.u32 [%rd1+16], %r10;
                    mul24.hi.s32 %r11, %r7, %r7;
                    st.global.u32 [%rd1+20], %r11;
                    mov.u32 %r12, 0x007FFFFF;
                    mov.u32 %r13, 0x7FFFFFF0;
                    mad24.hi.sat.s32 %r14, %r12, %r12, %r13;
                    st.global.u32 [%rd1+24], %r14;
                    mad24.hi.s32 %r15, %r12, %r12, %r13;
                    st.global.u32 [%rd1+28], %r15;
                    mad24.lo.u32 %r16, %r6, %r7, 10;
                    st.global.u32 [%rd1+32], %r16;
                    // sad: c + |a - b|
                    sad.s32 %r17, %r1, %r2, 100;
                    st.global.u32 [%rd1+36], %r17;
                    sad.u32 %r18, %r1, %r2, 100;
                    st.global.u32 [%rd1+40], %r18;
                    mov.u64 %rd2, -1;
                    mov.u64 %rd3, 1;
                    sad.u64 %rd4, %rd3, %rd2, 0;
                    st.global.u64 [%rd1+48], %rd4;
                    sad.s64 %rd5, %rd3, %rd2, 0;
                    st.global.u64 [%rd1+56], %rd5;
                    ret;
                }
                """;
        long f = rig.function(rig.module(ptx), "k");
        long out = rig.upload(new int[16]);
        rig.run(f, 1, 1, out);
        int[] r = rig.ints(out, 16);
        assertEquals(-2, r[0], "hi(-15) + -1");
        assertEquals(1, r[1], "0xFFFFFFFF + 0xFFFFFFFF carries");
        long ua = 3;   // low 24 bits of 0x7F000003
        long ub = 0xFF_FFFFL;
        assertEquals((int) (ua * ub), r[2], "mul24.lo.u32");
        assertEquals((int) ((ua * ub) >>> 16), r[3], "mul24.hi.u32");
        assertEquals((int) (3L * -1L), r[4], "mul24.lo.s32: 0xFFFFFF is -1");
        assertEquals(0, r[5], "mul24.hi.s32 of (-1)(-1) = 1: bits 47..16 are 0");
        long p = 0x7F_FFFFL * 0x7F_FFFFL;
        assertEquals(Integer.MAX_VALUE, r[6], "mad24.hi.sat saturates");
        assertEquals((int) ((p >> 16) + 0x7FFF_FFF0L), r[7], "mad24.hi wraps");
        assertEquals((int) (ua * ub + 10), r[8], "mad24.lo.u32");
        assertEquals(108, r[9], "sad.s32 |-3 - 5| + 100");
        assertEquals((int) (0xFFFF_FFFDL - 5 + 100), r[10], "sad.u32: -3 is 0xFFFFFFFD");
        assertEquals(-2L, (r[12] & 0xFFFF_FFFFL) | (long) r[13] << 32, "sad.u64 |1 - (2^64-1)|");
        assertEquals(2L, (r[14] & 0xFFFF_FFFFL) | (long) r[15] << 32, "sad.s64 |1 - (-1)|");
    }

    @Test
    void carryFormsTheIsaDoesNotHaveAreRefused() {
        for (String insn : new String[] {"add.cc.f32 %r1, %r2, %r3;", "mul.cc.u32 %r1, %r2, %r3;", "addc.sat.s32 %r1, %r2, %r3;",
                "madc.u32 %r1, %r2, %r3, %r3;", "add.cc.u16 %r1, %r2, %r3;", "mul24.lo.u64 %r1, %r2, %r3;"}) {
            String ptx = Rig.HEADER + ".visible .entry k()\n{\n    .reg .b32 %r<4>;\n    " + insn + "\n    ret;\n}\n";
            assertEquals(io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    rig.launch(rig.function(rig.module(ptx), "k"), new int[] {1, 1, 1}, new int[] {1, 1, 1}, 0), insn);
        }
    }
}
