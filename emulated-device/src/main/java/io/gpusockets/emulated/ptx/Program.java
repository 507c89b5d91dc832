package io.gpusockets.emulated.ptx;

/**
 * One entry parsed for the PTX engines (interpreted by {@link Cta}, compiled by {@link JitCompiler}): its instructions (an implicit exit at the end), how many
 * register slots a lane has, the constant slots (immediates, symbol addresses) with their values,
 * the special-register slots with what fills them, and the entry's shared and local memory sizes.
 */
final class Program {
    // Special registers filled per warp.
    static final int TID_X = 0, TID_Y = 1, TID_Z = 2, NTID_X = 3, NTID_Y = 4, NTID_Z = 5;
    static final int CTAID_X = 6, CTAID_Y = 7, CTAID_Z = 8, NCTAID_X = 9, NCTAID_Y = 10, NCTAID_Z = 11;
    static final int LANEID = 12, WARPID = 13, NWARPID = 14, LANEMASK_EQ = 15, LANEMASK_LE = 16;
    static final int LANEMASK_LT = 17, LANEMASK_GE = 18, LANEMASK_GT = 19, ZERO = 20;
    /**
     * %dynamic_smem_size (the launch's sharedMemBytes), %total_smem_size (static plus dynamic shared bytes, not
     * rounded to an allocation unit), %smid (the CTA's linear index modulo {@link #SM_COUNT}: PTX allows any value
     * below %nsmid, and CTAs spread over the SMs this way), %nsmid ({@link #SM_COUNT}). %gridid is {@link #ZERO}:
     * any launch number is allowed, and one launch's CTAs agree on it.
     */
    static final int DYNAMIC_SMEM_SIZE = 21, TOTAL_SMEM_SIZE = 22, SMID = 23, NSMID = 24;
    /**
     * %envreg1 and %envreg2, the halves of the grid workspace's address (cooperative groups' grid_group): 0, as in a
     * launch that is not cooperative; {@link PtxKernel#readsGridWorkspace} lets a cooperative launch of such an entry be
     * refused, since grid-wide barriers are not emulated.
     */
    static final int GRID_WORKSPACE = 25;
    /** The multiprocessor count the device advertises (DeviceProperties.MULTIPROCESSOR_COUNT). */
    static final int SM_COUNT = 132;
    // Specials read when the instruction runs (Insn.CLOCK's mod).
    static final int CLOCK = 1, CLOCK64 = 2, GLOBALTIMER = 3;

    final String entry;
    final Insn[] code;
    final int slots;
    final int[] constSlots;
    final long[] constValues;
    final int[] specialSlots;
    final int[] specialKinds;
    /** Bytes of static shared memory; dynamic (extern) shared memory starts at this offset. */
    final long staticShared;
    final long localBytes;
    /** Whether the entry launches kernels (calls cudaLaunchDeviceV2): its launches then run {@link DeviceLaunches}. */
    boolean launchesKernels;

    Program(String entry, Insn[] code, int slots, int[] constSlots, long[] constValues, int[] specialSlots,
            int[] specialKinds, long staticShared, long localBytes) {
        this.entry = entry;
        this.code = code;
        this.slots = slots;
        this.constSlots = constSlots;
        this.constValues = constValues;
        this.specialSlots = specialSlots;
        this.specialKinds = specialKinds;
        this.staticShared = staticShared;
        this.localBytes = localBytes;
    }
}
