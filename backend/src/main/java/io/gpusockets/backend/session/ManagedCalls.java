package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import java.lang.System.Logger.Level;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Area {@code managed}: managed (unified) memory, which a remote GPU cannot offer. Managed memory is
 * only useful if the program's CPU can load and store the same pages the GPU uses; the guest's CPU
 * cannot reach pages of a GPU on another machine, so cuMemAllocManaged is refused with
 * CUDA_ERROR_NOT_SUPPORTED (and one log line per session). The session's memory is therefore never
 * managed, and the calls that act on managed ranges answer as the driver does for non-managed memory,
 * CUDA_ERROR_INVALID_VALUE, once the range is checked to be the session's (the batch prefetches and discards of
 * CUDA 13 likewise, whatever they list). Nothing reaches the driver.
 */
final class ManagedCalls implements BackendHandlers.Managed {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    private static final String NOT_MANAGED = "the session's memory is never managed (no managed memory is handed out)";

    private final Session session;
    private final AtomicBoolean logged = new AtomicBoolean();

    ManagedCalls(Session session) {
        this.session = session;
    }

    @Override
    public int cuMemAllocManaged(Call c, long bytesize, int flags) throws CallRejected {
        if (logged.compareAndSet(false, true)) {
            LOG.log(Level.WARNING, "session " + session.id() + ": cuMemAllocManaged refused with CUDA_ERROR_NOT_SUPPORTED:"
                    + " managed memory needs the program's CPU to reach the GPU's pages, which a remote GPU cannot offer;"
                    + " use device memory and explicit copies");
        }
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "managed memory cannot be offered by a remote GPU");
    }

    @Override
    public int cuMemAdvise(Call c, long devPtr, long count, int advice, int device) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemAdvise_v2(Call c, long devPtr, long count, int advice, long location) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemPrefetchAsync(Call c, long devPtr, long count, int dstDevice, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemPrefetchAsync_v2(Call c, long devPtr, long count, long location, int flags, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemRangeGetAttribute(Call c, long dataSize, int attribute, long devPtr, long count) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemRangeGetAttributes(Call c, long numAttributes, long devPtr, long count) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemPrefetchBatchAsync(Call c, long dptrs, long sizes, long count, long prefetchLocs, long prefetchLocIdxs,
                                       long numPrefetchLocs, long flags, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemDiscardBatchAsync(Call c, long dptrs, long sizes, long count, long flags, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }

    @Override
    public int cuMemDiscardAndPrefetchBatchAsync(Call c, long dptrs, long sizes, long count, long prefetchLocs,
                                                 long prefetchLocIdxs, long numPrefetchLocs, long flags, long hStream)
            throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, NOT_MANAGED);
    }
}
