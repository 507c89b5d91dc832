package io.gpusockets.backend.session;

import io.gpusockets.protocol.api.StableWindows;
import java.util.Properties;
import java.util.Set;

/**
 * What the server and its sessions are configured with, validated once: what the server checks at the
 * handshake, the per-session bounds, and the lanes' tuning (listeners, device, tenants, TLS, admin socket,
 * metrics and isolation mode are the backend command's, in cli). Sessions and lanes get their values from here; none of
 * them reads a property. Command-line options fill the first group; the two tuning settings come from
 * system properties ({@link #fromSystemProperties}), as does address-stable memory's default where no option sets it:
 * <table>
 *   <caption>Backend settings</caption>
 *   <tr><th>Setting</th><th>Default</th><th>Meaning</th></tr>
 *   <tr><td>limits</td><td>{@link SessionLimits#DEFAULT}</td><td>per-session bounds (lanes, body budget, frame and bulk sizes, async)</td></tr>
 *   <tr><td>preSharedKey</td><td>none</td><td>frontends must prove they hold it (HMAC challenge)</td></tr>
 *   <tr><td>allowedUids</td><td>any</td><td>unix://, ring:// and fdunix:// peers' uids let in</td></tr>
 *   <tr><td>allowedCids</td><td>any</td><td>vsock:// peers' CIDs let in</td></tr>
 *   <tr><td>handshakeMillis</td><td>{@value #HANDSHAKE_MILLIS_DEFAULT}</td><td>a peer not through its handshake by then is dropped</td></tr>
 *   <tr><td>serverLimits</td><td>{@link ServerLimits#DEFAULT}</td><td>what peers may make the server hold:</td></tr>
 *   <tr><td>&nbsp;maxConnections</td><td>{@value ServerLimits#MAX_CONNECTIONS_DEFAULT}</td><td>connections held, also before
 *       their handshake; a new one past it is closed at once</td></tr>
 *   <tr><td>&nbsp;maxHandshakes</td><td>{@value ServerLimits#MAX_HANDSHAKES_DEFAULT}</td><td>handshakes in progress; past
 *       it the oldest is dropped</td></tr>
 *   <tr><td>&nbsp;maxSessions</td><td>{@value ServerLimits#MAX_SESSIONS_DEFAULT}</td><td>sessions; past it a handshake is
 *       refused</td></tr>
 *   <tr><td>&nbsp;idleTimeoutSeconds</td><td>{@value ServerLimits#IDLE_TIMEOUT_SECONDS_DEFAULT} (never)</td><td>a session
 *       without a frame for that long and with no call queued or running is ended</td></tr>
 *   <tr><td>warmContexts</td><td>{@value #WARM_CONTEXTS_DEFAULT}</td><td>contexts kept made ahead per device ({@link ContextPool})</td></tr>
 *   <tr><td>{@value #LANE_SPIN_MICROS_PROP}</td><td>{@value #LANE_SPIN_MICROS_DEFAULT} with more than two cores, else 0</td>
 *       <td>µs an idle lane thread polls its queue before it parks, 0 to {@value #LANE_SPIN_MICROS_MAX}</td></tr>
 *   <tr><td>{@value #PIPELINED_TO_LANE_PROP}</td><td>{@value #PIPELINED_TO_LANE_DEFAULT}</td>
 *       <td>pipelined quick calls go to the lane's thread rather than run on the reader when the lane is idle</td></tr>
 *   <tr><td>stableAddresses ({@code --stable-addresses}, else {@value StableAddresses#PROPERTY})</td><td>false</td>
 *       <td>new sessions get address-stable memory ({@link StableAddresses}) unless their tenant's
 *       {@code stable-addresses} says otherwise</td></tr>
 *   <tr><td>{@value StableWindows#PROPERTY} (checked here, read by {@link StableAddresses})</td>
 *       <td>{@code 0x6000_0000_0000}</td><td>where the address-stable windows start ({@link StableWindows})</td></tr>
 * </table>
 *
 * @param limits          per-session bounds
 * @param preSharedKey    when non-null, frontends must prove they hold it
 * @param allowedUids     for unix://, ring:// and fdunix:// peers: uids allowed in (empty = any local user)
 * @param allowedCids     for vsock:// peers: CIDs allowed in (empty = any)
 * @param handshakeMillis a peer that has not finished its handshake by then is dropped
 * @param warmContexts    contexts to keep made ahead per device for sessions' first primary retain; 0 for none
 * @param serverLimits    connections, handshakes and sessions held, and the idle timeout ({@link ServerLimits})
 * @param laneSpinMicros  how long an idle lane thread polls before it parks: a parked thread takes tens of
 *                        microseconds to wake on a virtual machine, which a client's next call usually
 *                        arrives well within; with two cores or fewer polling would take the core the
 *                        reader or the client needs, hence no polling there by default
 * @param pipelinedToLane whether pipelined quick calls go to the lane's thread (so the reader reads the next
 *                        frames while the driver runs them); false runs them on the reader when the lane is
 *                        idle, for measuring one against the other (benchmarks/RESULTS.md)
 * @param stableAddresses whether sessions get address-stable memory where their tenant sets nothing
 *                        ({@link io.gpusockets.backend.tenant.TenantLimits.Stable}): off by default, as it makes
 *                        allocation and free up to a quarter slower (benchmarks/RESULTS.md, issue 22)
 */
