package io.gpusockets.emulated.ptx;

/**
 * The warp-wide instructions' semantics over a warp's register values laid out lane-major: the
 * values of one operand for lanes 0..31 at {@code r[base + lane]} (the interpreter's registers,
 * or a warp's operands gathered by the compiled engine). Offsets of an absent operand are negative.
 */
final class WarpOps {
    private WarpOps() {
    }

    /** shfl.sync as the PTX ISA defines it: source lane j from b, clamp and segment mask from c. */
    static void shuffle(int mode, int exec, long[] r, int a, int b, int c, int d, int d2, long[] scratch) {
        long[] src = scratch;
        System.arraycopy(r, a, src, 0, 32);
        for (int m = exec; m != 0; m &= m - 1) {
            int lane = Integer.numberOfTrailingZeros(m);
            int delta = (int) r[b + lane] & 31;
            int cv = (int) r[c + lane];
            int clamp = cv & 31;
            int segmask = (cv >>> 8) & 31;
            int maxLane = (lane & segmask) | (clamp & ~segmask);
            int minLane = lane & segmask;
            int j;
            boolean ok;
            switch (mode) {
                case 0 -> {
                    j = lane - delta;
                    ok = j >= maxLane;
                }
                case 1 -> {
                    j = lane + delta;
                    ok = j <= maxLane;
                }
                case 2 -> {
                    j = lane ^ delta;
                    ok = j <= maxLane;
                }
                default -> {
                    j = minLane | (delta & ~segmask);
                    ok = j <= maxLane;
                }
            }
            if (!ok) {
                j = lane;
            }
            r[d + lane] = src[j];
            if (d2 >= 0) {
                r[d2 + lane] = ok ? 1 : 0;
            }
        }
    }

    /**
     * match.any.sync / match.all.sync (all) over the lanes in {@code exec}: values a (the low 32 bits unless wide),
     * member masks at {@code mask}. The lanes compared with lane l are the executing lanes in l's member mask (a
     * non-exited member that does not execute it is undefined in PTX: it is left out). match.any: d is the set of them
     * whose value equals l's; match.all: d is that set (its member mask when every member takes part) if all their
     * values equal l's, else 0, and the predicate at {@code p} (absent when negative) says which.
     */
    static void match(boolean all, boolean wide, int exec, long[] r, int a, int mask, int d, int p) {
        long valueMask = wide ? -1L : 0xFFFF_FFFFL;
        long[] result = new long[32];
        int equal = 0;
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            int members = (int) r[mask + l] & exec;
            long v = r[a + l] & valueMask;
            int same = 0;
            for (int k = members; k != 0; k &= k - 1) {
                int j = Integer.numberOfTrailingZeros(k);
                if ((r[a + j] & valueMask) == v) {
                    same |= 1 << j;
                }
            }
            if (same == members) {
                equal |= 1 << l;
            }
            result[l] = all ? (same == members ? members & 0xFFFF_FFFFL : 0) : same & 0xFFFF_FFFFL;
        }
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            if (all && p >= 0) {
                r[p + l] = equal >>> l & 1;
            }
            r[d + l] = result[l];
        }
    }

    static void vote(int mode, boolean negA, int exec, long[] r, int a, int e, int d) {
        int ballot = 0;
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            int member = (int) r[e + l];
            if ((member >>> l & 1) != 0 && ((r[a + l] & 1) != 0) != negA) {
                ballot |= 1 << l;
            }
        }
        int members = 0;
        for (int m = exec; m != 0; m &= m - 1) {
            int l = Integer.numberOfTrailingZeros(m);
            members |= (int) r[e + l] & (1 << l);
        }
        long v = switch (mode) {
            case 0 -> ballot == members ? 1 : 0;
            case 1 -> ballot != 0 ? 1 : 0;
            case 2 -> ballot == 0 || ballot == members ? 1 : 0;
            default -> ballot & 0xFFFF_FFFFL;
        };
        for (int m = exec; m != 0; m &= m - 1) {
            r[d + Integer.numberOfTrailingZeros(m)] = v;
        }
    }

    /** redux.sync: every lane in {@code exec} gets op (Insn.REDUX_*) of the 32-bit values a over the lanes in exec. */
    static void redux(int op, int type, int exec, long[] r, int a, int e, int d) {
        boolean signed = Types.signed(type);
        int acc = switch (op) {
            case Insn.REDUX_MIN -> signed ? Integer.MAX_VALUE : -1;
            case Insn.REDUX_MAX -> signed ? Integer.MIN_VALUE : 0;
            case Insn.REDUX_AND -> -1;
            default -> 0;
        };
        for (int m = exec; m != 0; m &= m - 1) {
            int v = (int) r[a + Integer.numberOfTrailingZeros(m)];
            acc = switch (op) {
                case Insn.REDUX_ADD -> acc + v;
                case Insn.REDUX_MIN -> signed ? Math.min(acc, v) : Integer.compareUnsigned(acc, v) <= 0 ? acc : v;
                case Insn.REDUX_MAX -> signed ? Math.max(acc, v) : Integer.compareUnsigned(acc, v) >= 0 ? acc : v;
                case Insn.REDUX_AND -> acc & v;
                case Insn.REDUX_OR -> acc | v;
                default -> acc ^ v;
            };
        }
        for (int m = exec; m != 0; m &= m - 1) {
            r[d + Integer.numberOfTrailingZeros(m)] = acc & 0xFFFF_FFFFL;
        }
    }
}
