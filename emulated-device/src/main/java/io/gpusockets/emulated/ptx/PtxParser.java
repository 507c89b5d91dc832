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
     * @param funcs    the module's .func definitions by name (those the entry calls are parsed)
     * @param externs  the module's .extern .func names
     */
    static Program parse(String entry, String body, int firstLine, Map<String, Long> params, Map<String, Long> globals,
                         List<Map.Entry<String, Integer>> moduleShared, Map<String, PtxFunction> funcs,
                         java.util.Set<String> externs) throws PtxUnsupported {
        Symbols root = new Symbols();
        globals.forEach((name, address) -> root.symbols.put(name, new Symbols.Symbol(Insn.GLOBAL, address)));
        Symbols symbols = new Symbols(root);
        params.forEach((name, offset) -> symbols.symbols.put(name, new Symbols.Symbol(Insn.PARAM, offset)));
        Declarations declarations = new Declarations(symbols);
        for (Map.Entry<String, Integer> s : moduleShared) {
            try {
                // Only the variables this entry (or a function of the module) names: a module holds the shared
                // variables of all its kernels, and a block gets only its own kernel's, as on a GPU.
                String name = Declarations.declaredName(s.getKey().trim());
                if (name != null && !named(name, body, funcs)) {
                    continue;
                }
                declarations.declare(s.getKey().trim());
                if (name != null && symbols.symbols.containsKey(name)) {
                    root.symbols.put(name, symbols.symbols.get(name));   // functions name them too
                }
            } catch (PtxUnsupported | RuntimeException e) {
                throw new PtxUnsupported("line " + s.getValue() + ": " + e.getMessage());
            }
        }
        List<Insn> code = new ArrayList<>();
        Calls.Func main = new Calls.Func(entry);
        long staticShared = body(entry, body, firstLine, symbols, declarations, main, true, code);
        Map<String, Calls.Func> linked = new HashMap<>();
        boolean launches = false;
        linked.put(entry, main);   // a kernel does not call itself (that is a launch), so the name is free
        for (int i = 0; i < code.size(); i++) {
            Insn in = code.get(i);
            if (in.op != Insn.CALL) {
                continue;
            }
            Calls.Site site = in.call;
            String callee = site.callee;
            PtxFunction f = funcs.get(callee);
            if (f == null) {
                site.extern = switch (callee) {
                    case "vprintf" -> Calls.VPRINTF;
                    case "malloc" -> Calls.MALLOC;
                    case "free" -> Calls.FREE;
                    case "__assertfail" -> Calls.ASSERTFAIL;
                    case "cudaGraphSetConditional" -> Calls.SET_CONDITIONAL;
                    case "cudaGetParameterBufferV2", "__cudaCDP2GetParameterBufferV2" -> Calls.PARAMETER_BUFFER;
                    case "cudaLaunchDeviceV2", "cudaLaunchDeviceV2_ptsz", "__cudaCDP2LaunchDeviceV2", "__cudaCDP2LaunchDeviceV2_ptsz" ->
                            Calls.LAUNCH_DEVICE;
                    case "cudaGetLastError", "__cudaCDP2GetLastError" -> Calls.GET_LAST_ERROR;
                    case "cudaPeekAtLastError", "__cudaCDP2PeekAtLastError" -> Calls.PEEK_AT_LAST_ERROR;
                    default -> 0;
                };
                if (site.extern == 0 || !externs.contains(callee)) {
                    throw new PtxUnsupported("line " + in.line + ": call to " + (externs.contains(callee) ? "extern function " : "undefined function ")
                            + callee + " (of the extern functions vprintf, malloc, free, __assertfail, cudaGetParameterBufferV2, "
                            + "cudaLaunchDeviceV2, cudaGetLastError, cudaPeekAtLastError and cudaGraphSetConditional are covered)");
                }
                // The parameter sizes of each extern as nvcc declares it, and its return value's (0: none).
                long[] args = switch (site.extern) {
                    case Calls.VPRINTF -> new long[] {8, 8};                  // format, argument buffer -> int
                    case Calls.MALLOC, Calls.FREE -> new long[] {8};          // size -> pointer; pointer
                    case Calls.SET_CONDITIONAL -> new long[] {8, 4};          // handle, value
                    case Calls.PARAMETER_BUFFER -> new long[] {8, 12, 12, 4}; // function, grid, block, shared bytes -> pointer
                    case Calls.LAUNCH_DEVICE -> new long[] {8, 8};            // parameter buffer, stream -> cudaError_t
                    case Calls.GET_LAST_ERROR, Calls.PEEK_AT_LAST_ERROR -> new long[0];   // -> cudaError_t
                    default -> new long[] {8, 8, 4, 8, 8};                    // message, file, line, function, charSize
                };
                long returns = switch (site.extern) {
                    case Calls.VPRINTF, Calls.LAUNCH_DEVICE, Calls.GET_LAST_ERROR, Calls.PEEK_AT_LAST_ERROR -> 4;
                    case Calls.MALLOC, Calls.PARAMETER_BUFFER -> 8;
                    default -> 0;
                };
                launches |= site.extern == Calls.LAUNCH_DEVICE;
                // Each argument (and the return value) must be declared with the parameter's size: one name declared in
                // several call sequences of a function (nvcc reuses param0, retval0...) is one variable as large as the
                // largest, so the size this call declares is among the name's declared sizes.
                boolean fits = site.argSizes.length == args.length
                        && (site.returnOffset < 0 || returns != 0 && site.returnDeclared.contains(returns));
                for (int k = 0; fits && k < args.length; k++) {
                    fits = site.argDeclared.get(k).contains(args[k]);
                }
                if (!fits) {
                    throw new PtxUnsupported("line " + in.line + ": call of " + callee + " with other arguments than its declaration");
                }
                continue;
            }
            Calls.Func target = linked.get(callee);
            if (target == null || target == main) {
                target = new Calls.Func(callee);
                linked.put(callee, target);
                Symbols fs = new Symbols(root);
                Declarations fd = new Declarations(fs, true);
                target.paramOffsets = new long[f.params().size()];
                target.paramSizes = new long[f.params().size()];
                if (f.returns().size() > 1) {
                    throw new PtxUnsupported("function " + callee + " with several return values");
                }
                for (PtxFunction.Param r : f.returns()) {
                    target.returnOffset = fd.frameVariable(r.name(), r.size(), r.alignment());
                    target.returnSize = r.size();
                }
                for (int k = 0; k < f.params().size(); k++) {
                    PtxFunction.Param q = f.params().get(k);
                    target.paramOffsets[k] = fd.frameVariable(q.name(), q.size(), q.alignment());
                    target.paramSizes[k] = q.size();
                }
                target.entryPc = code.size();
                body(callee, f.body(), f.line(), fs, fd, target, false, code);
            }
            if (site.argSizes.length != target.paramSizes.length) {
                throw new PtxUnsupported("line " + in.line + ": call of " + callee + " with " + site.argSizes.length + " arguments, it has "
                        + target.paramSizes.length);
            }
            for (int k = 0; k < site.argSizes.length; k++) {
                if (site.argSizes[k] < target.paramSizes[k]) {
                    throw new PtxUnsupported("line " + in.line + ": argument " + k + " of " + callee + " is smaller than the parameter");
                }
            }
            if (site.returnOffset >= 0 && (target.returnOffset < 0 || site.returnSize < target.returnSize)) {
                throw new PtxUnsupported("line " + in.line + ": call of " + callee + " expects a return value it does not have");
            }
            site.target = target;
            in.target = target.entryPc;
        }
        Program program = new Program(entry, code.toArray(new Insn[0]), symbols.slotBytes.size(), Symbols.ints(symbols.constSlots),
                symbols.constValues.stream().mapToLong(Long::longValue).toArray(), Symbols.ints(symbols.specialSlots),
                Symbols.ints(symbols.specialKinds), staticShared, main.frameBytes);
        program.launchesKernels = launches;
        return program;
    }

    /** Whether identifier {@code name} occurs in the entry's body or in a function of the module. */
    private static boolean named(String name, String body, Map<String, PtxFunction> funcs) {
        java.util.regex.Pattern p = java.util.regex.Pattern.compile("(?<![\\w$%])" + java.util.regex.Pattern.quote(name) + "(?![\\w$])");
        if (p.matcher(body).find()) {
            return true;
        }
        for (PtxFunction f : funcs.values()) {
            if (p.matcher(f.body()).find()) {
                return true;
            }
        }
        return false;
    }

    /** Parses one function's body onto {@code code}; returns the static shared bytes (the entry's). */
    private static long body(String name, String body, int firstLine, Symbols symbols, Declarations declarations, Calls.Func function,
                             boolean entry, List<Insn> code) throws PtxUnsupported {
        String text = body.trim();
        if (text.startsWith("{") && text.endsWith("}")) {
            text = text.substring(1, text.length() - 1);
        }
        List<Statements.Statement> statements = Shadowing.rename(Statements.scoped(text, firstLine));
        List<Statements.Statement> instructions = new ArrayList<>();
        java.util.Set<String> before = new java.util.HashSet<>(symbols.registers.keySet());
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
        long staticShared = entry ? declarations.finishShared() : 0;
        function.frameBytes = declarations.finishFrame();
        function.registers = symbols.registers.entrySet().stream().filter(e -> !before.contains(e.getKey()))
                .mapToInt(Map.Entry::getValue).sorted().toArray();

        int first = code.size();
        Map<String, Integer> labels = new HashMap<>();
        List<String> targets = new ArrayList<>();
        Builders builders = new Builders(new Operands(symbols), symbols, function, declarations, entry);
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
        Insn end = new Insn(firstLine, "(end of " + name + ")");
        end.op = entry ? Insn.EXIT : Insn.RET;
        code.add(end);
        targets.add(null);
        for (int i = first; i < code.size(); i++) {
            String label = targets.get(i - first);
            if (label != null) {
                Integer target = labels.get(label);
                if (target == null) {
                    throw new PtxUnsupported("line " + code.get(i).line + ": branch to " + label + ", no such label");
                }
                code.get(i).target = target;
            }
        }
        return staticShared;
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
