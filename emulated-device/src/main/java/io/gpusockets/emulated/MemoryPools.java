package io.gpusockets.emulated;

import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_DEVICE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_HANDLE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_INVALID_VALUE;
import static io.gpusockets.protocol.api.CuResult.CUDA_ERROR_NOT_SUPPORTED;

import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.MemoryProps;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Memory pools and stream-ordered allocation (cuMemAllocAsync and friends). An allocation is made at
 * the call (its address is usable by work queued after it, as on a GPU) from the context's device
 * budget; a free takes effect in stream order: the memory stays resolvable for work queued before the
 * free and is unmapped and released when the stream reaches it. The emulated pools keep no cache of
 * freed memory, so reserved bytes equal used bytes and the release threshold and trimming have nothing
 * to act on (both are accepted and kept). Each device has a default pool, created with the device; a
 * pool's allocations are owned by the context that made them, like cuMemAlloc's.
 */
final class MemoryPools {
    /** One pool. Its counters are derived from its live allocations. */
    static final class Pool {
        final long handle;
        final int device;
        final boolean isDefault;
        final int[] reuse = {1, 1, 1};                     // REUSE_* attributes, enabled by default as in CUDA
        long releaseThreshold;                             // guarded by this
        long reservedHigh;                                 // guarded by this
        long usedHigh;                                     // guarded by this
        final Map<Integer, Integer> access = new ConcurrentHashMap<>();
        final Map<Long, Allocation> allocations = new ConcurrentHashMap<>();
        volatile boolean destroyed;

        Pool(long handle, int device, boolean isDefault) {
            this.handle = handle;
            this.device = device;
            this.isDefault = isDefault;
        }
    }

    private final Handles handles;
    private final Contexts contexts;
    private final Streams streams;
    private final EmulatedMemory memory;
    private final int deviceCount;
    private final Pool[] defaults;
    private final Pool[] current;
    /** Allocations whose stream-ordered free is queued: a second free of one is refused. */
    private final Map<Long, Allocation> freeing = new ConcurrentHashMap<>();

    MemoryPools(Handles handles, Contexts contexts, Streams streams, EmulatedMemory memory, int deviceCount) {
        this.handles = handles;
        this.contexts = contexts;
        this.streams = streams;
        this.memory = memory;
        this.deviceCount = deviceCount;
        this.defaults = new Pool[deviceCount];
        this.current = new Pool[deviceCount];
        for (int d = 0; d < deviceCount; d++) {
            long h = handles.issue();
            defaults[d] = handles.register(h, new Pool(h, d, true));
        }
    }

    private Pool pool(long handle) {
        contexts.requireInit();
        Pool p = handles.find(handle, Pool.class);
        if (p == null || p.destroyed) {
            throw new CudaError(CUDA_ERROR_INVALID_HANDLE, "pool=0x" + Long.toHexString(handle) + " is not a live memory pool");
        }
        return p;
    }

    long defaultPool(int dev) {
        contexts.checkDevice(dev);
        return defaults[dev].handle;
    }

    synchronized long currentPool(int dev) {
        contexts.checkDevice(dev);
        Pool p = current[dev];
        return p != null && !p.destroyed ? p.handle : defaults[dev].handle;
    }

