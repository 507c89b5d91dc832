package io.gpusockets.backend.session;

import io.gpusockets.protocol.wire.FrameHeader;
import java.nio.ByteBuffer;

/** A frame read by the session's reader, waiting on its lane; {@code charge} is held from the body budget until released. */
record Inbound(FrameHeader header, ByteBuffer body, int charge) {
}
