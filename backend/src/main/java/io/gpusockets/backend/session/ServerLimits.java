package io.gpusockets.backend.session;

/**
 * Bounds on what peers may make the server hold, before and after authentication: connections (every
 * accepted one, also before its handshake), handshakes in progress, sessions, and how long a session may
 * sit idle. The server enforces them ({@code BackendServer}); sessions bound what each holds
 * ({@link SessionLimits}).
 *
 * @param maxConnections     connections held at once, handshaking or in session; above it a new one is
 *                           closed at once (a descriptor and a little memory each)
 * @param maxHandshakes      handshakes in progress at once; above it the oldest is dropped to make room, so
 *                           that peers that connect and say nothing cannot lock out those that do
 * @param maxSessions        sessions at once; above it a handshake is refused ("too many sessions")
 * @param idleTimeoutSeconds a session that has received no frame for this long and has no call queued or
 *                           running (so no lane inside a driver call) is ended; 0 for never
 */
public record ServerLimits(int maxConnections, int maxHandshakes, int maxSessions, long idleTimeoutSeconds) {
    public static final int MAX_CONNECTIONS_DEFAULT = 4096;
    public static final int MAX_HANDSHAKES_DEFAULT = 2048;
    public static final int MAX_SESSIONS_DEFAULT = 1024;
    public static final long IDLE_TIMEOUT_SECONDS_DEFAULT = 0;
    public static final ServerLimits DEFAULT = new ServerLimits(MAX_CONNECTIONS_DEFAULT, MAX_HANDSHAKES_DEFAULT,
            MAX_SESSIONS_DEFAULT, IDLE_TIMEOUT_SECONDS_DEFAULT);

    public ServerLimits {
        if (maxConnections < 1) {
            throw new IllegalArgumentException("maxConnections=" + maxConnections + ": must be at least 1");
        }
        if (maxHandshakes < 1) {
            throw new IllegalArgumentException("maxHandshakes=" + maxHandshakes + ": must be at least 1");
        }
        if (maxSessions < 1) {
            throw new IllegalArgumentException("maxSessions=" + maxSessions + ": must be at least 1");
        }
        if (idleTimeoutSeconds < 0) {
            throw new IllegalArgumentException("idleTimeoutSeconds=" + idleTimeoutSeconds + ": must be 0 (never) or more");
        }
    }
}
