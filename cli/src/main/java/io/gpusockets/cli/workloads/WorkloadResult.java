package io.gpusockets.cli.workloads;

/** What every workload reports, so that runs on different drivers can be compared. */
public interface WorkloadResult {
    /** Whether the workload's own check passed (results equal what the CPU computed, data intact, ...). */
    boolean passed();

    /** One line for humans. */
    String summary();

    /**
     * The bytes that any two correct drivers must produce identically for the same inputs (kernel
     * outputs, data read back); empty when the workload only measures time.
     */
    byte[] comparableOutput();

    /** Wall time spent in driver calls (not in generating inputs or checking outputs on the CPU). */
    long driverNanos();
}
