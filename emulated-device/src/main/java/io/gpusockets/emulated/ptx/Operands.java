package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.List;

/**
 * Operand text to slots: registers, immediates (decimal, hex, octal, binary, {@code 0f}/{@code 0d}
 * float bits), special registers, symbols (their address in their state space), vectors
 * {@code {a, b}} and addresses {@code [base+offset]}.
 */
final class Operands {
    private final Symbols symbols;

    Operands(Symbols symbols) {
        this.symbols = symbols;
    }

    /** Splits operands at top-level commas (not inside braces or brackets). */
    static List<String> split(String s) {
        List<String> out = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                depth--;
            } else if (c == ',' && depth == 0) {
                out.add(s.substring(start, i).trim());
                start = i + 1;
            }
        }
        if (!s.substring(start).isBlank()) {
            out.add(s.substring(start).trim());
        }
        return out;
    }

    /** A register to write. */
    int destination(String op) throws PtxUnsupported {
        Integer slot = symbols.registers.get(op);
        if (slot == null) {
            throw new PtxUnsupported("destination " + op + " is not a declared register");
        }
        return slot;
    }

    /** A value read as {@code type}: register, immediate, special register or symbol address. */
    int source(String op, int type) throws PtxUnsupported {
        Integer slot = symbols.registers.get(op);
        if (slot != null) {
            return slot;
        }
        if (op.startsWith("%")) {
            int kind = Symbols.specialKind(op);
            if (kind < -1) {
                throw new PtxUnsupported("special register " + op + " outside mov");
            }
            if (kind < 0) {
                throw new PtxUnsupported("operand " + op + " is not a declared register or a covered special register");
            }
            return symbols.special(kind);
        }
        Symbols.Symbol sym = symbols.symbols.get(op);
        if (sym != null) {
            return symbols.constant(sym.address());
        }
        if (op.equals("WARP_SZ")) {
            return symbols.constant(32);
        }
        return symbols.constant(immediate(op, type));
    }

    static long immediate(String op, int type) throws PtxUnsupported {
        if (Types.isHalf(type)) {
            throw new PtxUnsupported("immediate operand " + op + " of a .f16/.bf16 type");
        }
        String s = op.trim();
        String lower = s.toLowerCase();
        try {
            if (lower.startsWith("0f") && lower.length() == 10) {
                int bits = (int) Long.parseLong(lower.substring(2), 16);
                return Types.isFloat(type) && Types.size(type) == 8
                        ? Double.doubleToRawLongBits(Float.intBitsToFloat(bits)) : bits & 0xFFFF_FFFFL;
            }
            if (lower.startsWith("0d") && lower.length() == 18) {
                long bits = Long.parseUnsignedLong(lower.substring(2), 16);
                return Types.isFloat(type) && Types.size(type) == 4
                        ? Float.floatToRawIntBits((float) Double.longBitsToDouble(bits)) & 0xFFFF_FFFFL : bits;
            }
            if (Types.isFloat(type) && (lower.contains(".") || lower.contains("e")) && !lower.startsWith("0x")) {
                double d = Double.parseDouble(s);
                return Types.size(type) == 4 ? Float.floatToRawIntBits((float) d) & 0xFFFF_FFFFL : Double.doubleToRawLongBits(d);
            }
            boolean negative = lower.startsWith("-");
            String digits = negative ? lower.substring(1) : lower;
            if (digits.endsWith("u")) {
                digits = digits.substring(0, digits.length() - 1);
            }
            long v;
            if (digits.startsWith("0x")) {
                v = Long.parseUnsignedLong(digits.substring(2), 16);
            } else if (digits.startsWith("0b")) {
                v = Long.parseUnsignedLong(digits.substring(2), 2);
            } else if (digits.length() > 1 && digits.startsWith("0")) {
                v = Long.parseUnsignedLong(digits.substring(1), 8);
            } else {
                v = Long.parseUnsignedLong(digits);
            }
            return negative ? -v : v;
        } catch (NumberFormatException e) {
            throw new PtxUnsupported("operand " + op + " is not a register, a symbol or an immediate");
        }
    }

    /** The components of {@code {a, b, ...}}; {@code _} (a sink) is -1 for destinations. */
    List<String> vector(String op) throws PtxUnsupported {
        if (!op.startsWith("{") || !op.endsWith("}")) {
            throw new PtxUnsupported("operand " + op + " is not a vector");
        }
        return split(op.substring(1, op.length() - 1));
    }

    /** Sets {@code in.a} (base slot), {@code in.offset}, {@code in.addressMask}; returns the base's symbol space or -1. */
    int address(Insn in, String op) throws PtxUnsupported {
        if (!op.startsWith("[") || !op.endsWith("]")) {
            throw new PtxUnsupported("operand " + op + " is not an address");
        }
        String inner = op.substring(1, op.length() - 1).replace(" ", "");
        int plus = inner.indexOf('+', 1);
        String base = plus < 0 ? inner : inner.substring(0, plus);
        in.offset = plus < 0 ? 0 : immediate(inner.substring(plus + 1), 0);
        Integer reg = symbols.registers.get(base);
        if (reg != null) {
            in.a = reg;
            in.addressMask = symbols.slotBytes.get(reg) == 8 ? -1L : 0xFFFF_FFFFL;
            return -1;
        }
        Symbols.Symbol sym = symbols.symbols.get(base);
        if (sym != null) {
            in.a = symbols.constant(sym.address());
            return sym.space();
        }
        if (base.startsWith("%")) {
            throw new PtxUnsupported("address base " + base + " is not a declared register");
        }
        in.a = symbols.constant(immediate(base, 0));
        return -1;
    }
}
