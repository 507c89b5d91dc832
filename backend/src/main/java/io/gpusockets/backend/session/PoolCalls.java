package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.calls.PoolAttributeRequest;
import io.gpusockets.protocol.structs.MemoryProps;
import io.gpusockets.protocol.wire.ProtocolException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Area {@code pools}: memory pools and stream-ordered allocation, on the session's own pools only
 * ({@link SessionPools} says why the device's default pool is never named). Handles arrive translated
 * (a pool of another session was already refused); async allocations become session ranges at the call.
 */
final class PoolCalls implements BackendHandlers.Pools {
    /** CUmemAccessDesc entries one cuMemPoolSetAccess may carry (a few per device suffice). */
    static final long MAX_ACCESS_DESCS = 64;
    private static final String NO_IPC = "IPC handles name objects of the backend's host and cannot cross machines";

    private final Session session;
    private final CudaDriver driver;
    private final SessionPools pools;

    PoolCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
        this.pools = session.pools();
    }

    /** The device of the calling lane's current context. */
    private int currentDevice(Call c) throws CallRejected {
        MemorySegment dev = c.scratch(4);
        int r = driver.cuCtxGetDevice(dev);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new CallRejected(r, "no current context");
        }
        return dev.get(ValueLayout.JAVA_INT, 0);
    }

    /** The session's stand-in for the device's default pool, made on first use. */
    private long defaultPool(Call c, int device) throws CallRejected {
        return defaultPool(c, device, false);
    }

    /**
     * The stand-in; {@code aside}: made on the side of a call that does not return it (cuMemAllocAsync), so that a
     * checkpoint records it as the cuDeviceGetDefaultMemPool that makes it alone (a restore then makes it first,
     * with the same id).
     */
    private long defaultPool(Call c, int device, boolean aside) throws CallRejected {
        synchronized (pools) {
            long p = pools.defaultPool(device);
            if (p != 0) {
                return p;
            }
            MemorySegment props = c.scratch(MemoryProps.POOL_PROPS_SIZE);
            props.set(ValueLayout.JAVA_INT, MemoryProps.TYPE, MemoryProps.ALLOCATION_TYPE_PINNED);
            props.set(ValueLayout.JAVA_INT, MemoryProps.LOCATION, MemoryProps.LOCATION_TYPE_DEVICE);
            props.set(ValueLayout.JAVA_INT, MemoryProps.LOCATION + 4, device);
            MemorySegment out = c.scratch(8);
            int r = driver.cuMemPoolCreate(out, props);
            if (r != CuResult.CUDA_SUCCESS) {
                throw new CallRejected(r, "creating the session's pool for device " + device);
            }
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            pools.add(new SessionPools.Pool(real, device, true));
            long id = session.handles().intern(ParamType.POOL, real, 0, 0);
            CheckpointRecorder rec = session.recorder();
            if (aside && rec != null) {
                byte[] body = java.nio.ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(device).array();
                rec.madeBy(io.gpusockets.protocol.api.ApiTable.get().byName("cuDeviceGetDefaultMemPool"), body,
                        session.currentContextId(c.lane), id);
            }
            return real;
        }
    }

    private void putPool(Call c, long real) {
        c.outs.putLong(session.handles().idOf(ParamType.POOL, real));
    }

    /**
     * Charged to the tenant as its size before the driver call (a pool may hold more; the quota counts what
     * is allocated). On a capturing stream the allocation becomes a graph memory node: its charge then stays
     * until the session ends ({@link SessionQuota#keepGraphMemory}), since the driver keeps graph memory past
     * the graph and a captured free gives nothing back; its range is the session's from the call on, so that
     * the captured work naming it is checked as any other.
     */
    private int allocate(Call c, long bytesize, long pool, long hStream) throws CallRejected {
        boolean graphMemory = session.captureGuard().capturing(c, driver, hStream);
        session.quota().reserve(bytesize, c.name());
        MemorySegment out = c.scratch(8);
        int r = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            r = driver.cuMemAllocFromPoolAsync(out, bytesize, pool, hStream);
        } finally {
            if (r != CuResult.CUDA_SUCCESS) {
                session.quota().unreserve(bytesize);
            }
        }
        if (r == CuResult.CUDA_SUCCESS) {
            long base = out.get(ValueLayout.JAVA_LONG, 0);
            if (graphMemory) {
                session.quota().keepGraphMemory(bytesize);
            } else {
                session.quota().keepRange(base, bytesize);
            }
            // Owned by no context: the driver frees pool memory only when it is freed (or at the session's end).
            session.memory().add(new SessionMemory.Range(base, bytesize, 0, true));
            pools.allocated(new SessionPools.AsyncAllocation(base, pool, c.lane.topContext()));
            c.outs.putLong(base);
        }
        return r;
    }

    /** From the session's current pool of the current context's device, never the driver's shared default. */
    @Override
    public int cuMemAllocAsync(Call c, long bytesize, long hStream) throws CallRejected {
        int device = currentDevice(c);
        long pool = pools.currentPool(device);
        return allocate(c, bytesize, pool != 0 ? pool : defaultPool(c, device, true), hStream);
    }

    @Override
    public int cuMemAllocFromPoolAsync(Call c, long bytesize, long pool, long hStream) throws CallRejected {
        return allocate(c, bytesize, pool, hStream);
    }

    /**
     * The range is the session's (checked); it stops being one at the call, as later work may not use it.
     * In a capture (a graph memory free node, which frees nothing until a launch of the graph) its charge
     * stays, as graph memory, for the session's life ({@link SessionQuota#rangeToGraphMemory}).
     */
    @Override
    public int cuMemFreeAsync(Call c, long dptr, long hStream) {
        boolean captured = session.captureGuard().capturing(c, driver, hStream);
        int r = driver.cuMemFreeAsync(dptr, hStream);
        if (r == CuResult.CUDA_SUCCESS) {
            if (captured) {
                session.quota().rangeToGraphMemory(dptr);
            }
            session.memory().remove(dptr);
            pools.freed(dptr);
        }
        return r;
    }

    /** Pinned device memory without IPC handle types only; the location must be one of the session's devices. */
    @Override
    public int cuMemPoolCreate(Call c, long poolPropsLength) throws ProtocolException, CallRejected, InterruptedException {
        if (poolPropsLength != MemoryProps.POOL_PROPS_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "poolProps of " + poolPropsLength + " bytes");
        }
        MemorySegment props = c.receiveBulk(poolPropsLength);
        String refusal = MemoryProps.poolRefusal(props, session.host().deviceCount());
        if (refusal != null) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, refusal);
        }
        if (!MemoryProps.validDevice(props, session.host().deviceCount())) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_DEVICE, "location.id is no device");
        }
        MemorySegment out = c.scratch(8);
        int r = driver.cuMemPoolCreate(out, props);
        if (r == CuResult.CUDA_SUCCESS) {
            long real = out.get(ValueLayout.JAVA_LONG, 0);
            pools.add(new SessionPools.Pool(real, MemoryProps.Location.read(props, MemoryProps.LOCATION).id(), false));
            c.outs.putLong(session.handles().intern(ParamType.POOL, real, 0, 0));
        }
        return r;
    }

    /** As the driver: a device's default pool cannot be destroyed (the session's stand-in neither). */
    @Override
    public int cuMemPoolDestroy(Call c, long pool) throws CallRejected {
        SessionPools.Pool p = pools.pool(pool);
        if (p != null && p.isDefault()) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "a device's default pool cannot be destroyed");
        }
        int r = driver.cuMemPoolDestroy(pool);
        if (r == CuResult.CUDA_SUCCESS) {
            pools.remove(pool);
            session.dropHandle(session.handles().idOf(ParamType.POOL, pool));
            // Its outstanding allocations stay valid until freed, as in the driver (they are still remembered).
        }
        return r;
    }

    private long poolOf(Call c, PoolAttributeRequest.Request q) throws CallRejected {
        if (PoolAttributeRequest.valueBytes(q.attribute()) == 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "pool attribute " + q.attribute());
        }
        return c.handle(ParamType.POOL, q.pool(), false);
    }

    /**
     * The pool is the session's own, so every attribute concerns the session alone. But a pool keeps up to its
     * release threshold of freed memory past each synchronization: memory no allocation holds, so no charge
     * covers it, and a tenant could grow it without bound over pools of its own. For a tenant with a memory
     * limit the threshold asked for is therefore only remembered (and answered by cuMemPoolGetAttribute); the
     * pool's own stays 0, so the driver gives freed memory back at each synchronization.
     */
    @Override
    public int cuMemPoolSetAttribute(Call c) throws ProtocolException, CallRejected {
        PoolAttributeRequest.Request q = PoolAttributeRequest.read(c.body);
        c.expectEnd();
        long pool = poolOf(c, q);
        if (q.attribute() == PoolAttributeRequest.RELEASE_THRESHOLD && session.tenant().limits().memoryBytes() != Long.MAX_VALUE) {
            pools.releaseThreshold(pool, q.value());
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment value = c.scratch(8);
        if (PoolAttributeRequest.valueBytes(q.attribute()) == 4) {
            value.set(ValueLayout.JAVA_INT, 0, (int) q.value());
        } else {
            value.set(ValueLayout.JAVA_LONG, 0, q.value());
        }
        return driver.cuMemPoolSetAttribute(pool, q.attribute(), value);
    }

    @Override
    public int cuMemPoolGetAttribute(Call c) throws ProtocolException, CallRejected {
        PoolAttributeRequest.Request q = PoolAttributeRequest.read(c.body);
        c.expectEnd();
        long pool = poolOf(c, q);
        Long kept = q.attribute() == PoolAttributeRequest.RELEASE_THRESHOLD ? pools.releaseThreshold(pool) : null;
        if (kept != null) {
            PoolAttributeRequest.putValue(c.outs, kept);
            return CuResult.CUDA_SUCCESS;
        }
        MemorySegment value = c.scratch(8);
        int r = driver.cuMemPoolGetAttribute(pool, q.attribute(), value);
        if (r == CuResult.CUDA_SUCCESS) {
            PoolAttributeRequest.putValue(c.outs, PoolAttributeRequest.valueBytes(q.attribute()) == 4
                    ? value.get(ValueLayout.JAVA_INT, 0) : value.get(ValueLayout.JAVA_LONG, 0));
        }
        return r;
    }

    /** Every entry must name one of the session's devices (count bounded before the bytes are taken). */
    @Override
    public int cuMemPoolSetAccess(Call c, long pool, long mapLength, long count)
            throws ProtocolException, CallRejected, InterruptedException {
        if (count < 0 || count > MAX_ACCESS_DESCS || mapLength != count * MemoryProps.ACCESS_DESC_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "count=" + count + " with " + mapLength + " bytes");
        }
        MemorySegment map = count == 0 ? MemorySegment.NULL : c.receiveBulk(mapLength);
        checkAccessDescs(map, count, session.host().deviceCount());
        return driver.cuMemPoolSetAccess(pool, map, count);
    }

    static void checkAccessDescs(MemorySegment descs, long count, int deviceCount) throws CallRejected {
        for (long i = 0; i < count; i++) {
            MemoryProps.Location l = MemoryProps.Location.read(descs, i * MemoryProps.ACCESS_DESC_SIZE);
            if (!l.isDevice(deviceCount)) {
                throw new CallRejected(l.type() == MemoryProps.LOCATION_TYPE_DEVICE ? CuResult.CUDA_ERROR_INVALID_DEVICE
                        : CuResult.CUDA_ERROR_NOT_SUPPORTED, "desc[" + i + "].location type=" + l.type() + " id=" + l.id());
            }
        }
    }

    @Override
    public int cuMemPoolGetAccess(Call c, long memPool, long locationLength)
            throws ProtocolException, CallRejected, InterruptedException {
        MemorySegment location = locationBytes(c, locationLength, session.host().deviceCount());
        MemorySegment flags = c.scratch(4);
        int r = driver.cuMemPoolGetAccess(flags, memPool, location);
        if (r == CuResult.CUDA_SUCCESS) {
            c.outs.putInt(flags.get(ValueLayout.JAVA_INT, 0));
        }
        return r;
    }

    /** A CUmemLocation from the wire, which must name one of the session's devices. */
    static MemorySegment locationBytes(Call c, long length, int deviceCount)
            throws ProtocolException, CallRejected, InterruptedException {
        if (length != MemoryProps.LOCATION_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "location of " + length + " bytes");
        }
        MemorySegment location = c.receiveBulk(length);
        MemoryProps.Location l = MemoryProps.Location.read(location, 0);
        if (!l.isDevice(deviceCount)) {
            throw new CallRejected(l.type() == MemoryProps.LOCATION_TYPE_DEVICE ? CuResult.CUDA_ERROR_INVALID_DEVICE
                    : CuResult.CUDA_ERROR_NOT_SUPPORTED, "location type=" + l.type() + " id=" + l.id());
        }
        return location;
    }

    /** The session's own pool standing for the device's default one (see {@link SessionPools}). */
    @Override
    public int cuDeviceGetDefaultMemPool(Call c, int dev) throws CallRejected {
        putPool(c, defaultPool(c, dev));
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuDeviceGetMemPool(Call c, int dev) throws CallRejected {
        long p = pools.currentPool(dev);
        putPool(c, p != 0 ? p : defaultPool(c, dev));
        return CuResult.CUDA_SUCCESS;
    }

    /** Changes only the session's view: the driver's current pool of the device, shared by all sessions, stays. */
    @Override
    public int cuDeviceSetMemPool(Call c, int dev, long pool) throws CallRejected {
        SessionPools.Pool p = pools.pool(pool);
        if (p == null) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_HANDLE, "not a pool of this session");
        }
        if (p.device() != dev) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_DEVICE, "the pool is on device " + p.device() + ", not " + dev);
        }
        pools.setCurrent(dev, pool);
        return CuResult.CUDA_SUCCESS;
    }

    /** CU_MEM_LOCATION_TYPE_HOST, _HOST_NUMA, _HOST_NUMA_CURRENT; CU_MEM_ALLOCATION_TYPE_MANAGED. */
    private static final int LOCATION_HOST_FIRST = 2, LOCATION_HOST_LAST = 4, ALLOCATION_TYPE_MANAGED = 2;

    /**
     * The device of a location-based pool call (CUmemLocation as 8 bytes of DATA): a device location with
     * pinned allocations; host locations and managed pools refused as not reaching the guest.
     */
    private static int poolDevice(Call c, long locationLength, int type)
            throws ProtocolException, CallRejected, InterruptedException {
        if (locationLength != MemoryProps.LOCATION_SIZE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "location of " + locationLength + " bytes");
        }
        MemoryProps.Location l = MemoryProps.Location.read(c.receiveBulk(locationLength), 0);
        if (l.type() >= LOCATION_HOST_FIRST && l.type() <= LOCATION_HOST_LAST || type == ALLOCATION_TYPE_MANAGED) {
            throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED,
                    "pools of host or managed memory: memory of the backend's host cannot reach the guest");
        }
        if (l.type() != MemoryProps.LOCATION_TYPE_DEVICE || type != MemoryProps.ALLOCATION_TYPE_PINNED) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "location type " + l.type() + ", allocation type " + type);
        }
        return c.device(l.id());
    }

    @Override
    public int cuMemGetDefaultMemPool(Call c, long location, int type)
            throws ProtocolException, CallRejected, InterruptedException {
        return cuDeviceGetDefaultMemPool(c, poolDevice(c, location, type));
    }

    @Override
    public int cuMemGetMemPool(Call c, long location, int type) throws ProtocolException, CallRejected, InterruptedException {
        return cuDeviceGetMemPool(c, poolDevice(c, location, type));
    }

    @Override
    public int cuMemSetMemPool(Call c, long location, int type, long pool)
            throws ProtocolException, CallRejected, InterruptedException {
        return cuDeviceSetMemPool(c, poolDevice(c, location, type), pool);
    }

    @Override
    public int cuMemPoolExportToShareableHandle(Call c, long pool, int handleType, long flags) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NO_IPC);
    }

    @Override
    public int cuMemPoolImportFromShareableHandle(Call c, int handleType, long flags) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NO_IPC);
    }

    @Override
    public int cuMemPoolExportPointer(Call c, long ptr) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NO_IPC);
    }

    @Override
    public int cuMemPoolImportPointer(Call c, long pool) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, NO_IPC);
    }
}
