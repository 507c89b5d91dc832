package io.gpusockets.frontend;

/**
 * What managed memory moved on one connection so far ({@link RemoteCudaDriver#managedMemoryStats}): pages and bytes
 * sent to the device before GPU work, pages and bytes fetched on the CPU's first touch after it, pages filled with
 * zeros in the guest (fresh memory, nothing moved), and the faults the frontend resolved. Bytes count only what lies
 * in the allocations (a page's part outside one is not moved).
 */
public record ManagedMemoryStats(long pagesSent, long bytesSent, long pagesFetched, long bytesFetched, long pagesZeroFilled,
                                 long faults) {
    /** The form {@code GPUSOCKETS_MANAGED_STATS=1} prints: {@code pages_sent=N bytes_sent=N ...}. */
    @Override
    public String toString() {
        return "pages_sent=" + pagesSent + " bytes_sent=" + bytesSent + " pages_fetched=" + pagesFetched
                + " bytes_fetched=" + bytesFetched + " pages_zero_filled=" + pagesZeroFilled + " faults=" + faults;
    }
}
