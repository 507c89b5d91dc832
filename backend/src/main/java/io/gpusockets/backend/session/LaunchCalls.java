package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/** Area {@code launches}: kernel launches, whose parameters are rebuilt as the native arrays the driver reads. */
final class LaunchCalls implements BackendHandlers.Launches {
    /** Kernel parameter limits (CUDA 12.1+ allows 32764 bytes of parameters). */
    static final int MAX_KERNEL_PARAMS = 1024;
    static final int MAX_KERNEL_PARAM_BYTES = 32764;
    static final int LAUNCH_KERNEL_PARAMS = 0;
    static final int LAUNCH_EXTRA = 1;

    private final CudaDriver driver;

    LaunchCalls(Session session) {
        this.driver = session.host().driver();
    }

    /**
     * Request: f u64, grid x/y/z u32, block x/y/z u32, sharedMemBytes u32, stream u64, mode u32, then
     * mode 0: count u32 and per parameter size u32 + bytes; mode 1: size u32 + the packed buffer.
     */
    @Override
    public int cuLaunchKernel(Call c) throws ProtocolException, CallRejected {
        long fId = c.readLong();
        int gx = c.readInt(), gy = c.readInt(), gz = c.readInt();
        int bx = c.readInt(), by = c.readInt(), bz = c.readInt();
        int shared = c.readInt();
        long streamId = c.readLong();
        int mode = c.readInt();
        MemorySegment kernelParams = MemorySegment.NULL;
        MemorySegment extra = MemorySegment.NULL;
        if (mode == LAUNCH_KERNEL_PARAMS) {
            int count = c.readInt();
            if (count < 0 || count > MAX_KERNEL_PARAMS) {
                throw new ProtocolException("cuLaunchKernel: parameter count out of range: count=" + count);
            }
            kernelParams = c.scratch(8L * Math.max(count, 1));
            int total = 0;
            for (int i = 0; i < count; i++) {
                int size = c.readInt();
                total += size;
                if (size <= 0 || total > MAX_KERNEL_PARAM_BYTES || size > c.body.remaining()) {
                    throw new ProtocolException("cuLaunchKernel: parameter size out of range: size=" + size);
                }
                MemorySegment value = c.scratch(size);
                MemorySegment.copy(MemorySegment.ofBuffer(c.body.slice(c.body.position(), size)), 0, value, 0, size);
                c.body.position(c.body.position() + size);
                kernelParams.setAtIndex(ValueLayout.ADDRESS, i, value);
            }
        } else if (mode == LAUNCH_EXTRA) {
            int size = c.readInt();
            if (size < 0 || size > MAX_KERNEL_PARAM_BYTES || size > c.body.remaining()) {
                throw new ProtocolException("cuLaunchKernel: extra buffer size out of range: size=" + size);
            }
            MemorySegment buffer = c.scratch(size);
            MemorySegment.copy(MemorySegment.ofBuffer(c.body.slice(c.body.position(), size)), 0, buffer, 0, size);
            c.body.position(c.body.position() + size);
            MemorySegment sizeCell = c.scratch(8);
            sizeCell.set(ValueLayout.JAVA_LONG, 0, size);
            extra = c.scratch(40);
            extra.setAtIndex(ValueLayout.JAVA_LONG, 0, 1); // CU_LAUNCH_PARAM_BUFFER_POINTER
            extra.setAtIndex(ValueLayout.ADDRESS, 1, buffer);
            extra.setAtIndex(ValueLayout.JAVA_LONG, 2, 2); // CU_LAUNCH_PARAM_BUFFER_SIZE
            extra.setAtIndex(ValueLayout.ADDRESS, 3, sizeCell);
            extra.setAtIndex(ValueLayout.JAVA_LONG, 4, 0); // CU_LAUNCH_PARAM_END
        } else {
            throw new ProtocolException("cuLaunchKernel: unknown parameter mode " + mode);
        }
        c.expectEnd();
        long f = c.handle(ParamType.FUNC, fId, false);
        long stream = c.handle(ParamType.STREAM, streamId, true);
        return driver.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, stream, kernelParams, extra);
}
}
