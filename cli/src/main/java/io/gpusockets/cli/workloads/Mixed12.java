package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * gpus_mixed12: eleven by-value parameters of sizes 1 to 16 bytes and alignments 1 to 16, plus the
 * output pointer. The kernel writes parameter k's bytes at out + 16*k, zero-padded to 16 bytes (176
 * bytes in all); the result must equal the layout built here from the same values. The output buffer
 * is pre-filled with 0xEE so that the zero padding is checked too.
 */
public final class Mixed12 {
    public static final int OUT_BYTES = 176;
    private static final int SLOT = 16;

    // Distinctive values: every byte of every parameter differs from its neighbours and from zero where possible.
    static final byte P0 = (byte) 0xA5;                                  // unsigned char
    static final short P1 = (short) 0xB1C2;                              // short
    static final int P2 = 0x12345678;                                    // int
    static final long P3 = 0x1122334455667788L;                          // long long
    static final float P4 = 3.14159265f;                                 // float
    static final double P5 = -2.718281828459045;                         // double
    static final float[] P6 = {1.5f, -2.25f};                            // float2 (align 8)
    static final int[] P7 = {-1, 0x7FFFFFFF, 0x13579BDF, 0x2468ACE0};    // int4 (align 16)
    static final short P8 = (short) 0xFEDC;                              // unsigned short
    static final byte[] P9 = {'G', 'P', 'U', 's'};                       // char4 (align 4)
    static final double[] P10 = {1.0e300, -1.0e-300};                   // double2 (align 16)

    private Mixed12() {
    }

    public record Result(byte[] expected, byte[] actual, long driverNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return Arrays.equals(expected, actual);
        }

        @Override
        public String summary() {
            int at = Arrays.mismatch(expected, actual);
            if (at < 0) {
                return OUT_BYTES + " bytes as laid out in Java";
            }
            if (at >= actual.length || at >= expected.length) {
                return "read back " + actual.length + " bytes, expected " + expected.length;
            }
            return String.format("byte %d (parameter %d) differs: expected 0x%02x, got 0x%02x; got %s", at, at / SLOT,
                    expected[at], actual[at], HexFormat.of().formatHex(actual));
        }

        @Override
        public byte[] comparableOutput() {
            return actual.clone();
        }
    }

    public static Result run(CudaDriver cu, Kernels kernels) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(OUT_BYTES);
            host.fill((byte) 0xEE);
            long t0 = System.nanoTime();
            try (DeviceBuffer out = DeviceBuffer.allocate(cu, OUT_BYTES)) {
                out.copyFrom(host);
                MemorySegment params = new KernelParams(arena)
                        .u8(P0).i16(P1).i32(P2).i64(P3).f32(P4).f64(P5)
                        .bytes(le(8).putFloat(P6[0]).putFloat(P6[1]).array(), 8)
                        .bytes(le(16).putInt(P7[0]).putInt(P7[1]).putInt(P7[2]).putInt(P7[3]).array(), 16)
                        .i16(P8)
                        .bytes(P9.clone(), 4)
                        .bytes(le(16).putDouble(P10[0]).putDouble(P10[1]).array(), 16)
                        .pointer(out.address())
                        .build();
                kernels.launchAndSync(Kernels.MIXED12, 1, 1, 0, params);
                out.copyTo(host);
            }
            long nanos = System.nanoTime() - t0;
            return new Result(expected(), host.toArray(JAVA_BYTE), nanos);
        }
    }

    /** The 176 bytes the kernel must write, per the comment on gpus_mixed12 in gpusockets_kernels.cu. */
    static byte[] expected() {
        ByteBuffer b = le(OUT_BYTES);
        b.position(0).put(P0);
        b.position(SLOT).putShort(P1);
        b.position(2 * SLOT).putInt(P2);
        b.position(3 * SLOT).putLong(P3);
        b.position(4 * SLOT).putFloat(P4);
        b.position(5 * SLOT).putDouble(P5);
        b.position(6 * SLOT).putFloat(P6[0]).putFloat(P6[1]);
        b.position(7 * SLOT).putInt(P7[0]).putInt(P7[1]).putInt(P7[2]).putInt(P7[3]);
        b.position(8 * SLOT).putShort(P8);
        b.position(9 * SLOT).put(P9);
        b.position(10 * SLOT).putDouble(P10[0]).putDouble(P10[1]);
        return b.array();
    }

    private static ByteBuffer le(int size) {
        return ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    }
}
