package io.gpusockets.emulated.ptx;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * An opcode's modifiers ({@code ld.global.nc.v4.f32} → global, nc, v4, f32), consumed by the
 * instruction's builder; any left over make the instruction unsupported, so a modifier the
 * interpreter does not know is never silently ignored.
 */
final class Mods {
    /** Modifiers with no effect under this execution model (cache hints, memory-order scopes). */
    private static final Set<String> NO_EFFECT = Set.of("ca", "cg", "cs", "lu", "cv", "nc", "wb", "wt", "volatile",
            "relaxed", "acquire", "release", "acq_rel", "weak", "cta", "gpu", "sys", "cluster", "uni", "aligned", "sync");

    private final List<String> mods;
    /** Whether {@link #types} takes .f16/.f16x2/.bf16/.bf16x2 (only instructions that execute them ask for it). */
    private boolean halves;

    Mods(List<String> mods) {
        this.mods = new ArrayList<>(mods);
    }

    boolean take(String m) {
        return mods.remove(m);
    }

    boolean has(String m) {
        return mods.contains(m);
    }

    /** The modifiers not taken yet (the list itself: a builder may take them off it). */
    List<String> rest() {
        return mods;
    }

    /** Removes the first of {@code options} present and returns its index, or -1. */
    int takeOne(String... options) {
        for (int i = 0; i < options.length; i++) {
            if (mods.remove(options[i])) {
                return i;
            }
        }
        return -1;
    }

    void dropNoEffect() {
        mods.removeIf(m -> NO_EFFECT.contains(m) || m.startsWith("L1::") || m.startsWith("L2::") || m.startsWith("level::"));
    }

    /** The types named, in order (cvt has two), removed. */
    List<Integer> types() throws PtxUnsupported {
        List<Integer> out = new ArrayList<>();
        for (var it = mods.iterator(); it.hasNext(); ) {
            String m = it.next();
            int t = Types.parse(m);
            if (t < 0 || Types.isHalf(t) && !halves) {
                throw new PtxUnsupported("type ." + m);
            }
            if (t > 0) {
                out.add(t);
                it.remove();
            }
        }
        return out;
    }

    void allowHalves() {
        halves = true;
    }

    /** A .f16/.f16x2/.bf16/.bf16x2 type among the modifiers, removed; 0 when there is none. */
    int halfType() {
        for (var it = mods.iterator(); it.hasNext(); ) {
            int t = Types.parse(it.next());
            if (t > 0 && Types.isHalf(t)) {
                it.remove();
                return t;
            }
        }
        return 0;
    }

    int type() throws PtxUnsupported {
        List<Integer> t = types();
        if (t.size() != 1) {
            throw new PtxUnsupported(t.isEmpty() ? "no type" : "several types");
        }
        return t.getFirst();
    }

    /** A vector width .v2/.v4, or 1. */
    int vector() {
        int i = takeOne("v2", "v4");
        return i < 0 ? 1 : i == 0 ? 2 : 4;
    }

    void done() throws PtxUnsupported {
        if (!mods.isEmpty()) {
            throw new PtxUnsupported("modifier ." + String.join(".", mods));
        }
    }
}
