package io.gpusockets.backend.status;

import io.gpusockets.backend.session.DriverHost;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.System.Logger.Level;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads each device's name and memory (used and total) from the driver for status and metrics.
 * cuDeviceTotalMem needs no context, but cuMemGetInfo answers for the current context's device, so
 * on the first query this makes one context per device of its own (never a session's, never the
 * primary one) and keeps it until {@link #close}; each query pushes it, asks, and pops it, on the
 * calling thread (an admin or metrics thread, never a session's). The context is made only when
 * someone asks: a backend nobody monitors holds none. On a real GPU such a context holds a few
 * hundred MiB of device memory, which shows in the used figure from the first query on.
 *
 * <p>Queries are serialized (one at a time); each is a few short driver calls.
 */
public final class DeviceMonitor implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger("gpusockets.backend");

    private final CudaDriver driver;
    private final int count;
    private long[] contexts;
    private String[] names;
    private boolean closed;

    public DeviceMonitor(DriverHost host) {
        this.driver = host.driver();
        this.count = host.deviceCount();
    }

    /** Every device now; a memory figure the driver would not give is -1. */
    public synchronized List<ServerSnapshot.Device> devices() {
        List<ServerSnapshot.Device> out = new ArrayList<>();
        if (closed) {
            return out;
        }
        try (Arena a = Arena.ofConfined()) {
            if (names == null) {
                start(a);
            }
            MemorySegment free = a.allocate(ValueLayout.JAVA_LONG);
            MemorySegment total = a.allocate(ValueLayout.JAVA_LONG);
            MemorySegment cell = a.allocate(ValueLayout.JAVA_LONG);
            for (int dev = 0; dev < count; dev++) {
                long totalBytes = driver.cuDeviceTotalMem(total, dev) == CuResult.CUDA_SUCCESS
                        ? total.get(ValueLayout.JAVA_LONG, 0) : -1;
                long used = -1;
                if (contexts[dev] != 0 && driver.cuCtxPushCurrent(contexts[dev]) == CuResult.CUDA_SUCCESS) {
                    if (driver.cuMemGetInfo(free, total) == CuResult.CUDA_SUCCESS) {
                        long t = total.get(ValueLayout.JAVA_LONG, 0);
                        used = t - free.get(ValueLayout.JAVA_LONG, 0);
                        totalBytes = totalBytes < 0 ? t : totalBytes;
                    }
                    driver.cuCtxPopCurrent(cell);
                }
                out.add(new ServerSnapshot.Device(dev, names[dev], used, totalBytes));
            }
        }
        return out;
    }

    private void start(Arena a) {
        names = new String[count];
        contexts = new long[count];
        MemorySegment name = a.allocate(256);
        MemorySegment cell = a.allocate(ValueLayout.JAVA_LONG);
        for (int dev = 0; dev < count; dev++) {
            names[dev] = driver.cuDeviceGetName(name, 256, dev) == CuResult.CUDA_SUCCESS
                    ? name.getString(0, StandardCharsets.UTF_8) : "device " + dev;
            int r = driver.cuCtxCreate(cell, MemorySegment.NULL, 0, dev);
            if (r == CuResult.CUDA_SUCCESS) {
                contexts[dev] = cell.get(ValueLayout.JAVA_LONG, 0);
                driver.cuCtxPopCurrent(cell); // current nowhere between queries
            } else {
                LOG.log(Level.WARNING, "status: cannot make a context on device " + dev + " to read its memory ("
                        + CuResult.name(r) + "); its used memory shows as unknown");
            }
        }
    }

    /** Destroys the contexts it made. */
    @Override
    public synchronized void close() {
        closed = true;
        if (contexts != null) {
            for (long ctx : contexts) {
                if (ctx != 0) {
                    driver.cuCtxDestroy(ctx);
                }
            }
        }
    }
}