    synchronized void setCurrent(int dev, long handle) {
        contexts.checkDevice(dev);
        Pool p = pool(handle);
        if (p.device != dev) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "the pool is on device " + p.device + ", not " + dev);
        }
        current[dev] = p;
    }

    long create(MemorySegment props) {
        contexts.requireInit();
        MemorySegment s = HostSegments.sized(props, MemoryProps.POOL_PROPS_SIZE, "poolProps");
        String refusal = MemoryProps.poolRefusal(s, deviceCount);
        if (refusal != null) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, refusal);
        }
        if (!MemoryProps.validDevice(s, deviceCount)) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, "poolProps.location.id is no device");
        }
        long h = handles.issue();
        handles.register(h, new Pool(h, MemoryProps.Location.read(s, MemoryProps.LOCATION).id(), false));
        return h;
    }

    /** Outstanding allocations stay valid (CUDA releases the pool once they are freed). */
    synchronized void destroy(long handle) {
        Pool p = pool(handle);
        if (p.isDefault) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "a device's default memory pool cannot be destroyed");
        }
        p.destroyed = true;
        handles.remove(handle, p);
        for (int d = 0; d < deviceCount; d++) {
            if (current[d] == p) {
                current[d] = null;
            }
        }
    }

    long allocate(long bytesize, long poolHandle, long hStream) {
        EmulatedContext c = contexts.active();
        streams.resolve(hStream, c);
        Pool p = poolHandle == 0 ? pool(currentPool(c.device)) : pool(poolHandle);
        if (p.device != c.device) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "allocating from a pool of device " + p.device
                    + " on a stream of device " + c.device + " is not emulated");
        }
        if (bytesize == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "bytesize=0");
        }
        Allocation a = memory.allocate(c, bytesize, Allocation.Kind.ALLOCATED);
        p.allocations.put(a.base(), a);
        poolMade.add(a);
        synchronized (p) {
            long used = used(p);
            p.usedHigh = Math.max(p.usedHigh, used);
            p.reservedHigh = Math.max(p.reservedHigh, used);
        }
        return a.base();
    }

    /** Any live cuMemAlloc or pool allocation of the current context; released when the stream reaches the free. */
    /** Pool allocations, live or freed (held weakly: a freed one drops out once nothing holds it). */
    private final java.util.Set<Allocation> poolMade =
            java.util.Collections.synchronizedSet(java.util.Collections.newSetFromMap(new java.util.WeakHashMap<>()));

    /** Whether {@code a} came from a pool (cuMemAllocAsync, cuMemAllocFromPoolAsync) or a graph memory node. */
    boolean isPoolMemory(Allocation a) {
        return poolMade.contains(a) || graphMemory.contains(a.base());
    }

    /** Allocations of graph memory nodes (Graphs): they stay until their context goes. */
    private final java.util.Set<Long> graphMemory = java.util.concurrent.ConcurrentHashMap.newKeySet();

    void keepAsGraphMemory(long base) {
        graphMemory.add(base);
    }

    boolean isGraphMemory(long base) {
        return graphMemory.contains(base);
    }

    void freeAsync(long dptr, long hStream) {
        EmulatedContext c = contexts.active();
        EmulatedStream s = streams.resolve(hStream, c);
        Allocation a = memory.find(dptr);
        if (a != null && a.base() == dptr && a.owner() == c && graphMemory.contains(dptr)) {
            return;   // graph memory: kept until its context goes (Graphs.addMemAlloc), so a relaunch finds it
        }
        if (a == null || a.owner() != c || a.base() != dptr || a.kind() != Allocation.Kind.ALLOCATED
                || freeing.putIfAbsent(dptr, a) != null) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "dptr=0x" + Long.toHexString(dptr)
                    + " is not the start of a live allocation of the current context (or its free is already queued)");
        }
        try {
            c.enqueue(s, null, () -> release(a), "cuMemFreeAsync", true);
        } catch (CudaError e) {
            freeing.remove(dptr, a);
            throw e;
        }
    }

    private void release(Allocation a) {
        try {
            if (memory.unmap(a)) {
                memory.release(a);
            }
        } finally {
            freeing.remove(a.base(), a);
        }
    }

    /** Bytes of the pool's allocations still live (freed ones, by any means, drop out here). */
    private long used(Pool p) {
        long used = 0;
        for (Allocation a : p.allocations.values()) {
            if (memory.find(a.base()) == a) {
                used += a.size();
            } else {
                p.allocations.remove(a.base(), a);
            }
        }
        return used;
    }

    void trimTo(long handle, long minBytesToKeep) {
        pool(handle);   // nothing is cached to trim
    }

    void setAttribute(long handle, int attr, MemorySegment value) {
        Pool p = pool(handle);
        int size = PoolAttributeRequest.valueBytes(attr);
        if (size == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr);
        }
        MemorySegment v = HostSegments.sized(value, size, "value");
        synchronized (p) {
            switch (attr) {
                case PoolAttributeRequest.REUSE_FOLLOW_EVENT_DEPENDENCIES, PoolAttributeRequest.REUSE_ALLOW_OPPORTUNISTIC,
                     PoolAttributeRequest.REUSE_ALLOW_INTERNAL_DEPENDENCIES -> p.reuse[attr - 1] = v.get(HostSegments.INT, 0) != 0 ? 1 : 0;
                case PoolAttributeRequest.RELEASE_THRESHOLD -> p.releaseThreshold = v.get(HostSegments.LONG, 0);
                case PoolAttributeRequest.RESERVED_MEM_HIGH, PoolAttributeRequest.USED_MEM_HIGH -> {
                    if (v.get(HostSegments.LONG, 0) != 0) {
                        throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr + " may only be reset to 0");
                    }
                    long used = used(p);
                    if (attr == PoolAttributeRequest.RESERVED_MEM_HIGH) {
                        p.reservedHigh = used;
                    } else {
                        p.usedHigh = used;
                    }
                }
                default -> throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr + " is read-only");
            }
        }
    }

    void getAttribute(long handle, int attr, MemorySegment value) {
        Pool p = pool(handle);
        int size = PoolAttributeRequest.valueBytes(attr);
        if (size == 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "attr=" + attr);
        }
        MemorySegment v = HostSegments.sized(value, size, "value");
        synchronized (p) {
            long used = used(p);
            switch (attr) {
                case PoolAttributeRequest.REUSE_FOLLOW_EVENT_DEPENDENCIES, PoolAttributeRequest.REUSE_ALLOW_OPPORTUNISTIC,
                     PoolAttributeRequest.REUSE_ALLOW_INTERNAL_DEPENDENCIES -> v.set(HostSegments.INT, 0, p.reuse[attr - 1]);
                case PoolAttributeRequest.RELEASE_THRESHOLD -> v.set(HostSegments.LONG, 0, p.releaseThreshold);
                case PoolAttributeRequest.RESERVED_MEM_CURRENT, PoolAttributeRequest.USED_MEM_CURRENT -> v.set(HostSegments.LONG, 0, used);
                case PoolAttributeRequest.RESERVED_MEM_HIGH -> v.set(HostSegments.LONG, 0, Math.max(p.reservedHigh, used));
                default -> v.set(HostSegments.LONG, 0, Math.max(p.usedHigh, used));
            }
        }
    }

    /** The pool's own device always has read-write access; others may get read-write or none (read-only is not emulated). */
    void setAccess(long handle, MemorySegment map, long count) {
        Pool p = pool(handle);
        if (count < 0) {
            throw new CudaError(CUDA_ERROR_INVALID_VALUE, "count=" + count);
        }
        MemorySegment descs = HostSegments.sized(map, count * MemoryProps.ACCESS_DESC_SIZE, "map");
        List<int[]> changes = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            long at = i * MemoryProps.ACCESS_DESC_SIZE;
            int device = checkedDevice(MemoryProps.Location.read(descs, at), "map[" + i + "]");
            int flags = descs.get(HostSegments.INT, at + MemoryProps.ACCESS_FLAGS);
            if (flags == MemoryProps.ACCESS_READ) {
                throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, "read-only access is not emulated");
            }
            if (flags != MemoryProps.ACCESS_NONE && flags != MemoryProps.ACCESS_READWRITE) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "map[" + i + "].flags=" + flags);
            }
            if (device == p.device && flags != MemoryProps.ACCESS_READWRITE) {
                throw new CudaError(CUDA_ERROR_INVALID_VALUE, "the pool's own device keeps read-write access");
            }
            changes.add(new int[] {device, flags});
        }
        for (int[] ch : changes) {
            p.access.put(ch[0], ch[1]);
        }
    }

    int getAccess(long handle, MemorySegment location) {
        Pool p = pool(handle);
        int device = checkedDevice(MemoryProps.Location.read(HostSegments.sized(location, MemoryProps.LOCATION_SIZE, "location"), 0),
                "location");
        return device == p.device ? MemoryProps.ACCESS_READWRITE : p.access.getOrDefault(device, MemoryProps.ACCESS_NONE);
    }

    private int checkedDevice(MemoryProps.Location l, String what) {
        if (l.type() != MemoryProps.LOCATION_TYPE_DEVICE) {
            throw new CudaError(CUDA_ERROR_NOT_SUPPORTED, what + ".type=" + l.type() + ": only device locations are emulated");
        }
        if (l.id() < 0 || l.id() >= deviceCount) {
            throw new CudaError(CUDA_ERROR_INVALID_DEVICE, what + ".id=" + l.id());
        }
        return l.id();
    }
}
