package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;

import java.util.Collections;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Context and stream queries (issue 11): the _v2 forms that name their context (NULL: the current
 * one), context and stream ids, a stream's context and device, the priority range, and the shared
 * memory bank configuration (four-byte banks, as on sm_90, where it cannot be changed: setting it
 * is accepted and changes nothing, as the driver documents for such devices).
 */
final class ContextQueries {
    /** Priorities run from 0 (least) to -5 (greatest), as on sm_90; {@link Streams#create} clamps to them. */
    static final int LEAST_PRIORITY = 0;
    static final int GREATEST_PRIORITY = -5;
    static final int SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE = 1;
    static final int MAX_SHARED_MEM_CONFIG = 2;

    private final Contexts contexts;
    private final Streams streams;
    /** Ids of the legacy and per-thread streams, which have no handle: small numbers, below every handle. */
    private final Map<EmulatedStream, Long> specialIds = Collections.synchronizedMap(new WeakHashMap<>());
    private final AtomicLong nextSpecialId = new AtomicLong(1);

    ContextQueries(Contexts contexts, Streams streams) {
        this.contexts = contexts;
        this.streams = streams;
    }

    /** {@code ctx}, or the current context for 0. */
    EmulatedContext context(long ctx) {
        return ctx == 0 ? contexts.current() : contexts.find(ctx);
    }

    void synchronize(long ctx) {
        EmulatedContext c = context(ctx);
        c.allWork().join();
        c.throwIfFaulted();
    }

    /** A context's id: its handle, never reused. */
    long contextId(long ctx) {
        return context(ctx).handle;
    }

    /** The stream a handle names; the special ones are the current context's. */
    EmulatedStream stream(long hStream) {
        if (hStream >= 0 && hStream <= Streams.PER_THREAD) {
            return streams.resolve(hStream, contexts.current());
        }
        return contexts.lookup(hStream, EmulatedStream.class, "hStream");
    }

    long streamId(long hStream) {
        EmulatedStream s = stream(hStream);
        return s.handle != 0 ? s.handle : specialIds.computeIfAbsent(s, k -> nextSpecialId.getAndIncrement());
    }

    void checkSharedMemConfig(int config) {
        contexts.current();
        if (config < 0 || config > MAX_SHARED_MEM_CONFIG) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "config=" + config);
        }
    }
}
