package io.gpusockets.backend.driver;

import io.gpusockets.protocol.api.CuResult;

/** Run in a child JVM by {@link NativeCudaDriverTest}: a library loaded into a JVM stays for its life. */
public final class NativeOpenProbe {
    private NativeOpenProbe() {
    }

    public static void main(String[] args) {
        try {
            NativeCudaDriver driver = NativeCudaDriver.open(args[0]);
            System.out.println("OPENED " + driver.description());
            System.out.println("AVAILABLE " + NativeCudaDriver.available(args[0]));
            System.out.println("OTHER " + NativeCudaDriver.available("/elsewhere/libcuda.so.1"));
        } catch (NativeDriverException e) {
            System.out.println("FAILED " + CuResult.name(e.result()) + " " + e.getMessage());
            System.out.println("AVAILABLE " + NativeCudaDriver.available(args[0]));
        }
    }
}
