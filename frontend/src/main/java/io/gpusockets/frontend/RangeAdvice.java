package io.gpusockets.frontend;

import java.util.Arrays;

/**
 * What a program told the driver about the guest pages of one managed allocation ({@link ManagedMemory}), page by
 * page, so that cuMemRangeGetAttribute(s) answers from it as the driver does: read-mostly (CU_MEM_ADVISE_SET/UNSET_READ_MOSTLY),
 * the preferred location (SET/UNSET_PREFERRED_LOCATION), the locations advised ACCESSED_BY (a bit each: bit 0 the CPU,
 * bit 1 + N device N, for devices 0 to 62) and the last location the range was prefetched to (cuMemPrefetchAsync(_v2)).
 * Locations are in {@link ManagedMemory#location} form (0: none). Advice changes nothing else here: when data moves is
 * the model's (README, Managed memory). Not thread-safe: the ManagedMemory's lock guards it.
 */
final class RangeAdvice {
    private final boolean[] readMostly;
    private final long[] preferred;
    private final long[] accessedBy;
    private final long[] lastPrefetch;

    RangeAdvice(int pages) {
        readMostly = new boolean[pages];
        preferred = new long[pages];
        accessedBy = new long[pages];
        lastPrefetch = new long[pages];
    }

    /** A CUmem_advise (1 to 6) for pages first..last. */
    void apply(int first, int last, int advice, long location) {
        switch (advice) {
            case 1, 2 -> Arrays.fill(readMostly, first, last + 1, advice == 1);
            case 3, 4 -> Arrays.fill(preferred, first, last + 1, advice == 3 ? location : 0);
            case 5, 6 -> {
                long bit = bit(location);
                for (int p = first; p <= last; p++) {
                    accessedBy[p] = advice == 5 ? accessedBy[p] | bit : accessedBy[p] & ~bit;
                }
            }
            default -> {
                // the backend refused it
            }
        }
    }

    void fillLastPrefetch(int first, int last, long location) {
        Arrays.fill(lastPrefetch, first, last + 1, location);
    }

    /** The ACCESSED_BY bit of a location: bit 0 the CPU, bit 1 + N device N (0 to 62); 0 for others. */
    static long bit(long location) {
        if (ManagedMemory.isHost(location)) {
            return 1;
        }
        int id = (int) location;
        return (int) (location >>> 32) == ManagedMemory.LOCATION_DEVICE && id >= 0 && id < 63 ? 1L << (id + 1) : 0;
    }

    /** Whether every page of first..last is read-mostly. */
    static boolean readMostly(RangeAdvice a, int first, int last) {
        if (a == null) {
            return false;
        }
        for (int p = first; p <= last; p++) {
            if (!a.readMostly[p]) {
                return false;
            }
        }
        return true;
    }

    /** The preferred location all pages of first..last share, or 0. */
    static long preferred(RangeAdvice a, int first, int last) {
        return a == null ? 0 : common(a.preferred, first, last);
    }

    /** The last prefetch location all pages of first..last share, or 0. */
    static long lastPrefetch(RangeAdvice a, int first, int last) {
        return a == null ? 0 : common(a.lastPrefetch, first, last);
    }

    /** The ACCESSED_BY bits every page of first..last has. */
    static long accessedBy(RangeAdvice a, int first, int last) {
        if (a == null) {
            return 0;
        }
        long bits = -1;
        for (int p = first; p <= last; p++) {
            bits &= a.accessedBy[p];
        }
        return bits;
    }

    private static long common(long[] values, int first, int last) {
        long v = values[first];
        for (int p = first + 1; p <= last; p++) {
            if (values[p] != v) {
                return 0;
            }
        }
        return v;
    }
}
