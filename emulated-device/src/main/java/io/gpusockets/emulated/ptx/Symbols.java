package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The names an entry's operands resolve to: registers (slots), symbols (a state space and an
 * address in it), immediates and special registers (constant and special slots, shared by value).
 */
final class Symbols {
    record Symbol(int space, long address) {
    }

    final Map<String, Integer> registers = new HashMap<>();
    /** The names of the .pred registers among them. */
    final java.util.Set<String> predicates = new java.util.HashSet<>();
    /** Bytes of each slot's register (4 for .b32): 32-bit address registers are masked. */
    final List<Integer> slotBytes;
    final Map<String, Symbol> symbols;
    final Map<Long, Integer> constants;
    final Map<Integer, Integer> specials;
    final List<Integer> constSlots;
    final List<Long> constValues;
    final List<Integer> specialSlots;
    final List<Integer> specialKinds;

    Symbols() {
        slotBytes = new ArrayList<>();
        symbols = new HashMap<>();
        constants = new HashMap<>();
        specials = new HashMap<>();
        constSlots = new ArrayList<>();
        constValues = new ArrayList<>();
        specialSlots = new ArrayList<>();
        specialKinds = new ArrayList<>();
    }

    /**
     * The names of one function of the program: its own registers and a copy of {@code outer}'s
     * symbols, sharing the slot numbering and the constant and special slots with it.
     */
    Symbols(Symbols outer) {
        slotBytes = outer.slotBytes;
        symbols = new HashMap<>(outer.symbols);
        constants = outer.constants;
        specials = outer.specials;
        constSlots = outer.constSlots;
        constValues = outer.constValues;
        specialSlots = outer.specialSlots;
        specialKinds = outer.specialKinds;
    }

    /**
     * Most register, constant and special slots one entry may have. PTX comes from clients: a
     * declaration such as {@code .reg .b32 %r<2000000000>} must not make the backend allocate its
     * registers (nvcc's entries use hundreds to a few thousand).
     */
    static final int MAX_SLOTS = 1 << 16;

    /** A declared register's slot; refused past {@link #MAX_SLOTS}. */
    int newRegister(int bytes) throws PtxUnsupported {
        if (slotBytes.size() >= MAX_SLOTS) {
            throw new PtxUnsupported("more than " + MAX_SLOTS + " registers in one entry");
        }
        return newSlot(bytes);
    }

    /** A slot for a constant or special register: bounded by the entry's instructions, which read them. */
    int newSlot(int bytes) {
        slotBytes.add(bytes);
        return slotBytes.size() - 1;
    }

    int constant(long value) {
        return constants.computeIfAbsent(value, v -> {
            int slot = newSlot(8);
            constSlots.add(slot);
            constValues.add(v);
            return slot;
        });
    }

    int special(int kind) {
        return specials.computeIfAbsent(kind, k -> {
            int slot = newSlot(4);
            specialSlots.add(slot);
            specialKinds.add(k);
            return slot;
        });
    }

    /** %envreg0..%envreg31. */
    private static boolean envreg(String n) {
        return n.matches("[0-9]|[12][0-9]|3[01]");
    }

    static int[] ints(List<Integer> list) {
        return list.stream().mapToInt(Integer::intValue).toArray();
    }

    /** Static special registers by name, or -1; dynamic ones (%clock...) are -2 - their Program code. */
    static int specialKind(String name) {
        return switch (name) {
            case "%tid.x" -> Program.TID_X;
            case "%tid.y" -> Program.TID_Y;
            case "%tid.z" -> Program.TID_Z;
            case "%ntid.x" -> Program.NTID_X;
            case "%ntid.y" -> Program.NTID_Y;
            case "%ntid.z" -> Program.NTID_Z;
            case "%ctaid.x" -> Program.CTAID_X;
            case "%ctaid.y" -> Program.CTAID_Y;
            case "%ctaid.z" -> Program.CTAID_Z;
            case "%nctaid.x" -> Program.NCTAID_X;
            case "%nctaid.y" -> Program.NCTAID_Y;
            case "%nctaid.z" -> Program.NCTAID_Z;
            case "%laneid" -> Program.LANEID;
            case "%warpid" -> Program.WARPID;
            case "%nwarpid" -> Program.NWARPID;
            case "%lanemask_eq" -> Program.LANEMASK_EQ;
            case "%lanemask_le" -> Program.LANEMASK_LE;
            case "%lanemask_lt" -> Program.LANEMASK_LT;
            case "%lanemask_ge" -> Program.LANEMASK_GE;
            case "%lanemask_gt" -> Program.LANEMASK_GT;
            case "%gridid" -> Program.ZERO;
            // the driver's environment registers: %envreg1/2 hold the grid workspace of a cooperative launch
            // (cooperative groups' grid_group), null in any other launch, which is what grid_group::is_valid() tests
            case "%envreg1", "%envreg2" -> Program.GRID_WORKSPACE;
            case "%smid" -> Program.SMID;
            case "%nsmid" -> Program.NSMID;
            case "%dynamic_smem_size" -> Program.DYNAMIC_SMEM_SIZE;
            case "%total_smem_size" -> Program.TOTAL_SMEM_SIZE;
            case "%clock" -> -2 - Program.CLOCK;
            case "%clock64" -> -2 - Program.CLOCK64;
            case "%globaltimer" -> -2 - Program.GLOBALTIMER;
            default -> name.startsWith("%envreg") && envreg(name.substring(7)) ? Program.ZERO : -1;
        };
    }
}
