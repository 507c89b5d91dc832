package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CuResult;
import io.gpusockets.protocol.api.CudaDriver;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Area {@code managed}: the backend's half of managed memory (issue 25; the model, the guest's half and what a program
 * must not do are in the frontend's {@code ManagedMemory} and the top README, <i>Managed memory</i>).
 *
 * <p>A managed allocation is, here, plain device memory: {@code cuMemAllocManaged} charges the tenant, allocates with
 * {@code cuMemAlloc} (padded: {@link #GUEST_PAGE}) through the session's driver (so with address-stable windows on, it lies in the session's window;
 * else where the driver puts it), zeroes it (the guest's fresh pages read zero without a transfer) and registers the
 * range, owned by the current context, as any allocation: launches, copies and {@code cuMemFree} use it as they use
 * device memory, and a session's end frees it. The guest maps the same address ({@code ManagedMemory}) and moves
 * pages at launch and synchronisation points with ordinary {@code cuMemcpyHtoD/DtoH} of the range; the backend never
 * sees a guest page otherwise. It is never the driver's managed memory: the driver's page migration would move pages
 * into the backend's own host memory, which helps nobody.
 *
 * <p>The calls on managed ranges check that the range lies in one managed allocation of the session (else
 * CUDA_ERROR_INVALID_VALUE, as the driver answers for memory that is not managed) and reach no driver:
 * {@code cuMemAdvise(_v2)} is accepted and changes nothing (the guest decides when pages move);
 * {@code cuMemPrefetchAsync(_v2)} is accepted (the guest sends dirty pages before it, as before any GPU work, and fetches
 * a prefetch to CU_DEVICE_CPU itself); {@code cuMemRangeGetAttribute(s)} never comes from a frontend of this version
 * (it answers them in the guest from the advice and prefetches it saw); for one that sends it, the four classic
 * attributes are answered as the driver does for memory never advised: READ_MOSTLY 0, PREFERRED_LOCATION, LAST_PREFETCH_LOCATION and each
 * ACCESSED_BY slot CU_DEVICE_INVALID (-2); {@code cuStreamAttachMemAsync} is checked (a whole managed allocation, known
 * flags) and accepted: the guest narrows by it which allocations a kernel launch makes coherent. The batch prefetches and discards of CUDA 13 are refused with
 * CUDA_ERROR_INVALID_VALUE, whatever they list (not written yet).
 */
final class ManagedCalls implements BackendHandlers.Managed {
    private static final String NOT_MANAGED = "not a managed allocation of the session";
    private static final int CU_MEM_ATTACH_GLOBAL = 1;
    private static final int CU_MEM_ATTACH_HOST = 2;
    private static final int CU_MEM_ATTACH_SINGLE = 4;
    /** CU_DEVICE_INVALID, what the driver answers for a location never set. */
    private static final int DEVICE_INVALID = -2;
    /** The most bytes cuMemRangeGetAttribute answers (ACCESSED_BY: 4 bytes a device; far more devices than exist). */
    private static final long MAX_ATTRIBUTE_BYTES = 4096;
    /**
     * The largest guest page size provided for (arm64 kernels may use 64 KiB): each managed allocation is made this much
     * larger than its size rounded up to it, so that the guest pages two managed allocations cover never overlap, even
     * where the driver aligns allocations to less than a page (the emulated device: 256 bytes). Charged too.
     */
    static final long GUEST_PAGE = 64 << 10;

    private final Session session;
    private final CudaDriver driver;
    /** The session's managed allocations by base: the range as registered, so that a freed base no longer counts. */
    private final ConcurrentHashMap<Long, SessionMemory.Range> managed = new ConcurrentHashMap<>();

    ManagedCalls(Session session) {
        this.session = session;
        this.driver = session.driver();
    }

    /**
     * Flags GLOBAL or HOST (one of them, as the driver asks); the size is charged to the tenant before the driver call,
     * as cuMemAlloc's is.
     */
    @Override
    public int cuMemAllocManaged(Call c, long bytesize, int flags) throws CallRejected {
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags + " (CU_MEM_ATTACH_GLOBAL or _HOST)");
        }
        if (bytesize <= 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "bytesize=" + bytesize);
        }
        if (bytesize > Long.MAX_VALUE / 2) {
            throw new CallRejected(CuResult.CUDA_ERROR_OUT_OF_MEMORY, "bytesize=" + bytesize);
        }
        managed.values().removeIf(r -> session.memory().at(r.base()) != r);
        long padded = ((bytesize + GUEST_PAGE - 1) & -GUEST_PAGE) + GUEST_PAGE;
        session.quota().reserve(padded, c.name());
        MemorySegment out = c.scratch(8);
        int r = CuResult.CUDA_ERROR_UNKNOWN;
        try {
            r = session.managedDriver().cuMemAlloc(out, padded);
        } finally {
            if (r != CuResult.CUDA_SUCCESS) {
                session.quota().unreserve(padded);
            }
        }
        if (r != CuResult.CUDA_SUCCESS) {
            String why = session.managedRange() == null ? null : session.managedPlaceFailure();
            if (why != null && why.contains("managed range")) {
                throw new CallRejected(r, "cuMemAllocManaged of " + bytesize + " bytes: " + why);
            }
            return r;
        }
        long base = out.get(ValueLayout.JAVA_LONG, 0);
        // placed in granules of its own (the managed range's windows, or address-stable memory): the granules are
        // what the device gives, so they are what the tenant is charged (a 4 MiB allocation takes 6 MiB of 2 MiB granules)
        long granules = session.managedDriver() instanceof StableAddresses placed ? placed.ownGranuleBytes(base) : 0;
        if (granules > padded) {
            try {
                session.quota().reserve(granules - padded, c.name());
            } catch (CallRejected over) {
                session.managedDriver().cuMemFree(base);
                session.quota().unreserve(padded);
                throw over;
            }
            padded = granules;
        }
        // a migration's or hand-over's restore replays this on memory that holds the source's contents: kept
        StableAddresses windows = session.stable();
        r = windows != null && windows.adopting() ? CuResult.CUDA_SUCCESS : driver.cuMemsetD8(base, (byte) 0, bytesize);
        if (r != CuResult.CUDA_SUCCESS) {
            driver.cuMemFree(base);
            session.quota().unreserve(padded);
            return r;
        }
        session.quota().keepRange(base, padded);
        SessionMemory.Range range = new SessionMemory.Range(base, bytesize, session.currentContextId(c.lane), true);
        session.memory().add(range);
        managed.put(base, range);
        c.outs.putLong(base);
        return CuResult.CUDA_SUCCESS;
    }

    /**
     * The session's live managed allocations (mapped host memory's too) that do not lie in {@code windows}' address
     * windows (all of them when null): what a checkpoint cannot capture. Those in the windows are recorded as the
     * allocations they are, and a restore replays their cuMemAllocManaged at the same address, managed again.
     */
    int liveOutside(StableAddresses windows) {
        int n = 0;
        for (SessionMemory.Range r : managed.values()) {
            if (session.memory().at(r.base()) == r && (windows == null || !windows.covers(r.base()))) {
                n++;
            }
        }
        return n;
    }

    /** Whether {@code [p, p+n)} lies in one live managed allocation of the session (for pointer attributes too). */
    boolean isManaged(long p, long n) {
        SessionMemory.Range r = session.memory().covering(p, n);
        return r != null && managed.get(r.base()) == r && session.memory().at(r.base()) == r;
    }

    private void checkManaged(Call c, long p, long n) throws CallRejected {
        c.deviceRange(p, n);
        if (!isManaged(p, Math.max(n, 1))) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d: %s", p, n, NOT_MANAGED));
        }
    }

    private static void checkAdvice(int advice) throws CallRejected {
        if (advice < 1 || advice > 6) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "advice=" + advice);
        }
    }

    @Override
    public int cuMemAdvise(Call c, long devPtr, long count, int advice, int device) throws CallRejected {
        checkManaged(c, devPtr, count);
        checkAdvice(advice);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuMemAdvise_v2(Call c, long devPtr, long count, int advice, long location) throws CallRejected {
        checkManaged(c, devPtr, count);
        checkAdvice(advice);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuMemPrefetchAsync(Call c, long devPtr, long count, int dstDevice, long hStream) throws CallRejected {
        checkManaged(c, devPtr, count);
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuMemPrefetchAsync_v2(Call c, long devPtr, long count, long location, int flags, long hStream) throws CallRejected {
        checkManaged(c, devPtr, count);
        if (flags != 0) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        return CuResult.CUDA_SUCCESS;
    }

    /** The classic attributes 1..4 (see the class comment); 4 bytes each, ACCESSED_BY a multiple of 4. */
    @Override
    public int cuMemRangeGetAttribute(Call c, long dataSize, int attribute, long devPtr, long count) throws CallRejected,
            java.io.IOException {
        checkManaged(c, devPtr, count);
        if (attribute < 1 || attribute > 4 || dataSize <= 0 || dataSize > MAX_ATTRIBUTE_BYTES || dataSize % 4 != 0
                || attribute != 3 && dataSize != 4) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "attribute=" + attribute + " dataSize=" + dataSize);
        }
        MemorySegment data = c.scratch(dataSize);
        for (long i = 0; i < dataSize; i += 4) {
            data.set(ValueLayout.JAVA_INT, i, attribute == 1 ? 0 : DEVICE_INVALID);
        }
        c.sendData(data.asSlice(0, dataSize));
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuMemRangeGetAttributes(Call c, long numAttributes, long devPtr, long count) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_NOT_SUPPORTED, "cuMemRangeGetAttributes (ask one attribute at a time)");
    }

    /**
     * Checked and accepted, as the driver checks it: a whole managed allocation (its base, length 0 or its size: the
     * driver cannot change the association of a part of one), flags GLOBAL, HOST or SINGLE. What it changes is the
     * guest's ({@code ManagedMemory}: which allocations a kernel launch on a stream makes coherent); the device
     * memory is the same whatever the association.
     */
    @Override
    public int cuStreamAttachMemAsync(Call c, long hStream, long devPtr, long length, int flags) throws CallRejected {
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "flags=" + flags);
        }
        SessionMemory.Range r = session.memory().covering(devPtr, Math.max(length, 1));
        if (r == null || r.base() != devPtr || length != 0 && length != r.size()) {
            throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, String.format("0x%x+%d: %s", devPtr, length,
                    r != null && isManaged(devPtr, 1) ? "not a whole managed allocation (its base, length 0 or its size)" : NOT_MANAGED));
        }
        checkManaged(c, devPtr, r.size());
        return CuResult.CUDA_SUCCESS;
    }

    @Override
    public int cuMemPrefetchBatchAsync(Call c, long dptrs, long sizes, long count, long prefetchLocs, long prefetchLocIdxs,
                                       long numPrefetchLocs, long flags, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "batch prefetches of managed memory are not written yet");
    }

    @Override
    public int cuMemDiscardBatchAsync(Call c, long dptrs, long sizes, long count, long flags, long hStream) throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "batch discards of managed memory are not written yet");
    }

    @Override
    public int cuMemDiscardAndPrefetchBatchAsync(Call c, long dptrs, long sizes, long count, long prefetchLocs,
                                                 long prefetchLocIdxs, long numPrefetchLocs, long flags, long hStream)
            throws CallRejected {
        throw new CallRejected(CuResult.CUDA_ERROR_INVALID_VALUE, "batch discards of managed memory are not written yet");
    }
}
