package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Parses one entry's body into a {@link Program}. Directives first (so every variable is placed
 * before an operand names it), then instructions through {@link Builders}; labels become
 * instruction indices. Anything outside the covered subset throws {@link PtxUnsupported} naming the
 * construct and its line.
 */
final class PtxParser {
    private PtxParser() {
    }

    /**
     * @param params   the entry's parameters: name to offset in the parameter buffer
     * @param globals  the module's .global/.const variables: name to device address
     * @param moduleShared module-scope .shared declarations (text, line)
     */
    static Program parse(String entry, String body, int firstLine, Map<String, Long> params, Map<String, Long> globals,
                         List<Map.Entry<String, Integer>> moduleShared) throws PtxUnsupported {
        Symbols symbols = new Symbols();
        params.forEach((name, offset) -> symbols.symbols.put(name, new Symbols.Symbol(Insn.PARAM, offset)));
        globals.forEach((name, address) -> symbols.symbols.put(name, new Symbols.Symbol(Insn.GLOBAL, address)));
        Declarations declarations = new Declarations(symbols);
        for (Map.Entry<String, Integer> s : moduleShared) {
            try {
                declarations.declare(s.getKey().trim());
            } catch (PtxUnsupported | RuntimeException e) {
                throw new PtxUnsupported("line " + s.getValue() + ": " + e.getMessage());
            }
        }
        String text = body.trim();
        if (text.startsWith("{") && text.endsWith("}")) {
            text = text.substring(1, text.length() - 1);
        }
        List<Statements.Statement> statements = Statements.split(text, firstLine);
        List<Statements.Statement> instructions = new ArrayList<>();
        for (Statements.Statement s : statements) {
            if (!s.label() && s.text().startsWith(".")) {
                boolean known;
                try {
                    known = declarations.declare(s.text());
                } catch (PtxUnsupported | RuntimeException e) {
                    throw new PtxUnsupported("line " + s.line() + ": " + e.getMessage() + " in '" + s.text() + "'");
                }
                if (!known) {
                    throw new PtxUnsupported("line " + s.line() + ": directive '" + s.text() + "'");
                }
            } else if (!s.text().isEmpty()) {
                instructions.add(s);
            }
        }
        long staticShared = declarations.finishShared();

        Map<String, Integer> labels = new HashMap<>();
        List<Insn> code = new ArrayList<>();
        List<String> targets = new ArrayList<>();
        Builders builders = new Builders(new Operands(symbols), symbols);
        for (Statements.Statement s : instructions) {
            if (s.label()) {
                labels.put(s.text(), code.size());
                continue;
            }
            Insn in = new Insn(s.line(), s.text());
            try {
                targets.add(builders.build(in, s.text()));
            } catch (PtxUnsupported | RuntimeException e) {
                throw new PtxUnsupported("line " + s.line() + ": '" + s.text() + "': " + e.getMessage());
            }
            code.add(in);
        }
        Insn exit = new Insn(firstLine, "(end of " + entry + ")");
        exit.op = Insn.EXIT;
        code.add(exit);
        targets.add(null);
        for (int i = 0; i < code.size(); i++) {
            String label = targets.get(i);
            if (label != null) {
                Integer target = labels.get(label);
                if (target == null) {
                    throw new PtxUnsupported("line " + code.get(i).line + ": branch to " + label + ", no such label");
                }
                code.get(i).target = target;
            }
        }
        return new Program(entry, code.toArray(new Insn[0]), symbols.slotBytes.size(), Symbols.ints(symbols.constSlots),
                symbols.constValues.stream().mapToLong(Long::longValue).toArray(), Symbols.ints(symbols.specialSlots),
                Symbols.ints(symbols.specialKinds), staticShared, declarations.localBytes);
    }

    /** Splits "@!%p1 add.s32 a, b" into guard, opcode and operand text. */
    static String[] pieces(String text) {
        String guard = null;
        String rest = text;
        if (rest.startsWith("@")) {
            int sp = firstSpace(rest);
            guard = rest.substring(1, sp);
            rest = rest.substring(sp).trim();
        }
        int sp = firstSpace(rest);
        String opcode = sp < 0 ? rest : rest.substring(0, sp);
        String operands = sp < 0 ? "" : rest.substring(sp).trim();
        return new String[] {guard, opcode, operands};
    }

    private static int firstSpace(String s) {
        for (int i = 0; i < s.length(); i++) {
            if (Character.isWhitespace(s.charAt(i))) {
                return i;
            }
        }
        return -1;
    }

    static List<String> modifiers(String opcode) {
        List<String> parts = new ArrayList<>(Arrays.asList(opcode.split("\\.")));
        parts.removeFirst();
        return parts;
    }
}
