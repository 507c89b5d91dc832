package io.gpusockets.cli.workloads;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Device memory from cuMemAlloc, freed by {@link #close()}; use it in try-with-resources so that a
 * failing workload leaks nothing (a failing cuMemFree then arrives as a suppressed exception).
 */
public final class DeviceBuffer implements AutoCloseable {
    private final CudaDriver cu;
    private final long address;
    private final long bytes;
    private boolean freed;

    private DeviceBuffer(CudaDriver cu, long address, long bytes) {
        this.cu = cu;
        this.address = address;
        this.bytes = bytes;
    }

    /** cuMemAlloc in the current context. */
    public static DeviceBuffer allocate(CudaDriver cu, long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            Cu.check(cu.cuMemAlloc(out, bytes), "cuMemAlloc(" + bytes + ")");
            return new DeviceBuffer(cu, out.get(JAVA_LONG, 0), bytes);
        }
    }

    /** The device pointer. */
    public long address() {
        return address;
    }

    public long bytes() {
        return bytes;
    }

    /** cuMemcpyHtoD of {@code src} (its whole size) to the start of this buffer. */
    public void copyFrom(MemorySegment src) {
        Cu.check(cu.cuMemcpyHtoD(address, src, src.byteSize()), "cuMemcpyHtoD(" + src.byteSize() + ")");
    }

    /** cuMemcpyDtoH of {@code dst.byteSize()} bytes from the start of this buffer. */
    public void copyTo(MemorySegment dst) {
        Cu.check(cu.cuMemcpyDtoH(dst, address, dst.byteSize()), "cuMemcpyDtoH(" + dst.byteSize() + ")");
    }

    @Override
    public void close() {
        if (!freed) {
            freed = true;
            Cu.check(cu.cuMemFree(address), "cuMemFree");
        }
    }
}
