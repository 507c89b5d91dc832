package io.gpusockets.cli.workloads;

import io.gpusockets.protocol.api.CudaDriver;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

/**
 * The standard workloads, in order, on one driver: cuInit, deviceQuery, then, in the device's
 * primary context with the project's PTX loaded, vectorAdd, blockSum, mixed12, memcpyRoundTrips and
 * nullCalls. Every outcome is reported (a failing workload does not stop the others, unless there is
 * no context to run them in); the context and module are released before returning.
 *
 * <p>Inputs are seeded, so two drivers given the same {@link Options} must produce identical
 * {@link WorkloadResult#comparableOutput()}s.
 */
public final class WorkloadSuite {
    public static final String SETUP = "setup";
    public static final String DEVICE_QUERY = "deviceQuery";
    public static final String VECTOR_ADD = "vectorAdd";
    public static final String BLOCK_SUM = "blockSum";
    public static final String MIXED12 = "mixed12";
    public static final String MEMCPY = "memcpyRoundTrips";
    public static final String NULL_CALLS = "nullCalls";
    public static final String TEARDOWN = "teardown";
    /** The workloads in the order they run ({@link #TEARDOWN} appears only when it fails). */
    public static final List<String> NAMES = List.of(SETUP, DEVICE_QUERY, VECTOR_ADD, BLOCK_SUM, MIXED12, MEMCPY, NULL_CALLS);

    public static final long DEFAULT_SEED = 0x67707573L; // "gpus"

    private WorkloadSuite() {
    }

    /** Sizes and seed; {@link #defaults()} is what the GPU suite runs. */
    public record Options(int ordinal, long seed, int vectorN, int blockSumN, List<Long> memcpySizes, int nullCalls) {
        public Options {
            memcpySizes = List.copyOf(memcpySizes);
        }

        public static Options defaults() {
            return new Options(0, DEFAULT_SEED, VectorAdd.DEFAULT_N, BlockSum.DEFAULT_N, MemcpyRoundTrips.DEFAULT_SIZES,
                    NullCalls.DEFAULT_COUNT);
        }
    }

    /** One workload's result, or why it has none. */
    public record Outcome(String workload, WorkloadResult result, Throwable failure) {
        public boolean passed() {
            return failure == null && result != null && result.passed();
        }

        /** The result's summary, or the failure's message. */
        public String detail() {
            if (failure != null) {
                return failure.getClass().getSimpleName() + ": " + failure.getMessage();
            }
            return result.summary();
        }
    }

    /** cuInit(0), context setup and module load, timed together. */
    public record Setup(long initNanos, long contextNanos, long moduleNanos) implements WorkloadResult {
        @Override
        public boolean passed() {
            return true;
        }

        @Override
        public String summary() {
            return String.format("cuInit %.1f ms, primary context %.1f ms, cuModuleLoadData %.1f ms", initNanos / 1e6,
                    contextNanos / 1e6, moduleNanos / 1e6);
        }

        @Override
        public byte[] comparableOutput() {
            return new byte[0];
        }

        @Override
        public long driverNanos() {
            return initNanos + contextNanos + moduleNanos;
        }
    }

    public static List<Outcome> run(CudaDriver cu, Options options) {
        List<Outcome> outcomes = new ArrayList<>();
        long t0 = System.nanoTime();
        long init;
        try {
            Cu.check(cu.cuInit(0), "cuInit(0)");
            init = System.nanoTime() - t0;
        } catch (RuntimeException e) {
            return failAll(outcomes, NAMES, e);
        }
        PrimaryContext context;
        Kernels kernels;
        long t1 = System.nanoTime();
        long contextNanos;
        try {
            context = PrimaryContext.retain(cu, options.ordinal());
            contextNanos = System.nanoTime() - t1;
        } catch (RuntimeException e) {
            outcomes.add(attempt(DEVICE_QUERY, () -> DeviceQuery.run(cu, options.ordinal())));
            return failAll(outcomes, NAMES, e);
        }
        try {
            outcomes.add(attempt(DEVICE_QUERY, () -> DeviceQuery.run(cu, options.ordinal())));
            long t2 = System.nanoTime();
            try {
                kernels = Kernels.load(cu);
            } catch (RuntimeException e) {
                return failAll(outcomes, NAMES, e);
            }
            outcomes.addFirst(new Outcome(SETUP, new Setup(init, contextNanos, System.nanoTime() - t2), null));
            try {
                outcomes.add(attempt(VECTOR_ADD, () -> VectorAdd.run(cu, kernels, options.vectorN(), options.seed())));
                outcomes.add(attempt(BLOCK_SUM, () -> BlockSum.run(cu, kernels, options.blockSumN(), options.seed())));
                outcomes.add(attempt(MIXED12, () -> Mixed12.run(cu, kernels)));
                outcomes.add(attempt(MEMCPY, () -> MemcpyRoundTrips.run(cu, options.memcpySizes(), options.seed())));
                outcomes.add(attempt(NULL_CALLS, () -> NullCalls.run(cu, options.nullCalls())));
            } finally {
                closeRecording(kernels, outcomes);
            }
        } finally {
            closeRecording(context, outcomes);
        }
        return outcomes;
    }

    /** Runs one workload; an exception becomes the outcome's failure. */
    public static Outcome attempt(String name, Supplier<? extends WorkloadResult> workload) {
        try {
            return new Outcome(name, workload.get(), null);
        } catch (RuntimeException e) {
            return new Outcome(name, null, e);
        }
    }

    private static List<Outcome> failAll(List<Outcome> outcomes, List<String> names, RuntimeException cause) {
        for (String name : names) {
            if (outcomes.stream().noneMatch(o -> o.workload().equals(name))) {
                outcomes.add(new Outcome(name, null, cause));
            }
        }
        outcomes.sort(java.util.Comparator.comparingInt(o -> order(o.workload())));
        return outcomes;
    }

    private static int order(String name) {
        int i = NAMES.indexOf(name);
        return i < 0 ? NAMES.size() : i;
    }

    private static void closeRecording(AutoCloseable resource, List<Outcome> outcomes) {
        try {
            resource.close();
        } catch (Exception e) {
            outcomes.add(new Outcome(TEARDOWN, null, e));
        }
    }
}
