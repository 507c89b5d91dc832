package io.gpusockets.emulated.ptx;

/**
 * An entry uses PTX the interpreter does not cover (an instruction, type, state space or directive):
 * a launch of it fails with CUDA_ERROR_NOT_SUPPORTED carrying this message, which names the
 * construct and its PTX line. Nothing of the entry runs.
 */
public final class PtxUnsupported extends Exception {
    private static final long serialVersionUID = 1L;

    PtxUnsupported(String detail) {
        super(detail, null, false, false);
    }
}
