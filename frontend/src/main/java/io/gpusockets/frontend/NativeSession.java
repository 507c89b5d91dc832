package io.gpusockets.frontend;

import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.UnsupportedCudaDriver;
import io.gpusockets.protocol.wire.WireValues;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The driver behind libcuda.so.1's upcalls. It connects to the backend on the program's first
 * cuInit (or cuDriverGetVersion), within the connect timeout; until then, and for good when the
 * backend cannot be reached, calls get the answers a machine without a GPU gives.
 *
 * <p>The connect itself starts earlier, on a thread of its own, as soon as the JVM is up
 * ({@link #connectEarly}, from the program's first CUDA call, nearly always cuInit): it then overlaps
 * the making of the first upcall stubs. cuInit waits for it and reports its failure, as if it had
 * connected itself; a program that never calls cuInit leaves an unused session open until it exits.
 */
final class NativeSession {
    /** The CUDA version whose ABI libcuda.so.1 implements (cuda.h 13.0). */
    static final int API_VERSION = 13000;
    /** By table index: the entries on which the frontend connects ({@code connects} in the table). */
    private static final boolean[] CONNECTS = connecting();
    private static final AtomicBoolean internalErrorReported = new AtomicBoolean();

    private static volatile CudaDriver connected;
    private static FutureTask<CudaDriver> early;   // guarded by NativeSession.class
    /**
     * Set by libcuda.so.1 when it found, before starting this JVM, that the backend named cannot be
     * reached (bootstrap.c's probe: no socket file) and already answered cuInit for it: this JVM then
     * answers as after a failed connect, without connecting.
     */
    static final String UNREACHABLE_PROP = "gpusockets.frontend.unreachable";
    private static final boolean UNREACHABLE = Boolean.getBoolean(UNREACHABLE_PROP);
    private static volatile Unconnected unconnected = new Unconnected(UNREACHABLE);

    private NativeSession() {
    }

    private static boolean[] connecting() {
        var functions = ApiTable.get().functions();
        boolean[] c = new boolean[functions.size()];
        for (var f : functions) {
            c[f.index()] = f.connects();
        }
        return c;
    }

    static CudaDriver driverFor(int index) {
        CudaDriver d = connected;
        if (d != null) {
            return d;
        }
        if (CONNECTS[index]) {
            return connect();
        }
        return unconnected;
    }

    /** Starts the connect that cuInit will wait for, on a daemon thread (the program may exit without cuInit). */
    static synchronized void connectEarly() {
        if (early == null && connected == null && !UNREACHABLE) {
            early = new FutureTask<>(NativeSession::open);
            Thread.ofPlatform().daemon().name("gpusockets-connect").start(early);
        }
    }

    private static CudaDriver open() throws IOException {
        StartupTrace.connecting();
        CudaDriver d = FrontendDrivers.connect(FrontendConfig.fromEnvironment(Map.of()));
        StartupTrace.connected();
        return d;
    }

    private static synchronized CudaDriver connect() {
        if (connected != null) {
            return connected;
        }
        if (unconnected.failed) {
            return unconnected;
        }
        long waitStart = System.nanoTime();
        try {
            connected = early != null ? awaitEarly() : open();
            StartupTrace.report(waitStart);
            return connected;
        } catch (IOException | RuntimeException e) {
            System.err.println("gpusockets: " + e.getMessage() + "; cuInit returns CUDA_ERROR_NO_DEVICE");
            unconnected = new Unconnected(true);
            return unconnected;
        } finally {
            early = null;
        }
    }

    /** The early connect's driver, or what it threw; the connect timeout bounds the wait. */
    private static CudaDriver awaitEarly() throws IOException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return early.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } catch (ExecutionException e) {
            switch (e.getCause()) {
                case IOException io -> throw io;
                case RuntimeException re -> throw re;
                case Error err -> throw err;
                default -> throw new IOException(e.getCause());
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The program is exiting (the library's atexit handler): a session the backend would keep for a resume
     * ends now, with GOODBYE, since nobody will resume it. Other sessions end as the process's sockets close.
     */
    static void programExiting() {
        try {
            if (connected instanceof RemoteCudaDriver r) {
                r.programExiting();
                r.endIfResumable();
            }
        } catch (Throwable t) {
            // exiting anyway; an upcall must not throw
        }
    }

    static void reportInternalError(String function, Throwable t) {
        if (internalErrorReported.compareAndSet(false, true)) {
            System.err.println("gpusockets: internal error in " + function + " (returning CUDA_ERROR_UNKNOWN): " + t);
        }
    }

    /** Answers before a backend is connected: no device after a failed connect, not initialised before cuInit. */
    private static final class Unconnected extends UnsupportedCudaDriver {
        final boolean failed;
        private final LocalCalls local = new LocalCalls();

        Unconnected(boolean failed) {
            this.failed = failed;
        }

        @Override
        protected int unsupported() {
            return CuResult.CUDA_ERROR_NOT_INITIALIZED;
        }

        @Override
        public int cuInit(int flags) {
            return failed ? CuResult.CUDA_ERROR_NO_DEVICE : CuResult.CUDA_ERROR_NOT_INITIALIZED;
        }

        @Override
        public int cuDriverGetVersion(MemorySegment driverVersion) {
            if (driverVersion.address() == 0) {
                return CuResult.CUDA_ERROR_INVALID_VALUE;
            }
            WireValues.sized(driverVersion, 4).set(ValueLayout.JAVA_INT, 0, API_VERSION);
            return CuResult.CUDA_SUCCESS;
        }

        @Override
        public int cuGetErrorName(int error, MemorySegment pStr) {
            return local.errorText(error, pStr, true);
        }

        @Override
        public int cuGetErrorString(int error, MemorySegment pStr) {
            return local.errorText(error, pStr, false);
        }
    }
}
