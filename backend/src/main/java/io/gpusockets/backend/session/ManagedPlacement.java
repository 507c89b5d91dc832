package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.CudaDriver;
import io.gpusockets.protocol.api.DelegatingCudaDriver;
import java.lang.foreign.MemorySegment;

/**
 * The session's driver when address-stable windows are off (issue 25, item 1): managed allocations placed in the guest's
 * managed range ({@link io.gpusockets.protocol.api.ManagedRange}) once the frontend announced one ({@link #place}), by a
 * {@link StableAddresses} of their own whose windows are confined to that range ({@link StableAddresses#confine}: the
 * same {@code cuMemAddressReserve} at a fixed address and {@code cuMemCreate}/{@code cuMemMap} as address-stable memory,
 * one window per device inside the range). Every other allocation keeps the driver's addresses. What the program does
 * to managed memory through ordinary calls reaches those windows here: {@code cuMemFree}, {@code cuMemGetAddressRange},
 * the range attributes of {@code cuPointerGetAttribute(s)}, and a {@code cuCtxDestroy} that takes its allocations with
 * it; the rest goes straight to the driver (one volatile read more on these calls, one delegation on others: no
 * difference measured in the null call's cost, scripts/bench compare, H38). The range comes with the HELLO
 * ({@link Session#managedRange}, before the session's first call). The windows go
 * at the session's end ({@link #close}, after the contexts). With address-stable windows on, the session's own
 * {@link StableAddresses} is confined to the range instead (one mechanism), and this class is not used.
 */
final class ManagedPlacement extends DelegatingCudaDriver {
    private final long sessionId;
    /** Where managed allocations go once a range is announced; null before. */
    private volatile StableAddresses placed;

    ManagedPlacement(CudaDriver real, long sessionId) {
        super(real);
        this.sessionId = sessionId;
    }

    /** The guest announced its managed range {@code [base, base + size)} (checked by {@code ManagedRange.check}). */
    synchronized StableAddresses place(long base, long size) {
        if (placed == null) {
            StableAddresses p = new StableAddresses(delegate, sessionId);
            p.confine(base, size, true);
            placed = p;
        }
        return placed;
    }

    /** The managed allocations' windows, or null before a range was announced. */
    StableAddresses placed() {
        return placed;
    }

    @Override
    public int cuMemFree(long dptr) {
        StableAddresses p = placed;
        return p != null && p.holds(dptr) ? p.cuMemFree(dptr) : delegate.cuMemFree(dptr);
    }

    @Override
    public int cuMemGetAddressRange(MemorySegment pbase, MemorySegment psize, long dptr) {
        StableAddresses p = placed;
        return p != null && p.covers(dptr) ? p.cuMemGetAddressRange(pbase, psize, dptr)
                : delegate.cuMemGetAddressRange(pbase, psize, dptr);
    }

    @Override
    public int cuPointerGetAttribute(MemorySegment data, int attribute, long ptr) {
        StableAddresses p = placed;
        return p != null && p.covers(ptr) ? p.cuPointerGetAttribute(data, attribute, ptr)
                : delegate.cuPointerGetAttribute(data, attribute, ptr);
    }

    @Override
    public int cuPointerGetAttributes(int numAttributes, MemorySegment attributes, MemorySegment data, long ptr) {
        StableAddresses p = placed;
        return p != null && p.covers(ptr) ? p.cuPointerGetAttributes(numAttributes, attributes, data, ptr)
                : delegate.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
    }

    @Override
    public int cuCtxDestroy(long ctx) {
        StableAddresses p = placed;
        return p != null ? p.cuCtxDestroy(ctx) : delegate.cuCtxDestroy(ctx);
    }

    /** At the session's end, after its contexts: the managed windows go. */
    void close() {
        StableAddresses p = placed;
        if (p != null) {
            p.close();
        }
    }
}
