package io.gpusockets.emulated.ptx;

import java.io.ByteArrayOutputStream;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.nio.charset.StandardCharsets;

/**
 * C printf formatting for the device's {@code vprintf(format, args)}: the format is a NUL-terminated
 * string in device memory, the arguments lie packed in a buffer at their natural alignment as nvcc
 * lays them out (int-sized and smaller integers and {@code %c} 4 bytes, {@code l ll z j t} integers,
 * pointers, strings and every floating conversion 8 bytes: floats arrive promoted to double).
 * Conversions {@code d i u x X o c s p f F e E g G a A %} with the flags {@code - + space # 0}, width
 * and precision (also {@code *}) and the length modifiers {@code hh h l ll z j t} (and {@code L},
 * read as double) produce what glibc's printf produces. Anything else in a conversion is copied out
 * as it stands. Memory is read through {@link Memory}, whose every access is bounds-checked.
 */
final class DevicePrintf {
    /** Reads {@code size} bytes (1, 4 or 8) at a generic device address; throws the kernel fault if it may not. */
    interface Memory {
        long read(long address, int size);
    }

    /** The bytes printed and the number of arguments the format consumed. */
    record Result(byte[] text, int arguments) {
    }

    private static final int MAX_STRING = 1 << 20;

    private final Memory memory;
    private final long args;
    private long offset;
    private int consumed;
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();

    private DevicePrintf(Memory memory, long args) {
        this.memory = memory;
        this.args = args;
    }

    static Result format(Memory memory, long format, long args) {
        DevicePrintf p = new DevicePrintf(memory, args);
        p.run(p.string(format, -1));
        return new Result(p.out.toByteArray(), p.consumed);
    }

    private byte[] string(long address, int limit) {
        ByteArrayOutputStream s = new ByteArrayOutputStream();
        for (int i = 0; limit < 0 || i < limit; i++) {
            if (i >= MAX_STRING) {
                break;
            }
            int b = (int) memory.read(address + i, 1) & 0xFF;
            if (b == 0) {
                break;
            }
            s.write(b);
        }
        return s.toByteArray();
    }

    private long next(int size) {
        consumed++;
        if (args == 0) {
            return 0;
        }
        offset = (offset + size - 1) / size * size;
        long v = memory.read(args + offset, size);
        offset += size;
        return v;
    }

    private void run(byte[] f) {
        int n = f.length;
        int i = 0;
        while (i < n) {
            byte c = f[i];
            if (c != '%') {
                out.write(c);
                i++;
                continue;
            }
            int start = i++;
            boolean left = false, plus = false, space = false, alt = false, zero = false;
            for (; i < n; i++) {
                if ("-+ #0".indexOf(f[i]) < 0) {
                    break;
                }
                switch (f[i]) {
                    case '-' -> left = true;
                    case '+' -> plus = true;
                    case ' ' -> space = true;
                    case '#' -> alt = true;
                    default -> zero = true;
                }
            }
            int width = 0;
            if (i < n && f[i] == '*') {
                width = (int) next(4);
                if (width < 0) {
                    left = true;
                    width = width == Integer.MIN_VALUE ? Integer.MAX_VALUE : -width;
                }
                i++;
            } else {
                while (i < n && f[i] >= '0' && f[i] <= '9') {
                    width = Math.min(1 << 20, width * 10 + (f[i++] - '0'));
                }
            }
            int precision = -1;
            if (i < n && f[i] == '.') {
                i++;
                precision = 0;
                if (i < n && f[i] == '*') {
                    precision = (int) next(4);
                    i++;
                } else {
                    while (i < n && f[i] >= '0' && f[i] <= '9') {
                        precision = Math.min(1 << 20, precision * 10 + (f[i++] - '0'));
                    }
                }
            }
            int length = 0;   // 0 int, 1 hh, 2 h, 8 long
            while (i < n && "hlzjtLq".indexOf(f[i]) >= 0) {
                length = switch (f[i]) {
                    case 'h' -> length == 2 ? 1 : 2;
                    default -> 8;
                };
                i++;
            }
            if (i >= n) {
                out.write(f, start, n - start);
                return;
            }
            char conv = (char) f[i++];
            Spec s = new Spec(left, plus, space, alt, zero, width, precision);
            switch (conv) {
                case '%' -> out.write('%');
                case 'd', 'i' -> {
                    long v = next(length == 8 ? 8 : 4);
                    v = length == 8 ? v : length == 1 ? (byte) v : length == 2 ? (short) v : (int) v;
                    integer(s, v < 0, Long.toUnsignedString(v < 0 ? -v : v), "", true, false);
                }
                case 'u', 'x', 'X', 'o' -> {
                    long v = next(length == 8 ? 8 : 4);
                    v = length == 8 ? v : length == 1 ? v & 0xFF : length == 2 ? v & 0xFFFF : v & 0xFFFF_FFFFL;
                    String digits = switch (conv) {
                        case 'u' -> Long.toUnsignedString(v);
                        case 'o' -> Long.toOctalString(v);
                        case 'x' -> Long.toHexString(v);
                        default -> Long.toHexString(v).toUpperCase();
                    };
                    String prefix = alt && v != 0 && conv == 'x' ? "0x" : alt && v != 0 && conv == 'X' ? "0X" : "";
                    integer(s, false, digits, prefix, false, conv == 'o' && alt);
                }
                case 'c' -> pad(s, new byte[] {(byte) next(4)});
                case 's' -> {
                    long p = next(8);
                    if (p == 0) {
                        pad(s, (precision < 0 || precision >= 6 ? "(null)" : "").getBytes(StandardCharsets.US_ASCII));
                    } else {
                        pad(s, string(p, precision));
                    }
                }
                case 'p' -> {
                    long p = next(8);
                    if (p == 0) {
                        pad(s, "(nil)".getBytes(StandardCharsets.US_ASCII));
                    } else {
                        integer(s, false, Long.toHexString(p), "0x", true, false);
                    }
                }
                case 'f', 'F', 'e', 'E', 'g', 'G', 'a', 'A' -> floating(s, conv, Double.longBitsToDouble(next(8)));
                default -> out.write(f, start, i - start);
            }
        }
    }

