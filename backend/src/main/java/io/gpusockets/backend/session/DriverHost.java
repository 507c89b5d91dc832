package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The driver the backend serves (real or emulated), initialised once and shared by all sessions.
 *
 * @param driver        the driver
 * @param description   what it is, for logs and the WELCOME message (says "emulated" where it is)
 * @param deviceCount   devices it has
 * @param driverVersion its cuDriverGetVersion
 * @param facts         what the charge rules read of each device, kept once read
 * @param health        whether a kernel fault has poisoned the driver in this process ({@link DriverHealth})
 */
public record DriverHost(CudaDriver driver, String description, int deviceCount, int driverVersion, DeviceFacts facts,
                         DriverHealth health) {

    /** A driver not (yet) poisoned. */
    public DriverHost(CudaDriver driver, String description, int deviceCount, int driverVersion) {
        this(driver, description, deviceCount, driverVersion, new DriverHealth());
    }

    /** A driver whose health {@code health} tracks; its device facts read when first needed. */
    public DriverHost(CudaDriver driver, String description, int deviceCount, int driverVersion, DriverHealth health) {
        this(driver, description, deviceCount, driverVersion, new DeviceFacts(driver, deviceCount), health);
    }

    /** Calls cuInit and reads the device count and version; throws with the CUresult name on failure. */
    public static DriverHost initialise(CudaDriver driver, String description) {
        return initialise(driver, description, new DriverHealth());
    }

    /** As {@link #initialise(CudaDriver, String)}, with the driver's health tracked by {@code health}. */
    public static DriverHost initialise(CudaDriver driver, String description, DriverHealth health) {
        int r = driver.cuInit(0);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException("cuInit failed: " + CuResult.name(r) + " (" + description + ")");
        }
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ValueLayout.JAVA_INT);
            check(driver.cuDeviceGetCount(v), "cuDeviceGetCount");
            int count = v.get(ValueLayout.JAVA_INT, 0);
            check(driver.cuDriverGetVersion(v), "cuDriverGetVersion");
            return new DriverHost(driver, description, count, v.get(ValueLayout.JAVA_INT, 0), health);
        }
    }

    private static void check(int r, String call) {
        if (r != CuResult.CUDA_SUCCESS) {
            throw new IllegalStateException(call + " failed: " + CuResult.name(r));
        }
    }
}
