package io.gpusockets.cli;

import io.gpusockets.backend.driver.NativeCudaDriver;
import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.emulated.EmulatedDevice;

/** Which driver a backend serves: {@code auto} takes the real one when libcuda.so.1 and a device are there. */
public enum DeviceChoice {
    AUTO, NATIVE, EMULATED;

    /** Opens the chosen driver; {@code libcuda} null means the loader's libcuda.so.1. */
    public DriverHost open(String libcuda) {
        boolean nativeDriver = switch (this) {
            case NATIVE -> true;
            case EMULATED -> false;
            case AUTO -> NativeCudaDriver.available(libcuda);
        };
        if (nativeDriver) {
            NativeCudaDriver d = NativeCudaDriver.open(libcuda);
            return DriverHost.initialise(d, d.description());
        }
        EmulatedDevice d = new EmulatedDevice();
        return DriverHost.initialise(d, d.description());
    }
}
