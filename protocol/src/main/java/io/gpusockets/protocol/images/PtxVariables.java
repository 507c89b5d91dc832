package io.gpusockets.protocol.images;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_PTX;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Module-scope {@code .global} and {@code .const} variables of PTX text, with their sizes and initial
 * bytes: what the driver allocates in device memory when it loads the module. Declarations that
 * allocate nothing ({@code .extern}) are left out. The declarator grammar (type, vector width,
 * {@code .align}, names, array dimensions) serves the emulated device's parameter lists too.
 */
public final class PtxVariables {
    /** A module-scope variable. {@code initial} holds its initializer's bytes, or is empty (zero-filled). */
    public record Variable(String name, long size, long alignment, byte[] initial) {
    }

    /**
     * Type, alignment, names and element count of the part of a declaration after its state space;
     * {@code count} is -1 for {@code name[]} (sized by its initializer).
     */
    public record Declarator(String typeName, long elementSize, long vector, long alignment, List<String> names, long count) {
    }

    private PtxVariables() {
    }

    /** Every module-scope {@code .global}/{@code .const} variable of {@code ptx}, in declaration order, sizes only (no initial bytes). */
    public static List<Variable> of(String ptx) {
        List<Variable> out = new ArrayList<>();
        PtxText.scan(PtxText.stripComments(ptx), new PtxText.Visitor() {
            @Override
            public void statement(String text, int line) {
                out.addAll(declared(text, false));
            }

            @Override
            public void block(String header, String body, int line) {
                // entries and functions: their variables are not module-scope
            }
        });
        return out;
    }

    /**
     * The variables a module-scope statement defines: none unless it is a {@code .global}/{@code .const}
     * definition; with {@code withBytes}, each with its initializer's bytes.
     */
    public static List<Variable> declared(String statement, boolean withBytes) {
        int eq = statement.indexOf('=');
        String declaration = eq < 0 ? statement : statement.substring(0, eq);
        List<String> tokens = PtxText.tokens(declaration);
        int space = Math.max(tokens.indexOf(".global"), tokens.indexOf(".const"));
        if (space < 0 || tokens.contains(".extern") || tokens.contains(".entry") || tokens.contains(".func")) {
            return List.of();
        }
        Declarator d = declarator(tokens.subList(space + 1, tokens.size()), "variable");
        String initializer = eq < 0 ? "" : statement.substring(eq + 1);
        long componentSize = d.elementSize() / d.vector();
        byte[] initial = withBytes ? PtxInitializer.bytes(initializer, d.typeName(), componentSize) : new byte[0];
        // name[] takes its size from the initializer: its items, whether or not their bytes could be computed
        long count = d.count() >= 0 ? d.count() : PtxInitializer.items(initializer) / d.vector();
        long size;
        try {
            size = Math.multiplyExact(d.elementSize(), Math.max(count, 1));
        } catch (ArithmeticException e) {
            throw new ImageError(CUDA_ERROR_INVALID_PTX, "variable " + d.names() + " is larger than 2^63 bytes");
        }
        List<Variable> out = new ArrayList<>(d.names().size());
        for (String name : d.names()) {
            byte[] bytes = initial.length > size ? Arrays.copyOf(initial, (int) size) : initial;
            out.add(new Variable(name, size, d.alignment(), bytes));
        }
        return out;
    }

    /**
     * The declarator of {@code tokens} (a declaration's words after its state space).
     *
     * @throws ImageError CUDA_ERROR_INVALID_PTX without a type or a name, with a bad number or alignment
     */
    public static Declarator declarator(List<String> tokens, String what) {
        String type = null;
        long explicitAlign = 0;
        long vector = 1;
        long count = 1;
        boolean pointerAttributes = false;
        List<String> names = new ArrayList<>();
        for (int i = 0; i < tokens.size(); i++) {
            String t = tokens.get(i);
            if (t.equals(".align")) {
                long a = i + 1 < tokens.size() ? parseCount(tokens.get(++i), what) : 0;
                if (!pointerAttributes) {
                    explicitAlign = a;   // after .ptr it is the pointee's alignment, not the parameter's
                }
            } else if (t.equals(".ptr")) {
                pointerAttributes = true;
            } else if (t.equals(".v2") || t.equals(".v4") || t.equals(".v8")) {
                vector = Long.parseLong(t.substring(2));
            } else if (t.equals(".attribute")) {
                while (i < tokens.size() && !tokens.get(i).equals(")")) {
                    i++;
                }
            } else if (typeSize(t) > 0) {
                type = t;
            } else if (t.startsWith("[")) {
                String inner = t.substring(1, t.length() - 1).trim();
                try {
                    count = inner.isEmpty() ? -1 : (count < 0 ? -1 : Math.multiplyExact(count, parseCount(inner, what)));
                } catch (ArithmeticException e) {
                    throw new ImageError(CUDA_ERROR_INVALID_PTX, what + ": dimensions over 2^63 elements");
                }
            } else if (!t.startsWith(".") && !t.equals(",") && !Character.isDigit(t.charAt(0))) {
                names.add(t);
            }
        }
        if (type == null || names.isEmpty()) {
            throw new ImageError(CUDA_ERROR_INVALID_PTX, what + " without a type or a name: " + String.join(" ", tokens));
        }
        long elementSize = typeSize(type) * vector;
        long alignment = explicitAlign > 0 ? explicitAlign : elementSize;
        if (Long.bitCount(alignment) != 1) {
            throw new ImageError(CUDA_ERROR_INVALID_PTX, what + ": alignment " + alignment + " is not a power of two");
        }
        return new Declarator(type, elementSize, vector, alignment, List.copyOf(names), count);
    }

    private static long parseCount(String s, String what) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new ImageError(CUDA_ERROR_INVALID_PTX, what + ": not a number: " + s);
        }
    }

    /** Bytes of a PTX fundamental type, or 0 when {@code t} is not one. */
    public static long typeSize(String t) {
        return switch (t) {
            case ".b8", ".u8", ".s8" -> 1;
            case ".b16", ".u16", ".s16", ".f16", ".bf16" -> 2;
            case ".b32", ".u32", ".s32", ".f32", ".f16x2", ".bf16x2" -> 4;
            case ".b64", ".u64", ".s64", ".f64", ".texref", ".samplerref", ".surfref" -> 8;
            case ".b128" -> 16;
            default -> 0;
        };
    }
}
