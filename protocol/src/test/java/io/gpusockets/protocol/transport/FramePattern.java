package io.gpusockets.protocol.transport;

import java.nio.ByteBuffer;

/**
 * Frame bodies whose every byte depends on (lane, sequence, offset), so a byte from another frame, a
 * shifted frame or a torn one shows up as a mismatch at a known place.
 */
public final class FramePattern {
    private FramePattern() {
    }

    public static byte at(int lane, long seq, int offset) {
        int x = offset * 0x9E3779B1 + (int) seq * 0x01000193 + (int) (seq >>> 32) + lane * 0x5BD1E995;
        x ^= x >>> 15;
        x *= 0x2C1B3C6D;
        x ^= x >>> 13;
        return (byte) x;
    }

    /** Fills the remaining bytes of {@code dst} and flips nothing: position ends at the limit. */
    public static ByteBuffer fill(ByteBuffer dst, int lane, long seq) {
        int base = dst.position();
        for (int i = 0, n = dst.remaining(); i < n; i++) {
            dst.put(base + i, at(lane, seq, i));
        }
        return dst.position(dst.limit());
    }

    /** A new buffer of {@code length} pattern bytes, ready to send. */
    public static ByteBuffer of(int lane, long seq, int length) {
        return fill(ByteBuffer.allocate(length), lane, seq).flip();
    }

    /** Offset of the first byte in {@code body}'s remaining bytes that breaks the pattern, or -1. */
    public static int firstMismatch(ByteBuffer body, int lane, long seq) {
        int base = body.position();
        for (int i = 0, n = body.remaining(); i < n; i++) {
            if (body.get(base + i) != at(lane, seq, i)) {
                return i;
            }
        }
        return -1;
    }
}
