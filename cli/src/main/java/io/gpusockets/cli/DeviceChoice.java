package io.gpusockets.cli;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.session.DriverHealth;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;
import io.gpusockets.emulated.FaultScope;

/** Which driver a backend serves: {@code auto} takes the real one when libcuda.so.1 and a device are there. */
public enum DeviceChoice {
    AUTO, NATIVE, EMULATED;

    /** Opens the chosen driver; {@code libcuda} null means the loader's libcuda.so.1. */
    public DriverHost open(String libcuda) {
        return open(libcuda, null);
    }

    /**
     * As {@link #open(String)}; an emulated device's UUIDs derive from {@code emulatedUuidSeed} when it is given
     * (a worker process gets its backend's, so that all the backend's sessions see the same device).
     */
    public DriverHost open(String libcuda, Long emulatedUuidSeed) {
        boolean nativeDriver = switch (this) {
            case NATIVE -> true;
            case EMULATED -> false;
            case AUTO -> NativeCudaDriver.available(libcuda);
        };
        if (nativeDriver) {
            NativeCudaDriver d = NativeCudaDriver.open(libcuda);
            return DriverHost.initialise(d, d.description());
        }
        EmulatedDevice d = emulatedUuidSeed == null ? new EmulatedDevice()
                : new EmulatedDevice(1, EmulatedDevice.DEFAULT_MEMORY_BYTES, FaultScope.fromSystemProperties(), emulatedUuidSeed);
        // a fault poisons the emulated device's process only in its default scope, as on the real driver
        return DriverHost.initialise(d, d.description(), new DriverHealth(d.faultScope() == FaultScope.PROCESS));
    }
}
