package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/** The device's name, compute capability, multiprocessors, memory and the driver version. Needs cuInit only. */
public final class DeviceQuery {
    static final int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
    static final int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
    static final int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
    private static final int NAME_MAX = 256;

    private DeviceQuery() {
    }

    public record Result(String name, int ccMajor, int ccMinor, int multiprocessors, long totalMemBytes,
                         int driverVersion, long driverNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return !name.isEmpty() && ccMajor > 0 && totalMemBytes > 0 && driverVersion > 0;
        }

        @Override
        public String summary() {
            return String.format("%s, sm_%d%d, %d SMs, %.1f GiB, driver %d", name, ccMajor, ccMinor, multiprocessors,
                    totalMemBytes / (double) (1L << 30), driverVersion);
        }

        @Override
        public byte[] comparableOutput() {
            return (name + "|" + ccMajor + "." + ccMinor + "|" + multiprocessors + "|" + totalMemBytes + "|" + driverVersion)
                    .getBytes(StandardCharsets.UTF_8);
        }
    }

    public static Result run(CudaDriver cu, int ordinal) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment i = arena.allocate(JAVA_INT);
            MemorySegment l = arena.allocate(JAVA_LONG);
            MemorySegment name = arena.allocate(NAME_MAX);
            long t0 = System.nanoTime();
            Cu.check(cu.cuDriverGetVersion(i), "cuDriverGetVersion");
            int version = i.get(JAVA_INT, 0);
            Cu.check(cu.cuDeviceGet(i, ordinal), "cuDeviceGet(" + ordinal + ")");
            int dev = i.get(JAVA_INT, 0);
            Cu.check(cu.cuDeviceGetName(name, NAME_MAX, dev), "cuDeviceGetName");
            int major = attribute(cu, i, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
            int minor = attribute(cu, i, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
            int sms = attribute(cu, i, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            Cu.check(cu.cuDeviceTotalMem(l, dev), "cuDeviceTotalMem");
            long nanos = System.nanoTime() - t0;
            return new Result(name.getString(0), major, minor, sms, l.get(JAVA_LONG, 0), version, nanos);
        }
    }

    private static int attribute(CudaDriver cu, MemorySegment out, int attribute, int dev) {
        Cu.check(cu.cuDeviceGetAttribute(out, attribute, dev), "cuDeviceGetAttribute(" + attribute + ")");
        return out.get(JAVA_INT, 0);
    }
}
