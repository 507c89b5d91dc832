package io.gpusockets.protocol.images;

/**
 * A module image that cannot be read as its format says: the CUresult the driver would return
 * (CUDA_ERROR_INVALID_IMAGE, _INVALID_PTX, _NO_BINARY_FOR_GPU) and a sentence saying why. The image
 * readers of this package throw it; the emulated device returns its code, the backend refuses the load
 * with it. Stackless: it is control flow on untrusted input, not a bug report.
 */
public final class ImageError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The CUresult to answer with. */
    public final int code;

    public ImageError(int code, String detail) {
        super(detail, null, false, false);
        this.code = code;
    }
}
