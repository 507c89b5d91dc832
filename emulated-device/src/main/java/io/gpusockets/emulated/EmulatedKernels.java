package io.gpusockets.emulated;

import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * The two kernels of {@code gpusockets_kernels.cu} that run as Java code, found by entry name, because
 * their Java versions earn their keep: {@code gpus_sleep} parks its stream's thread for the time asked
 * (its PTX spins on %globaltimer, which would hold a host core for the whole time), and {@code gpus_empty}
 * costs nothing beyond the launch, so launch-latency figures measure the launch path alone. Every
 * other entry, the other shipped kernels included, runs from its PTX (the compiled engine, else the
 * interpreter: {@code io.gpusockets.emulated.ptx}). A whole launch runs on its stream's thread.
 */
final class EmulatedKernels {
    /** A kernel body; it throws {@link KernelFault} for a bad access. */
    @FunctionalInterface
    interface Body {
        void run(KernelLaunch launch);
    }

    /** A Java kernel and the parameter sizes it expects, checked against the PTX entry before launch. */
    record Kernel(String name, long[] paramSizes, Body body) {
        /** Why {@code entry} cannot run on this kernel, or null if its parameters match. */
        String mismatch(PtxModule.Entry entry) {
            long[] actual = entry.params().stream().mapToLong(PtxModule.Param::size).toArray();
            return Arrays.equals(actual, paramSizes) ? null
                    : "kernel " + name + " has parameter sizes " + Arrays.toString(actual) + " in the PTX, the emulated one "
                    + Arrays.toString(paramSizes);
        }
    }

    private static final Map<String, Kernel> KERNELS = Map.of(
            "gpus_empty", new Kernel("gpus_empty", new long[] {}, launch -> { }),
            "gpus_sleep", new Kernel("gpus_sleep", new long[] {8}, EmulatedKernels::sleep));

    private EmulatedKernels() {
    }

    /** The Java kernel for a PTX entry name, or null. */
    static Kernel find(String name) {
        return KERNELS.get(name);
    }

    static Set<String> names() {
        return KERNELS.keySet();
    }

    /** Waits about {@code nanoseconds} once per launch: all its threads would spin side by side on a GPU. */
    private static void sleep(KernelLaunch l) {
        long nanos = l.u64(0);
        long duration = nanos < 0 ? Long.MAX_VALUE : nanos;   // unsigned long long: huge means "forever"
        long start = System.nanoTime();
        long elapsed;
        while ((elapsed = System.nanoTime() - start) < duration && !l.cancelled()) {
            LockSupport.parkNanos(Math.min(duration - elapsed, 1_000_000L));
        }
    }
}
