package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Area {@code contexts}: virtual primary contexts ({@link PrimaryContexts}) and the lane's context
 * stack, which lives on the lane rather than in a driver thread ({@link Lane}), so that any thread
 * can run the lane's calls. Contexts arrive translated to the driver's values and leave as this
 * session's handle ids.
 */
final class ContextCalls implements BackendHandlers.Contexts {
    private final Session session;

    /**
     * Ids of the special streams (legacy, per-thread) by the driver's id: numbers this session
     * issues from the top of the u64 range, where no handle id lies. Bounded by contexts x lanes.
     */
    private final Map<Long, Long> specialStreamIds = new ConcurrentHashMap<>();
    private final AtomicLong nextSpecialStreamId = new AtomicLong(Long.MIN_VALUE + 1);

    ContextCalls(Session session) {
        this.session = session;
    }

    private CudaDriver driver() {
        return session.driver();
    }

    @Override
    public int cuDevicePrimaryCtxRetain(Call c, int dev) throws CallRejected {
        long[] id = new long[1];
        int r = session.primary().retain(c, dev, c.scratch(8), id);
        c.exec.invalidate(); // creating the context changed this thread's driver stack
        c.outs.putLong(id[0]);
        return r;
    }

    @Override
    public int cuDevicePrimaryCtxRelease(Call c, int dev) throws CallRejected, InterruptedException {
        int r = session.primary().release(c, dev);
        c.exec.invalidate();
        return r;
    }

    @Override
    public int cuDevicePrimaryCtxReset(Call c, int dev) throws CallRejected, InterruptedException {
        int r = session.primary().reset(c, dev);
        c.exec.invalidate();
        return r;
    }

    @Override
    public int cuDevicePrimaryCtxGetState(Call c, int dev) {
        int[] flags = new int[1], active = new int[1];
        int r = session.primary().state(dev, flags, active);
        c.outs.putInt(flags[0]).putInt(active[0]);
        return r;
    }

    /** Core-dump flags are refused as in {@link #cuCtxSetFlags}: the primary context is made with these flags. */
    @Override
    public int cuDevicePrimaryCtxSetFlags(Call c, int dev, int flags) throws CallRejected {
        if ((flags & COREDUMP_FLAGS) != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "core-dump flags set how the backend's whole process dumps, not one session's context");
        }
        return session.primary().setFlags(dev, flags);
    }

    @Override
    public int cuCtxPushCurrent(Call c, long ctx) {
        c.lane.pushContext(ctx);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuCtxPopCurrent(Call c) {
        long popped = c.lane.popContext();
        if (popped == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        c.outs.putLong(session.handles().idOf(ParamType.CTX, popped));
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuCtxSetCurrent(Call c, long ctx) {
        c.lane.setContext(ctx);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuCtxGetCurrent(Call c) {
        c.outs.putLong(session.handles().idOf(ParamType.CTX, c.lane.topContext()));
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * The driver's context ids number every context of the process, other sessions' too: a session
     * gets the context's handle id instead, which is unique and stable for the session's life and
     * says nothing of other sessions. NULL asks for the lane's current context.
     */
    @Override
    public int cuCtxGetId(Call c, long ctx) {
        long real = ctx != 0 ? ctx : c.lane.topContext();
        long id = real == 0 ? 0 : session.handles().idOf(ParamType.CTX, real);
        if (id == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        c.outs.putLong(id);
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * As {@link #cuCtxGetId}: a stream the session made answers its handle id; the special streams
     * (legacy, per-thread) answer a number issued here once per driver id, after the driver has said
     * which stream it is.
     */
    @Override
    public int cuStreamGetId(Call c, long hStream) {
        MemorySegment out = c.scratch(8);
        int r = driver().cuStreamGetId(hStream, out);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        long id = hStream == 0 || hStream == 1 || hStream == 2 ? 0 : session.handles().idOf(ParamType.STREAM, hStream);
        if (id == 0) {
            id = specialStreamIds.computeIfAbsent(out.get(ValueLayout.JAVA_LONG, 0), k -> nextSpecialStreamId.getAndIncrement());
        }
        c.outs.putLong(id);
        return CuResult.CUDA_SUCCESS;
    }

    /** The stream's context as this session's id; green contexts are never made through a session, so one is refused. */
    @Override
    public int cuStreamGetCtx_v2(Call c, long hStream) {
        MemorySegment ctx = c.scratch(8), green = c.scratch(8);
        int r = driver().cuStreamGetCtx_v2(hStream, ctx, green);
        if (r != CuResult.CUDA_SUCCESS) {
            return r;
        }
        if (green.get(ValueLayout.JAVA_LONG, 0) != 0) {
            return CuResult.CUDA_ERROR_NOT_SUPPORTED;
        }
        long id = session.handles().idOf(ParamType.CTX, ctx.get(ValueLayout.JAVA_LONG, 0));
        if (id == 0) {
            return CuResult.CUDA_ERROR_INVALID_CONTEXT;
        }
        c.outs.putLong(id).putLong(0);
        return CuResult.CUDA_SUCCESS;
    }

    /** CU_CTX_COREDUMP_ENABLE and CU_CTX_USER_COREDUMP_ENABLE: they set how the backend's process dumps. */
    static final int COREDUMP_FLAGS = 0x20 | 0x40;

    /** The lane's current context takes the flags; core-dump flags act on the whole process and are refused. */
    @Override
    public int cuCtxSetFlags(Call c, int flags) throws CallRejected {
        if ((flags & COREDUMP_FLAGS) != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "core-dump flags set how the backend's whole process dumps, not one session's context");
        }
        return session.driver().cuCtxSetFlags(flags);
    }
}
