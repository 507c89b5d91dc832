package io.gpusockets.protocol.api;

import java.util.function.IntToLongFunction;

/**
 * One parameter of an API table entry, with its bracketed modifiers parsed into typed fields (the
 * grammar is at the top of cuda-driver.api). Expressions name parameters by index ({@link Expr}).
 *
 * @param name     the parameter's name in cuda.h
 * @param index    its position in the entry, from 0
 * @param out      whether the driver writes through it
 * @param type     its type
 * @param length   bytes: the length; null for other types
 * @param range    dptr input: the bytes [p, p+range) that must lie in one session allocation; null
 *                 when p itself must (or, with {@code free}, when p must be an allocation's base)
 * @param rows     dptr input with {@code range}: rows of a pitched block, {@code pitch} apart; or null
 * @param pitch    dptr input with {@code rows}: the pitch; or null
 * @param alloc    dptr output: registers a new allocation of this many bytes; or null
 * @param global   dptr output: registers a module global of this many bytes; or null
 * @param owner    handle output: index of the handle parameter that owns it (dropped with it), or -1
 * @param nullable handle input: 0 is allowed; bytes input: NULL travels as length 0
 * @param destroy  handle input: dropped (with what it owns) after success
 * @param free     dptr input: the base of an allocation, dropped after success
 * @param optional output: the caller may pass NULL for it
 * @param known    i32/u32 input of a {@code known} entry: the values a frontend asks for in advance
 *                 ({@code known=LIST}); empty otherwise
 * @param byValue  bytes input of a constant length: cuda.h passes it as a struct by value (CUipcMemHandle,
 *                 CUipcEventHandle); the exported C function takes the struct and hands the frontend its address, and
 *                 the backend's downcall passes it by value again. Everywhere else it is a host buffer of that length.
 */
public record ApiParam(String name, int index, boolean out, ParamType type, Expr length, Expr range, Expr rows,
                       Expr pitch, Expr alloc, Expr global, int owner, boolean nullable, boolean destroy,
                       boolean free, boolean optional, java.util.List<Integer> known, boolean byValue) {

    /** Whether a successful call registers a device range from this output ({@code alloc=} or {@code global=}). */
    public boolean registersRange() {
        return alloc != null || global != null;
    }

    /** The size of the range a {@code alloc=} or {@code global=} output registers. */
    public Expr rangeSize() {
        return alloc != null ? alloc : global;
    }

    /**
     * The bytes a dptr input with {@code range} touches: {@code range} itself, or with {@code rows}
     * and {@code pitch} a pitched block ({@link #pitchedSpan}). -1 when out of range.
     */
    public long deviceSpan(IntToLongFunction valueAt) {
        long row = range.evaluate(valueAt);
        if (rows == null) {
            return row;
        }
        return pitchedSpan(row, rows.evaluate(valueAt), pitch.evaluate(valueAt));
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

    @Override
    public String toString() {
        StringBuilder m = new StringBuilder();
        append(m, length == null ? null : length.text());
        append(m, range == null ? null : "range=" + range);
        append(m, rows == null ? null : "rows=" + rows);
        append(m, pitch == null ? null : "pitch=" + pitch);
        append(m, alloc == null ? null : "alloc=" + alloc);
        append(m, global == null ? null : "global=" + global);
        append(m, owner < 0 ? null : "owner=" + owner);
        append(m, nullable ? "nullable" : null);
        append(m, destroy ? "destroy" : null);
        append(m, free ? "free" : null);
        append(m, optional ? "optional" : null);
        append(m, known.isEmpty() ? null : "known=" + known.size() + " values");
        append(m, byValue ? "byvalue" : null);
        return (out ? "out " : "") + type.name().toLowerCase() + (m.isEmpty() ? "" : "[" + m + "]") + " " + name;
    }

    private static void append(StringBuilder b, String s) {
        if (s != null) {
            b.append(b.isEmpty() ? "" : ";").append(s);
        }
    }
}
