package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.ParamType;

/**
 * Area {@code contexts}: virtual primary contexts ({@link PrimaryContexts}) and the lane's context
 * stack, which lives on the lane rather than in a driver thread ({@link Lane}), so that any thread
 * can run the lane's calls. Contexts arrive translated to the driver's values and leave as this
 * session's handle ids.
 */
final class ContextCalls implements BackendHandlers.Contexts {
    private final Session session;

    ContextCalls(Session session) {
        this.session = session;
    }

    @Override
    public int cuDevicePrimaryCtxRetain(Call c, int dev) {
        long[] id = new long[1];
        int r = session.primary().retain(dev, c.scratch(8), id);
        c.exec.invalidate(); // creating the context changed this thread's driver stack
        c.outs.putLong(id[0]);
        return r;
    }

    @Override
    public int cuDevicePrimaryCtxRelease(Call c, int dev) {
        int r = session.primary().release(dev);
        c.exec.invalidate();
        return r;
    }

    @Override
    public int cuDevicePrimaryCtxReset(Call c, int dev) {
        int r = session.primary().reset(dev);
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

    @Override
    public int cuDevicePrimaryCtxSetFlags(Call c, int dev, int flags) {
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
}