    private record Spec(boolean left, boolean plus, boolean space, boolean alt, boolean zero, int width, int precision) {
    }

    private void integer(Spec s, boolean negative, String digits, String prefix, boolean signed, boolean octalAlt) {
        int precision = s.precision();
        String d = digits;
        if (precision == 0 && d.equals("0")) {
            d = "";
        }
        if (precision > d.length()) {
            d = "0".repeat(precision - d.length()) + d;
        }
        if (octalAlt && !d.startsWith("0")) {
            d = "0" + d;   // %#o: the first digit is 0
        }
        String sign = negative ? "-" : signed && s.plus() ? "+" : signed && s.space() ? " " : "";
        emit(s, sign + prefix, d, s.zero() && precision < 0);
    }

    private void emit(Spec s, String head, String body, boolean zeroPad) {
        int len = head.length() + body.length();
        int fill = Math.max(0, s.width() - len);
        StringBuilder b = new StringBuilder();
        if (s.left()) {
            b.append(head).append(body).append(" ".repeat(fill));
        } else if (zeroPad) {
            b.append(head).append("0".repeat(fill)).append(body);
        } else {
            b.append(" ".repeat(fill)).append(head).append(body);
        }
        out.writeBytes(b.toString().getBytes(StandardCharsets.ISO_8859_1));
    }

    private void pad(Spec s, byte[] text) {
        int fill = Math.max(0, s.width() - text.length);
        if (!s.left()) {
            out.writeBytes(" ".repeat(fill).getBytes(StandardCharsets.US_ASCII));
        }
        out.writeBytes(text);
        if (s.left()) {
            out.writeBytes(" ".repeat(fill).getBytes(StandardCharsets.US_ASCII));
        }
    }

