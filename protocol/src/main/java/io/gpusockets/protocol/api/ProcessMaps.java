package io.gpusockets.protocol.api;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The mappings of this process's address space (Linux: {@code /proc/self/maps}) that overlap a range: the CUDA driver's
 * device addresses share the process's virtual address space, so the process's own memory (the JVM's heap and code,
 * shared libraries, thread stacks; placed at random per process by Linux) can lie where an address window or a fixed
 * reservation is wanted. Used by the backend to name what is in a window it could not reserve, and by the emulated
 * device to refuse a fixed reservation as the real driver would. Best effort: where the file cannot be read, nothing is
 * said to be mapped. Read when asked, never kept: the process's mappings change.
 */
public final class ProcessMaps {
    private static final Path MAPS = Path.of("/proc/self/maps");

    /** One mapping: {@code [start, end)} and its path, or "anonymous". */
    public record Mapping(long start, long end, String path) {
    }

    private ProcessMaps() {
    }

    /** This process's maps file, line by line; empty where it cannot be read. */
    public static List<String> lines() {
        try {
            return Files.readAllLines(MAPS);
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }

    /**
     * The mappings among {@code maps} (lines of a maps file: {@code start-end perms offset dev inode [path]}) that
     * overlap {@code [base, base + size)}, in the file's order; lines that do not parse are skipped.
     */
    public static List<Mapping> overlapping(List<String> maps, long base, long size) {
        long end = base + size;
        List<Mapping> out = new ArrayList<>();
        for (String line : maps) {
            String[] f = line.trim().split("\\s+", 6);
            int dash = f[0].indexOf('-');
            if (dash <= 0) {
                continue;
            }
            long s, e;
            try {
                s = Long.parseUnsignedLong(f[0], 0, dash, 16);
                e = Long.parseUnsignedLong(f[0], dash + 1, f[0].length(), 16);
            } catch (NumberFormatException x) {
                continue;
            }
            if (Long.compareUnsigned(s, end) < 0 && Long.compareUnsigned(e, base) > 0) {
                out.add(new Mapping(s, e, f.length > 5 ? f[5] : "anonymous"));
            }
        }
        return out;
    }
}
