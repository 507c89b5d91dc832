package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;

/**
 * Area {@code memops}: cuStreamBatchMemOp. Its count is bounded before the array is taken, and each
 * operation's address must be a device range of the session (4 or 8 bytes by operation), as for the
 * single cuStreamWrite/WaitValue calls, which the generic path checks.
 */
final class MemopsCalls implements BackendHandlers.Memops {
    private final CudaDriver driver;

    MemopsCalls(Session session) {
        this.driver = session.host().driver();
    }

    @Override
    public int cuStreamBatchMemOp_v2(Call c, long stream, int count, long paramArrayLength, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuStreamBatchMemOp_v2(stream, count, checked(c, count, paramArrayLength), flags);
    }

    @Override
    public int cuStreamBatchMemOp(Call c, long stream, int count, long paramArrayLength, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuStreamBatchMemOp(stream, count, checked(c, count, paramArrayLength), flags);
    }

    /** The operations, each address checked to be a device range of the session. */
    private static MemorySegment checked(Call c, int count, long paramArrayLength)
            throws ProtocolException, CallRejected, InterruptedException {
        if (count <= 0 || count > BatchMemOp.MAX_BATCH || paramArrayLength != (long) count * BatchMemOp.SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count + " with " + paramArrayLength + " bytes");
        }
        MemorySegment ops = c.receiveBulk(paramArrayLength);
        for (int i = 0; i < count; i++) {
            long at = (long) i * BatchMemOp.SIZE;
            int width = BatchMemOp.width(BatchMemOp.operation(ops, at));
            if (width < 0) {
                throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "paramArray[" + i + "].operation=" + BatchMemOp.operation(ops, at));
            }
            if (width > 0) {
                c.deviceRange(BatchMemOp.address(ops, at), width);
                BatchMemOp.clearAlias(ops, at);
            }
        }
        return ops;
    }
}
