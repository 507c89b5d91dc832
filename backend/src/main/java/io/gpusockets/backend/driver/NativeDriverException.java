package io.gpusockets.backend.driver;

/**
 * The real driver cannot be used: the library did not load, or cuInit failed, or it sees no device.
 * The message names the library path and the reason; {@link #result()} is the CUresult when a driver
 * call failed, or {@link #NO_RESULT} when the library itself could not be loaded.
 */
public final class NativeDriverException extends RuntimeException {
    public static final int NO_RESULT = -1;

    private static final long serialVersionUID = 1L;

    private final String libraryPath;
    private final int result;

    NativeDriverException(String libraryPath, int result, String message, Throwable cause) {
        super(message, cause);
        this.libraryPath = libraryPath;
        this.result = result;
    }

    /** The library path that was tried. */
    public String libraryPath() {
        return libraryPath;
    }

    /** The failing CUresult, or {@link #NO_RESULT}. */
    public int result() {
        return result;
    }
}
