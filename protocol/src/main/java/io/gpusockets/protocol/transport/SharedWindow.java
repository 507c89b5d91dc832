package io.gpusockets.protocol.transport;

import java.lang.foreign.MemorySegment;

/**
 * Memory that both ends of a shared-memory connection map: the same bytes, seen by the frontend and the
 * backend. Bulk data of a call can be placed here and referred to by offset (a DATA frame flagged
 * {@link io.gpusockets.protocol.wire.FrameHeader#FLAG_WINDOW}) instead of being copied through the
 * byte stream and out again on the other side.
 *
 * <p>Nothing in the window is trusted by its reader beyond the bytes themselves: the peer may change
 * them at any time. Offsets and lengths that refer to it are validated against {@link #segment()}.
 */
public interface SharedWindow {

    /** The window in this process; valid until {@link #release()}. */
    MemorySegment segment();

    /**
     * Unmaps the window here once its user no longer touches it (the connection's close does not,
     * since a call may still be reading it). Idempotent.
     */
    void release();
}
