package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.List;

/**
 * Body directives: {@code .reg} (register slots, {@code %r<N>} ranges included) and {@code .shared}/
 * {@code .local} variables, laid out in declaration order at their alignment; {@code .extern .shared}
 * arrays all start where dynamic shared memory does (after the static variables, 16-aligned).
 */
final class Declarations {
    /** Dynamic shared memory's offset, known once every static variable is placed. */
    static final long DYNAMIC = Long.MIN_VALUE;

    long sharedBytes;
    /**
     * Bytes of the function's frame: its parameters and return values (a .func's), then its .local
     * variables in declaration order, then the call sites' .param variables ({@link #finishFrame}).
     */
    long localBytes;
    final List<String> externShared = new ArrayList<>();
    /** Call-site .param variables: name to {size, alignment}; one name declared in several call sequences is one variable, as large as the largest. */
    final java.util.Map<String, long[]> callParams = new java.util.LinkedHashMap<>();
    /** Call-site .param variables: name to every size it is declared with (nvcc reuses param0, retval0... across call sequences). */
    final java.util.Map<String, java.util.Set<Long>> callParamSizes = new java.util.HashMap<>();
    private final Symbols symbols;
    private final boolean function;

    Declarations(Symbols symbols) {
        this(symbols, false);
    }

    Declarations(Symbols symbols, boolean function) {
        this.symbols = symbols;
        this.function = function;
    }

    /** Places a .func's parameter or return value in the frame; returns its frame offset. */
    long frameVariable(String name, long size, long align) {
        localBytes = (localBytes + align - 1) / align * align;
        long offset = localBytes;
        symbols.symbols.put(name, new Symbols.Symbol(Insn.LOCAL, offset));
        localBytes += size;
        return offset;
    }

    /** Places the call sites' .param variables after the locals; returns the frame's size (16-aligned). */
    long finishFrame() {
        for (java.util.Map.Entry<String, long[]> e : callParams.entrySet()) {
            frameVariable(e.getKey(), e.getValue()[0], e.getValue()[1]);
        }
        localBytes = (localBytes + 15) / 16 * 16;
        return localBytes;
    }

    /** Handles a directive statement; returns false when it is not one the interpreter knows. */
    boolean declare(String statement) throws PtxUnsupported {
        List<String> tokens = tokens(statement);
        String first = tokens.getFirst();
        switch (first) {
            case ".reg" -> registers(tokens);
            case ".shared", ".local", ".extern", ".align" -> variable(tokens);
            case ".param" -> callParam(tokens);
            case ".pragma" -> {
            }
            default -> {
                return false;
            }
        }
        return true;
    }

    private void registers(List<String> tokens) throws PtxUnsupported {
        int type = 0;
        int vector = 1;
        for (int i = 1; i < tokens.size(); i++) {
            String t = tokens.get(i);
            if (t.startsWith(".v")) {
                vector = Integer.parseInt(t.substring(2));
            } else if (t.startsWith(".")) {
                type = Types.parse(t.substring(1));
                if (type <= 0) {
                    throw new PtxUnsupported("register type " + t);
                }
            } else if (!t.equals(",")) {
                if (vector != 1) {
                    throw new PtxUnsupported("vector registers");
                }
                int lt = t.indexOf('<');
                if (lt > 0) {
                    String base = t.substring(0, lt);
                    int count = Integer.parseInt(t.substring(lt + 1, t.length() - 1));
                    if (count < 0 || count > Symbols.MAX_SLOTS) {
                        throw new PtxUnsupported("register range " + t + " (at most " + Symbols.MAX_SLOTS + ")");
                    }
                    for (int k = 0; k < count; k++) {
                        add(base + k, type);
                    }
                } else {
                    add(t, type);
                }
            }
        }
    }

    private void add(String name, int type) throws PtxUnsupported {
        Integer slot = symbols.registers.get(name);
        if (type == Types.PRED) {
            symbols.predicates.add(name);
        }
        if (slot == null) {
            symbols.registers.put(name, symbols.newRegister(Types.size(type)));
        } else if (symbols.slotBytes.get(slot) != Types.size(type)) {
            // nvcc declares one scratch register (temp_param_reg) in every call sequence: those share a slot
            throw new PtxUnsupported("register " + name + " declared twice with different types (nested scopes)");
        }
    }

    /** {@code .param [.align N] .type name[[K]]} in a call sequence. */
    private void callParam(List<String> tokens) throws PtxUnsupported {
        Sized v = sized(tokens, 1, true);
        if (v.count < 0 || v.count > MAX_VARIABLE_BYTES / v.element || v.align < 0 || v.align > MAX_VARIABLE_BYTES) {
            throw new PtxUnsupported("call parameter " + v.name + " of " + v.count + " elements of " + v.element + " bytes");
        }
        long size = v.element * v.count;
        long a = v.align == 0 ? v.element : v.align;
        callParams.merge(v.name, new long[] {size, a}, (x, y) -> new long[] {Math.max(x[0], y[0]), Math.max(x[1], y[1])});
        callParamSizes.computeIfAbsent(v.name, k -> new java.util.HashSet<>()).add(size);
    }

    /** What a declaration says of one variable: alignment (0: its element's), element bytes, element count, name. */
    private record Sized(long align, long element, long count, String name) {
    }

