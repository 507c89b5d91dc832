package io.gpusockets.backend.session;

import io.gpusockets.backend.tenant.TenantAccount;
import io.gpusockets.backend.tenant.TenantLimits;
import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiParam;
import io.gpusockets.protocol.api.ApiTable;
import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.ParamType;
import io.gpusockets.protocol.structs.ArrayDescriptor;
import java.lang.System.Logger.Level;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashMap;
import java.util.Map;

/**
 * What one session has charged to its tenant ({@link Session#tenant()}), and the charge rules of every
 * allocation path: device allocations ({@code alloc=} entries of the generic path, stream-ordered pool
 * allocations), VMM physical allocations (cuMemCreate), arrays (an estimate from their descriptor),
 * module and library globals (charged when the session first registers their range: cudart asks for
 * every variable of a module as it loads it) and the page-locked shared window. Memory is reserved
 * before the driver call (over the quota: CUDA_ERROR_OUT_OF_MEMORY, and the driver is not called) and
 * given back when the call fails, when the memory is freed, when its context or module goes, and at the
 * session's end, which gives back everything still charged ({@link #close}).
 *
 * <p>The charges are kept here by what frees them (a device base, an array, a VMM handle), so the
 * tenant gets back exactly what was taken. Charging goes only through {@link TenantAccount}, which in
 * another process may be a proxy.
 */
final class SessionQuota {
    private static final System.Logger LOG = System.getLogger("gpusockets.session");
    /** A row pitch the driver may round a cuMemAllocPitch row up to, for the estimate before the call. */
    static final long PITCH_ESTIMATE_ALIGN = 512;
    /** Bytes per element charged for array formats whose size is not known here (the largest plain element). */
    static final int UNKNOWN_ELEMENT_BYTES = 16;

    private static final byte NONE = 0, ALLOC = 1, PITCH = 2, ARRAY = 3, GLOBAL = 4, INFO = 5;
    /** By table index: the rule of a generic entry. */
    private static final byte[] RULES = rules();

    /** A reserve taken before a driver call; {@code bytes} given back by {@link #failed}. */
    record Pending(byte rule, long bytes) {
    }

    private final long sessionId;
    private final TenantAccount tenant;
    /** Device ranges charged, by base: allocations, async allocations, globals. */
    private final Map<Long, Long> ranges = new HashMap<>();
    /** Arrays charged, by real handle. */
    private final Map<Long, Long> arrays = new HashMap<>();
    /** VMM physical allocations charged, by real handle. */
    private final Map<Long, Long> vmm = new HashMap<>();
    private long charged;
    private long pinned;
    private boolean closed;

    SessionQuota(long sessionId, TenantAccount tenant) {
        this.sessionId = sessionId;
        this.tenant = tenant;
    }

    private static byte[] rules() {
        ApiTable table = ApiTable.get();
        byte[] r = new byte[table.functions().size()];
        for (ApiFunction f : table.functions()) {
            if (f.customBackend()) {
                continue; // their handlers charge themselves
            }
            for (ApiParam p : f.params()) {
                if (p.out() && p.type() == ParamType.DPTR && p.alloc() != null) {
                    r[f.index()] = f.name().equals("cuMemAllocPitch") ? PITCH : ALLOC;
                } else if (p.out() && p.type() == ParamType.DPTR && p.global() != null) {
                    r[f.index()] = GLOBAL;
                }
            }
            if (f.name().equals("cuArrayCreate")) {
                r[f.index()] = ARRAY;
            } else if (f.name().equals("cuMemGetInfo")) {
                r[f.index()] = INFO;
            }
        }
        return r;
    }

    TenantAccount tenant() {
        return tenant;
    }

    /** Bytes of device memory this session has charged now. */
    synchronized long charged() {
        return charged;
    }

