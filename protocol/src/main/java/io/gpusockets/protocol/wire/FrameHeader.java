package io.gpusockets.protocol.wire;

/**
 * The fixed frame header, 24 bytes, little-endian:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                     body length (bytes)                       |  0
 *  +---------------------------------------------------------------+
 *  |        opcode (API function, or a control code 0xFFFFxxxx)    |  4
 *  +---------------------------------------------------------------+
 *  |          flags (REPLY, NO_REPLY, WINDOW, ACKED)               |  8
 *  +---------------------------------------------------------------+
 *  |                lane (one per client thread)                   | 12
 *  +---------------------------------------------------------------+
 *  |     request id (64 bits, per session; rising on each lane)    | 16
 *  +---------------------------------------------------------------+
 * </pre>
 */
public record FrameHeader(int length, int opcode, int flags, int lane, long requestId) {
    public static final int BYTES = 24;
    public static final int LENGTH_OFFSET = 0;
    public static final int OPCODE_OFFSET = 4;
    public static final int FLAGS_OFFSET = 8;
    public static final int LANE_OFFSET = 12;
    public static final int REQUEST_ID_OFFSET = 16;

    /** This frame answers a request with the same lane and request id. */
    public static final int FLAG_REPLY = 1;
    /** The sender does not wait for a reply (pipelined asynchronous call); errors are latched on the lane. */
    public static final int FLAG_NO_REPLY = 2;
    /**
     * On DATA: the body is a window reference (offset u64, length u64) into the connection's
     * {@link io.gpusockets.protocol.transport.SharedWindow}, not the bytes. On a call: the caller asks
     * for its bulk output that way. Only on sessions that agreed to the window feature. A reference means the
     * window of the connection the frame travels on: a session resumed on a new ring has that ring's window,
     * and what a resume resends never refers to a window.
     */
    public static final int FLAG_WINDOW = 4;

    /**
     * On a call (resumable sessions): the sender has received every reply of this lane to requests before
     * this one, so the backend may forget the copies it keeps for a resume. The acknowledgement rides on
     * the next call; nothing else is sent for it.
     */
    public static final int FLAG_ACKED = 8;

    public boolean acked() {
        return (flags & FLAG_ACKED) != 0;
    }

    public boolean inWindow() {
        return (flags & FLAG_WINDOW) != 0;
    }

    public boolean isReply() {
        return (flags & FLAG_REPLY) != 0;
    }

    public boolean wantsReply() {
        return (flags & FLAG_NO_REPLY) == 0;
    }

    @Override
    public String toString() {
        return "frame[op=" + Opcodes.name(opcode) + " len=" + length + " flags=" + flags + " lane=" + lane
                + " req=" + requestId + "]";
    }
}
