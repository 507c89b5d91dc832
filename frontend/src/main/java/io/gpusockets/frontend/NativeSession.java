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
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The driver behind libcuda.so.1's upcalls. It connects to the backend on the program's first
 * cuInit (or cuDriverGetVersion), within the connect timeout; until then, and for good when the
 * backend cannot be reached, calls get the answers a machine without a GPU gives.
 */
final class NativeSession {
    /** The CUDA version whose ABI libcuda.so.1 implements (cuda.h 13.0). */
    static final int API_VERSION = 13000;
    private static final int CU_INIT = ApiTable.get().byName("cuInit").index();
    private static final int CU_DRIVER_GET_VERSION = ApiTable.get().byName("cuDriverGetVersion").index();
    private static final AtomicBoolean internalErrorReported = new AtomicBoolean();

    private static volatile CudaDriver connected;
    private static volatile Unconnected unconnected = new Unconnected(false);

    private NativeSession() {
    }

    static CudaDriver driverFor(int index) {
        CudaDriver d = connected;
        if (d != null) {
            return d;
        }
        if (index == CU_INIT || index == CU_DRIVER_GET_VERSION) {
            return connect();
        }
        return unconnected;
    }

    private static synchronized CudaDriver connect() {
        if (connected != null) {
            return connected;
        }
        if (unconnected.failed) {
            return unconnected;
        }
        try {
            connected = FrontendDrivers.connect(FrontendConfig.fromEnvironment(Map.of()));
            return connected;
        } catch (IOException | RuntimeException e) {
            System.err.println("gpusockets: " + e.getMessage() + "; cuInit returns CUDA_ERROR_NO_DEVICE");
            unconnected = new Unconnected(true);
            return unconnected;
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
