package io.gpusockets.protocol.wire;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The version handshake, first on every connection:
 * <pre>
 *   backend  → SERVER_HELLO  magic u32, min version u32, max version u32, auth method u32, nonce[32]
 *   frontend → HELLO         magic u32, version u32, features u32, identity str, proof bytes, resume token bytes
 *                            [managed range base u64, size u64: only with {@link #FEATURE_MANAGED_RANGE}]
 *   backend  → WELCOME       session id u64, driver version i32, device count i32, features u32, description str,
 *                            resume token bytes, resume grace seconds u32
 *          or  REFUSE        reason str (and the backend closes)
 *   backend  → RESUMED       (only after a WELCOME that answers a HELLO with a resume token) {@link ResumeState}
 *          or  MOVED         instead of WELCOME, to a HELLO with the token of a session that moved: {@link Moved}
 *   backend  → MOVED         at any time after the handshake, to a frontend granted resume: {@link Moved}
 * </pre>
 * str = u32 length + UTF-8; bytes = u32 length + bytes. With the pre-shared-key method the proof is
 * HMAC-SHA256(key, nonce || identity); without it the proof is empty.
 *
 * <p><b>Resume.</b> A frontend that asks for {@link #FEATURE_RESUME} and is granted it receives a session
 * token ({@link #TOKEN_BYTES} random bytes) and the grace period in WELCOME. After a lost connection it
 * connects again and sends a HELLO that carries the token (authenticated as any HELLO; the identity must be
 * the one that opened the session); the backend answers WELCOME (same session id, same token) and RESUMED,
 * then resends the replies the frontend had not acknowledged; the frontend resends what RESUMED says the
 * backend did not receive. An empty token asks for a new session.
 *
 * <p><b>Moved.</b> A session migrated to another backend (or checkpointed with stop and restored there) is
 * resumed there: the backend that had it sends MOVED with the URI the frontend should use, on the session's
 * connection, and as the answer to a resume HELLO with its token while it remembers where it went. The frontend
 * then resumes at that URI, as after a lost connection, and uses it for later resumes too.
 */
public final class Handshake {
    public static final int MAGIC = 0x53555047; // "GPUS" little-endian
    public static final int PROTOCOL_VERSION = 1;
    public static final int NONCE_BYTES = 32;

    public static final int AUTH_NONE = 0;
    public static final int AUTH_PSK = 1;

    /** Calls marked async may be sent without waiting for their reply (errors latched per lane). */
    public static final int FEATURE_ASYNC = 1;
    /**
     * Bulk data may go through the connection's shared window (DATA frames flagged
     * {@link FrameHeader#FLAG_WINDOW}); asked for by a frontend whose connection has one, granted by a
     * backend whose end of the connection has it too.
     */
    public static final int FEATURE_WINDOW = 2;
    /**
     * The session survives a lost connection: WELCOME carries a token the frontend presents in a later
     * HELLO to resume it (granted where the backend keeps sessions it serves itself; not over a shared window).
     */
    public static final int FEATURE_RESUME = 4;
    /**
     * A HELLO with this bit opens no session: it is a source backend migrating a session here (issue 23; the
     * backend's {@code Migration}s). Granted only by a backend that accepts migrations and only to a peer proven by
     * the backend's own pre-shared key, a TLS client certificate, or the backend's own uid over unix; the WELCOME
     * echoes the bit, and the migration's frames ({@link Opcodes#MIGRATE_BEGIN} and after) follow.
     */
    public static final int FEATURE_MIGRATION = 8;
    /**
     * The HELLO of a new session carries the guest's managed range (issue 25; {@link
     * io.gpusockets.protocol.api.ManagedRange}): the address space the frontend reserved in the guest process for the
     * session's managed memory, base and size after the resume token. A backend that places managed allocations there
     * echoes the bit in WELCOME; one that does not (an older backend, which ignores the two longs) leaves it out, and the
     * frontend gives its reservation back and keeps the driver's addresses. A range that
     * {@link io.gpusockets.protocol.api.ManagedRange#check} refuses is refused with the HELLO (REFUSE naming it).
     * Never in a resume's HELLO: the session has its range already.
     */
    public static final int FEATURE_MANAGED_RANGE = 16;
    /**
     * With {@link #FEATURE_MIGRATION}: the source migrates several sessions that share IPC memory or events together on
     * this one connection (issue 24; the backend's {@code Migration#runGroup} states the frames: each frame's request id
     * names the group member it belongs to, and BEGIN says how many there are). A backend that does not echo this bit
     * in its WELCOME (one older than it, or one that cannot make the shares again) is not sent a group: the source
     * refuses the migration before sending anything, so shares are never dropped on the way.
     */
    public static final int FEATURE_MIGRATION_GROUP = 32;
    /** Bytes of a session token: 256 random bits. */
    public static final int TOKEN_BYTES = 32;
    /**
     * How a backend's REFUSE of a resume begins when it knows no session by the token: the session ended or was never
     * here, or is not yet (a restore of its checkpoint may be on its way), so a frontend keeps trying within its
     * grace period, where any other refusal (another identity) is final.
     */
    public static final String REFUSAL_UNKNOWN_SESSION = "resume refused: unknown or expired session token";
    /** A window DATA body: offset u64, length u64. */
    public static final int WINDOW_REF_BYTES = 16;

    public static final int MAX_STRING = 4096;

    private Handshake() {
    }

    public record ServerHello(int minVersion, int maxVersion, int authMethod, byte[] nonce) {
        public ByteBuffer encode() {
            ByteBuffer b = buffer(16 + NONCE_BYTES);
            b.putInt(MAGIC).putInt(minVersion).putInt(maxVersion).putInt(authMethod).put(nonce);
            return b.flip();
        }

        public static ServerHello decode(ByteBuffer b) throws ProtocolException {
            if (b.remaining() < 16 + NONCE_BYTES) {
                throw new ProtocolException("malformed SERVER_HELLO: " + b.remaining() + " bytes, expected "
                        + (16 + NONCE_BYTES));
            }
            checkMagic(b);
            int min = b.getInt(), max = b.getInt(), auth = b.getInt();
            byte[] nonce = new byte[NONCE_BYTES];
            b.get(nonce);
            return new ServerHello(min, max, auth, nonce);
        }
    }

    /**
     * {@code resumeToken}: empty for a new session, else the token of the session to resume; {@code managedBase} and
     * {@code managedSize}: the guest's managed range when {@code features} has {@link #FEATURE_MANAGED_RANGE}, else 0.
     */
    public record Hello(int version, int features, String identity, byte[] proof, byte[] resumeToken, long managedBase,
                        long managedSize) {
        public Hello(int version, int features, String identity, byte[] proof) {
            this(version, features, identity, proof, new byte[0]);
        }

        public Hello(int version, int features, String identity, byte[] proof, byte[] resumeToken) {
            this(version, features & ~FEATURE_MANAGED_RANGE, identity, proof, resumeToken, 0, 0);
        }

        public ByteBuffer encode() {
            byte[] id = identity.getBytes(StandardCharsets.UTF_8);
            boolean range = (features & FEATURE_MANAGED_RANGE) != 0;
            ByteBuffer b = buffer(12 + 4 + id.length + 4 + proof.length + 4 + resumeToken.length + (range ? 16 : 0));
            b.putInt(MAGIC).putInt(version).putInt(features);
            b.putInt(id.length).put(id).putInt(proof.length).put(proof).putInt(resumeToken.length).put(resumeToken);
            if (range) {
                b.putLong(managedBase).putLong(managedSize);
            }
            return b.flip();
        }

        public static Hello decode(ByteBuffer b) throws ProtocolException {
            checkMagic(b);
            int version = b.getInt(), features = b.getInt();
            String identity = readString(b);
            byte[] proof = readBytes(b);
            byte[] token = b.remaining() == 0 ? new byte[0] : readBytes(b);
            if (token.length != 0 && token.length != TOKEN_BYTES) {
                throw new ProtocolException("resume token of " + token.length + " bytes (expected " + TOKEN_BYTES + ")");
            }
            long base = 0, size = 0;
            if ((features & FEATURE_MANAGED_RANGE) != 0) {
                if (b.remaining() < 16) {
                    throw new ProtocolException("malformed HELLO: FEATURE_MANAGED_RANGE without the range (" + b.remaining()
                            + " bytes after the resume token, expected 16)");
                }
                base = b.getLong();
                size = b.getLong();
            }
            return new Hello(version, features, identity, proof, token, base, size);
        }

        public boolean resumes() {
            return resumeToken.length > 0;
        }

        /** Whether this HELLO carries a managed range ({@link #FEATURE_MANAGED_RANGE}). */
        public boolean hasManagedRange() {
            return (features & FEATURE_MANAGED_RANGE) != 0;
        }
    }

    /** {@code resumeToken}: empty unless {@link #FEATURE_RESUME} was granted; {@code graceSeconds}: how long a detached session waits. */
    public record Welcome(long sessionId, int driverVersion, int deviceCount, int features, String description,
                          byte[] resumeToken, int graceSeconds) {
        public Welcome(long sessionId, int driverVersion, int deviceCount, int features, String description) {
            this(sessionId, driverVersion, deviceCount, features, description, new byte[0], 0);
        }

        public ByteBuffer encode() {
            byte[] d = description.getBytes(StandardCharsets.UTF_8);
            ByteBuffer b = buffer(20 + 4 + d.length + 4 + resumeToken.length + 4);
            b.putLong(sessionId).putInt(driverVersion).putInt(deviceCount).putInt(features).putInt(d.length).put(d);
            b.putInt(resumeToken.length).put(resumeToken).putInt(graceSeconds);
            return b.flip();
        }

        public static Welcome decode(ByteBuffer b) throws ProtocolException {
            try {
                long id = b.getLong();
                int dv = b.getInt(), dc = b.getInt(), f = b.getInt();
                String desc = readString(b);
                byte[] token = b.remaining() == 0 ? new byte[0] : readBytes(b);
                int grace = b.remaining() >= 4 ? b.getInt() : 0;
                return new Welcome(id, dv, dc, f, desc, token, grace);
            } catch (RuntimeException e) {
                throw new ProtocolException("malformed WELCOME: " + e);
            }
        }
    }

    /**
     * RESUMED: what the backend received of each lane before the connection was lost, so that the
     * frontend resends the rest. Per lane: lane u32, the last call's request id u64 (0: none), and how many
     * DATA frames of that call arrived u32. Layout: count u32, then count × 16 bytes.
     */
    public record ResumeState(java.util.Map<Integer, long[]> lanes) {
        public static final int MAX_LANES = 1 << 16;

        public ByteBuffer encode() {
            ByteBuffer b = buffer(4 + 16 * lanes.size());
            b.putInt(lanes.size());
            lanes.forEach((lane, v) -> b.putInt(lane).putLong(v[0]).putInt((int) v[1]));
            return b.flip();
        }

        public static ResumeState decode(ByteBuffer b) throws ProtocolException {
            if (b.remaining() < 4) {
                throw new ProtocolException("malformed RESUMED");
            }
            int n = b.getInt();
            if (n < 0 || n > MAX_LANES || b.remaining() != 16L * n) {
                throw new ProtocolException("malformed RESUMED: count=" + n);
            }
            java.util.Map<Integer, long[]> m = new java.util.HashMap<>();
            for (int i = 0; i < n; i++) {
                m.put(b.getInt(), new long[] {b.getLong(), Integer.toUnsignedLong(b.getInt())});
            }
            return new ResumeState(m);
        }
    }

    /**
     * MOVED: where the session went, one str (a transport URI of at most {@link #MAX_MOVED_URI} bytes that
     * {@link io.gpusockets.protocol.transport.TransportUri#parse} accepts).
     */
    public record Moved(String uri) {
        public static final int MAX_MOVED_URI = 1024;

        public Moved {
            check(uri);
        }

        public ByteBuffer encode() {
            return encodeString(uri);
        }

        /** Decodes and checks a MOVED body of {@code b.remaining()} bytes. */
        public static Moved decode(ByteBuffer b) throws ProtocolException {
            if (b.remaining() > 4 + MAX_MOVED_URI) {
                throw new ProtocolException("malformed MOVED: body of " + b.remaining() + " bytes (max " + (4 + MAX_MOVED_URI) + ")");
            }
            String uri = readString(b);
            if (b.hasRemaining()) {
                throw new ProtocolException("malformed MOVED: " + b.remaining() + " bytes after the URI");
            }
            try {
                return new Moved(uri);
            } catch (IllegalArgumentException e) {
                throw new ProtocolException("malformed MOVED: " + e.getMessage());
            }
        }

        /** Throws IllegalArgumentException, naming why, for a URI MOVED cannot carry. */
        public static void check(String uri) {
            if (uri.getBytes(StandardCharsets.UTF_8).length > MAX_MOVED_URI) {
                throw new IllegalArgumentException("a moved-to URI is at most " + MAX_MOVED_URI + " bytes: length="
                        + uri.getBytes(StandardCharsets.UTF_8).length);
            }
            if (uri.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
                throw new IllegalArgumentException("a moved-to URI has no control characters");
            }
            io.gpusockets.protocol.transport.TransportUri.parse(uri);
        }
    }

    public static ByteBuffer encodeString(String s) {
        byte[] d = s.getBytes(StandardCharsets.UTF_8);
        return buffer(4 + d.length).putInt(d.length).put(d).flip();
    }

    public static String readString(ByteBuffer b) throws ProtocolException {
        return new String(readBytes(b), StandardCharsets.UTF_8);
    }

    private static byte[] readBytes(ByteBuffer b) throws ProtocolException {
        if (b.remaining() < 4) {
            throw new ProtocolException("truncated handshake field");
        }
        int n = b.getInt();
        if (n < 0 || n > MAX_STRING || n > b.remaining()) {
            throw new ProtocolException("handshake field length out of range: length=" + n);
        }
        byte[] d = new byte[n];
        b.get(d);
        return d;
    }

    private static void checkMagic(ByteBuffer b) throws ProtocolException {
        if (b.remaining() < 16 || b.getInt() != MAGIC) {
            throw new ProtocolException("not a GPUsockets peer (bad handshake magic)");
        }
    }

    private static ByteBuffer buffer(int size) {
        return ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** HMAC-SHA256(key, nonce || identity). */
    public static byte[] proof(byte[] key, byte[] nonce, String identity) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(key, "HmacSHA256"));
            mac.update(nonce);
            return mac.doFinal(identity.getBytes(StandardCharsets.UTF_8));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    /** Constant-time comparison of a received proof with the expected one. */
    public static boolean proofMatches(byte[] key, byte[] nonce, String identity, byte[] received) {
        return MessageDigest.isEqual(proof(key, nonce, identity), received);
    }
}