    /** Takes {@code bytes} from the tenant; CUDA_ERROR_OUT_OF_MEMORY (the driver is not called) when over its quota. */
    void reserve(long bytes, String what) throws CallRejected {
        if (bytes < 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, what + ": size " + bytes);
        }
        if (!tenant.reserveMemory(bytes)) {
            TenantLimits l = tenant.limits();
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, what + " of " + bytes + " bytes: tenant "
                    + tenant.name() + " holds " + tenant.memoryUsed() + " of its " + l.memoryBytes() + " bytes");
        }
        synchronized (this) {
            charged += bytes;
        }
    }

    /** Gives back a reserve whose driver call failed. */
    void unreserve(long bytes) {
        synchronized (this) {
            charged -= bytes;
        }
        tenant.releaseMemory(bytes);
    }

    // ---- the generic path (CallDispatcher): one call before the driver, one after its success

    /** Before the driver call of a generic entry: reserves what it will allocate; null when it charges nothing. */
    Pending before(ApiFunction f, Object[] args, long[] values) throws CallRejected {
        byte rule = RULES[f.index()];
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
                long n = arrayBytes(ArrayDescriptor.read((MemorySegment) args[1]));
                reserve(n, f.name());
                return new Pending(rule, n);
            }
            case GLOBAL, INFO -> {
                return new Pending(rule, 0);
            }
            default -> {
                return null;
            }
        }
    }

    /** The driver call failed: its reserve goes back. */
    void failed(Pending p) {
        if (p != null && p.bytes() > 0) {
            unreserve(p.bytes());
        }
    }

    /**
     * After the driver call succeeded, before its outputs are recorded: the charge is kept under what
     * frees it (or trued up to the real size, or for a global taken now). Returns CUDA_SUCCESS, or an error
     * after undoing the call's allocation when the true size is over the quota.
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
            case GLOBAL -> {
                ApiParam g = globalParam(f);
                long base = outLong(args, g.index());
                long size = outLong(args, g.index() + 1);
                if (!chargeGlobal(base, size)) {
                    return CuResult.CUDA_ERROR_OUT_OF_MEMORY;
                }
            }
            case INFO -> tenantView((MemorySegment) args[0], (MemorySegment) args[1]);
            default -> {
            }
        }
        return CuResult.CUDA_SUCCESS;
    }

    private static ApiParam allocParam(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (p.out() && p.alloc() != null) {
                return p;
            }
        }
        throw new IllegalStateException(f.name());
    }

    private static ApiParam globalParam(ApiFunction f) {
        for (ApiParam p : f.params()) {
            if (p.out() && p.global() != null) {
                return p;
            }
        }
        throw new IllegalStateException(f.name());
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

    /**
     * A global of {@code size} bytes at {@code base} is registered: charged the first time. False (with
     * a quota rejection counted) when over the tenant's quota.
     */
    boolean chargeGlobal(long base, long size) {
        synchronized (this) {
            if (ranges.containsKey(base)) {
                return true;
            }
        }
        try {
            reserve(size, "module global");
        } catch (CallRejected e) {
            LOG.log(Level.DEBUG, () -> "session " + sessionId + ": " + e.getMessage());
            return false;
        }
        synchronized (this) {
            if (!closed && ranges.putIfAbsent(base, size) == null) {
                return true;
            }
        }
        unreserve(size); // another lane charged it meanwhile, or the session has ended
        return true;
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

    /** A handle left the session: an array's charge goes back. */
    void handleDropped(SessionHandles.Entry e) {
        if (e.kind() != ParamType.ARRAY) {
            return;
        }
        synchronized (this) {
            Long n = arrays.remove(e.real());
            if (n != null) {
                releaseLocked(n);
            }
        }
    }

    /** cuMemCreate made {@code real} of {@code bytes} (reserved before the call). */
    void vmmCreated(long real, long bytes) {
        keep(vmm, real, bytes);
    }

    /** The VMM allocation {@code real} is neither referenced nor mapped by the session any more: the driver freed it. */
    synchronized void vmmFreed(long real) {
        Long n = vmm.remove(real);
        if (n != null) {
            releaseLocked(n);
        }
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
        long missed;
        synchronized (this) {
            if (closed) {
                return 0;
            }
            closed = true;
            vmm.values().forEach(this::releaseLocked);
            vmm.clear();
            missed = 0;
            for (long n : ranges.values()) {
                missed += n;
                releaseLocked(n);
            }
            for (long n : arrays.values()) {
                missed += n;
                releaseLocked(n);
            }
            ranges.clear();
            arrays.clear();
            // what stays charged now is a reserve of a lane still inside a driver call: given back when it returns
        }
        return missed;
    }
}
