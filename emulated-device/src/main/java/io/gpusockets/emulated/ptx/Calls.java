package io.gpusockets.emulated.ptx;

/**
 * Device functions of a program. Each thread has a stack of frames in its local memory; a frame
 * holds the function's parameters and return values, its {@code .local} variables and the
 * {@code .param} variables of its call sites ({@link Declarations#finishFrame}). A call copies the
 * arguments from the caller's call-site variables into the callee's frame (placed right after the
 * caller's), saves the callee's registers for the lane (so each active frame has registers of its
 * own, recursion included) and jumps; {@code ret} copies the return value back, restores them and
 * returns. Extern functions (vprintf, malloc, free, __assertfail) run in Java on the caller's
 * call-site variables.
 */
final class Calls {
    /** Most frames a thread may have (the kernel's own counts as one); one more is a kernel fault. */
    static final int MAX_DEPTH = 1024;
    /** Most bytes of local memory (all frames) a thread may use; more is a kernel fault. */
    static final long MAX_STACK_BYTES = 512 << 10;

    static final int VPRINTF = 1;
    static final int MALLOC = 2;
    static final int FREE = 3;
    /** assert() failing: {@code __assertfail(message, file, line, function, charSize)} ends the launch with CUDA_ERROR_ASSERT. */
    static final int ASSERTFAIL = 4;
    /** Dynamic parallelism ({@link DeviceLaunches}): cudaGetParameterBufferV2(func, grid, block, shared) and cudaLaunchDeviceV2(buffer, stream). */
    static final int PARAMETER_BUFFER = 5;
    static final int LAUNCH_DEVICE = 6;
    /** The device runtime's cudaGetLastError / cudaPeekAtLastError: the thread's last error from the two above. */
    static final int GET_LAST_ERROR = 7;
    static final int PEEK_AT_LAST_ERROR = 8;
    /** {@code cudaGraphSetConditional(handle u64, value u32)}: sets a conditional node's value (GlobalMemory.setConditional). */
    static final int SET_CONDITIONAL = 9;

    private Calls() {
    }

    /** A function of the program (the entry included). */
    static final class Func {
        final String name;
        int entryPc;
        /** Frame bytes (16-aligned). */
        long frameBytes;
        /** Register slots of the function, saved and restored around each call of it. */
        int[] registers;
        long[] paramOffsets;
        long[] paramSizes;
        long returnOffset = -1;
        long returnSize;

        Func(String name) {
            this.name = name;
        }
    }

    /** One call instruction: the callee (or extern kind) and the caller's frame offsets of its argument and return variables. */
    static final class Site {
        final String callee;
        final Func caller;
        final long[] argOffsets;
        final long[] argSizes;
        final long returnOffset;
        final long returnSize;
        Func target;
        int extern;
        /** Every size each argument's (and the return value's) variable is declared with in the caller. */
        java.util.List<java.util.Set<Long>> argDeclared = java.util.List.of();
        java.util.Set<Long> returnDeclared = java.util.Set.of();

        Site(String callee, Func caller, long[] argOffsets, long[] argSizes, long returnOffset, long returnSize) {
            this.callee = callee;
            this.caller = caller;
            this.argOffsets = argOffsets;
            this.argSizes = argSizes;
            this.returnOffset = returnOffset;
            this.returnSize = returnSize;
        }
    }

    /** A lane's active call: where to return and what to restore. */
    record Frame(Frame parent, int returnPc, long base, long top, long[] saved, Site site) {
    }
}
