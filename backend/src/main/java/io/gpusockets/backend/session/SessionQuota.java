package io.gpusockets.backend.session;

import io.gpusockets.backend.tenant.TenantAccount;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ChargeRule;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.LimitFootprint;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.images.ImageError;
import io.gpusockets.protocol.images.ModuleFootprint;
import io.gpusockets.protocol.structs.Array3DDescriptor;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What one session has charged to its tenant ({@link Session#tenant()}), and the charge rules of every
 * path that makes the driver allocate device memory. The rule of an entry is its table attribute
 * ({@code charge=}, {@link ChargeRule}): device allocations ({@code alloc}, {@code pitch}, stream-ordered
 * pool allocations too), arrays and mipmapped arrays (an estimate from their descriptor; sparse and deferred-mapping
 * ones nothing, their memory being the VMM allocations bound to them), module and library loads (the
 * image's footprint: its variables and code, {@link ModuleFootprint}), contexts and their limits
 * ({@link ContextCharges}; the stack a launch grows too, by its handler: {@link LaunchStack}), VMM physical
 * allocations (cuMemCreate, by its handler); cuMemGetInfo
 * ({@code info}) answers with the tenant's view. The page-locked shared window is charged here too,
 * against the tenant's pinned limit. Memory is reserved before the driver call (over the quota:
 * CUDA_ERROR_OUT_OF_MEMORY, and the driver is not called) and given back when the call fails, when the
 * memory is freed, when its context, module or library goes, and at the session's end, which gives back
 * everything still charged ({@link #close}). Graph memory (stream-ordered allocations made, or freed, in a
 * stream capture) is the exception: charged for the session's life ({@link #keepGraphMemory}).
 *
 * <p>The charges are kept here by what frees them (a device base, an array, a VMM handle, a module), so
 * the tenant gets back exactly what was taken. Charging goes only through {@link TenantAccount}, which in
 * another process may be a proxy.
 */
final class SessionQuota {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** A row pitch the driver may round a cuMemAllocPitch row up to, for the estimate before the call. */
    static final long PITCH_ESTIMATE_ALIGN = 512;
    /** Bytes per element charged for array formats whose size is not known here (the largest plain element). */
    static final int UNKNOWN_ELEMENT_BYTES = 16;

    /**
     * A reserve taken before a driver call; {@code bytes} given back by {@link #failed}. {@code key},
     * {@code aux} and {@code value} carry what the rule needs after the call: for a context its own charge
     * and device, for a library its footprint, for a limit the context, the limit and its previous value.
     */
    record Pending(ChargeRule rule, long bytes, long key, long aux, long value) {
        Pending(ChargeRule rule, long bytes) {
            this(rule, bytes, 0, 0, 0);
        }
    }

    private final long sessionId;
    private final TenantAccount tenant;
    /** Device ranges charged, by base: allocations and async allocations (globals are their module's). */
    private final Map<Long, Long> ranges = new HashMap<>();
    /** Arrays charged, by real handle. */
    private final Map<Long, Long> arrays = new HashMap<>();
    /** Mipmapped arrays charged, by real handle (their levels are theirs). */
    private final Map<Long, Long> mipmaps = new HashMap<>();
    /** VMM physical allocations charged, by real handle. */
    private final Map<Long, Long> vmm = new HashMap<>();
    /** Modules charged at their load, by real handle. */
    private final Map<Long, Long> modules = new HashMap<>();
    /** Contexts, their limits, and the libraries charged per context. */
    private final ContextCharges contexts;
    private final DeviceFacts facts;
    private long charged;
    /**
     * Graph memory: stream-ordered allocations made in a stream capture (graph memory allocation nodes).
     * The driver takes their memory from a pool it keeps for the device when the graph is instantiated or
     * launched and keeps it past the graph (until a trim), so a free captured in the graph does not give it
     * back: the charge stays until the session ends.
     */
    private long graphMemory;
    /** The high-water mark of {@link #graphMemory} (cuDeviceGetGraphMemAttribute); guarded by this. */
    private long graphMemoryHigh;
    private long pinned;
    private boolean closed;

    /** {@code facts}: what the rules read of the devices (the session's {@link DriverHost#facts}). */
    SessionQuota(long sessionId, TenantAccount tenant, DeviceFacts facts) {
        this.sessionId = sessionId;
        this.tenant = tenant;
        this.facts = facts;
        this.contexts = new ContextCharges(this, facts);
    }

    /** For tests: devices the rules cannot read (every charge that needs them takes its fallback). */
    SessionQuota(long sessionId, TenantAccount tenant) {
        this(sessionId, tenant, new DeviceFacts(new io.gpusockets.protocol.api.UnsupportedCudaDriver() { }, 0));
    }

    TenantAccount tenant() {
        return tenant;
    }

    ContextCharges contexts() {
        return contexts;
    }

    /**
     * Whether the tenant has a memory limit now. The rules that cost work beyond the call (reading a module
     * image, measuring a context's footprint) charge a tenant without one nothing: nothing would be refused,
     * and an image the driver accepts but the reader's bounds do not ({@link ModuleFootprint}) would be.
     */
    boolean metered() {
        return tenant.limits().memoryBytes() != Long.MAX_VALUE;
    }

    /** Bytes of device memory this session has charged now. */
    synchronized long charged() {
        return charged;
    }

    /**
     * Takes {@code bytes} from the tenant; CUDA_ERROR_OUT_OF_MEMORY (the driver is not called) when over its
     * quota. Nothing is asked for 0 bytes (a tenant over a limit a reload lowered may still make what costs nothing).
     */
    void reserve(long bytes, String what) throws CallRejected {
        if (bytes < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, what + ": size " + bytes);
        }
        if (bytes > 0 && !tenant.reserveMemory(bytes)) {
            TenantLimits l = tenant.limits();
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, what + " of " + bytes + " bytes: tenant "
                    + tenant.name() + " holds " + tenant.memoryUsed() + " of its " + l.memoryBytes() + " bytes");
        }
        synchronized (this) {
            charged += bytes;
        }
    }

    /** Gives back a reserve whose driver call failed, or a charge whose memory the driver has freed. */
    void unreserve(long bytes) {
        if (bytes == 0) {
            return;
        }
        synchronized (this) {
            charged -= bytes;
        }
        tenant.releaseMemory(bytes);
    }

    // ---- the generic path (CallDispatcher): one call before the driver, one after its success

    /**
     * Before the driver call of a generic entry, in the calling lane's context: reserves what it will
     * allocate by its {@code charge=} rule; null when it charges nothing. A non-null result is always
     * followed by {@link #succeeded} or {@link #failed}.
     */
    Pending before(CudaDriver driver, Call c, ApiFunction f, Object[] args, long[] values) throws CallRejected {
        ChargeRule rule = f.charge();
        switch (rule) {
            case ALLOC -> {
                long n = allocParam(f).alloc().evaluate(k -> values[k]);
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case PITCH -> {
                long n = pitchEstimate(values[2], values[3]);
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case ARRAY -> {
                long n = arrayBytes((MemorySegment) args[1]);
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case MIPMAP -> {
                Array3DDescriptor d = Array3DDescriptor.read((MemorySegment) args[1]);
                long n = d.unbacked() ? 0 : d.mipmapBytes((int) values[2], UNKNOWN_ELEMENT_BYTES);
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case MODULE -> {
                long n = metered() ? footprint(imageArg(f, args), new int[] {facts.capability(currentDevice(driver, c))}, f.name()) : 0;
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case LIBRARY -> {
                // context-independent: the library may be loaded into a context of any of the host's devices
                long n = metered() ? footprint(imageArg(f, args), facts.capabilities(), f.name()) : 0;
                return contexts.libraryBefore(n, f.name());
            }
            case CONTEXT -> {
                return contexts.contextBefore((int) values[paramOf(f, ParamType.DEV, false).index()], f.name());
            }
            case LIMIT -> {
                return limitBefore(driver, c, (int) values[0], values[1], f.name());
            }
            case INFO -> {
                return new Pending(rule, 0);
            }
            default -> {
                return null;
            }
        }
    }

    /** cuCtxSetLimit in the lane's current context: reserved by {@link ContextCharges#limitBefore}; null for limits that reserve no memory. */
    private Pending limitBefore(CudaDriver driver, Call c, int limit, long value, String what) throws CallRejected {
        if (!LimitFootprint.reservesMemory(limit)) {
            return null;
        }
        MemorySegment current = c.scratch(8);
        int r = driver.cuCtxGetLimit(current, limit);
        if (r != CuResult.CUDA_SUCCESS) {
            throw new CallRejected(r, "reading the limit before setting it"); // no context: the driver would refuse too
        }
        return contexts.limitBefore(c.lane.topContext(), currentDevice(driver, c), limit, value,
                current.get(ValueLayout.JAVA_LONG, 0), what);
    }

    /** The device of the calling thread's current context, or -1 when there is none (the call then fails in the driver). */
    static int currentDevice(CudaDriver driver, Call c) {
        MemorySegment dev = c.scratch(4);
        return driver.cuCtxGetDevice(dev) == CuResult.CUDA_SUCCESS ? dev.get(ValueLayout.JAVA_INT, 0) : -1;
    }

    /**
     * Bytes loading {@code image} takes on a device of one of {@code capabilities} (the most of them); an image
     * that cannot be read is refused as the driver refuses it.
     */
    private static long footprint(MemorySegment image, int[] capabilities, String what) throws CallRejected {
        long most = 0;
        try {
            for (int capability : capabilities) {
                most = Math.max(most, ModuleFootprint.of(image, capability).total());
            }
        } catch (ImageError e) {
            throw new CallRejected(e.code, what + ": " + e.getMessage());
        }
        return most;
    }

    /** Before the driver makes a context on {@code dev} outside the generic path (a session's primary context). */
    Pending beforeContext(int dev, String what) throws CallRejected {
        return contexts.contextBefore(dev, what);
    }

    /** The driver made context {@code real} after {@link #beforeContext}. */
    void contextMade(Pending p, long real) {
        contexts.contextMade(p, real);
    }

    /** The driver did not make the context of {@link #beforeContext}. */
    void contextFailed(Pending p) {
        contexts.failed(p);
    }

    /** The driver call failed: its reserve goes back. */
    void failed(Pending p) {
        if (p == null) {
            return;
        }
        switch (p.rule()) {
            case CONTEXT, LIBRARY, LIMIT -> contexts.failed(p);
            default -> {
                if (p.bytes() > 0) {
                    unreserve(p.bytes());
                }
            }
        }
    }

    /**
     * After the driver call succeeded, before its outputs are recorded: the charge is kept under what
     * frees it (or trued up to the real size). Returns CUDA_SUCCESS, or an error after undoing the call's
     * allocation when the true size is over the quota.
     */
    int succeeded(CudaDriver driver, ApiFunction f, Object[] args, long[] values, Pending p) {
        if (p == null) {
            return CuResult.CUDA_SUCCESS;
        }
        switch (p.rule()) {
            case ALLOC -> keepRange(outLong(args, allocParam(f).index()), p.bytes());
            case PITCH -> {
                long base = outLong(args, 0);
                long pitch = outLong(args, 1), height = values[3];
                long actual = pitch < 0 || Math.multiplyHigh(pitch, height) != 0 ? Long.MAX_VALUE : pitch * height;
                if (actual > p.bytes()) {
                    try {
                        reserve(actual - p.bytes(), f.name());
                    } catch (CallRejected e) {
                        driver.cuMemFree(base);
                        unreserve(p.bytes());
                        return e.result;
                    }
                } else if (actual < p.bytes()) {
                    unreserve(p.bytes() - actual);
                }
                keepRange(base, actual);
            }
            case ARRAY -> keep(arrays, outLong(args, 0), p.bytes());
            case MIPMAP -> keep(mipmaps, outLong(args, 0), p.bytes());
            case MODULE -> keep(modules, outLong(args, paramOf(f, ParamType.MOD, true).index()), p.bytes());
            case LIBRARY -> contexts.libraryLoaded(p, outLong(args, paramOf(f, ParamType.LIB, true).index()));
            case CONTEXT -> contextMade(p, outLong(args, paramOf(f, ParamType.CTX, true).index()));
            case LIMIT -> {
                return limitSet(driver, p);
            }
            case INFO -> tenantView((MemorySegment) args[0], (MemorySegment) args[1]);
            default -> {
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * cuCtxSetLimit succeeded: its charge is trued up to the value the driver kept; past the quota the
     * limit's previous value is restored and the call answers CUDA_ERROR_OUT_OF_MEMORY.
     */
    private int limitSet(CudaDriver driver, Pending p) {
        int limit = (int) p.aux();
        long actual;
        try (java.lang.foreign.Arena a = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment v = a.allocate(8);
            actual = driver.cuCtxGetLimit(v, limit) == CuResult.CUDA_SUCCESS ? v.get(ValueLayout.JAVA_LONG, 0) : -1;
        }
        if (contexts.limitSet(p, actual)) {
            return CuResult.CUDA_SUCCESS;
        }
        driver.cuCtxSetLimit(limit, p.value());
        LOG.log(Level.DEBUG, () -> "session " + sessionId + ": cuCtxSetLimit(" + limit + ") over the quota once the driver rounded it");
        return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
    }

    private static ApiParam allocParam(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (p.out() && p.alloc() != null) {
                return p;
            }
        }
        throw new IllegalStateException(f.name());
    }

    /** The entry's first parameter of {@code type} that is an output ({@code out}) or an input. */
    private static ApiParam paramOf(ApiFunction f, ParamType type, boolean out) {
        for (ApiParam p : f.params()) {
            if (p.out() == out && p.type() == type) {
                return p;
            }
        }
        throw new IllegalStateException(f.name() + ": no " + (out ? "output " : "input ") + type);
    }

    private static MemorySegment imageArg(ApiFunction f, Object[] args) {
        return (MemorySegment) args[paramOf(f, ParamType.IMAGE, false).index()];
    }

    private static long outLong(Object[] args, int i) {
        return ((MemorySegment) args[i]).get(ValueLayout.JAVA_LONG, 0);
    }

    /** cuMemAllocPitch's charge before the call: rows rounded up to {@link #PITCH_ESTIMATE_ALIGN}. */
    static long pitchEstimate(long widthInBytes, long height) {
        if (widthInBytes < 0 || height < 0 || widthInBytes > Long.MAX_VALUE - PITCH_ESTIMATE_ALIGN) {
            return Long.MAX_VALUE;
        }
        long pitch = (widthInBytes + PITCH_ESTIMATE_ALIGN - 1) / PITCH_ESTIMATE_ALIGN * PITCH_ESTIMATE_ALIGN;
        return Math.multiplyHigh(pitch, height) != 0 || pitch * height < 0 ? Long.MAX_VALUE : pitch * height;
    }

    /**
     * An array's charge from the descriptor its create call passes: a CUDA_ARRAY_DESCRIPTOR (cuArrayCreate,
     * 24 bytes) or a CUDA_ARRAY3D_DESCRIPTOR (cuArray3DCreate, 40 bytes), told apart by their length.
     */
    static long arrayBytes(MemorySegment descriptor) {
        return descriptor.byteSize() == Array3DDescriptor.SIZE
                ? arrayBytes(Array3DDescriptor.read(descriptor))
                : arrayBytes(ArrayDescriptor.read(descriptor));
    }

    /**
     * A 3D array's charge: width × max(height, 1) × max(depth, 1) × element bytes (depth counts layers and
     * cubemap faces; formats not known here: 16 bytes an element); nothing for a sparse or deferred-mapping
     * array, whose memory is the VMM allocations cuMemMapArrayAsync binds to it, charged at their cuMemCreate.
     */
    static long arrayBytes(Array3DDescriptor d) {
        return d.unbacked() ? 0 : d.bytes(UNKNOWN_ELEMENT_BYTES);
    }

    /** An array's charge: width × max(height, 1) × element bytes (formats not known here: 16 bytes an element). */
    static long arrayBytes(ArrayDescriptor d) {
        int e = ArrayDescriptor.elementBytes(d.format(), d.numChannels());
        long element = e > 0 ? e : UNKNOWN_ELEMENT_BYTES;
        long w = d.width(), h = Math.max(d.height(), 1);
        if (w < 0 || h < 0) {
            return Long.MAX_VALUE;
        }
        try {
            return Math.multiplyExact(Math.multiplyExact(w, h), element);
        } catch (ArithmeticException x) {
            return Long.MAX_VALUE;
        }
    }

    // ---- handlers' paths

    /** A device range {@code base} now holds {@code bytes} reserved before its driver call. */
    /**
     * {@code bytes} reserved before a stream-ordered allocation that a capture turned into a graph memory
     * node: kept until the session ends ({@link #graphMemory}), whatever the graph frees.
     */
    void keepGraphMemory(long bytes) {
        synchronized (this) {
            if (!closed) {
                graphMemory += bytes;
                return;
            }
            releaseLocked(bytes);
        }
    }

    /**
     * A free of the range at {@code base} was captured into a graph (a graph memory free node): the memory
     * stays the driver's until a launch of that graph frees it, if one ever does, so its charge moves to the
     * session's graph memory instead of going back when the range leaves the session.
     */
    void rangeToGraphMemory(long base) {
        synchronized (this) {
            Long n = ranges.remove(base);
            if (n != null) {
                graphMemory += n;
            }
        }
    }

    /**
     * Graph memory a stand-in allocation node held ({@link StableGraphMemory}) went back with its graph: its
     * {@code bytes} leave {@link #graphMemory} and return to the tenant (after the session's end, the end did).
     */
    void releaseGraphMemory(long bytes) {
        synchronized (this) {
            if (closed) {
                return;
            }
            long n = Math.min(bytes, graphMemory);
            graphMemory -= n;
            releaseLocked(n);
        }
    }

    /** Bytes of graph memory this session holds charged. */
    synchronized long graphMemory() {
        return graphMemory;
    }

    /** Graph memory charged now and its high-water mark since the session began or the mark's last reset. */
    synchronized long[] graphMemoryMarks() {
        graphMemoryHigh = Math.max(graphMemoryHigh, graphMemory);
        return new long[] {graphMemory, graphMemoryHigh};
    }

    /** cuDeviceSetGraphMemAttribute's reset: the high-water mark becomes the current figure. */
    synchronized void resetGraphMemoryHigh() {
        graphMemoryHigh = graphMemory;
    }

    void keepRange(long base, long bytes) {
        keep(ranges, base, bytes);
    }

    /** Keeps a charge under its key; after {@link #close} (a lane that was still in the driver) gives it back at once. */
    private synchronized void keep(Map<Long, Long> where, long key, long bytes) {
        if (closed) {
            releaseLocked(bytes);
            return;
        }
        Long old = where.put(key, bytes);
        if (old != null) {
            releaseLocked(old); // the driver handed out a key still charged: its free was not seen
        }
    }

    /** A device range left the session (freed, or its context or module went): its charge goes back. */
    void rangeRemoved(SessionMemory.Range r) {
        synchronized (this) {
            Long n = ranges.remove(r.base());
            if (n != null) {
                releaseLocked(n);
            }
        }
    }

    /**
     * A handle left the session (destroyed, or with its owner or context): the charge of an array or a
     * module goes back; a context's or a library's goes by {@link ContextCharges}.
     */
    void handleDropped(SessionHandles.Entry e) {
        switch (e.kind()) {
            case ARRAY -> dropKept(arrays, e.real());
            case MIPMAP -> dropKept(mipmaps, e.real());
            case MOD -> dropKept(modules, e.real());
            case CTX -> contexts.contextGone(e.real());
            case LIB -> contexts.libraryUnloaded(e.real());
            default -> {
            }
        }
    }

    private synchronized void dropKept(Map<Long, Long> where, long key) {
        Long n = where.remove(key);
        if (n != null) {
            releaseLocked(n);
        }
    }

    /** cuMemCreate made {@code real} of {@code bytes} (reserved before the call). */
    void vmmCreated(long real, long bytes) {
        keep(vmm, real, bytes);
    }

    /** The VMM allocation {@code real} is neither referenced nor mapped by the session any more: the driver freed it. */
    void vmmFreed(long real) {
        dropKept(vmm, real);
    }

    private void releaseLocked(long bytes) {
        charged -= bytes;
        tenant.releaseMemory(bytes);
    }

    // ---- pinned host memory

    /** Takes {@code bytes} of page-locked memory from the tenant; false (a rejection counted) when over. */
    boolean reservePinned(long bytes) {
        if (!tenant.reservePinned(bytes)) {
            return false;
        }
        synchronized (this) {
            pinned += bytes;
        }
        return true;
    }

    void releasePinned(long bytes) {
        synchronized (this) {
            pinned -= bytes;
        }
        tenant.releasePinned(bytes);
    }

    synchronized long pinned() {
        return pinned;
    }

    // ---- views and the end

    /**
     * cuMemGetInfo as the tenant sees it (as HAMi shows it): total = min(device total, quota),
     * free = min(device free, quota - what the tenant holds). Unchanged without a memory quota.
     */
    void tenantView(MemorySegment free, MemorySegment total) {
        long limit = tenant.limits().memoryBytes();
        if (limit == Long.MAX_VALUE) {
            return;
        }
        long t = total.get(ValueLayout.JAVA_LONG, 0), f = free.get(ValueLayout.JAVA_LONG, 0);
        long left = Math.max(0, limit - tenant.memoryUsed());
        total.set(ValueLayout.JAVA_LONG, 0, Math.min(t, limit));
        free.set(ValueLayout.JAVA_LONG, 0, Math.min(f, left));
    }

    /**
     * The session has ended and released what it made: gives the tenant back everything still charged
     * (VMM allocations the end released; anything else is a charge the release paths missed, returned as
     * such, so the caller can say so). Idempotent.
     */
    long close() {
        long missed = contexts.close();
        synchronized (this) {
            if (closed) {
                return missed;
            }
            closed = true;
            vmm.values().forEach(this::releaseLocked);
            vmm.clear();
            releaseLocked(graphMemory); // held for the session's life by rule, not missed
            graphMemory = 0;
            for (Map<Long, Long> kept : List.of(ranges, arrays, mipmaps, modules)) {
                for (long n : kept.values()) {
                    missed += n;
                    releaseLocked(n);
                }
                kept.clear();
            }
            // what stays charged now is a reserve of a lane still inside a driver call: given back when it returns
        }
        return missed;
    }
}
