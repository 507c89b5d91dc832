package io.gpusockets.frontend;

/**
 * GPUSOCKETS_TRACE_STARTUP=1: where the start of a program's first CUDA call went, as one stderr line
 * printed when cuInit has connected. libcuda.so.1 hands over its own times (its first call, the Java
 * runtime loaded) in the property {@value FrontendConfig#STARTUP_TRACE_PROP}; both sides read CLOCK_MONOTONIC
 * ({@link System#nanoTime} on Linux), so the times compare. Off (the property is absent), every
 * method returns at once.
 */
final class StartupTrace {
    private static final long[] NATIVE = FrontendConfig.startupTraceTimes();
    static final boolean ON = NATIVE != null;

    private static long jvmReady;
    private static long installed;
    private static int stubs;
    private static long stubNanos;
    private static long connectStart;
    private static long connectEnd;

    private StartupTrace() {
    }

    static synchronized void jvmReady() {
        if (ON && jvmReady == 0) {
            jvmReady = System.nanoTime();
        }
    }

    static synchronized void installed() {
        if (ON) {
            installed = System.nanoTime();
        }
    }

    static synchronized void stubMade(long startNanos) {
        if (ON) {
            stubs++;
            stubNanos += System.nanoTime() - startNanos;
        }
    }

    static synchronized void connecting() {
        if (ON) {
            connectStart = System.nanoTime();
        }
    }

    static synchronized void connected() {
        if (ON) {
            connectEnd = System.nanoTime();
        }
    }

    /** Prints the line, once: at the end of the cuInit that waited {@code waitStart}.. for the connection. */
    static synchronized void report(long waitStart) {
        if (!ON || installed == 0 || connectEnd == 0) {
            return;
        }
        long now = System.nanoTime();
        long t0 = NATIVE[0];
        System.err.println("gpusockets: startup: libjvm loaded " + ms(NATIVE[1] - t0)
                + ", JNI_CreateJavaVM " + ms(jvmReady - NATIVE[1])
                + ", frontend install " + ms(installed - jvmReady)
                + ", upcall stubs (" + stubs + ") " + ms(stubNanos)
                + ", connect+handshake " + ms(connectEnd - connectStart) + " (from +" + ms(connectStart - t0)
                + ", cuInit waited " + ms(Math.max(0, connectEnd - waitStart)) + ")"
                + ", cuInit done +" + ms(now - t0) + " after the first CUDA call");
        connectEnd = 0;
    }

    private static String ms(long nanos) {
        long tenths = nanos / 100_000;
        return tenths / 10 + "." + tenths % 10 + " ms";
    }
}
