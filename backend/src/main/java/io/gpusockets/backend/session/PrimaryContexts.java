package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Virtual primary contexts: each session gets its own context per device in place of the real
 * primary context, which tenants must never share. Retain/release count as the driver's do; the
 * context is destroyed (with everything in it) when the count reaches zero or on reset.
 */
final class PrimaryContexts {
    private final Session session;
    private final long[] handle;
    private final int[] refs;
    private final int[] flags;

    PrimaryContexts(Session session) {
        this.session = session;
        int n = session.host().deviceCount();
        this.handle = new long[n];
        this.refs = new int[n];
        this.flags = new int[n];
    }

    /** Retains on the calling lane thread for call {@code c}; {@code idOut} receives the handle id. */
    synchronized int retain(Call c, int dev, MemorySegment scratch8, long[] idOut) throws CallRejected {
        SharedContexts shared = session.shared();
        if (handle[dev] == 0 && shared != null) {
            c.reserveHandles(1, 0);
            long real = shared.acquire(session.tenant().name(), dev, scratch8);
            if (real < 0) {
                return (int) -real;
            }
            handle[dev] = session.handles().intern(ParamType.CTX, real, 0, 0);
        }
        if (handle[dev] == 0) {
            c.reserveHandles(1, 0);
            ContextPool pool = session.contextPool();
            // charged as the session's other contexts are (its first on the device is free: ContextCharges)
            SessionQuota.Pending charge = session.quota().beforeContext(dev, c.name());
            long real = 0;
            try {
                real = pool != null && flags[dev] == 0 ? pool.take(dev) : 0; // made ahead, now this session's
                if (real == 0) {
                    CudaDriver d = session.driver();
                    int r = d.cuCtxCreate(scratch8, MemorySegment.NULL, flags[dev], dev);
                    if (r != CuResult.CUDA_SUCCESS) {
                        return r;
                    }
                    real = scratch8.get(ValueLayout.JAVA_LONG, 0);
                    // cuCtxCreate made it current; a primary retain does not change the current context.
                    d.cuCtxPopCurrent(scratch8);
                }
            } finally {
                if (real == 0) {
                    session.quota().contextFailed(charge);
                } else {
                    session.quota().contextMade(charge, real);
                }
            }
            handle[dev] = session.handles().intern(ParamType.CTX, real, 0, 0);
        }
        refs[dev]++;
        idOut[0] = handle[dev];
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * Releases one reference; the last destroys the context, once no other call of the session runs
     * in it or uses anything of it (outside this object's lock, which those calls may be waiting for).
     */
    int release(Call c, int dev) throws CallRejected, InterruptedException {
        long id;
        synchronized (this) {
            if (refs[dev] == 0) {
                return CuResult.CUDA_ERROR_INVALID_CONTEXT;
            }
            if (--refs[dev] > 0 || session.shared() != null) { // a shared context stays the session's until it ends
                return CuResult.CUDA_SUCCESS;
            }
            id = handle[dev];
            handle[dev] = 0;
        }
        return destroy(c, id);
    }

    /** Drops every reference and destroys the context, as {@link #release} does with the last. */
    int reset(Call c, int dev) throws CallRejected, InterruptedException {
        long id;
        synchronized (this) {
            if (session.shared() != null) {
                return CuResult.CUDA_ERROR_NOT_PERMITTED; // the context is the tenant's other sessions' too
            }
            refs[dev] = 0;
            id = handle[dev];
            handle[dev] = 0;
        }
        return destroy(c, id);
    }

    private int destroy(Call c, long id) throws CallRejected, InterruptedException {
        if (id == 0) {
            return CuResult.CUDA_SUCCESS;
        }
        SessionHandles.Entry e = session.handles().get(id, ParamType.CTX);
        if (e == null) {
            return CuResult.CUDA_SUCCESS; // destroyed through cuCtxDestroy already
        }
        try (SessionUses.Retirement retiring = c.retire(new long[] {id}, new long[0])) {
            if (session.handles().get(id, ParamType.CTX) == null) {
                return CuResult.CUDA_SUCCESS; // destroyed through cuCtxDestroy meanwhile
            }
            session.beforeContextDestroy(e.real());
            int r = session.driver().cuCtxDestroy(e.real());
            retiring.commit();   // forgotten even when the driver refused: as before, the session no longer holds it
            session.afterContextDestroy(e.real());
            session.forgetContext(e.real());
            session.dropHandle(id);
            return r;
        }
    }

    /** For a checkpoint: per device, {references, flags}. */
    synchronized int[][] snapshot() {
        int[][] out = new int[refs.length][];
        for (int d = 0; d < refs.length; d++) {
            out[d] = new int[] {refs[d], flags[d]};
        }
        return out;
    }

    /** A restore, before the replay: the flags each device's primary context is made with. */
    synchronized void restoreFlags(int[][] state) {
        for (int d = 0; d < Math.min(state.length, flags.length); d++) {
            flags[d] = state[d][1];
        }
    }

    /** A restore, after the replay (which retained each once): the references the checkpointed session held. */
    synchronized void restoreRefs(int[][] state) {
        for (int d = 0; d < Math.min(state.length, refs.length); d++) {
            if (handle[d] != 0 && state[d][0] > 0) {
                refs[d] = state[d][0];
            }
        }
    }

    synchronized int state(int dev, int[] flagsOut, int[] activeOut) {
        flagsOut[0] = flags[dev];
        activeOut[0] = refs[dev] > 0 ? 1 : 0;
        return CuResult.CUDA_SUCCESS;
    }

    synchronized int setFlags(int dev, int newFlags) {
        flags[dev] = newFlags;
        return CuResult.CUDA_SUCCESS;
    }
}
