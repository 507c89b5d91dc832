package io.gpusockets.protocol.api;

import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * One parameter of an API table entry.
 *
 * @param name      the parameter's name in cuda.h
 * @param out       whether the driver writes through it
 * @param type      its type
 * @param modifiers the bracketed modifiers, e.g. {@code range=ByteCount}, {@code destroy}
 */
public record ApiParam(String name, boolean out, ParamType type, Map<String, String> modifiers) {

    public boolean has(String modifier) {
        return modifiers.containsKey(modifier);
    }

    public String modifier(String modifier) {
        return modifiers.get(modifier);
    }

    /** The length expression of a bytes parameter (its only bare modifier). */
    public String lengthExpression() {
        for (Map.Entry<String, String> e : modifiers.entrySet()) {
            if (e.getValue().isEmpty() && !e.getKey().equals("nullable") && !e.getKey().equals("destroy")
                    && !e.getKey().equals("free")) {
                return e.getKey();
            }
        }
        return null;
    }

    /**
     * Evaluates a length expression: NAME, NUMBER, NAME*NUMBER or NAME*NAME. Products that overflow
     * return -1 so that a range check fails rather than wraps.
     */
    public static long evaluate(String expression, ToLongFunction<String> valueOf) {
        int star = expression.indexOf('*');
        if (star < 0) {
            return term(expression, valueOf);
        }
        long a = term(expression.substring(0, star), valueOf);
        long b = term(expression.substring(star + 1), valueOf);
        if (a < 0 || b < 0) {
            return -1;
        }
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    /**
     * The bytes a dptr input with a {@code range} modifier touches: {@code range} itself, or with
     * {@code rows} and {@code pitch} a pitched block ({@link #pitchedSpan}). -1 when out of range.
     */
    public long deviceSpan(ToLongFunction<String> valueOf) {
        long row = evaluate(modifier("range"), valueOf);
        if (!has("rows")) {
            return row;
        }
        return pitchedSpan(row, evaluate(modifier("rows"), valueOf), evaluate(modifier("pitch"), valueOf));
    }

    /**
     * The extent of {@code rows} rows of {@code rowBytes} bytes, {@code pitch} bytes apart:
     * {@code (rows-1)*pitch + rowBytes}, 0 when there are no rows or no bytes per row, -1 when a value
     * is negative (a size_t above 2^63) or the result overflows.
     */
    public static long pitchedSpan(long rowBytes, long rows, long pitch) {
        if (rowBytes < 0 || rows < 0 || pitch < 0) {
            return -1;
        }
        if (rowBytes == 0 || rows == 0) {
            return 0;
        }
        try {
            return Math.addExact(Math.multiplyExact(rows - 1, pitch), rowBytes);
        } catch (ArithmeticException e) {
            return -1;
        }
    }

    private static long term(String t, ToLongFunction<String> valueOf) {
        return Character.isDigit(t.charAt(0)) ? Long.parseLong(t) : valueOf.applyAsLong(t);
    }

    @Override
    public String toString() {
        return (out ? "out " : "") + type.name().toLowerCase() + (modifiers.isEmpty() ? "" : modifiers) + " " + name;
    }
}
