package io.gpusockets.protocol.api;

import java.util.List;
import java.util.function.IntToLongFunction;

/**
 * A length expression of the API table ({@code NAME | NUMBER | TERM*TERM}), with each name resolved
 * to the index of the parameter it names when the table is parsed, so evaluating it costs no look-up.
 *
 * @param text the expression as written in the table
 * @param a    first term: a parameter index, or {@link #CONSTANT} with its value in {@code aValue}
 * @param b    second term of a product, {@link #NONE} when there is no product
 */
public record Expr(String text, int a, long aValue, int b, long bValue) {
    /** A term that is a number, not a parameter. */
    public static final int CONSTANT = -1;
    /** No second term. */
    public static final int NONE = -2;

    /** Parses {@code text}, resolving names against {@code params} (in C order); throws naming the expression. */
    public static Expr parse(String text, List<String> params) {
        int star = text.indexOf('*');
        String first = star < 0 ? text : text.substring(0, star);
        int a = term(first, params, text);
        long aValue = a == CONSTANT ? Long.parseLong(first) : 0;
        if (star < 0) {
            return new Expr(text, a, aValue, NONE, 0);
        }
        String second = text.substring(star + 1);
        int b = term(second, params, text);
        return new Expr(text, a, aValue, b, b == CONSTANT ? Long.parseLong(second) : 0);
    }

    private static int term(String t, List<String> params, String text) {
        if (t.isEmpty()) {
            throw new IllegalArgumentException("empty term in expression: " + text);
        }
        if (Character.isDigit(t.charAt(0))) {
            try {
                Long.parseLong(t);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad number in expression: " + text);
            }
            return CONSTANT;
        }
        int i = params.indexOf(t);
        if (i < 0) {
            throw new IllegalArgumentException("expression names no parameter: " + text);
        }
        return i;
    }

    /**
     * The value, given each parameter's value by index; -1 when a term is negative (a size_t above
     * 2^63) or a product overflows, so that a range check fails rather than wraps.
     */
    public long evaluate(IntToLongFunction valueAt) {
        long x = a == CONSTANT ? aValue : valueAt.applyAsLong(a);
        if (b == NONE) {
            return x;
        }
        long y = b == CONSTANT ? bValue : valueAt.applyAsLong(b);
        if (x < 0 || y < 0) {
            return -1;
        }
        try {
            return Math.multiplyExact(x, y);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /** Whether the expression reads parameter {@code index}. */
    public boolean reads(int index) {
        return a == index || b == index;
    }

    @Override
    public String toString() {
        return text;
    }
}
