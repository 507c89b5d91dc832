package io.gpusockets.emulated;

import io.gpusockets.protocol.api.ManagedRange;
import io.gpusockets.protocol.api.ProcessMaps;
import java.util.List;

/**
 * Whether this process maps anything in a range of its address space (Linux: {@code /proc/self/maps}, read by {@link ProcessMaps}), for the
 * emulated device's address reservations at a requested address ({@link EmulatedMemory#reserveAt}): the real driver's
 * device addresses share the process's virtual address space, so it cannot reserve where the process's own memory
 * (the JVM's heap and code, shared libraries, thread stacks; placed at random per process by Linux) lies, and gives
 * the reservation another address. The emulated device's memory is not mapped at its device addresses, so without
 * this a range the real driver would refuse would be granted. A guest's managed-range reservation in this process
 * ({@link ManagedRange#guest}: a test hosting frontend and backend in one JVM) stands for the guest's process and is
 * not counted. Best effort: where the file cannot be read, nothing is
 * said to be mapped. Read on every such reservation (a few per session), never kept: the process's mappings change.
 */
final class HostMappings {
    private HostMappings() {
    }

    /** Whether a mapping of this process overlaps {@code [base, base + size)}; false where the maps cannot be read. */
    static boolean overlap(long base, long size) {
        return overlap(ManagedRange.withoutGuestReservations(ProcessMaps.lines()), base, size);
    }

    /** As {@link #overlap(long, long)}, from the lines of a maps file ({@code start-end perms offset dev inode [path]}). */
    static boolean overlap(List<String> maps, long base, long size) {
        return !ProcessMaps.overlapping(maps, base, size).isEmpty();
    }
}
