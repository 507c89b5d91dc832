package io.gpusockets.emulated.ptx;

/**
 * The 64-bit mbarrier object in shared memory (what {@code mbarrier.*} and the bulk copies that complete transactions
 * on one act on): its layout is the device's own (the PTX ISA keeps it opaque), here
 * <pre>
 *  63     62..42           41..21            20..0
 * [phase][tx count, signed][expected count][pending arrivals]
 * </pre>
 * A phase completes when its pending arrivals reach 0 and its transaction count is 0 (a bulk copy may complete its
 * bytes before the arrival that expects them, so the count goes below 0 meanwhile): the phase bit flips and the
 * pending count starts again from the expected one. A wait for the phase of parity P is over once the phase bit is
 * not P. Bulk copies are done when issued, so their bytes are complete at once.
 */
final class Mbarrier {
    private static final long FIELD = (1L << 21) - 1;

    private Mbarrier() {
    }

    /**
     * Failed waits in a row, in one CTA, after which the launch fails: the engines run a block's threads one after
     * another between barriers, so a phase that other threads of the block must complete while one spins waiting for it
     * cannot complete here (CUB's bulk-copy kernels wait after a bar.sync, which works).
     */
    static final long MAX_FAILED_WAITS = 1L << 20;

    static String stuck(Insn in) {
        return in.text + " (line " + in.line + "): a wait for an mbarrier phase that no thread of the block can complete while "
                + "the waiting thread spins (the emulated device runs a block's threads one after another between barriers)";
    }

    /** The largest count mbarrier.init takes (2^20 - 1, as the ISA gives it). */
    static final long MAX_COUNT = (1L << 20) - 1;

    static long init(long count) {
        return (count & FIELD) | (count & FIELD) << 21;
    }

    static long pending(long w) {
        return w & FIELD;
    }

    static long expected(long w) {
        return w >>> 21 & FIELD;
    }

    static long tx(long w) {
        return (w << 1) >> 43;   // bits 62..42, sign-extended
    }

    static long phase(long w) {
        return w >>> 63;
    }

    private static long make(long phase, long tx, long expected, long pending) {
        return phase << 63 | (tx & FIELD) << 42 | (expected & FIELD) << 21 | (pending & FIELD);
    }

    /** The word after {@code count} arrivals that expect {@code txBytes} more bytes (a phase may complete). */
    static long arrive(long w, long count, long txBytes) {
        return settle(phase(w), tx(w) + txBytes, expected(w), pending(w) - count);
    }

    /** The word after {@code bytes} of transactions completed. */
    static long completeTx(long w, long bytes) {
        return settle(phase(w), tx(w) - bytes, expected(w), pending(w));
    }

    /** The word after expecting {@code bytes} more transaction bytes (mbarrier.expect_tx). */
    static long expectTx(long w, long bytes) {
        return make(phase(w), tx(w) + bytes, expected(w), pending(w));
    }

    private static long settle(long phase, long tx, long expected, long pending) {
        if (pending <= 0 && tx == 0) {
            return make(phase ^ 1, 0, expected, expected);
        }
        return make(phase, tx, expected, Math.max(pending, 0));
    }

    /** Whether the phase of parity {@code parity} has completed. */
    static boolean done(long w, long parity) {
        return phase(w) != (parity & 1);
    }
}
