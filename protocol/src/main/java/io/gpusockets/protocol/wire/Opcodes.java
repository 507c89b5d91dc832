package io.gpusockets.protocol.wire;

import io.gpusockets.protocol.api.ApiFunction;
import io.gpusockets.protocol.api.ApiTable;

/**
 * Control opcodes. API functions take stable opcodes derived from their names
 * ({@link ApiFunction#opcodeFor(String)}), which never fall in the control range 0xFFFF0000..0xFFFFFFFF.
 */
public final class Opcodes {
    public static final int CONTROL_BASE = 0xFFFF0000;
    /** backend → frontend, first frame: versions, auth method, nonce. */
    public static final int SERVER_HELLO = 0xFFFF0001;
    /** frontend → backend: chosen version, identity, auth proof, requested features. */
    public static final int HELLO = 0xFFFF0002;
    /** backend → frontend: session id, driver version, device count, granted features. */
    public static final int WELCOME = 0xFFFF0003;
    /** either side: the handshake is refused; the body is a UTF-8 reason. The connection closes after it. */
    public static final int REFUSE = 0xFFFF0004;
    /** backend → frontend, after the WELCOME that resumes a session: {@link Handshake.ResumeState}. */
    public static final int RESUMED = 0xFFFF0005;
    /**
     * backend → frontend of a resumable session: the session moved to another backend ({@link Handshake.Moved}); the
     * frontend resumes it there and keeps that URI. Also the answer to a resume HELLO whose session moved away.
     */
    public static final int MOVED = 0xFFFF0006;
    /** a chunk of a bulk parameter (memcpy data, module image), tied to its call by lane and request id. */
    /**
     * A migration's frames, on a connection whose HELLO asked for {@link Handshake#FEATURE_MIGRATION}, all on lane 0
     * (the backend's {@code Migration} states their bodies): BEGIN (seed, chunk size), CHUNK (address, hash,
     * bytes), IMAGE (the checkpoint image's header, flags 0, or its arrays' contents, flags 1, in pieces), COMMIT (the
     * memory ranges), LAYOUT (the physical allocations of the session's address windows, before each round; flags 1:
     * the final one, sent while the session is drained), and the target's answer DONE (ok, message). Sessions that
     * migrate together ({@link Handshake#FEATURE_MIGRATION_GROUP}) share one connection: each frame's request id is
     * the index of the member it belongs to, and one DONE answers the whole group.
     */
    public static final int MIGRATE_BEGIN = 0xFFFF0020;
    public static final int MIGRATE_CHUNK = 0xFFFF0021;
    public static final int MIGRATE_IMAGE = 0xFFFF0022;
    public static final int MIGRATE_COMMIT = 0xFFFF0023;
    public static final int MIGRATE_DONE = 0xFFFF0024;
    public static final int MIGRATE_LAYOUT = 0xFFFF0025;
    public static final int DATA = 0xFFFF0010;
    /** frontend → backend: the client thread behind this lane has ended. */
    public static final int LANE_END = 0xFFFF0011;
    /** frontend → backend: clean end of session. */
    public static final int GOODBYE = 0xFFFF0012;

    private Opcodes() {
    }

    public static boolean isControl(int opcode) {
        return (opcode & 0xFFFF0000) == CONTROL_BASE;
    }

    public static String name(int opcode) {
        return switch (opcode) {
            case SERVER_HELLO -> "SERVER_HELLO";
            case HELLO -> "HELLO";
            case WELCOME -> "WELCOME";
            case REFUSE -> "REFUSE";
            case RESUMED -> "RESUMED";
            case MOVED -> "MOVED";
            case DATA -> "DATA";
            case LANE_END -> "LANE_END";
            case GOODBYE -> "GOODBYE";
            default -> {
                ApiFunction f = ApiTable.get().byOpcode(opcode);
                yield f != null ? f.name() : String.format("0x%08x", opcode);
            }
        };
    }
}