    /**
     * Reads {@code [.align N] [.vK] .type name[[K]]} from {@code tokens} starting at {@code from}. With
     * {@code strict} any other token is refused; without it other directives and an initializer's
     * {@code =} are passed over (the caller judges them), and {@code name[]} has no elements.
     */
    private static Sized sized(List<String> tokens, int from, boolean strict) throws PtxUnsupported {
        long align = 0;
        long element = 0;
        long count = 1;
        String name = null;
        for (int i = from; i < tokens.size(); i++) {
            String t = tokens.get(i);
            if (t.equals(".align")) {
                align = Long.parseLong(tokens.get(++i));
            } else if (t.startsWith(".v")) {
                count *= Long.parseLong(t.substring(2));
            } else if (t.startsWith(".") && Types.parse(t.substring(1)) != 0) {
                int type = Types.parse(t.substring(1));
                element = type < 0 ? 2 : Types.size(type);   // f16 data is only bytes here
            } else if (t.startsWith("[")) {
                String inner = t.substring(1, t.length() - 1).trim();
                count = inner.isEmpty() && !strict ? 0 : count * Long.parseLong(inner);
            } else if (!t.startsWith(".") && !t.equals("=") && name == null) {
                name = t;
            } else if (strict || !t.startsWith(".") && !t.equals("=")) {
                throw new PtxUnsupported((name != null && !strict ? "declaration of several variables or an initializer: "
                        : "declaration ") + String.join(" ", tokens));
            }
        }
        if (name == null || element == 0) {
            throw new PtxUnsupported("declaration " + String.join(" ", tokens));
        }
        return new Sized(align, element, count, name);
    }

    /**
     * Largest .shared or .local variable: far above what a block may use (the launch checks the
     * totals against the device's limits), low enough that sizes cannot overflow when added up.
     */
    static final long MAX_VARIABLE_BYTES = 1L << 30;

    private void variable(List<String> tokens) throws PtxUnsupported {
        boolean external = tokens.contains(".extern");
        int space = tokens.contains(".shared") ? Insn.SHARED : tokens.contains(".local") ? Insn.LOCAL : -1;
        if (space < 0) {
            throw new PtxUnsupported("declaration " + String.join(" ", tokens));
        }
        if (space == Insn.SHARED && function) {
            throw new PtxUnsupported(".shared variable declared in a .func");
        }
        Sized v = sized(tokens, 0, false);
        long element = v.element;
        long count = v.count;
        String name = v.name;
        long align = v.align;
        if (tokens.contains("=")) {
            throw new PtxUnsupported("initialized " + (space == Insn.SHARED ? ".shared" : ".local") + " variable " + name);
        }
        align = align == 0 ? element : align;
        if (external) {
            if (space != Insn.SHARED) {
                throw new PtxUnsupported(".extern .local variable " + name);
            }
            externShared.add(name);
            symbols.symbols.put(name, new Symbols.Symbol(Insn.SHARED, DYNAMIC));
            return;
        }
        if (count < 0 || align <= 0 || align > MAX_VARIABLE_BYTES || count > MAX_VARIABLE_BYTES / element) {
            throw new PtxUnsupported("variable " + name + " of " + count + " elements of " + element + " bytes (at most "
                    + MAX_VARIABLE_BYTES + " bytes)");
        }
        long size = element * count;
        if (space == Insn.SHARED) {
            sharedBytes = (sharedBytes + align - 1) / align * align;
            symbols.symbols.put(name, new Symbols.Symbol(Insn.SHARED, sharedBytes));
            sharedBytes += size;
            if (sharedBytes > MAX_VARIABLE_BYTES) {
                throw new PtxUnsupported(".shared variables of more than " + MAX_VARIABLE_BYTES + " bytes");
            }
        } else {
            localBytes = (localBytes + align - 1) / align * align;
            symbols.symbols.put(name, new Symbols.Symbol(Insn.LOCAL, localBytes));
            localBytes += size;
            if (localBytes > MAX_VARIABLE_BYTES) {
                throw new PtxUnsupported(".local variables of more than " + MAX_VARIABLE_BYTES + " bytes");
            }
        }
    }

    /** The name a .shared/.local variable declaration declares, or null when it is none. */
    static String declaredName(String statement) {
        List<String> tokens = tokens(statement);
        if (!tokens.contains(".shared") && !tokens.contains(".local")) {
            return null;
        }
        try {
            return sized(tokens, 0, false).name;
        } catch (PtxUnsupported e) {
            return null;
        }
    }

    /** Places the extern shared arrays; returns where dynamic shared memory starts. */
    long finishShared() {
        long dynamic = (sharedBytes + 15) / 16 * 16;
        for (String name : externShared) {
            symbols.symbols.put(name, new Symbols.Symbol(Insn.SHARED, dynamic));
        }
        return dynamic;
    }

    static List<String> tokens(String s) {
        List<String> out = new ArrayList<>();
        int n = s.length();
        int i = 0;
        while (i < n) {
            char c = s.charAt(i);
            if (Character.isWhitespace(c)) {
                i++;
            } else if (c == ',' || c == '=') {
                out.add(String.valueOf(c));
                i++;
            } else if (c == '[') {
                int end = s.indexOf(']', i);
                out.add(s.substring(i, end + 1));
                i = end + 1;
            } else {
                int j = i;
                while (j < n && !Character.isWhitespace(s.charAt(j)) && ",=[".indexOf(s.charAt(j)) < 0) {
                    j++;
                }
                out.add(s.substring(i, j));
                i = j;
            }
        }
        return out;
    }
}