    private void floating(Spec s, char conv, double v) {
        boolean upper = Character.isUpperCase(conv);
        boolean negative = (Double.doubleToRawLongBits(v) < 0);
        String sign = negative ? "-" : s.plus() ? "+" : s.space() ? " " : "";
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            String t = Double.isNaN(v) ? "nan" : "inf";
            emit(s, sign, upper ? t.toUpperCase() : t, false);
            return;
        }
        double a = Math.abs(v);
        int p = s.precision();
        String body;
        String head = sign;
        switch (Character.toLowerCase(conv)) {
            case 'f' -> body = fixed(a, p < 0 ? 6 : p, s.alt());
            case 'e' -> body = exponent(a, p < 0 ? 6 : p, s.alt(), upper);
            case 'g' -> {
                int pp = p < 0 ? 6 : p == 0 ? 1 : p;
                int x = a == 0 ? 0 : decimalExponent(a, pp);
                if (pp > x && x >= -4) {
                    body = fixed(a, pp - 1 - x, s.alt());
                    if (!s.alt()) {
                        body = stripZeros(body);
                    }
                } else {
                    body = exponent(a, pp - 1, s.alt(), upper);
                    if (!s.alt()) {
                        int e = body.indexOf(upper ? 'E' : 'e');
                        body = stripZeros(body.substring(0, e)) + body.substring(e);
                    }
                }
            }
            default -> {
                head = sign + (upper ? "0X" : "0x");
                body = hex(a, p, s.alt(), upper);
            }
        }
        emit(s, head, body, s.zero());
    }

    private static String stripZeros(String s) {
        if (s.indexOf('.') < 0) {
            return s;
        }
        int end = s.length();
        while (s.charAt(end - 1) == '0') {
            end--;
        }
        if (s.charAt(end - 1) == '.') {
            end--;
        }
        return s.substring(0, end);
    }

    private static String fixed(double a, int p, boolean alt) {
        String t = new BigDecimal(a).setScale(p, RoundingMode.HALF_EVEN).toPlainString();
        return p == 0 && alt ? t + "." : t;
    }

    /** The decimal exponent of {@code a} once rounded to {@code digits} significant digits. */
    private static int decimalExponent(double a, int digits) {
        BigDecimal r = new BigDecimal(a).round(new MathContext(digits, RoundingMode.HALF_EVEN));
        return r.unscaledValue().toString().length() - r.scale() - 1;
    }

    private static String exponent(double a, int p, boolean alt, boolean upper) {
        String digits;
        int exp;
        if (a == 0) {
            digits = "0".repeat(p + 1);
            exp = 0;
        } else {
            BigDecimal r = new BigDecimal(a).round(new MathContext(p + 1, RoundingMode.HALF_EVEN));
            String u = r.unscaledValue().toString();
            exp = u.length() - r.scale() - 1;
            digits = u.length() >= p + 1 ? u.substring(0, p + 1) : u + "0".repeat(p + 1 - u.length());
        }
        StringBuilder b = new StringBuilder().append(digits.charAt(0));
        if (p > 0 || alt) {
            b.append('.').append(digits, 1, digits.length());
        }
        b.append(upper ? 'E' : 'e').append(exp < 0 ? '-' : '+');
        int e = Math.abs(exp);
        if (e < 10) {
            b.append('0');
        }
        return b.append(e).toString();
    }

    private static String hex(double a, int p, boolean alt, boolean upper) {
        long bits = Double.doubleToRawLongBits(a);
        int biased = (int) (bits >>> 52) & 0x7FF;
        long mant = bits & ((1L << 52) - 1);
        long lead;
        int exp;
        if (biased == 0) {
            lead = 0;
            exp = mant == 0 ? 0 : -1022;
        } else {
            lead = 1;
            exp = biased - 1023;
        }
        String frac;
        if (p < 0) {
            frac = String.format("%013x", mant).replaceAll("0+$", "");
        } else if (p >= 13) {
            frac = String.format("%013x", mant) + "0".repeat(p - 13);
        } else {
            int drop = 4 * (13 - p);
            long keep = mant >>> drop;
            long rest = mant & ((1L << drop) - 1);
            long half = 1L << (drop - 1);
            long parity = p == 0 ? lead : keep;   // ties to even, on the leading digit when no fraction digit is kept
            if (rest > half || rest == half && (parity & 1) != 0) {
                keep++;
            }
            if (p == 0 ? keep > 0 : keep >>> (4 * p) != 0) {
                lead++;
                keep &= p == 0 ? 0 : (1L << (4 * p)) - 1;
            }
            frac = p == 0 ? "" : String.format("%0" + p + "x", keep);
        }
        String t = lead + (frac.isEmpty() && !alt ? "" : "." + frac) + "p" + (exp < 0 ? "-" : "+") + Math.abs(exp);
        return upper ? t.toUpperCase() : t;
    }
}
