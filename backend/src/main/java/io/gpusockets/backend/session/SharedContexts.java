package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;

/**
 * Isolation mode shared: one real context per tenant and device, which every session of that tenant
 * gets as its (virtual) primary context. What it owns: those contexts, each made at the first session's
 * first primary retain and destroyed when the last session using it ends. Sessions still have their own
 * handles, and a session's end frees only what it made in the context (allocations, modules, streams,
 * events: {@link SessionCleanup}); calls that would end the context for the others (cuCtxDestroy of it,
 * cuDevicePrimaryCtxReset) are refused with CUDA_ERROR_NOT_PERMITTED. For trusted tenants only: a
 * faulting kernel of one session poisons the context of all of them, and context-wide settings
 * (limits, cache config, flags) are shared.
 */
public final class SharedContexts {
    private record Key(String tenant, int device) {
    }

    private static final class Shared {
        final long real;
        final Key key;
        int sessions;

        Shared(long real, Key key) {
            this.real = real;
            this.key = key;
        }
    }

    private final CudaDriver driver;
    private final Map<Key, Shared> byKey = new HashMap<>();
    private final Map<Long, Shared> byReal = new HashMap<>();

    public SharedContexts(CudaDriver driver) {
        this.driver = driver;
    }

    /**
     * The tenant's context on {@code device}, made now if it has none, counted once more as in use by a
     * session; the driver's CUresult (negated) when it cannot be made. {@code scratch8} takes the new handle.
     */
    synchronized long acquire(String tenant, int device, MemorySegment scratch8) {
        Key k = new Key(tenant, device);
        Shared s = byKey.get(k);
        if (s == null) {
            int r = driver.cuCtxCreate(scratch8, MemorySegment.NULL, 0, device);
            if (r != CuResult.CUDA_SUCCESS) {
                return -r;
            }
            long real = scratch8.get(ValueLayout.JAVA_LONG, 0);
            driver.cuCtxPopCurrent(scratch8); // a primary retain does not change the current context
            s = new Shared(real, k);
            byKey.put(k, s);
            byReal.put(real, s);
        }
        s.sessions++;
        return s.real;
    }

    /** Whether {@code real} is a shared context (which no session may destroy). */
    synchronized boolean isShared(long real) {
        return byReal.containsKey(real);
    }

    /** A session that {@link #acquire}d {@code real} has ended; the last one destroys it. Returns whether it did. */
    synchronized boolean release(long real) {
        Shared s = byReal.get(real);
        if (s == null) {
            return false;
        }
        if (--s.sessions > 0) {
            return false;
        }
        byReal.remove(real);
        byKey.remove(s.key);
        driver.cuCtxDestroy(real);
        return true;
    }

    /** Contexts shared now (for tests and status). */
    public synchronized int count() {
        return byKey.size();
    }
}
