package io.gpusockets.protocol.images;

import java.io.ByteArrayOutputStream;
import java.lang.System.Logger.Level;
import java.math.BigInteger;

/**
 * The bytes of a PTX variable initializer ({@code = 5}, {@code = {1, 2, 3}}, {@code = {0f3F800000}},
 * nested braces for arrays of vectors), little-endian as on the device. Address initializers
 * ({@code generic(var)}, another variable's name) cannot be resolved here: the variable is then left
 * zero-filled and a warning says so, rather than refusing a module a program may never read that from.
 */
final class PtxInitializer {
    private static final System.Logger LOG = System.getLogger(PtxInitializer.class.getName());

    private PtxInitializer() {
    }

    /** Components an initializer lists (nested braces flattened); 0 for none. */
    static long items(String initializer) {
        String flat = initializer.replace('{', ' ').replace('}', ' ').trim();
        return flat.isEmpty() ? 0 : flat.split(",").length;
    }

    static byte[] bytes(String initializer, String type, long componentSize) {
        String flat = initializer.replace('{', ' ').replace('}', ' ').trim();
        if (flat.isEmpty()) {
            return new byte[0];
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        boolean floating = type.startsWith(".f");
        for (String item : flat.split(",")) {
            String v = item.trim();
            Long bits = floating ? floatBits(v, componentSize) : integer(v);
            if (bits == null) {
                LOG.log(Level.WARNING, "PTX initializer {0} of type {1} cannot be computed here; the variable starts zero-filled", v, type);
                return new byte[0];
            }
            for (int b = 0; b < componentSize; b++) {
                out.write((int) (bits >>> (8 * b)));
            }
        }
        return out.toByteArray();
    }

    private static Long floatBits(String v, long size) {
        String lower = v.toLowerCase();
        if (lower.startsWith("0f") && lower.length() == 10) {
            return Long.parseUnsignedLong(lower.substring(2), 16);
        }
        if (lower.startsWith("0d") && lower.length() == 18) {
            return Long.parseUnsignedLong(lower.substring(2), 16);
        }
        try {
            double d = Double.parseDouble(v);
            return switch ((int) size) {
                case 4 -> (long) Float.floatToRawIntBits((float) d) & 0xFFFF_FFFFL;
                case 8 -> Double.doubleToRawLongBits(d);
                default -> null;   // f16/bf16 literals: not worth a converter here
            };
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** PTX integer literals: decimal, 0x hex, 0b binary, leading-0 octal, optional U suffix, optional sign. */
    private static Long integer(String v) {
        String s = v.endsWith("U") || v.endsWith("u") ? v.substring(0, v.length() - 1) : v;
        boolean negative = s.startsWith("-");
        if (negative || s.startsWith("+")) {
            s = s.substring(1);
        }
        int radix = 10;
        if (s.startsWith("0x") || s.startsWith("0X")) {
            radix = 16;
            s = s.substring(2);
        } else if (s.startsWith("0b") || s.startsWith("0B")) {
            radix = 2;
            s = s.substring(2);
        } else if (s.length() > 1 && s.startsWith("0")) {
            radix = 8;
            s = s.substring(1);
        }
        try {
            long value = new BigInteger(s, radix).longValue();
            return negative ? -value : value;
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
