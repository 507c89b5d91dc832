package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A device's primary context, retained and made current on the calling thread;
 * {@link #close()} unsets it and releases it.
 *
 * <p>The workloads do not make contexts themselves: they run in whatever context is current on the
 * calling thread, and the caller holds one {@code PrimaryContext} around a whole batch (see
 * {@link WorkloadSuite}). Retaining and releasing around each workload would, on the real driver,
 * destroy the primary context when its last reference goes and re-create it (and re-JIT the PTX) for
 * the next workload; the timings would then mostly measure that.
 */
public final class PrimaryContext implements AutoCloseable {
    private final CudaDriver cu;
    private final int device;
    private final long context;
    private boolean released;

    private PrimaryContext(CudaDriver cu, int device, long context) {
        this.cu = cu;
        this.device = device;
        this.context = context;
    }

    /** cuDeviceGet(ordinal), cuDevicePrimaryCtxRetain, cuCtxSetCurrent. cuInit must have succeeded. */
    public static PrimaryContext retain(CudaDriver cu, int ordinal) {
        int device;
        long context;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(JAVA_INT);
            Cu.check(cu.cuDeviceGet(dev, ordinal), "cuDeviceGet(" + ordinal + ")");
            device = dev.get(JAVA_INT, 0);
            MemorySegment ctx = arena.allocate(JAVA_LONG);
            Cu.check(cu.cuDevicePrimaryCtxRetain(ctx, device), "cuDevicePrimaryCtxRetain");
            context = ctx.get(JAVA_LONG, 0);
        }
        PrimaryContext pc = new PrimaryContext(cu, device, context);
        try {
            Cu.check(cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
        } catch (RuntimeException e) {
            try {
                pc.close();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        return pc;
    }

    /** The CUdevice. */
    public int device() {
        return device;
    }

    /** The CUcontext handle. */
    public long context() {
        return context;
    }

    @Override
    public void close() {
        if (released) {
            return;
        }
        released = true;
        int unset = cu.cuCtxSetCurrent(0L);
        Cu.check(cu.cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
        Cu.check(unset, "cuCtxSetCurrent(NULL)");
    }
}
