package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.LimitFootprint;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * What the charge rules need to know of each device, read from the driver once and kept: its compute
 * capability (which image a module load takes), the threads it holds at once (what a stack limit
 * reserves local memory for: {@link LimitFootprint}) and the device memory one more context takes.
 *
 * <p>A context's footprint is measured, not assumed: the first time a session makes a context beyond its
 * first on a device, this makes two contexts of its own there and reads how far the device's free memory
 * fell with the second (the first context of a process also pays for the driver's process-wide state, the
 * second only for itself), then destroys both. Other work on the device in that moment makes the figure
 * larger, rarely smaller; it is rounded up to {@link #CONTEXT_ROUNDING} and logged.
 * {@code -Dgpusockets.backend.contextBytes=N} sets it instead (a rule of the administrator's), and a driver
 * that cannot be measured this way is taken at {@link #CONTEXT_BYTES_FALLBACK}.
 */
public final class DeviceFacts {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");
    /** Property that fixes a context's footprint instead of measuring it. */
    public static final String CONTEXT_BYTES_PROPERTY = "gpusockets.backend.contextBytes";
    /** A context's footprint when it cannot be measured (what an H200 context takes, in round figures). */
    static final long CONTEXT_BYTES_FALLBACK = 512L << 20;
    /** Measured footprints are rounded up to this (the driver maps device memory in 2 MiB pages). */
    static final long CONTEXT_ROUNDING = 2L << 20;
    /** Threads assumed resident when the device's attributes cannot be read: more than any current GPU holds. */
    static final long RESIDENT_THREADS_FALLBACK = 2048L * 256;
    private static final int ATTRIBUTE_CAPABILITY_MAJOR = 75;
    private static final int ATTRIBUTE_CAPABILITY_MINOR = 76;

    private final CudaDriver driver;
    private final int[] capability;
    private final long[] residentThreads;
    private final long[] contextBytes;

    DeviceFacts(CudaDriver driver, int deviceCount) {
        this.driver = driver;
        int n = Math.max(deviceCount, 0);
        this.capability = new int[n];
        this.residentThreads = new long[n];
        this.contextBytes = new long[n];
        Arrays.fill(capability, Integer.MIN_VALUE);
        Arrays.fill(contextBytes, -1);
    }

    /** Compute capability of {@code dev} as major * 10 + minor, or -1 when it cannot be read. */
    public synchronized int capability(int dev) {
        if (dev < 0 || dev >= capability.length) {
            return -1;
        }
        if (capability[dev] == Integer.MIN_VALUE) {
            int major = attribute(ATTRIBUTE_CAPABILITY_MAJOR, dev), minor = attribute(ATTRIBUTE_CAPABILITY_MINOR, dev);
            capability[dev] = major < 0 || minor < 0 ? -1 : major * 10 + minor;
        }
        return capability[dev];
    }

    /** The distinct compute capabilities of the host's devices (-1 for one that cannot be read). */
    synchronized int[] capabilities() {
        return java.util.stream.IntStream.range(0, capability.length).map(this::capability).distinct().toArray();
    }

    /** Threads {@code dev} holds at once (maxThreadsPerMultiProcessor × multiProcessorCount). */
    public synchronized long residentThreads(int dev) {
        if (dev < 0 || dev >= residentThreads.length) {
            return RESIDENT_THREADS_FALLBACK;
        }
        if (residentThreads[dev] == 0) {
            int perSm = attribute(LimitFootprint.ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev);
            int sms = attribute(LimitFootprint.ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            residentThreads[dev] = perSm <= 0 || sms <= 0 ? RESIDENT_THREADS_FALLBACK : LimitFootprint.residentThreads(perSm, sms);
        }
        return residentThreads[dev];
    }

    /**
     * Device memory one more context on {@code dev} takes; measured on first use (this thread's context
     * stack is left as it was).
     */
    public synchronized long contextBytes(int dev) {
        if (dev < 0 || dev >= contextBytes.length) {
            return CONTEXT_BYTES_FALLBACK;
        }
        if (contextBytes[dev] < 0) {
            Long fixed = Long.getLong(CONTEXT_BYTES_PROPERTY);
            contextBytes[dev] = fixed != null && fixed >= 0 ? fixed : measureContext(dev);
        }
        return contextBytes[dev];
    }

    private long measureContext(int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment first = a.allocate(8), second = a.allocate(8), free = a.allocate(8), total = a.allocate(8);
            if (driver.cuCtxCreate(first, MemorySegment.NULL, 0, dev) != CuResult.CUDA_SUCCESS) {
                return fallback(dev, "cuCtxCreate failed");
            }
            long before = -1, after = -1;
            try {
                if (driver.cuMemGetInfo(free, total) == CuResult.CUDA_SUCCESS) {
                    before = free.get(ValueLayout.JAVA_LONG, 0);
                }
                if (driver.cuCtxCreate(second, MemorySegment.NULL, 0, dev) == CuResult.CUDA_SUCCESS) {
                    try {
                        if (driver.cuMemGetInfo(free, total) == CuResult.CUDA_SUCCESS) {
                            after = free.get(ValueLayout.JAVA_LONG, 0);
                        }
                    } finally {
                        driver.cuCtxDestroy(second.get(ValueLayout.JAVA_LONG, 0));   // pops it: it is current
                    }
                }
            } finally {
                driver.cuCtxDestroy(first.get(ValueLayout.JAVA_LONG, 0));
                ExecutionThread.contextDestroyed();
            }
            if (before < 0 || after < 0) {
                return fallback(dev, "cuMemGetInfo or the second cuCtxCreate failed");
            }
            long bytes = Math.max(0, before - after);
            long rounded = (bytes + CONTEXT_ROUNDING - 1) / CONTEXT_ROUNDING * CONTEXT_ROUNDING;
            LOG.log(Level.INFO, "device " + dev + ": a context takes " + bytes + " bytes of device memory (measured; charged as "
                    + rounded + " to a session's every context beyond its first on the device)");
            return rounded;
        }
    }

    private static long fallback(int dev, String why) {
        LOG.log(Level.WARNING, "device " + dev + ": a context's device memory cannot be measured (" + why + "); charged as "
                + CONTEXT_BYTES_FALLBACK + " bytes");
        return CONTEXT_BYTES_FALLBACK;
    }

    private int attribute(int attribute, int dev) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(ValueLayout.JAVA_INT);
            return driver.cuDeviceGetAttribute(v, attribute, dev) == CuResult.CUDA_SUCCESS ? v.get(ValueLayout.JAVA_INT, 0) : -1;
        }
    }
}
