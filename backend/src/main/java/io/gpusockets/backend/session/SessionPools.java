package io.gpusockets.backend.session;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A session's memory pools and its stream-ordered allocations.
 *
 * <p>The driver's default pool of a device is shared by every session of the backend process: one
 * session's cuMemPoolTrimTo, attributes or access changes would reach the others, and its used/reserved
 * bytes would show theirs. So no session ever names it. Each session has, per device, a pool of its
 * own that stands for the device's default pool (created on first use by {@link PoolCalls}), and a
 * current pool per device that only its own cuDeviceSetMemPool changes and its own cuMemAllocAsync
 * allocates from. Everything here is in real driver values; the ids the frontend sees are
 * {@link SessionHandles}' (kind POOL, owned by nobody: the driver does not destroy pools with contexts).
 *
 * <p>Async allocations are remembered with their pool and the context they were made in, so the
 * session's end can free them (the driver frees neither them nor their pools with a context).
 */
final class SessionPools {
    /** A pool the session made (or its stand-in for a device's default pool). */
    record Pool(long real, int device, boolean isDefault) {
    }

    /** An outstanding stream-ordered allocation: its pool and the context (real) it was made in. */
    record AsyncAllocation(long base, long pool, long context) {
    }

    private final Map<Long, Pool> pools = new LinkedHashMap<>();
    private final Map<Integer, Long> defaults = new HashMap<>();
    private final Map<Integer, Long> current = new HashMap<>();
    private final Map<Long, AsyncAllocation> allocations = new LinkedHashMap<>();
    /** Release thresholds asked for but kept from the driver (PoolCalls: a tenant with a memory limit), by pool. */
    private final Map<Long, Long> releaseThresholds = new HashMap<>();

    synchronized void add(Pool p) {
        pools.put(p.real(), p);
        if (p.isDefault()) {
            defaults.put(p.device(), p.real());
        }
    }

    synchronized Pool pool(long real) {
        return pools.get(real);
    }

    /** The session's stand-in for the device's default pool, or 0 if not made yet. */
    synchronized long defaultPool(int device) {
        return defaults.getOrDefault(device, 0L);
    }

    /** The pool cuMemAllocAsync uses on the device: the one set, else the default (0 if not made yet). */
    synchronized long currentPool(int device) {
        Long p = current.get(device);
        return p != null ? p : defaultPool(device);
    }

    synchronized void setCurrent(int device, long real) {
        current.put(device, real);
    }

    /** Remembers the release threshold asked for {@code real} (the pool's own stays 0). */
    synchronized void releaseThreshold(long real, long value) {
        releaseThresholds.put(real, value);
    }

    /** The release threshold asked for {@code real} and kept from the driver, or null. */
    synchronized Long releaseThreshold(long real) {
        return releaseThresholds.get(real);
    }

    /** Forgets a destroyed pool; a device whose current pool it was goes back to its default, as in the driver. */
    synchronized void remove(long real) {
        pools.remove(real);
        releaseThresholds.remove(real);
        current.values().removeIf(p -> p == real);
    }

    synchronized void allocated(AsyncAllocation a) {
        allocations.put(a.base(), a);
    }

    synchronized AsyncAllocation freed(long base) {
        return allocations.remove(base);
    }

    synchronized int allocationCount() {
        return allocations.size();
    }

    /** Takes every outstanding allocation, grouped by context, for the session's end. */
    synchronized Map<Long, List<AsyncAllocation>> takeAllocations() {
        Map<Long, List<AsyncAllocation>> byContext = new LinkedHashMap<>();
        for (AsyncAllocation a : allocations.values()) {
            byContext.computeIfAbsent(a.context(), k -> new ArrayList<>()).add(a);
        }
        allocations.clear();
        return byContext;
    }

    /** Takes every pool, for the session's end. */
    synchronized List<Pool> takePools() {
        List<Pool> all = new ArrayList<>(pools.values());
        pools.clear();
        defaults.clear();
        current.clear();
        return all;
    }
}
