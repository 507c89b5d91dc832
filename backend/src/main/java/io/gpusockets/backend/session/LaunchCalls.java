package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.LaunchRequest;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/** Area {@code launches}: kernel launches, whose parameters are rebuilt as the native arrays the driver reads. */
final class LaunchCalls implements BackendHandlers.Launches {
    private final CudaDriver driver;

    LaunchCalls(Session session) {
        this.driver = session.host().driver();
    }

    /** The request is {@link LaunchRequest}'s; the parameters are copied into this call's scratch memory. */
    @Override
    public int cuLaunchKernel(Call c) throws ProtocolException, CallRejected {
        LaunchRequest.Header h = LaunchRequest.readHeader(c.body);
        SegmentAllocator scratch = (bytes, alignment) -> c.scratch(bytes);
        MemorySegment kernelParams = MemorySegment.NULL;
        MemorySegment extra = MemorySegment.NULL;
        if (h.mode() == LaunchRequest.MODE_KERNEL_PARAMS) {
            kernelParams = LaunchRequest.readKernelParams(c.body, scratch);
        } else {
            extra = LaunchRequest.readExtra(c.body, scratch);
        }
        c.expectEnd();
        long f = c.handle(ParamType.FUNC, h.function(), false);
        long stream = c.handle(ParamType.STREAM, h.stream(), true);
        return driver.cuLaunchKernel(f, h.gridX(), h.gridY(), h.gridZ(), h.blockX(), h.blockY(), h.blockZ(),
                h.sharedMemBytes(), stream, kernelParams, extra);
    }
}
