package io.gpusockets.backend.session;

import java.io.IOException;

/**
 * How a checkpoint or restore moves its contents to and from the image file ({@link CheckpointContents}): with how many
 * threads ({@value #THREADS_PROP}: 1 to {@value #MAX_THREADS}, default min({@value #DEFAULT_MAX_THREADS}, cores)) and,
 * at a checkpoint, through a mapping of the file or positional writes ({@value #IO_PROP}: {@code mapped},
 * {@code positional}, or {@code auto}, the default: mapped with {@value #MAPPED_FROM_THREADS} threads or more).
 * Why: Linux serialises {@code pwrite}s to one file (the inode's lock is held for the whole copy), so positional
 * writes scale only in the device copies and the hashing; a mapping's page faults run in parallel but cost more per
 * byte (on a loaded 2-core machine, two mapped writers wrote at about half the speed of one {@code pwrite}r), so
 * they pay only with several threads. Read from the system properties at each checkpoint and restore; a bad value
 * fails it, named. Public for the benchmarks, which measure the file with the same settings.
 */
public final class CheckpointIo {
    /** System property: threads moving one checkpoint's or restore's contents to or from a file. */
    public static final String THREADS_PROP = "gpusockets.checkpoint.threads";
    /** The default threads: min(this, cores). */
    public static final int DEFAULT_MAX_THREADS = 8;
    /** The most threads one checkpoint or restore may have. */
    public static final int MAX_THREADS = 64;
    /** System property: how a checkpoint writes its file, {@code auto} (the default), {@code mapped} or {@code positional}. */
    public static final String IO_PROP = "gpusockets.checkpoint.io";
    /** With {@code auto}: the fewest threads that write through a mapping. */
    public static final int MAPPED_FROM_THREADS = 4;

    private CheckpointIo() {
    }

    /** {@link #threads(String, int)} from the system property and this machine's cores; a bad value fails, named. */
    public static int threads() throws IOException {
        try {
            return threads(System.getProperty(THREADS_PROP), Runtime.getRuntime().availableProcessors());
        } catch (IllegalArgumentException e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    /** The threads {@code value} of {@value #THREADS_PROP} asks for (null: the default on {@code cores} cores); throws name=value. */
    public static int threads(String value, int cores) {
        if (value == null || value.isBlank()) {
            return Math.max(1, Math.min(DEFAULT_MAX_THREADS, cores));
        }
        try {
            int n = Integer.parseInt(value.strip());
            if (n >= 1 && n <= MAX_THREADS) {
                return n;
            }
        } catch (NumberFormatException e) {
            // named below
        }
        throw new IllegalArgumentException(THREADS_PROP + "=" + value + ": must be a whole number from 1 to " + MAX_THREADS);
    }

    /**
     * Whether a checkpoint with {@code threads} threads writes its file through a mapping ({@value #IO_PROP}); a bad
     * value fails, named.
     */
    public static boolean mappedWrites(int threads) throws IOException {
        String v = System.getProperty(IO_PROP, "auto").strip();
        return switch (v) {
            case "auto" -> threads >= MAPPED_FROM_THREADS;
            case "mapped" -> true;
            case "positional" -> false;
            default -> throw new IOException(IO_PROP + "=" + v + ": must be auto, mapped or positional");
        };
    }
}
