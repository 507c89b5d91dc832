package io.gpusockets.backend.tenant;

/**
 * What one tenant may hold at once, over all its sessions unless said otherwise. {@link #UNLIMITED}
 * values ({@code Long.MAX_VALUE}, {@code Integer.MAX_VALUE}) mean no limit.
 *
 * @param memoryBytes  device memory over every allocation path (allocations, pools, VMM, arrays, module globals)
 * @param sessions     sessions at once
 * @param lanes        lanes (client threads) per session
 * @param handles      handles per session (contexts, modules, streams, events, graphs, ...)
 * @param streams      streams per session
 * @param pinnedBytes  page-locked host memory of the backend: the shared windows' page-locking (the guest's
 *                     pinned allocations and registrations stay in the guest and pin nothing here)
 * @param deviceShare  share of device time for kernel launches when tenants compete, in (0, 1]; 0 for none
 *                     (best effort, as today)
 * @param resumeGraceSeconds how long a session whose connection broke waits for its frontend to resume it
 *                     (seconds; 0: its sessions end with their connection), or {@link #GRACE_DEFAULT} for the
 *                     backend's {@code --resume-grace}. A detached session keeps counting against every limit above.
 * @param stableAddresses whether the tenant's new sessions get address-stable memory (the tenants file's
 *                     {@code stable-addresses}), or {@link Stable#BACKEND} for the backend's {@code --stable-addresses}
 */
public record TenantLimits(long memoryBytes, int sessions, int lanes, int handles, int streams, long pinnedBytes,
                           double deviceShare, int resumeGraceSeconds, Stable stableAddresses) {
    /** {@link #resumeGraceSeconds} when the tenant sets none: the backend's {@code --resume-grace} applies. */
    public static final int GRACE_DEFAULT = -1;
    /** The longest grace a tenant may be given (a day): a detached session holds its memory all that time. */
    public static final int GRACE_MAX = 86_400;

    public static final TenantLimits UNLIMITED = new TenantLimits(Long.MAX_VALUE, Integer.MAX_VALUE, Integer.MAX_VALUE,
            Integer.MAX_VALUE, Integer.MAX_VALUE, Long.MAX_VALUE, 0);

    /** A tenant's {@code stable-addresses}: not given (the backend's setting applies), on or off. */
    public enum Stable {
        BACKEND, ON, OFF;

        /** Whether a session gets address-stable memory, the backend's setting being {@code backendDefault}. */
        public boolean resolve(boolean backendDefault) {
            return this == BACKEND ? backendDefault : this == ON;
        }
    }

    public TenantLimits {
        if (stableAddresses == null) {
            throw new IllegalArgumentException("stableAddresses=null");
        }
        if (memoryBytes < 0 || sessions < 0 || lanes < 1 || handles < 0 || streams < 0 || pinnedBytes < 0
                || !(deviceShare >= 0 && deviceShare <= 1)
                || resumeGraceSeconds < GRACE_DEFAULT || resumeGraceSeconds > GRACE_MAX) {
            throw new IllegalArgumentException("tenant limits out of range: " + this);
        }
    }

    /** Limits with the backend's resume grace and address-stable memory setting. */
    public TenantLimits(long memoryBytes, int sessions, int lanes, int handles, int streams, long pinnedBytes,
                        double deviceShare) {
        this(memoryBytes, sessions, lanes, handles, streams, pinnedBytes, deviceShare, GRACE_DEFAULT);
    }

    /** Limits with the backend's address-stable memory setting. */
    public TenantLimits(long memoryBytes, int sessions, int lanes, int handles, int streams, long pinnedBytes,
                        double deviceShare, int resumeGraceSeconds) {
        this(memoryBytes, sessions, lanes, handles, streams, pinnedBytes, deviceShare, resumeGraceSeconds, Stable.BACKEND);
    }

    /** The grace this tenant's sessions get: its own, else {@code backendDefault}. */
    public java.time.Duration resumeGrace(java.time.Duration backendDefault) {
        return resumeGraceSeconds == GRACE_DEFAULT ? backendDefault : java.time.Duration.ofSeconds(resumeGraceSeconds);
    }
}
