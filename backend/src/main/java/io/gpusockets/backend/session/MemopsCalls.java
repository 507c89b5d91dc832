package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.BatchMemOp;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code memops}: cuStreamBatchMemOp and the waits. A batch's count is bounded before the array is
 * taken, and each operation's address must be a device range of the session (4 or 8 bytes by
 * operation), as for the single cuStreamWrite/WaitValue calls (checked by the generic decoding): the
 * rule of {@link #receiveChecked}, which graph batch memory-operation nodes are held to as well
 * ({@link GraphCalls}). Every wait is remembered in {@link SessionWaits} with its stream's context, so
 * the session's end can release it.
 */
final class MemopsCalls implements BackendHandlers.Memops {
    private final Session session;
    private final CudaDriver driver;

    MemopsCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    /** The context (real) whose stream {@code stream} (real) is: the lane's current one for the special streams. */
    private long contextOf(Call c, long stream) {
        long id = stream > 2 ? session.handles().idOf(ParamType.STREAM, stream) : 0;
        SessionHandles.Entry e = id == 0 ? null : session.handles().get(id, ParamType.STREAM);
        SessionHandles.Entry ctx = e == null ? null : session.handles().get(e.context(), ParamType.CTX);
        return ctx != null ? ctx.real() : c.lane.topContext();
    }

    private void remember(Call c, long stream, long addr, long value, int flags, int width) {
        session.waits().queued(new SessionWaits.Wait(contextOf(c, stream), addr, value, flags, width));
    }

    @Override
    public int cuStreamWaitValue32_v2(Call c, long stream, long addr, int value, int flags) {
        remember(c, stream, addr, value, flags, 4);
        return driver.cuStreamWaitValue32_v2(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWaitValue64_v2(Call c, long stream, long addr, long value, int flags) {
        remember(c, stream, addr, value, flags, 8);
        return driver.cuStreamWaitValue64_v2(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWaitValue32(Call c, long stream, long addr, int value, int flags) {
        remember(c, stream, addr, value, flags, 4);
        return driver.cuStreamWaitValue32(stream, addr, value, flags);
    }

    @Override
    public int cuStreamWaitValue64(Call c, long stream, long addr, long value, int flags) {
        remember(c, stream, addr, value, flags, 8);
        return driver.cuStreamWaitValue64(stream, addr, value, flags);
    }

    @Override
    public int cuStreamBatchMemOp_v2(Call c, long stream, int count, long paramArrayLength, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuStreamBatchMemOp_v2(stream, count, checked(c, stream, count, paramArrayLength), flags);
    }

    @Override
    public int cuStreamBatchMemOp(Call c, long stream, int count, long paramArrayLength, int flags)
            throws ProtocolException, CallRejected, InterruptedException {
        return driver.cuStreamBatchMemOp(stream, count, checked(c, stream, count, paramArrayLength), flags);
    }

    /** The operations, each address checked to be a device range of the session; waits remembered. */
    private MemorySegment checked(Call c, long stream, int count, long paramArrayLength)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment ops = receiveChecked(c, count, paramArrayLength);
        rememberWaits(session, contextOf(c, stream), ops, count);
        return ops;
    }

    /**
     * The rule every batch of memory operations from the wire is held to, a stream's (cuStreamBatchMemOp)
     * or a graph node's (cuGraphAddBatchMemOpNode and its SetParams): the count is bounded before the
     * array is taken, each operation is one cuda.h 13.0 defines, and each address is a device range of the
     * session, 4 or 8 bytes by operation; the driver-internal alias fields are zeroed.
     */
    static MemorySegment receiveChecked(Call c, int count, long paramArrayLength)
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
                ops.set(ValueLayout.JAVA_LONG_UNALIGNED, at + BatchMemOp.ADDRESS, c.deviceRange(BatchMemOp.address(ops, at), width));
                BatchMemOp.clearAlias(ops, at);
            }
        }
        return ops;
    }

    /** Remembers the waits among {@code ops} (checked) in context {@code context} (real), for the session's end. */
    static void rememberWaits(Session session, long context, MemorySegment ops, int count) {
        for (int i = 0; i < count; i++) {
            long at = (long) i * BatchMemOp.SIZE;
            int op = BatchMemOp.operation(ops, at);
            if (op == BatchMemOp.WAIT_VALUE_32 || op == BatchMemOp.WAIT_VALUE_64) {
                long value = op == BatchMemOp.WAIT_VALUE_32 ? BatchMemOp.value(ops, at) & 0xffff_ffffL : BatchMemOp.value(ops, at);
                session.waits().queued(new SessionWaits.Wait(context, BatchMemOp.address(ops, at), value, BatchMemOp.flags(ops, at),
                        BatchMemOp.width(op)));
            }
        }
    }
}
