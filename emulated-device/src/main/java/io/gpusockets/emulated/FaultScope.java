package io.gpusockets.emulated;

import java.util.Locale;

/**
 * How far a kernel fault (an out-of-bounds access, a failed device {@code assert}, {@code trap}) reaches in
 * one {@link EmulatedDevice}, which stands for the driver of one process.
 *
 * <p>{@link #PROCESS}, the default, is what the real driver does: CUDA documents each of these errors as
 * leaving "the process in an inconsistent state and any further CUDA work will return the same error. To
 * continue using CUDA, the process must be terminated and relaunched", and on the H200 (driver 580) every
 * later {@code cuCtxCreate} and primary-context retain of the process failed with the fault's error. So the
 * faulting context keeps its sticky error, every other live context of the device takes the same error (its
 * queued work is dropped, its next call that checks the context returns it), and every later context
 * creation fails with it. The default is realism because the emulated device is how CI and a GPU-less
 * try-out see what a program and the backend do on a GPU: a backend that kept serving after a fault here
 * would hide what a GPU does to it.
 *
 * <p>{@link #CONTEXT} keeps a fault in its context (the device's behaviour before this mode existed), for
 * tests that fault and then go on in the same process on purpose. System property
 * {@value #PROP_NAME}{@code =process|context} chooses; the backend's worker processes inherit it.
 */
public enum FaultScope {
    PROCESS, CONTEXT;

    public static final String PROP_NAME = "gpusockets.emulated.faultScope";
    public static final FaultScope DEFAULT = PROCESS;

    /** The scope {@value #PROP_NAME} names, else {@link #DEFAULT}; throws naming the choices on another value. */
    public static FaultScope fromSystemProperties() {
        String v = System.getProperty(PROP_NAME);
        if (v == null) {
            return DEFAULT;
        }
        try {
            return valueOf(v.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(PROP_NAME + "=" + v + ": must be process or context");
        }
    }

    @Override
    public String toString() {
        return name().toLowerCase(Locale.ROOT);
    }
}