public record BackendSettings(SessionLimits limits, byte[] preSharedKey, Set<Integer> allowedUids, Set<Long> allowedCids,
                              long handshakeMillis, int warmContexts, ServerLimits serverLimits, long laneSpinMicros,
                              boolean pipelinedToLane, boolean stableAddresses) {
    public static final long HANDSHAKE_MILLIS_DEFAULT = 10_000;
    public static final int WARM_CONTEXTS_DEFAULT = 0;
    public static final String LANE_SPIN_MICROS_PROP = "gpusockets.backend.laneSpinMicros";
    /** Where there are more than two cores; 0 elsewhere ({@link #laneSpinMicrosDefault}). */
    public static final long LANE_SPIN_MICROS_DEFAULT = 50;
    public static final long LANE_SPIN_MICROS_MAX = 1_000_000;
    public static final String PIPELINED_TO_LANE_PROP = "gpusockets.backend.pipelinedToLane";
    public static final boolean PIPELINED_TO_LANE_DEFAULT = true;

    public BackendSettings {
        if (limits == null) {
            throw new IllegalArgumentException("limits=null");
        }
        if (serverLimits == null) {
            throw new IllegalArgumentException("serverLimits=null");
        }
        allowedUids = Set.copyOf(allowedUids);
        allowedCids = Set.copyOf(allowedCids);
        if (handshakeMillis < 1) {
            throw new IllegalArgumentException("handshakeMillis=" + handshakeMillis + ": must be at least 1");
        }
        if (warmContexts < 0) {
            throw new IllegalArgumentException("warmContexts=" + warmContexts + ": must be 0 or more");
        }
        if (laneSpinMicros < 0 || laneSpinMicros > LANE_SPIN_MICROS_MAX) {
            throw new IllegalArgumentException(LANE_SPIN_MICROS_PROP + "=" + laneSpinMicros + ": must be 0 to "
                    + LANE_SPIN_MICROS_MAX);
        }
    }

    /** The defaults, with the two tuning settings and address-stable memory from this JVM's system properties. */
    public static BackendSettings fromSystemProperties() {
        return fromProperties(System.getProperties(), Runtime.getRuntime().availableProcessors());
    }

    /**
     * The defaults, with {@value #LANE_SPIN_MICROS_PROP}, {@value #PIPELINED_TO_LANE_PROP} and
     * {@value StableAddresses#PROPERTY} taken from {@code properties} where set, on a machine of {@code cores}
     * cores; throws with name=value on a bad value ({@value StableAddresses#PROPERTY} is on only when "true", as
     * {@link Boolean#getBoolean} reads it), also on a bad {@value StableWindows#PROPERTY} (the windows' base, which
     * {@link StableAddresses} reads when a session opens a window: checked here so that the backend does not start
     * with one).
     */
    public static BackendSettings fromProperties(Properties properties, int cores) {
        StableWindows.base(properties.getProperty(StableWindows.PROPERTY)); // checked here, read where a window opens
        return new BackendSettings(SessionLimits.DEFAULT, null, Set.of(), Set.of(), HANDSHAKE_MILLIS_DEFAULT,
                WARM_CONTEXTS_DEFAULT, ServerLimits.DEFAULT, laneSpinMicros(properties.getProperty(LANE_SPIN_MICROS_PROP), cores),
                pipelinedToLane(properties.getProperty(PIPELINED_TO_LANE_PROP)),
                Boolean.parseBoolean(properties.getProperty(StableAddresses.PROPERTY)));
    }

    /** {@value #LANE_SPIN_MICROS_DEFAULT} µs with more than two cores, else 0. */
    public static long laneSpinMicrosDefault(int cores) {
        return cores > 2 ? LANE_SPIN_MICROS_DEFAULT : 0;
    }

    private static long laneSpinMicros(String value, int cores) {
        if (value == null) {
            return laneSpinMicrosDefault(cores);
        }
        try {
            return Long.parseLong(value.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(LANE_SPIN_MICROS_PROP + "=" + value + ": not a whole number of microseconds");
        }
    }

    private static boolean pipelinedToLane(String value) {
        if (value == null) {
            return PIPELINED_TO_LANE_DEFAULT;
        }
        return switch (value.strip().toLowerCase(java.util.Locale.ROOT)) {
            case "true" -> true;
            case "false" -> false;
            default -> throw new IllegalArgumentException(PIPELINED_TO_LANE_PROP + "=" + value + ": must be true or false");
        };
    }

    /** {@link #laneSpinMicros} in nanoseconds. */
    public long laneSpinNanos() {
        return laneSpinMicros * 1000;
    }

    /** These settings with other session bounds. */
    public BackendSettings withLimits(SessionLimits l) {
        return new BackendSettings(l, preSharedKey, allowedUids, allowedCids, handshakeMillis, warmContexts, serverLimits,
                laneSpinMicros, pipelinedToLane, stableAddresses);
    }

    /** These settings with the server's handshake checks and warm contexts from elsewhere (the command line). */
    public BackendSettings withServer(byte[] psk, Set<Integer> uids, Set<Long> cids, long handshake, int warm) {
        return new BackendSettings(limits, psk, uids, cids, handshake, warm, serverLimits, laneSpinMicros, pipelinedToLane,
                stableAddresses);
    }

    /** These settings with other bounds on connections, handshakes, sessions and idleness. */
    public BackendSettings withServerLimits(ServerLimits l) {
        return new BackendSettings(limits, preSharedKey, allowedUids, allowedCids, handshakeMillis, warmContexts, l,
                laneSpinMicros, pipelinedToLane, stableAddresses);
    }

    /** These settings with address-stable memory on or off for sessions whose tenant sets nothing. */
    public BackendSettings withStableAddresses(boolean on) {
        return new BackendSettings(limits, preSharedKey, allowedUids, allowedCids, handshakeMillis, warmContexts, serverLimits,
                laneSpinMicros, pipelinedToLane, on);
    }
}
