package io.gpusockets.protocol.calls;

import java.nio.ByteBuffer;

/**
 * The request and reply bodies of cuLinkComplete, which the guest needs in two steps: the driver's
 * linked image lives in the backend (owned by the link state until cuLinkDestroy), and the guest
 * must hold a copy of its own, whose size it learns first.
 *
 * <pre>
 *  request                                                           reply (after the CUresult)
 *  +---------------------------------------------------------------+  +-----------------------+
 *  |              state u64 (the session's link handle id)         |  0 | size u64: bytes of    |  0
 *  +---------------------------------------------------------------+  | the linked image      |
 *  |  capacity u64: 0 = complete the link and reply with the size;  |  8 +-----------------------+  8
 *  |  the size = send the image (DATA of that many bytes)          |
 *  +---------------------------------------------------------------+ 16
 * </pre>
 *
 * The first step runs the driver's cuLinkComplete (once per state: a second first step answers the
 * size again); the second is refused unless its capacity is that size. A frontend bounds the size by
 * {@link ModuleImageKind#MAX_IMAGE} before it allocates.
 */
public final class LinkCompleteRequest {
    public static final int REQUEST_BYTES = 16;

    /** One decoded request. */
    public record Request(long state, long capacity) {
    }

    private LinkCompleteRequest() {
    }

    public static void put(ByteBuffer b, long state, long capacity) {
        b.putLong(state).putLong(capacity);
    }

    public static Request read(ByteBuffer b) {
        if (b.remaining() < REQUEST_BYTES) {
            throw new IllegalArgumentException("cuLinkComplete request of " + b.remaining() + " bytes, expected " + REQUEST_BYTES);
        }
        return new Request(b.getLong(), b.getLong());
    }

    public static void putSize(ByteBuffer b, long size) {
        b.putLong(size);
    }

    public static long readSize(ByteBuffer b) {
        return b.getLong();
    }
}
