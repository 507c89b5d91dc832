package io.gpusockets.backend.tenant;

/**
 * Where a session charges what it holds against its tenant's limits. In the backend's own process
 * this is the {@link Tenant}; a worker process (isolation mode {@code process}) charges through a
 * proxy that asks the front process, so one tenant's limits hold over all its workers.
 */
public interface TenantAccount {
    /** The tenant's name as the config file gives it ("default" when no config matches). */
    String name();

    /** The limits now in force (a config reload may change them while sessions run). */
    TenantLimits limits();

    /**
     * Takes {@code bytes} of device memory from the tenant's quota before an allocation; false, with a
     * quota rejection counted, when that would pass the limit. Every successful reserve is matched by
     * one {@link #releaseMemory} of the same size when the memory is freed or its session ends.
     */
    boolean reserveMemory(long bytes);

    /** Gives back what {@link #reserveMemory} took. */
    void releaseMemory(long bytes);

    /** Device memory the tenant holds now, over all its sessions. */
    long memoryUsed();

    /** As {@link #reserveMemory}, for page-locked host memory. */
    boolean reservePinned(long bytes);

    /** Gives back what {@link #reservePinned} took. */
    void releasePinned(long bytes);

    /** Counts one refusal for a limit other than memory ({@code what}: "handles", "streams", "lanes", ...). */
    void rejected(String what);
}
