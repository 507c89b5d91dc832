package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.ProcessMaps;
import java.util.ArrayList;
import java.util.List;

/**
 * What this process itself maps in a range of its address space (Linux: {@code /proc/self/maps}, read by {@link ProcessMaps}), for the message of a
 * restore whose address window the driver could not reserve there ({@link StableAddresses}): the driver's device
 * addresses share the process's virtual address space, so the process's own memory (the JVM's heap and code, shared
 * libraries, thread stacks, the driver's own mappings; where Linux puts them is randomised per process) can lie in a
 * window. Best effort: an empty answer where the file cannot be read. Bounded: the file is read once, at most
 * {@link #SHOWN} mappings are named.
 */
final class ProcessMappings {
    static final int SHOWN = 3;

    private ProcessMappings() {
    }

    /**
     * "; this process maps N ranges there (...)" naming the first {@link #SHOWN} mappings that overlap
     * {@code [base, base + size)} and the span they cover, or "" when none does or the maps cannot be read.
     */
    static String within(long base, long size) {
        return within(io.gpusockets.protocol.api.ManagedRange.withoutGuestReservations(ProcessMaps.lines()), base, size);
    }

    /** As {@link #within(long, long)}, from the lines of a maps file ({@code start-end perms offset dev inode [path]}). */
    static String within(List<String> maps, long base, long size) {
        List<ProcessMaps.Mapping> there = ProcessMaps.overlapping(maps, base, size);
        if (there.isEmpty()) {
            return "";
        }
        long low = Long.MAX_VALUE, high = 0;
        List<String> shown = new ArrayList<>();
        for (ProcessMaps.Mapping m : there) {
            low = Math.min(low, m.start());
            high = Math.max(high, m.end());
            if (shown.size() < SHOWN) {
                shown.add(String.format("0x%x-0x%x %s", m.start(), m.end(), m.path()));
            }
        }
        return String.format("; this process maps %d range(s) there, 0x%x-0x%x in all (%s%s): its own memory (the JVM's"
                + " heap, libraries, the driver's mappings; placed at random per process) lies in the window", there.size(),
                low, high, String.join(", ", shown), there.size() > shown.size() ? ", ..." : "");
    }
}
