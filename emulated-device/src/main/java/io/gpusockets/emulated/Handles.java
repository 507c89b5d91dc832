package io.gpusockets.emulated;

import io.gpusockets.protocol.api.CuResult;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The opaque handles the emulated device issues (contexts, streams, events, modules, functions,
 * libraries, kernels). One counter for all kinds, so a handle of one kind passed where another is
 * expected is simply not found; values are never reused, so a stale handle can never name a newer
 * object. They start far above CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) and look like
 * pointers, as real driver handles do.
 *
 * <p>Texture and surface objects are not handles to the program but values its kernels receive: they are counted
 * apart, from 1 up, one counter for both kinds, never reused ({@link #issueObject}), so that a device that makes the
 * same objects in the same order gives them the same values (what a checkpoint's restore asserts), as a GPU, whose
 * texture objects are small numbers, is expected to do.
 */
final class Handles {
    private static final long FIRST = 0x5e00_0000_1000L;
    private static final long STEP = 0x40;

    private final AtomicLong next = new AtomicLong(FIRST);
    private final ConcurrentHashMap<Long, Object> live = new ConcurrentHashMap<>();

    long issue() {
        return next.getAndAdd(STEP);
    }

    private final AtomicLong nextObject = new AtomicLong(1);

    /** The value of a new texture or surface object: 1, 2, 3, ... per device. */
    long issueObject() {
        return nextObject.getAndIncrement();
    }

    <T> T register(long handle, T object) {
        live.put(handle, object);
        return object;
    }

    /** The live object of {@code type} named by {@code handle}, or null. */
    <T> T find(long handle, Class<T> type) {
        Object o = live.get(handle);
        return type.isInstance(o) ? type.cast(o) : null;
    }

    /** Registers an object created in {@code c}; refused if {@code c} died meanwhile (its cleanup has run). */
    <T> T own(EmulatedContext c, long handle, T object) {
        register(handle, object);
        c.owned.put(handle, object);
        if (c.destroyed()) {
            remove(handle, object);
            c.owned.remove(handle);
            throw new CudaError(CuResult.CUDA_ERROR_INVALID_CONTEXT, "context " + c.name + " was destroyed");
        }
        return object;
    }

    boolean remove(long handle, Object object) {
        return live.remove(handle, object);
    }
}
