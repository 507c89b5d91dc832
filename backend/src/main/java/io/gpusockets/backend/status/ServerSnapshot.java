package io.gpusockets.backend.status;

import java.util.List;
import java.util.Map;

/**
 * What the backend serves at one moment: its devices, tenants and sessions, and the traffic totals
 * of every tenant since the backend started (ended sessions included). Made by
 * {@code BackendServer.snapshot()}; written as JSON by {@link StatusJson} and as Prometheus metrics by
 * {@link MetricsEndpoint}.
 *
 * @param timeMillis  when it was taken (epoch milliseconds)
 * @param backend     the driver served, as the backend describes it
 * @param connections connections open now (sessions and handshakes in progress)
 * @param devices     the driver's devices
 * @param tenants     tenants known to the backend, by name
 * @param sessions    the sessions open now, by id
 * @param traffic     calls and bytes per tenant and transport since the backend started
 * @param poisoned    what poisoned the driver in the backend's own process (a kernel fault, isolation modes
 *                    context and shared), or null while it serves
 * @param operations  checkpoints, restores, resumes and migrations since the backend started, by outcome
 * @param shares      live shares between sessions now (IPC memory and event handles, shareable VMM handles:
 *                    {@code ShareRegistry.count()})
 */
public record ServerSnapshot(long timeMillis, String backend, int connections, List<Device> devices,
                             List<Tenant> tenants, List<SessionSnapshot> sessions, List<Traffic> traffic, Poisoned poisoned,
                             Operations operations, int shares) {

    /** As the canonical constructor, with no shares. */
    public ServerSnapshot(long timeMillis, String backend, int connections, List<Device> devices, List<Tenant> tenants,
                          List<SessionSnapshot> sessions, List<Traffic> traffic, Poisoned poisoned, Operations operations) {
        this(timeMillis, backend, connections, devices, tenants, sessions, traffic, poisoned, operations, 0);
    }

    /** A backend whose driver is not poisoned, with no operations counted. */
    public ServerSnapshot(long timeMillis, String backend, int connections, List<Device> devices, List<Tenant> tenants,
                          List<SessionSnapshot> sessions, List<Traffic> traffic) {
        this(timeMillis, backend, connections, devices, tenants, sessions, traffic, null, Operations.NONE);
    }

    /** As the canonical constructor, with no operations counted. */
    public ServerSnapshot(long timeMillis, String backend, int connections, List<Device> devices, List<Tenant> tenants,
                          List<SessionSnapshot> sessions, List<Traffic> traffic, Poisoned poisoned) {
        this(timeMillis, backend, connections, devices, tenants, sessions, traffic, poisoned, Operations.NONE);
    }

    /**
     * Session operations since the backend started, each by outcome: done, refused (the request named something the
     * backend will not do: a session that cannot be captured, an unknown token) or failed (an I/O error, a damaged image).
     * Migrations are those from this backend to another ({@code migrationBytes}: the memory bytes sent by the ones
     * that completed). Take-overs are those this backend made of another ({@code gpusockets backend --take-over}), with
     * the sessions it adopted by them and the bytes their take-over connections carried. The downtimes are those of the
     * moves from this backend that completed, migrations and hand-overs alike: how many, and their sum in nanoseconds.
     */
    public record Operations(long checkpoints, long checkpointsRefused, long checkpointsFailed, long restores,
                             long restoresRefused, long restoresFailed, long resumes, long resumesRefused,
                             long migrations, long migrationsRefused, long migrationsFailed, long migrationBytes,
                             long takeOvers, long takeOverSessions, long takeOverBytes, long downtimes,
                             long downtimeNanos) {
        public static final Operations NONE = new Operations(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

        /** No downtimes counted. */
        public Operations(long checkpoints, long checkpointsRefused, long checkpointsFailed, long restores,
                          long restoresRefused, long restoresFailed, long resumes, long resumesRefused,
                          long migrations, long migrationsRefused, long migrationsFailed, long migrationBytes,
                          long takeOvers, long takeOverSessions, long takeOverBytes) {
            this(checkpoints, checkpointsRefused, checkpointsFailed, restores, restoresRefused, restoresFailed, resumes,
                    resumesRefused, migrations, migrationsRefused, migrationsFailed, migrationBytes, takeOvers,
                    takeOverSessions, takeOverBytes, 0, 0);
        }

        /** No take-overs counted. */
        public Operations(long checkpoints, long checkpointsRefused, long checkpointsFailed, long restores,
                          long restoresRefused, long restoresFailed, long resumes, long resumesRefused,
                          long migrations, long migrationsRefused, long migrationsFailed, long migrationBytes) {
            this(checkpoints, checkpointsRefused, checkpointsFailed, restores, restoresRefused, restoresFailed, resumes,
                    resumesRefused, migrations, migrationsRefused, migrationsFailed, migrationBytes, 0, 0, 0);
        }

        /** No migrations counted. */
        public Operations(long checkpoints, long checkpointsRefused, long checkpointsFailed, long restores,
                          long restoresRefused, long restoresFailed, long resumes, long resumesRefused) {
            this(checkpoints, checkpointsRefused, checkpointsFailed, restores, restoresRefused, restoresFailed, resumes,
                    resumesRefused, 0, 0, 0, 0);
        }
    }

    public ServerSnapshot {
        devices = List.copyOf(devices);
        tenants = List.copyOf(tenants);
        sessions = List.copyOf(sessions);
        traffic = List.copyOf(traffic);
    }

    /**
     * A device as the driver reports it.
     *
     * @param memoryUsedBytes  total minus cuMemGetInfo's free: every process's and context's use; -1 when unknown
     * @param memoryTotalBytes cuDeviceTotalMem
     */
    public record Device(int index, String name, long memoryUsedBytes, long memoryTotalBytes) {
    }

    /**
     * A tenant's holdings against its limits.
     *
     * @param memoryLimitBytes {@link Long#MAX_VALUE} when unlimited
     * @param sessionLimit     {@link Integer#MAX_VALUE} when unlimited
     * @param rejections       refusals so far by the limit that refused ("memory", "sessions", ...)
     */
    public record Tenant(String name, long memoryUsedBytes, long memoryLimitBytes, int sessions, int sessionLimit,
                         Map<String, Long> rejections) {
        public Tenant {
            rejections = Map.copyOf(rejections);
        }
    }

    /**
     * The driver in the backend's process is poisoned (io.gpusockets.backend.session.DriverHealth): new sessions
     * are refused with {@code message} until the backend restarts.
     *
     * @param error     the CUresult name, e.g. CUDA_ERROR_ILLEGAL_ADDRESS
     * @param sessionId the session the error was first returned to
     * @param call      the call that returned it
     */
    public record Poisoned(String error, long sessionId, String call, long timeMillis, String message) {
    }

    /** Calls and frame bytes of one tenant over one transport since the backend started. */
    public record Traffic(String tenant, String transport, long calls, long bytesIn, long bytesOut) {
    }
}
