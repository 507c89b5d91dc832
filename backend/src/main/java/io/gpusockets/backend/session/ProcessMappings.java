package io.gpusockets.backend.session;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * What this process itself maps in a range of its address space (Linux: {@code /proc/self/maps}), for the message of a
 * restore whose address window the driver could not reserve there ({@link StableAddresses}): the driver's device
 * addresses share the process's virtual address space, so the process's own memory (the JVM's heap and code, shared
 * libraries, thread stacks, the driver's own mappings; where Linux puts them is randomised per process) can lie in a
 * window. Best effort: an empty answer where the file cannot be read. Bounded: the file is read once, at most
 * {@link #SHOWN} mappings are named.
 */
final class ProcessMappings {
    static final int SHOWN = 3;
    private static final Path MAPS = Path.of("/proc/self/maps");

    private ProcessMappings() {
    }

    /**
     * "; this process maps N ranges there (...)" naming the first {@link #SHOWN} mappings that overlap
     * {@code [base, base + size)} and the span they cover, or "" when none does or the maps cannot be read.
     */
    static String within(long base, long size) {
        List<String> lines;
        try {
            lines = Files.readAllLines(MAPS);
        } catch (IOException | RuntimeException e) {
            return "";
        }
        return within(lines, base, size);
    }

    /** As {@link #within(long, long)}, from the lines of a maps file ({@code start-end perms offset dev inode [path]}). */
    static String within(List<String> maps, long base, long size) {
        long end = base + size, low = Long.MAX_VALUE, high = 0;
        int count = 0;
        List<String> shown = new ArrayList<>();
        for (String line : maps) {
            String[] f = line.trim().split("\\s+", 6);
            int dash = f[0].indexOf('-');
            if (dash < 0) {
                continue;
            }
            long s, e;
            try {
                s = Long.parseUnsignedLong(f[0].substring(0, dash), 16);
                e = Long.parseUnsignedLong(f[0].substring(dash + 1), 16);
            } catch (NumberFormatException x) {
                continue;
            }
            if (Long.compareUnsigned(s, end) >= 0 || Long.compareUnsigned(e, base) <= 0) {
                continue;
            }
            count++;
            low = Math.min(low, s);
            high = Math.max(high, e);
            if (shown.size() < SHOWN) {
                shown.add(String.format("0x%x-0x%x %s", s, e, f.length > 5 ? f[5] : "anonymous"));
            }
        }
        if (count == 0) {
            return "";
        }
        return String.format("; this process maps %d range(s) there, 0x%x-0x%x in all (%s%s): its own memory (the JVM's"
                + " heap, libraries, the driver's mappings; placed at random per process) lies in the window", count, low,
                high, String.join(", ", shown), count > shown.size() ? ", ..." : "");
    }
}
