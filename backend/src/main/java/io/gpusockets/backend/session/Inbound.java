package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import java.nio.ByteBuffer;

/**
 * A frame read by the session's reader, waiting on its lane; {@code charge} is held from the body budget until
 * released. {@code window}: the shared window of the connection the frame came on, or null (no window there): a
 * window DATA frame's bytes lie in it, and a call frame flagged {@link FrameHeader#FLAG_WINDOW} asks for its bulk
 * output through it. A window belongs to one connection: after a resume, frames of the new connection refer to the
 * new window, while those read before it still refer to theirs.
 */
record Inbound(FrameHeader header, ByteBuffer body, int charge, SessionWindow window) {
    Inbound(FrameHeader header, ByteBuffer body, int charge) {
        this(header, body, charge, null);
    }

    /** Whether the frame's bytes lie in {@link #window} (a window DATA frame). */
    boolean bytesInWindow() {
        return window != null && header.opcode() == io.gpusockets.protocol.wire.Opcodes.DATA && header.inWindow();
    }
}
