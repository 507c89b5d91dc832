package io.gpusockets.emulated.ptx;

/**
 * An entry compiled to JVM bytecode by {@link JitCompiler}: a subclass generated per entry, one
 * hidden class each. {@link #run} runs one thread of a CTA from a resume point until it exits or
 * reaches an instruction its warp or block must meet at (a barrier, a shuffle, a vote): there it
 * saves the registers live across that instruction in {@code regs} and returns, and
 * {@link JitCta} carries out the instruction for the threads that met there, then resumes them.
 */
abstract class JitCode {
    /** The entry's instructions: the generated code hands those it does not compile itself to {@link Alu}. */
    protected final Insn[] code;

    protected JitCode(Insn[] code) {
        this.code = code;
    }

    /**
     * Runs thread {@code t} of the CTA {@code cta} is running, from resume point {@code at} (0: the
     * entry's start; k: after instruction k - 1, a meeting point, whose results are in {@code regs}).
     *
     * @return 0 when the thread exited, else k: it waits at instruction k - 1, its live registers in {@code regs}
     */
    abstract int run(JitCta cta, long[] regs, int t, int at);
}
