package io.gpusockets.transport.ring;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Whether spinning can pay on this machine now, one answer for the whole process. A spinning waiter is a
 * bet that the other side is running on another core; where there are more runnable threads than cores
 * the other side is often waiting for the very core the spinner holds, and every spin then delays the
 * answer it waits for (on a 2-core machine with two busy processes, a ring round trip took 163 µs at the
 * median while tcp, which sleeps at once, took 7 µs). So the machine counts as oversubscribed
 * <ul>
 *   <li>while the last sample of {@code /proc/loadavg}'s runnable count (its fourth field, before the
 *   slash), less the sampling thread and this process's own spinning waiters ({@link #spinning}), was at least
 *   the machine's cores: every core had other work that a spin would take it from (counting our own spinners
 *   as load made a quiet 2-core machine look oversubscribed at half of the samples, and its ring null call
 *   2.4 times slower), or</li>
 *   <li>for one sample period after a spinning waiter saw itself descheduled ({@link #preempted}: a gap
 *   between two of its polls no spin loop makes on its own), or</li>
 *   <li>always on one core, where the other side can never run while we spin.</li>
 * </ul>
 * Samples are taken at most every {@link #SAMPLE_NANOS}, only by waiters about to sleep (who are slow
 * already), by whichever one gets there first: a reply that arrives while a waiter spins never waits for
 * a sample. Where {@code /proc/loadavg} cannot be read (not Linux) only the other two signs count.
 * {@code /proc/loadavg} counts the whole machine's threads, so they are compared with the machine's
 * online CPUs ({@code /sys/devices/system/cpu/online}), not with the CPUs a container lets this process use.
 *
 * <p>The runnable count is only a guess at what a spin would meet: the other side's own spinning waiter counts
 * as load, and so does any thread that is runnable for a moment, so a quiet 2-core machine serving one ring
 * client looked oversubscribed so often that its null call went from 6.7 to 16 µs. So the waits keep a
 * record of what their spins met ({@link SpinRecord}): a spin that ended with the answer scores one, one
 * that ran its full time or was descheduled loses two. While the record is positive a wait spins whatever
 * the runnable count says; otherwise every {@link SpinRecord#PROBE_EVERY}th wait the count sends to sleep
 * spins anyway, so that the record learns when spinning pays again. Where the runnable count says spinning
 * is fine, waits spin as before, whatever the record.
 *
 * <p>{@code -D}{@value #ADAPTIVE_PROP}{@code =false} turns all this off (waits always spin their full time):
 * for cores set aside for the two sides (isolcpus, pinning), where the machine's runnable count says
 * nothing about them, and for measuring the spinning path itself on a machine that is busy elsewhere.
 */
final class CpuPressure {
    /** The most often {@code /proc/loadavg} is read, and how long a sign of preemption holds. */
    static final long SAMPLE_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    /** System property: false to spin whatever the machine's load ({@link BackoffIdleStrategy}'s full spin). */
    static final String ADAPTIVE_PROP = "gpusockets.ring.adaptiveSpin";
    private static final boolean ADAPTIVE = !"false".equalsIgnoreCase(System.getProperty(ADAPTIVE_PROP, "true").strip());
    private static final Path LOADAVG = Path.of("/proc/loadavg");
    /** The CPUs this process may run on: one alone means spinning never pays. */
    private static final int USABLE = Runtime.getRuntime().availableProcessors();
    /** The machine's online CPUs, what {@code /proc/loadavg}'s count is compared with. */
    private static final int CORES = onlineCpus();

    /** When the last sample (or sign of preemption) was taken; the single sampler claims it by CAS. */
    private static final AtomicLong lastSample = new AtomicLong(System.nanoTime() - SAMPLE_NANOS);
    private static volatile boolean oversubscribed = ADAPTIVE && USABLE < 2;
    /** Open once; null after it failed (then only preemption counts). Touched by the sampler alone. */
    private static FileChannel loadavg;
    private static boolean loadavgFailed;
    private static final ByteBuffer BUFFER = ByteBuffer.allocate(128);

    /** This process's waiters spinning now ({@link #spinning}): runnable, but not load that spinning competes with. */
    private static final java.util.concurrent.atomic.AtomicInteger SPINNERS = new java.util.concurrent.atomic.AtomicInteger();

    private CpuPressure() {
    }

    /** What this process's spins met lately. */
    private static final SpinRecord RECORD = new SpinRecord();

    /** Whether the runnable count or a sign of preemption says the cores are oversubscribed. */
    static boolean oversubscribed() {
        return oversubscribed;
    }

    /** Whether a wait should spin before it sleeps: not oversubscribed, or recent spins paid, or a probe is due. */
    static boolean shouldSpin() {
        if (!oversubscribed) {
            return true;
        }
        return ADAPTIVE && USABLE >= 2 && RECORD.spinAnyway();
    }

    /** A spin ended with what its wait waited for. */
    static void spinPaid() {
        RECORD.paid();
    }

    /** A spin ran its full time, or was descheduled, without what its wait waited for. */
    static void spinWasted() {
        RECORD.wasted();
    }

    /**
     * The outcomes of recent spins as one score in [-{@link #BOUND}, {@link #BOUND}]: +1 for a spin that paid, -2
     * for one that did not, so that a positive score means at least two of three recent spins paid. Updated by all
     * of the process's waiters without locks; a lost update now and then only shifts the score by one.
     */
    static final class SpinRecord {
        static final int BOUND = 16;
        /** Of the waits the runnable count sends to sleep at once while the score is not positive, one in this many spins. */
        static final int PROBE_EVERY = 8;
        private volatile int score;
        private final java.util.concurrent.atomic.AtomicInteger skipped = new java.util.concurrent.atomic.AtomicInteger();

        /** Whether a wait the runnable count would send to sleep at once spins anyway. */
        boolean spinAnyway() {
            return score > 0 || skipped.incrementAndGet() % PROBE_EVERY == 0;
        }

        void paid() {
            int s = score;
            if (s < BOUND) {
                score = s + 1;
            }
        }

        void wasted() {
            score = Math.max(-BOUND, score - 2);
        }

        int score() {
            return score;
        }
    }

    /** A waiter starts ({@code +1}) or stops ({@code -1}) spinning. */
    static void spinning(int delta) {
        SPINNERS.addAndGet(delta);
    }

    /** A spinning waiter found it was not running for a while: no spinning until the next sample. */
    static void preempted(long now) {
        if (!ADAPTIVE) {
            return;
        }
        oversubscribed = true;
        lastSample.set(now);
    }

    /** Takes a sample if none was taken for {@link #SAMPLE_NANOS} and no other thread takes one now. */
    static void sample(long now) {
        long last = lastSample.get();
        if (now - last < SAMPLE_NANOS || !lastSample.compareAndSet(last, now)) {
            return;
        }
        if (!ADAPTIVE || USABLE < 2) {
            return; // never, or for good
        }
        // runnable threads other than this sampler and this process's spinning waiters: they would use a core
        int others = runnable() - 1 - SPINNERS.get();
        oversubscribed = others >= CORES;
    }

    /** The runnable count {@code /proc/loadavg} gives now, 0 where it cannot be read. */
    private static synchronized int runnable() {
        if (loadavgFailed) {
            return 0;
        }
        try {
            if (loadavg == null) {
                loadavg = FileChannel.open(LOADAVG, StandardOpenOption.READ);
            }
            BUFFER.clear();
            loadavg.read(BUFFER, 0); // procfs makes the text anew for a read at 0
            return parseRunnable(new String(BUFFER.array(), 0, BUFFER.position(), StandardCharsets.US_ASCII));
        } catch (IOException | RuntimeException e) {
            loadavgFailed = true;
            return 0;
        }
    }

    private static int onlineCpus() {
        try {
            return parseCpuList(java.nio.file.Files.readString(Path.of("/sys/devices/system/cpu/online")));
        } catch (IOException | RuntimeException e) {
            return USABLE;
        }
    }

    /** The number of CPUs in a kernel CPU list ("0-3,8,10-11"). */
    static int parseCpuList(String list) {
        int n = 0;
        for (String range : list.strip().split(",")) {
            int dash = range.indexOf('-');
            int first = Integer.parseInt(dash < 0 ? range : range.substring(0, dash));
            int last = dash < 0 ? first : Integer.parseInt(range.substring(dash + 1));
            if (first < 0 || last < first) {
                throw new IllegalArgumentException("not a CPU list: list=" + list);
            }
            n += last - first + 1;
        }
        return n;
    }

    /** The runnable count in a {@code /proc/loadavg} line ("0.28 1.05 1.68 3/178 12345"). */
    static int parseRunnable(String line) {
        String[] fields = line.strip().split(" ");
        if (fields.length < 4 || fields[3].indexOf('/') < 0) {
            throw new IllegalArgumentException("not a /proc/loadavg line: line=" + line);
        }
        return Integer.parseInt(fields[3].substring(0, fields[3].indexOf('/')));
    }
}
